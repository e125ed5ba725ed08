"""The README's set-up, as commands: the `pip install` lines of its developer block (the one that runs the fast
lane), in order. `.ci/run`'s "today" lane runs exactly these in a fresh venv, unpinned, so CI tests what a newcomer
who follows the README gets that day.

    python scripts/readme_setup.py            # one command a line: pip install torch==2.13.0, pip install -e '.[test]'
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
FAST_LANE = 'python -m pytest -m "not integration"'


def setup_commands(text: str) -> list[str]:
    """The `pip install ...` commands (comments dropped) of the first ```bash block that runs the fast lane."""
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        if FAST_LANE not in block:
            continue
        lines = [re.split(r"\s+#", line, maxsplit=1)[0].strip() for line in block.splitlines()]
        return [line for line in lines if line.startswith("pip install ")]
    return []


def main() -> int:
    commands = setup_commands(README.read_text())
    if not commands:
        print(f"README.md has no ```bash block with `{FAST_LANE}` and pip install lines", file=sys.stderr)
        return 1
    print("\n".join(commands))
    return 0


if __name__ == "__main__":
    sys.exit(main())
