"""The rag reference application (run app.py; see README.md)."""
