"""Checks: each takes plain data (environment, model, matrix) and returns plain results."""
