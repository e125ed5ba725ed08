"""The integration lane (tests/conftest.py)."""
