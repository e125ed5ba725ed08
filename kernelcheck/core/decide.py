"""The one status decider: evidence in, each function's FunctionStatus and the report's verdict out.

Callers gather evidence and pass it in; nothing here loads the matrix, probes the environment or runs a process,
so each decision is a pure function of its arguments (tests/unit/test_decide.py).

Evidence, lowest precedence first (a later kind overrides an earlier one only as described):

1. binding    the FunctionStatus doctor built from what transformers binds (doctor/run.py, doctor/lazy.py);
              `notes` are words added to its reason (a runtime finding that changes what a reader should do).
2. rule hits  certain breakage-rule hits (matrix/breakages.toml, core/rules.py) naming the function: they only
              raise the status (fast < unsupported = fallback < broken), never lower it; a warning never raises.
3. Hub        a Hub build kernels will load in place of the function (hub/check.py): the function is fast, with
              the Hub kernel as its implementation, whatever the binding and the rules said, and whether or not a
              pip package was bound (transformers 5.25: Hub kernels first, then the package, then torch). Rules about
              the Hub build itself (its fla dispatch: doctor/provider.py) are rule hits given after it.
4. live       what a run of the real layers observed (verify/statuses.py): broken when it raised, returned NaN/Inf or
              disagreed with the torch reference; fast when the fast path ran; a bound fast kernel whose torch
              reference ran instead is a fallback.

A fix is checked before it is printed (doctor/fixcheck.py): `assume` gives the status a function would have after
it, `decide(..., checked_fix=)` replaces a fix that would make the verdict worse (the last step of the rules).

Each function's `provider` (the code that runs in the job) is decided here too: the Hub build when one replaces it,
else the bound pip package (`Build`: distribution, version, the backend its own dispatch picks) when the package
path runs (fast, or broken because the package breaks), else torch; a live run that saw the torch path says torch.

`decide(prior, ...)` applies the kinds it is given in that order, so the stages of a command may call it in turn
(doctor: binding, notes and rules; the Hub check: its builds; verify: the observation) and get the same status as
one call with all the evidence. `verdict` is the one place a report's verdict is computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kernelcheck.core.fix import Fix
from kernelcheck.core.status import (
    SEVERITY_RANK,
    STATUS_RANK,
    Finding,
    FunctionStatus,
    Severity,
    SeverityWord,
    Status,
    StatusWord,
    Verdict,
    verdict_of_severity,
    verdict_of_status,
)
from kernelcheck.core.status import worst as _worst


@dataclass(frozen=True)
class RuleEvidence:
    """A certain breakage-rule hit (an uncertain one is only a warning finding and never reaches the decider)."""

    id: str
    severity: Severity | SeverityWord  # broken | fallback | warning (the rule's severity)
    title: str
    message: str
    fix: Fix | str | None  # a Fix once built
    functions: tuple[str, ...]
    stops_job: bool = False  # the job never starts (the model load fails): nothing runs for the function

    def __post_init__(self) -> None:
        object.__setattr__(self, "fix", Fix.of(self.fix))


NOTHING_RUNS = "nothing: the job does not start"  # the provider of a function whose job fails at the load


@dataclass(frozen=True)
class CheckedFix:
    """A function's fix checked against the rules (doctor/fixcheck.py): `original` would make the verdict worse
    here, so `fix` is printed instead (None: no fix), and `note` says why."""

    original: Fix | str | None  # Fixes once built
    fix: Fix | str | None
    note: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "original", Fix.of(self.original))
        object.__setattr__(self, "fix", Fix.of(self.fix))


@dataclass(frozen=True)
class HubEvidence:
    """kernels will load a Hub build in place of `function`: Hub kernels are used, a build was chosen, nothing
    blocks it."""

    function: str
    implementation: str  # "Hub kernel <repo> <layer> (<build>)"
    repo: str = ""  # "kernels-community/fla@v3"
    variant: str = ""  # the build variant kernels loads
    backends: str = ""  # the backend(s) the Hub build's own dispatch runs ("Triton", "fwd Triton, bwd TileLang")

    @property
    def provider(self) -> str:
        if not self.repo:
            return f"hub:{self.implementation}"
        return f"hub:{self.repo} (variant {self.variant})" + (f" / {self.backends}" if self.backends else "")


@dataclass(frozen=True)
class Build:
    """The pip package a function is bound to, as installed (doctor/provider.py gathers it): what runs when its
    package path runs."""

    distribution: str
    version: str | None
    backends: str = ""  # the backend(s) its own dispatch runs here ("TileLang", "fwd Triton, bwd TileLang")

    @property
    def provider(self) -> str:
        if not self.distribution:
            return "torch"
        return f"pip:{self.distribution} {self.version or '?'}" + (f" / {self.backends}" if self.backends else "")


@dataclass(frozen=True)
class Observation:
    """What a live run showed for one function."""

    evidence: dict[str, Any]  # the evidence block shown under the function (verify/statuses.py function_evidence)
    path: str  # "fast" or "torch": the path its calls took
    calls: int
    implementation: str | list[str]  # what was called (a list when several callables ran)
    broken: str | None = None  # why the run shows it broken (raised, NaN/Inf, disagrees), or None
    known_breakage: str | None = None  # id of a broken finding that names the function, when there is one
    fix: Fix | str | None = None  # the fix when broken (a Fix once built)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fix", Fix.of(self.fix))


TORCH = Build("", None)  # bound to no package: the torch function is the only code there is


def decide(prior: FunctionStatus, *, notes: Sequence[str] = (), rules: Iterable[RuleEvidence] = (),
           hub: HubEvidence | None = None, observed: Observation | None = None,
           checked_fix: CheckedFix | None = None, build: Build | None = None) -> FunctionStatus:
    """`prior`'s status after the evidence given, applied in precedence order (see the module text): a new value.
    `checked_fix` replaces the fix the rules left, when it is the one that was checked; `build` decides the
    provider of a function no Hub build replaces (`TORCH`: bound to no package)."""
    fs = replace(prior)
    for note in notes:
        fs.reason = (fs.reason or "") + note
    for rule in rules:
        if fs.name in rule.functions and fs.used and \
                SEVERITY_RANK.get(rule.severity, 0) > STATUS_RANK.get(fs.status, 0):
            fs.status, fs.reason, fs.fix = Status(rule.severity), f"{rule.title}: {rule.message}", rule.fix
        if rule.stops_job and fs.name in rule.functions and fs.used:
            fs.provider = NOTHING_RUNS
    if checked_fix is not None and fs.fix == checked_fix.original:
        fs.fix, fs.reason = checked_fix.fix, f"{fs.reason or ''}; {checked_fix.note}".lstrip("; ")
    if hub is not None and hub.function == fs.name:
        fs.status, fs.implementation, fs.reason, fs.fix = Status.FAST, hub.implementation, None, None
        fs.provider = hub.provider
    elif build is not None:
        fs.provider = _provider(fs, build)
    if observed is not None:
        _observe(fs, observed)
    return fs


def _provider(fs: FunctionStatus, build: Build) -> str:
    """A function no Hub build replaces: a Hub provider decided before stays; the package runs when its path is
    fast, breaks there (a crash in the package) or is bound for a device this machine is not (unsupported: the
    caller gives `TORCH` where transformers runs the torch function instead), else the torch function runs."""
    if fs.provider and fs.provider.startswith("hub:"):
        return fs.provider
    if build.distribution and fs.status in (Status.FAST, Status.BROKEN, Status.UNSUPPORTED):
        return build.provider
    return "torch"


def assume(prior: FunctionStatus, status: Status | StatusWord) -> FunctionStatus:
    """What-if evidence (doctor/fixcheck.py): the status `prior` would have once a fix is applied (fast or
    unsupported when the fix makes its package bound, fallback when it removes it). Never printed: a simulated
    environment's verdict is compared with the printed one."""
    fs = replace(prior, status=status)
    if status != Status.FALLBACK:
        fs.reason, fs.fix = None, None
    return fs


