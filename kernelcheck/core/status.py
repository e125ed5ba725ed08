"""The status vocabulary, verdict ranking and exit codes: the one copy every command uses.

Exit codes, identical for every command: 0 ready · 3 a slow fallback path would run · 4 broken (crash,
refusal, wrong results) · 2 bad usage or bad input · 1 internal error. A command's exit code is the worst
verdict it printed (`worst`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from kernelcheck.core.fix import Fix


class Status(StrEnum):  # a str: JSON and comparisons with plain strings keep working
    """What one function will really run."""

    FAST = "fast"
    FALLBACK = "fallback"
    BROKEN = "broken"
    UNSUPPORTED = "unsupported"


class Mode(StrEnum):  # a str: JSON and comparisons with plain strings keep working
    """What the job does: train (forward+backward) or infer (prefill+decode)."""

    TRAIN = "train"
    INFER = "infer"


class Verdict(StrEnum):  # a str: JSON and comparisons with plain strings keep working
    READY = "ready"
    FALLBACK = "fallback"
    BROKEN = "broken"


class Severity(StrEnum):  # a str: JSON and comparisons with plain strings keep working
    BROKEN = "broken"
    FALLBACK = "fallback"
    WARNING = "warning"
    INFO = "info"


# The same words as Literals: a record built from a plain word type-checks only when the word is in the vocabulary
# ("brokn" is a mypy error); __post_init__ turns it into the member, so every record holds Status/Severity values.
StatusWord = Literal["fast", "fallback", "broken", "unsupported"]
SeverityWord = Literal["broken", "fallback", "warning", "info"]


class Cause(StrEnum):
    """Why a function is not fast, as a value a decision can read (its reason says it in words)."""

    NOT_INSTALLED = "not-installed"  # the function's package is not installed here


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity | SeverityWord  # a Severity once built
    message: str
    fix: Fix | str | None = None  # a Fix once built (core/fix.py: the text, its command and what it installs)
    reference: str | None = None
    functions: tuple[str, ...] = ()
    decorators: tuple[str, ...] = ()  # the transformers decorators it is about (kernel-decorator-unread)

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", Severity(self.severity))
        object.__setattr__(self, "fix", Fix.of(self.fix))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        """A finding as a report's JSON prints it (install reads the doctor it runs after the install)."""
        return cls(**{**data, "functions": tuple(data.get("functions", ())),
                      "decorators": tuple(data.get("decorators", ()))})


@dataclass
class FunctionStatus:
    """One function's status. Built from the binding reading (doctor), then changed only by core/decide.py."""

    name: str
    package: str  # distribution a user installs
    status: Status | StatusWord  # a Status once built
    implementation: str
    reason: str | None = None
    fix: Fix | str | None = None  # a Fix once built, and after each decision (core/decide.py)
    phase: str = ""
    used: bool = True  # False: not called in this mode (decode in train) or not bound by this transformers
    evidence: dict[str, Any] | None = None
    cause: Cause | None = None  # why it is not fast, for decisions; never printed (JSON has the reason)
    # the code that runs for it in the job: "hub:<repo>@v<N> (variant <v>)", "pip:<dist> <version>[ / <backend>]",
    # "torch"; None where it was not decided (a report from before the field)
    provider: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # the word as its member, not a decision
        object.__setattr__(self, "fix", Fix.of(self.fix))  # the text as its value, not a decision

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FunctionStatus:
        """A function as a report's JSON prints it: the recorded values, not a new decision."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


EXIT_READY, EXIT_INTERNAL, EXIT_USAGE, EXIT_FALLBACK, EXIT_BROKEN = 0, 1, 2, 3, 4
# The one table from verdict to exit code, and back.
EXIT_CODE = {Verdict.READY: EXIT_READY, Verdict.FALLBACK: EXIT_FALLBACK, Verdict.BROKEN: EXIT_BROKEN}
VERDICT_OF_EXIT = {code: verdict for verdict, code in EXIT_CODE.items()}
WORDS = {Verdict.READY: "READY", Verdict.FALLBACK: "FALLBACK", Verdict.BROKEN: "BROKEN"}
# the verdict line's words (`verdict: <words> (exit N)`): the text report's last line and a Ray worker's gate error
VERDICT_WORDS = {Verdict.READY: "READY: every fast kernel this job uses will run",
                 Verdict.FALLBACK: "FALLBACK: a slow torch path would run",
                 Verdict.BROKEN: "BROKEN: the job would crash, refuse, or compute wrong results"}
# Every exit code, worst first: broken, internal error, bad input, fallback, ready. A gate over many results (the
# fleet's ranks, compare's reports) exits with the worst; a code outside the contract ranks as an internal error.
_EXIT_RANK = {EXIT_BROKEN: 4, EXIT_INTERNAL: 3, EXIT_USAGE: 2, EXIT_FALLBACK: 1, EXIT_READY: 0}


# The one ranking: how far a verdict is from ready. A status and a severity rank as the verdict they give (below), so
# "worse" means the same thing for a function, a finding, a report and a diff of two reports. Keys are the members,
# which hash as their words: `STATUS_RANK.get("fallback")` works on a word read from JSON too.
VERDICT_RANK: dict[str, int] = {Verdict.READY: 0, Verdict.FALLBACK: 1, Verdict.BROKEN: 2}


def verdict_of_status(status: str) -> Verdict:
    """A used function's status as a verdict: fast is ready, broken is broken, anything else is a fallback."""
    return {Status.FAST.value: Verdict.READY, Status.BROKEN.value: Verdict.BROKEN}.get(str(status), Verdict.FALLBACK)


def verdict_of_severity(severity: str) -> Verdict:
    """A finding's severity as a verdict: only broken and fallback findings change one."""
    return {Severity.BROKEN.value: Verdict.BROKEN, Severity.FALLBACK.value: Verdict.FALLBACK}.get(
        str(severity), Verdict.READY)


# fast 0, unsupported and fallback 1, broken 2; info and warning 0, fallback 1, broken 2
STATUS_RANK: dict[str, int] = {s: VERDICT_RANK[verdict_of_status(s)] for s in Status}
SEVERITY_RANK: dict[str, int] = {s: VERDICT_RANK[verdict_of_severity(s)] for s in Severity}


def worst(verdicts: Iterable[Verdict | str]) -> Verdict:
    """The worst of `verdicts` (ready when there are none)."""
    out = Verdict.READY
    for v in verdicts:
        vv = Verdict(v)
        if VERDICT_RANK[vv] > VERDICT_RANK[out]:
            out = vv
    return out


def worst_exit(codes: Iterable[int]) -> int:
    """The worst of `codes` in `_EXIT_RANK`'s order (broken when there are none: nothing reported is no pass)."""
    return max(codes, key=lambda c: _EXIT_RANK.get(c, _EXIT_RANK[EXIT_INTERNAL]), default=EXIT_BROKEN)


def verdict_of_exit(code: int) -> Verdict:
    """0/3/4 back to their verdict (ValueError for the error codes 1 and 2)."""
    if code not in VERDICT_OF_EXIT:
        raise ValueError(f"exit code {code} is not a verdict")
    return VERDICT_OF_EXIT[code]
