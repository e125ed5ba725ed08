"""A parent as kernelcheck's install is to its pip: starts a long child in its own session, tied to this process
by kernelcheck.core.lifeline (argv[1]: "tied" or "untied"), records it in the lock file argv[2] as an install does,
prints the child's pid as JSON and waits to be killed."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from kernelcheck.core import lifeline

tied = sys.argv[1] == "tied"
with open(sys.argv[2], "a+", encoding="utf-8") as lock:
    lifeline.hold(lock)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                             preexec_fn=lifeline.preexec() if tied else None)
    lifeline.note_child(child.pid)
    print(json.dumps({"child": child.pid}), flush=True)
    time.sleep(120)
