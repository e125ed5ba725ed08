"""A CPU stand-in for fla (see ../README.md)."""

__version__ = "0.0.0+fake"
