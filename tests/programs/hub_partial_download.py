"""Download part of a kernel repo with huggingface_hub's `snapshot_download`, as `hf download --include` does.

Sets up the partial cache (one ref, one build variant) that kernels' offline lookup calls incomplete.
Usage: `hub_partial_download.py REPO_ID REVISION PATTERN...` (allow_patterns). Prints the snapshot folder.
"""

from __future__ import annotations

import argparse

from huggingface_hub import snapshot_download


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo_id")
    parser.add_argument("revision")
    parser.add_argument("patterns", nargs="+")
    args = parser.parse_args()
    print(snapshot_download(args.repo_id, repo_type="kernel", revision=args.revision, allow_patterns=args.patterns))


if __name__ == "__main__":
    main()
