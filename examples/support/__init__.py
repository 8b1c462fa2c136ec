"""The support reference application (run app.py; see README.md)."""
