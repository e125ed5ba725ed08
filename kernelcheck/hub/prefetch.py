"""The findings of a pre-fetch's steps, one copy for `kernelcheck hub --prefetch` and `install --source hub`.

A build that could not be fetched (failed, skipped offline) or that no variant matches (missing) is a job that keeps,
or falls back to, the torch path: FALLBACK (exit 3), never BROKEN; nothing was shown to crash (docs/hub.md
"Severity and exit codes").
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelcheck.core.plan_step import Step
from kernelcheck.core.status import Finding, Severity


def findings(steps: Iterable[Step]) -> list[Finding]:
    """One finding per step that left its build out of the cache: hub-prefetch-failed, -skipped or -missing."""
    out = []
    for st in steps:
        if st.action == "skipped":  # the plan's step says why, once
            out.append(Finding(f"hub-prefetch-{st.action}", Severity.FALLBACK,
                               f"{st.spec}: no build could be chosen, so none is fetched (the plan says why)",
                               st.command or None))
        elif st.action == "failed":
            out.append(Finding(f"hub-prefetch-{st.action}", Severity.FALLBACK,
                               f"{st.spec}: {st.reason} (the build is not in the cache)", st.command or None))
        elif st.action == "missing":
            out.append(Finding("hub-prefetch-missing", Severity.FALLBACK, f"{st.spec}: {st.reason}"))
    return out
