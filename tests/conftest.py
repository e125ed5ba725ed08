import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# This checkout's kernelcheck first (also in git worktrees), then the test helpers.
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