def _observe(fs: FunctionStatus, ob: Observation) -> None:
    seen_before = fs.evidence is not None  # a live run already said what ran: its words stay as they are
    fs.evidence = ob.evidence
    if ob.broken:
        fs.status = Status.BROKEN
        fs.reason = ob.broken + (f" [known breakage {ob.known_breakage}]" if ob.known_breakage else "")
        fs.fix = ob.fix
        return
    if ob.path != "fast" or not ob.calls:
        fs.provider = "torch"  # seen: the torch reference ran
    if ob.path == "fast" and ob.calls:
        fs.status, fs.reason, fs.fix = Status.FAST, None, None
        fs.implementation = ob.implementation if isinstance(ob.implementation, str) else fs.implementation
        return
    # the torch reference ran
    if fs.status == Status.FAST:
        fs.status = Status.FALLBACK
        fs.reason = f"observed: the torch reference {ob.implementation} ran although transformers bound the fast kernel"
    elif fs.reason and not seen_before:
        fs.reason = f"observed: the torch reference ran ({ob.implementation}); {fs.reason}"


def decide_all(functions: Iterable[FunctionStatus], *, rules: Sequence[RuleEvidence] = (),
               hub: Iterable[HubEvidence] = ()) -> list[FunctionStatus]:
    """`decide` for each function, with the rule hits and the Hub builds that name it."""
    by_name = {h.function: h for h in hub}
    return [decide(fs, rules=rules, hub=by_name.get(fs.name)) for fs in functions]


def verdict(functions: Iterable[FunctionStatus], findings: Iterable[Finding]) -> Verdict:
    """A report's verdict: the worst of its used functions' statuses and its findings' severities."""
    return _worst([*(verdict_of_status(f.status) for f in functions if f.used),
                   *(verdict_of_severity(fd.severity) for fd in findings)])


def worst(*verdicts: Verdict | str) -> Verdict:
    """A command that prints several verdicts (install: the doctor after it and the plan's prediction) exits
    with the worst."""
    return _worst(verdicts)
