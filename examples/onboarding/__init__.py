"""The onboarding reference application (run app.py; see README.md)."""
