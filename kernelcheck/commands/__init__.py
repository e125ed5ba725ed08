"""One assembly point per command, below both the CLI and the library.

Each command is a module with a frozen `Request` (the options, parsed) and `run(request, ctx) -> Outcome`:
doctor, verify, hub, install, trace, padding, compare, fleet (--all-ranks' gate), forecast (doctor --upgrade),
warm, models. `cli/*.py` parse options into a Request and render the Outcome; `kernelcheck/__init__.py` calls the
same `run`, so the library and the CLI give the same report for the same inputs (tests/unit/test_commands.py).

Each command's usage rules (flag combinations, ranges, vocabularies, the model and the paths it names) are its
`check(request[, ctx])`, which `run` calls before anything is probed (shared rules: usage.py): the library refuses
what the CLI refuses, with the same BadInput. The CLI keeps what only exists on a command line: click's parsing,
-o/--junit/--budget-svg files, --report-issue, --all-ranks/--timeout, and which command doctor's flags route to.
"""
