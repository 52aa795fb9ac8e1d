"""Drivers for the systems compared in the peer benchmarks: dpsql itself and SmartNoise SQL."""
