"""The web console, the budget dashboard and the offline API docs (issue 17).

Pages and assets are files of this package, served by dpsql itself: nothing loads from
another origin, and every response carries a Content-Security-Policy (headers.py).
"""
