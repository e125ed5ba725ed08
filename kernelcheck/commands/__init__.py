"""One assembly point per command, below both the CLI and the library.

Each command is a module with a frozen `Request` (the options, parsed) and `run(request, ctx) -> Outcome`:
doctor, verify, hub, install, trace, padding, compare, fleet (--all-ranks' gate), forecast (doctor --upgrade).
`cli/*.py` parse options into a Request and render the Outcome; `kernelcheck/__init__.py` calls the same `run`, so
the library and the CLI give the same report for the same inputs (tests/unit/test_commands.py).
"""
