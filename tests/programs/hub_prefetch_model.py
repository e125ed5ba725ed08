"""Call `kernels_prefetch.prefetch_model`, the API `kernelcheck install --source hub` uses, in a fresh process.

Proves the library call (not only the CLI) prefetches a model's Hub kernels and writes the lock.
Usage: `hub_prefetch_model.py MODEL --mode MODE --device DEVICE --lock LOCK_PATH`.
Prints the returned plan steps (Step values) as one JSON list.
"""

from __future__ import annotations

import argparse
import json

from kernelcheck.commands.context import Context
from kernelcheck.integrations import kernels_prefetch as hub


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--mode", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--lock", required=True)
    args = parser.parse_args()
    steps = hub.prefetch_model(args.model, mode=args.mode, device=args.device, lock_path=args.lock,
                               m=Context.from_environ().matrix)
    print(json.dumps([s.to_json() for s in steps]))


if __name__ == "__main__":
    main()
