"""Run `kernelcheck verify --model M --packing --batch FILE --json` on each FILE in one process (the CLI through
click's runner) and print one JSON list of [exit code, report]: several batches on the same bound functions
(tests/programs/fake_kernels on PYTHONPATH) without a process start per batch.

    python tests/programs/packing_cases.py MODEL FILE...
"""

from __future__ import annotations

import json
import sys

from click.testing import CliRunner

from kernelcheck.cli.main import main

out = []
for path in sys.argv[2:]:
    res = CliRunner().invoke(main, ["verify", "--model", sys.argv[1], "--packing", "--batch", path, "--json"])
    out.append([res.exit_code, json.loads(res.stdout)])  # stdout alone: progress lines go to stderr
print(json.dumps(out))
