"""The Trino door: Trino's client HTTP protocol on dpsql's engine, for BI tools.

routes.py (HTTP) → door.py (routing) → shadow.py (catalog, data-free) or adapter.py
(the only module calling the Engine); protocol.py, types.py, session.py, statements.py
and series_limit.py hold the protocol's pieces; results.py keeps pages for nextUri;
hits.py answers repeat cache hits before the router (issue 18).
"""
