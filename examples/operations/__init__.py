"""The operations reference application (run app.py; see README.md)."""
