"""Load a Hub kernel through a kernels.lock with the real `kernels.load_kernel`, as an offline job does.

Proves that a lock kernelcheck wrote is one kernels reads (`KernelLocks.from_json`) and loads the locked
build from. Usage: `hub_load_lock.py LOCKFILE REPO_ID`. Prints one JSON object: `locked` (the sorted
repo ids in the lock) and `file` (the loaded module's `__file__`). A failure is a traceback and exit 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import kernels
from kernels._rust import KernelLocks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("lockfile", type=Path)
    parser.add_argument("repo_id")
    args = parser.parse_args()
    locks = KernelLocks.from_json(args.lockfile.read_text())
    module = kernels.load_kernel(args.repo_id, lockfile=args.lockfile)
    locked = sorted(d.repo_id for d in locks.keys())  # noqa: SIM118 (a kernels Rust class, not a dict)
    print(json.dumps({"locked": locked, "file": module.__file__}))


if __name__ == "__main__":
    main()
