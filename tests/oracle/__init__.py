"""The answer oracle: dpsql's answers against DuckDB's own (RELIABILITY.md)."""
