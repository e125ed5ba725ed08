"""Load a Hub kernel the way a job does, with the real `kernels.get_kernel`, and print what happened.

Proves what the real kernels does with the cache / Hub the test set up, so kernelcheck's verdict can be
compared with it. Usage: `hub_get_kernel.py REPO_ID VERSION [--trust-remote-code]`.
Prints the loaded module's `__file__` on success, else one line `FAILED <ExceptionType> <message>`
(the message may span lines: kernels lists every rejected build variant in it). Exit 0 either way.
"""

from __future__ import annotations

import argparse

import kernels


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo_id")
    parser.add_argument("version", type=int)
    parser.add_argument("--trust-remote-code", action="store_true")
    args = parser.parse_args()
    extra = {"trust_remote_code": True} if args.trust_remote_code else {}
    try:
        module = kernels.get_kernel(args.repo_id, version=args.version, **extra)
    except Exception as exc:  # noqa: BLE001 - the outcome under test: printed, never raised
        print("FAILED", type(exc).__name__, exc)
        return
    print(module.__file__)


if __name__ == "__main__":
    main()
