"""The fast lane (tests/conftest.py)."""
