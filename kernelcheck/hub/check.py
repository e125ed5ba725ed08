"""doctor's Hub section: will transformers take kernels from the Kernel Hub here, and which build?

Severity (docs/hub.md has the table):
- Hub kernels are *used* when the installed `kernels` is inside transformers' window, USE_HUB_KERNELS is on,
  and the model is loaded with `use_kernels=True` (the `from_pretrained` default read from the installed
  transformers, or `--hub` = "my job passes use_kernels=True").
- used + no build variant for this torch/CUDA: kernelize keeps the torch forward silently -> "fallback" (exit 3);
  for a function whose package path is fast anyway the miss changes nothing -> info.
- used + the chosen build fails kernels' arch / minimum-version check, or (offline) the version is not in
  the cache, or (online) the Hub cannot be reached: kernels raises and the model load fails -> "broken" (exit 4).
- `--hub` (or a use_kernels=True default) while `kernels` is outside the window: from_pretrained raises
  ValueError in transformers versions that check it (read from `set_use_kernels`) -> "broken".
- not used: everything is "info", with the reason, and what would happen with use_kernels=True.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcheck.core import decide, environment, gpu, settings
from kernelcheck.core import device as device_mod
from kernelcheck.core.status import Finding, FunctionStatus, Severity, Status
from kernelcheck.hub import load, prediction
from kernelcheck.integrations import kernels_hub
from kernelcheck.integrations.transformers_hub import MappingEntry, TransformersHub, select_entry, transformers_hub
from kernelcheck.integrations.transformers_load import PHASE_TRAIN, LoadName, hub_names, load_phases
from kernelcheck.report.hub import (
    HubLine,
    HubMapEntry,
    HubRow,
    HubTransformers,
    KernelsAbsentLine,
    LayoutUnknownLine,
    ListingLine,
    ResolutionLines,
    RowLine,
    SwitchLine,
    TargetLine,
    UseLine,
    WindowLine,
)
from kernelcheck.report.model import HubSection, Report

if TYPE_CHECKING:
    from kernelcheck.core.matrix import Matrix


def decide_use(th: TransformersHub, use_hub: bool | None) -> tuple[bool, str]:
    """(will transformers load Hub kernels, why) for this transformers/kernels/env and the user's intent."""
    if th.transformers is None:
        return False, "transformers is not installed"
    wants = th.use_kernels_default if use_hub is None else use_hub
    who = _who(th, use_hub)
    if not wants:
        return False, (f"{who}: transformers loads no Hub kernel unless the job passes use_kernels=True "
                       "(run doctor with --hub to check that case)")
    if refuses(th, use_hub):
        have = f"kernels {th.kernels} is outside" if th.kernels else "the `kernels` package is absent, outside"
        return False, (f"{who}, but {have} the window transformers {th.transformers} accepts ({th.window_text}): "
                       "from_pretrained raises ValueError (\"Kernels are not available\") before any Hub kernel loads")
    if not th.kernels:
        return False, f"{who}, but the `kernels` package is not installed"
    if not th.window_met:
        return False, (f"{who}, but kernels {th.kernels} is outside the window transformers {th.transformers} "
                       f"accepts ({th.window_text}): transformers treats kernels as absent")
    if not th.hub_enabled_by_env:
        return False, f"{who}, but USE_HUB_KERNELS={th.use_hub_kernels} turns the Hub layer decorators off"
    return True, (f"{who}; kernels {th.kernels} is inside transformers' window {th.window_text}; "
                  f"USE_HUB_KERNELS={th.use_hub_kernels}")


def _who(th: TransformersHub, use_hub: bool | None) -> str:
    """Who decides whether Hub kernels load: the flag, or from_pretrained's default (with where it is read)."""
    return ("use_kernels=True (--hub / --use-kernels)" if use_hub else
            f"from_pretrained's use_kernels default is {th.use_kernels_default} ({th.use_kernels_source})")


def refuses(th: TransformersHub, use_hub: bool | None) -> bool:
    """Whether from_pretrained raises ValueError because kernels is unusable: the job asks for Hub kernels (--hub,
    or 5.25's use_kernels=True default with USE_HUB_KERNELS on), kernels is outside the window (or absent), and
    this transformers' set_use_kernels raises on that (read from its source)."""
    wants = bool(use_hub) or (use_hub is None and bool(th.use_kernels_default) and th.hub_enabled_by_env)
    return bool(wants and th.transformers and not th.window_met and th.refuses_when_unusable)


def _kernels_importable() -> bool:
    try:
        import kernels  # noqa: F401
    except Exception:  # noqa: BLE001 - absent or broken: either way transformers cannot use it
        return False
    return True


def _header(th: TransformersHub, used: bool, why: str, refused: bool = False,
            use_hub: bool | None = None) -> list[HubLine]:
    items: list[HubLine] = []
    if th.window:
        items.append(WindowLine(th.transformers, th.window_text, th.window_source, th.kernels, th.window_met, refused))
    items.append(SwitchLine(th.use_hub_kernels, th.use_hub_kernels_set, th.hub_enabled_by_env,
                            th.use_kernels_default, th.use_kernels_source))
    # the switch line above already says the default and where it is read: the use line names it, once
    items.append(UseLine(used, why, said_above=_who(th, use_hub) if not use_hub else ""))
    return items


def _window_findings(th: TransformersHub, use_hub: bool | None, used: bool) -> list[Finding]:
    """Findings about whether transformers can use `kernels` at all, and what the static reader missed."""
    findings: list[Finding] = []
    if th.error:
        findings.append(Finding("hub-mapping-unreadable", Severity.WARNING, th.error))
    for what in th.unread:
        findings.append(Finding("transformers-unread", Severity.WARNING,
                                f"kernelcheck could not read {what} in transformers {th.transformers}: the Hub "
                                "answer below may be wrong for this version.",
                                "run doctor with --exact, and report the transformers version to kernelcheck"))
    if use_hub and th.transformers and not th.window_met:
        sev = Severity.BROKEN if th.refuses_when_unusable else Severity.WARNING
        findings.append(Finding(
            "hub-kernels-unusable", sev,
            f"the job asks for Hub kernels (use_kernels=True) but kernels {th.kernels or 'is not installed'}"
            f"{' is outside' if th.kernels else ', outside'} the window transformers {th.transformers} accepts "
            f"({th.window_text})" + (": from_pretrained raises ValueError (\"Kernels are not available\")"
                                     if th.refuses_when_unusable else ": Hub kernels are ignored"),
            f"pip install 'kernels{th.window_text}'  (if that version is available for your platform), or drop "
            "use_kernels=True", th.window_source))
    elif (not use_hub and th.use_kernels_default and th.transformers and not th.window_met
          and th.hub_enabled_by_env and th.refuses_when_unusable):
        findings.append(Finding(
            "hub-kernels-unusable", Severity.BROKEN,
            f"from_pretrained defaults to use_kernels=True in transformers {th.transformers}, but kernels "
            f"{th.kernels or '(absent)'} is outside the accepted window {th.window_text}: loading raises ValueError "
            "(\"Kernels are not available\")",
            f"pip install 'kernels{th.window_text}', or set USE_HUB_KERNELS=0, or pass use_kernels=False",
            th.window_source))
    if used and not settings.hub_offline():
        problem = kernels_hub.kernels_client_problem()
        if problem:
            findings.append(Finding(
                "hub-client-broken", Severity.BROKEN,
                f"{problem}; with use_kernels=True and the Hub online, the model load fails with that error "
                "(kernelize falls back only when no file is found).",
                "unset HF_HUB_DISABLE_TELEMETRY for the job, or pre-fetch (kernelcheck hub --model M --prefetch) "
                "and run the job with HF_HUB_OFFLINE=1",
                "kernels hf_hub.py _get_hf_api (user_agent_str stays empty when telemetry is disabled)"))
    return findings


def _listing_lines(env: environment.Environment, dev: str, mode: str, source: str, used: bool,
                   origin: str, target: kernels_hub.HubSystem | None) -> list[HubLine]:
    listing = "offline" if settings.hub_offline() else "cache" if source == "cache" else "online"
    items: list[HubLine] = [ListingLine(dev, origin, mode, listing, used)]
    if target is not None:
        sm = env.capabilities[0].sm if env.capabilities else None
        items.append(TargetLine(target.torch, target.cuda, sm))
    return items


def _rows(th: TransformersHub, names: dict[str, LoadName], env: environment.Environment, dev: str, mode: str,
          source: str, target: kernels_hub.HubSystem | None) -> tuple[list[HubRow], dict[str, kernels_hub.Resolution]]:
    """One row per Hub name of the model (layer or function) and phase of the load: the mapping entry and the build
    kernels picks. The load kernelizes for INFERENCE (from_pretrained calls model.eval() first); a train job's
    model.train() kernelizes again for TRAINING, a second row where that picks another repository."""
    cap = gpu.capability_number(env)
    rows: list[HubRow] = []
    resolutions: dict[str, kernels_hub.Resolution] = {}
    phases = load_phases(mode, th.eval_at_load)
    for name, ln in names.items():
        kind = ln.kind
        entries = [e for e in th.mapping if e.name == name]
        if not entries:
            rows.append(HubRow(name, kind, False, note="transformers maps no Hub kernel to it", where=ln.where))
            continue
        picked: set[str | None] = set()
        for phase, phase_mode in phases:
            entry, note = select_entry(entries, dev, phase_mode, cap)
            spec = entry.repo.spec if entry is not None else None
            if phase == PHASE_TRAIN and spec in picked:
                continue  # model.train() keeps the repository the load resolved
            picked.add(spec)
            row = HubRow(name, kind, True, where=ln.where, phase=phase if len(phases) > 1 else None)
            rows.append(row)
            _fill(row, entry, note, kind, env, source, target, resolutions)
    return rows, resolutions


def _fill(row: HubRow, entry: MappingEntry | None, note: str, kind: str, env: environment.Environment,
          source: str, target: kernels_hub.HubSystem | None,
          resolutions: dict[str, kernels_hub.Resolution]) -> None:
    """The row's repository and build (resolved once per repository), or why it keeps its path."""
    if entry is None:
        # a function's wrapper keeps what transformers bound at import (package or torch)
        row.note = note.replace("the torch forward stays", "the path bound at import stays") \
            if kind == "function" else note
        return
    spec = entry.repo.spec
    if spec not in resolutions:
        resolutions[spec] = kernels_hub.resolve_repo(entry.repo.repo_id, version=entry.repo.version,
                                                 revision=entry.repo.revision, source=source, env=env,
                                                 target=target)
    res = resolutions[spec]
    row.repo, row.layer, row.source, row.variant = spec, entry.repo.layer_name, res.source, res.chosen
    row.nearest, row.would_match, row.error = res.nearest, res.would_match, res.error
    row.problem, row.blocked = res.problem, res.blocked


def check(report: Report, env: environment.Environment, modeling_module: str | None,
          functions: tuple[str, ...], mode: str, *, use_hub: bool | None = None, device: str | None = None,
          source: str = "auto", query: str | None = None,
          target: kernels_hub.HubSystem | None = None, dropped: tuple[str, ...] = (), m: Matrix) -> HubSection:
    """Add the Hub section (`report.hub`) and its findings to `report`; returns the section. `dropped`: the
    module's functions the model never calls (a vision or audio tower: doctor/submodel.py), left out."""
    th = transformers_hub(m=m)
    used, why = decide_use(th, use_hub)
    dev = gpu.default_device(env, device, target)
    verdict_device = device_mod.choose(env, dev, target)
    if report.device is None:  # kernelcheck hub; doctor set its own
        report.device = device_mod.choose(env, device, target)
    predicted = dev if verdict_device.predicted else None
    refused = refuses(th, use_hub)
    lines = _header(th, used, why, refused, use_hub)  # what the section's lines say (report/hub_text.py writes them)
    findings = _window_findings(th, use_hub, used)
    if not used and source == "auto":
        source = "cache"  # Hub kernels are not in use: say what the cache holds, without network calls

    model_type = report.model.model_type if report.model is not None else None
    names = {n: ln for n, ln in hub_names(model_type, modeling_module, functions).items() if n not in dropped}
    if names:
        lines.extend(_listing_lines(env, dev, mode, source, used, report.device.origin, target))
        names = _resolvable(findings, lines, names, th, use_hub, used, refused)
    rows, resolutions = _rows(th, names, env, dev, mode, source, target)
    fstatus = {f.name: f for f in report.functions}
    by_repo: dict[str, list[HubRow]] = {}
    for row in rows:
        if row.repo is not None:
            by_repo.setdefault(row.repo, []).append(row)
    replaced: list[decide.HubEvidence] = []
    for spec, group in by_repo.items():
        replaced.extend(_judge(findings, group, resolutions[spec], used, fstatus, query or "M",
                               by_default=use_hub is None, predicted=predicted, m=m))
    # a train job runs what model.train() resolved where that differs from the load's (its own row): the load's
    # build still has to load (its failure stays), but it is not what the training step runs
    after_train = {r.name: r.repo for r in rows if r.phase == PHASE_TRAIN}
    replaced = [h for h in replaced if h.function not in after_train or after_train[h.function] == h.repo]
    report.functions = decide.decide_all(report.functions, hub=replaced)
    rows = _paths(rows, used, fstatus, {h.function for h in replaced})
    if used:
        report.functions = load.fails(report.functions, rows, findings)
        findings.extend(load.device_finding(th, names, rows, dev, mode, gpu.capability_number(env)))
    lines.extend(RowLine(row, used) for row in rows)
    lines.extend(ResolutionLines(spec, res) for spec, res in resolutions.items())
    if not used and not refused and any(r.repo is not None for r in rows):
        findings.append(Finding("hub-not-used", Severity.INFO, f"Hub kernels are not loaded in this job: {why}. The "
                                "builds listed under hub are what use_kernels=True would load."))

    section = HubSection(
        items=lines,
        used=used,
        why=why,
        device=dev,
        mode=mode,
        offline=settings.hub_offline(),
        transformers=HubTransformers.of(th),
        mapping=[HubMapEntry.of(e) for e in th.mapping if e.name in names],
        names=rows,
        repos=list(resolutions.values()),
    )
    report.hub = section
    report.findings.extend(findings)
    return section


# `kernelcheck hub` judges the Kernel Hub path only. When that path is not taken, or no Hub kernel applies on the
# device (transformers maps none for it: every layer and function keeps its torch or package path), it has proven
# nothing fast: exit 3, never 0 (a "nothing checked" gate is never READY). Not 4 either: nothing was shown to crash.
HUB_DECIDES_NOTHING = "hub-decides-nothing"


def decides_nothing(section: HubSection, model: str, mode: str) -> Finding | None:
    """hub-decides-nothing for `kernelcheck hub --model`, when this job would load no Hub kernel: Hub kernels are
    not used, or none of the model's mapped kernels applies on the section's device; None when one was judged."""
    if not section.used:
        why = f"this job would not load Hub kernels ({section.why or 'use_kernels is off'})"
    elif not any(r.repo is not None for r in section.names):
        why = (f"no Hub kernel that transformers maps applies to this model on {section.device} (every layer and "
               "function keeps the path bound at import)")
    else:
        return None
    return Finding(HUB_DECIDES_NOTHING, Severity.FALLBACK,
                   f"{why}, so kernelcheck hub cannot say that any of the model's functions run fast: it judges the "
                   "Hub path only.",
                   f"kernelcheck doctor --model {model} --mode {mode}  (the verdict for the functions; pass "
                   "--use-kernels here if the job loads with use_kernels=True)")


def _resolvable(findings: list[Finding], lines: list[HubLine], names: dict[str, LoadName], th: TransformersHub,
                use_hub: bool | None, used: bool, refused: bool) -> dict[str, LoadName]:
    """The names whose Hub builds can be resolved here: none without kernels or with a layout no adapter knows."""
    if not _kernels_importable():
        lines.append(_absent(findings, th, use_hub, refused))
        return {}
    return _adapter_guard(findings, lines, names) if used else names


def _paths(rows: list[HubRow], used: bool, fstatus: dict[str, FunctionStatus], replaced: set[str]) -> list[HubRow]:
    """The rows with their `path`: which code runs for that layer or function in the job - the Hub build (kernelize
    swaps it in), the pip package transformers bound at import, or the torch forward/function."""
    for row in rows:
        row.path, row.implementation = _path(row, used, fstatus, replaced)  # a copy of the decided implementation
    return rows


def _path(row: HubRow, used: bool, fstatus: dict[str, FunctionStatus], replaced: set[str]) -> tuple[str, str | None]:
    """(path, the function's implementation where its bound path runs)."""
    if used and row.repo is not None and (row.problem or (row.error and not row.variant)):
        return "load-fails", None  # kernels raises: hub-build-fails / hub-not-listable
    if used and row.variant and not (row.problem or row.blocked or row.error) \
            and (row.kind == "layer" or row.name in replaced or row.name not in fstatus):
        return "hub", None
    fs = fstatus.get(row.name)
    if row.kind == "function" and fs is not None:
        return ("package" if fs.status == Status.FAST else "torch"), fs.implementation
    return "torch", None


def _absent(findings: list[Finding], th: TransformersHub, use_hub: bool | None,
            refused: bool) -> KernelsAbsentLine:
    """Without the `kernels` package there is no resolver to ask: the line for the section (and a finding unless
    hub-kernels-unusable already says that from_pretrained refuses)."""
    if refused and not use_hub:
        return KernelsAbsentLine(default_refuses=True)
    findings.append(Finding(
        "hub-kernels-absent", Severity.BROKEN if use_hub else Severity.INFO,
        "the `kernels` package is not installed (or does not import)" + (
            ": the job asks for Hub kernels (use_kernels=True), which from_pretrained refuses without it"
            if use_hub else ": Hub kernels are off; every function keeps the path bound at import"),
        f"pip install '{'kernels' + th.window_text if th.window_text else 'kernels'}'"
        "  (only if you want Hub kernels)"))
    return KernelsAbsentLine(default_refuses=False)


def _adapter_guard(findings: list[Finding], lines: list[HubLine],
                   names: dict[str, LoadName]) -> dict[str, LoadName]:
    """A kernels release no adapter fits (kernels_api): one finding, no variant listed, never an internal error.
    A newer release whose layout matched the newest adapter is read, and says so."""
    from kernelcheck.integrations import kernels_api

    got = kernels_api.adapter()
    if isinstance(got, kernels_api.Unsupported):
        lines.append(LayoutUnknownLine(got.reason))
        findings.append(Finding(
            "hub-kernels-layout-unknown", Severity.FALLBACK,
            f"{got.reason}. The job loads Hub kernels (use_kernels=True), so which build each layer and function "
            "gets here, and whether a cached one exists, was not checked.",
            "pip install a kernels release inside transformers' window that kernelcheck knows (0.15-0.19), or set "
            "USE_HUB_KERNELS=0 for the job; and report the kernels version to kernelcheck",
            "kernelcheck/integrations/kernels_api (one adapter per kernels release generation)"))
        return {}
    if got.newer_than_known:
        findings.append(Finding(
            "hub-kernels-newer", Severity.INFO,
            f"kernels {got.newer_than_known} is newer than kernelcheck knows; its layout matches generation "
            f"{got.generation}, so the variants below are read with that adapter"))
    return names


def _judge(findings: list[Finding], group: list[HubRow], res: kernels_hub.Resolution, used: bool,
           fstatus: dict[str, FunctionStatus], q: str, by_default: bool = False,
           predicted: str | None = None, *, m: Matrix) -> list[decide.HubEvidence]:
    """One finding per repository (naming the layers/functions mapped to it); returns the functions the Hub
    kernel will really replace (the decider makes them fast)."""
    names = ", ".join(f"{r.name} ({r.kind})" for r in group)
    fns = tuple(r.name for r in group if r.kind == "function")
    hub_failed = res.hub_unreachable
    if used and hub_failed and not settings.hub_offline():
        # online, kernels asks the Hub first (HubResolver) and does not fall back to the cache
        cached = f"; the cache holds build {res.chosen}, which HF_HUB_OFFLINE=1 would use" if res.chosen else ""
        findings.append(Finding(
            "hub-unreachable", Severity.BROKEN,
            f"{res.spec} (for {names}): {hub_failed.split(';')[0]}. With HF_HUB_OFFLINE unset kernels asks the Hub "
            f"and raises on the connection error, so the model load fails{cached}.",
            "export HF_HUB_OFFLINE=1 for the job (after kernelcheck hub --model M --prefetch where the Hub is "
            "reachable)", "kernels load.py get_kernel (HubResolver when not offline)", fns))
        return []
    if res.chosen and res.blocked:
        if used:
            findings.append(Finding(
                "hub-snapshot-incomplete", Severity.FALLBACK,
                f"{res.spec} (for {names}): build {res.chosen} is in the cache, but {res.blocked}.",
                f"kernelcheck hub --model {q} --prefetch  (repairs the cache entry, no download needed)",
                "huggingface_hub _snapshot_download._raise_if_incomplete_snapshot; kernels resolver.py "
                "resolve_hub_cache_kernel", fns))
        return []
    if res.chosen and not res.problem:
        return [decide.HubEvidence(r.name, f"Hub kernel {res.spec} {r.layer} ({res.chosen})", res.spec, res.chosen)
                for r in group
                if used and r.kind == "function" and r.name in fstatus]
    if not used:
        return []  # the section's lines say what use_kernels=True would meet; hub-not-used says why
    if res.problem:
        findings.append(Finding("hub-build-fails", Severity.BROKEN,
                                f"{res.spec} (for {names}): build {res.chosen}: {res.problem}; the model load fails "
                                "(kernelize falls back only when no file is found)",
                                "load without use_kernels, or pass check_arch=False where you load the kernel yourself",
                                "kernels validate.py ArchValidator/MinverValidator", fns))
        return []
    if res.error:
        findings.append(_not_listable(res, names, q, by_default, fns, predicted, m=m))
        return []
    def is_slow(r: HubRow) -> bool:
        fs = fstatus.get(r.name)
        if r.kind == "layer" or fs is None:
            return True
        return fs.used and fs.status != Status.FAST  # a decode function in train mode, or a fast package path: no loss

    slow = [r for r in group if is_slow(r)]
    rejected = "; ".join(f"{d.variant}: {d.reason}" for d in res.decisions if not d.accepted) or "none listed"
    tail = (" kernelize keeps the torch forward and logs it at INFO only: the job runs the slow path"
            + (f" for {', '.join(r.name for r in slow)}." if slow else ".")) if slow else \
        (" Nothing is lost: the package path transformers bound at import runs, or the function is not used in "
         "this mode.")
    findings.append(Finding(
        "hub-no-variant", Severity.FALLBACK if slow else Severity.INFO,
        f"{res.spec} (for {names}) has no build for this torch/CUDA (listed from {res.source}). Rejected: {rejected}. "
        f"Nearest: {res.nearest}, which would match {res.would_match}.{tail}",
        f"run the job with {res.would_match}{_index_hint(res.nearest)}; or use the package path (kernelcheck "
        f"install --model {q}); kernelcheck never changes torch for you",
        "kernels variants.py resolve_variants; layer.py kernelize_layer (KernelizeFallback.CANNOT_LOAD)", fns))
    return []


def _not_listable(res: kernels_hub.Resolution, names: str, q: str, by_default: bool, fns: tuple[str, ...],
                  predicted: str | None = None, *, m: Matrix) -> Finding:
    """The build kernels needs cannot be found (offline, not cached; or the Hub unreachable): the load fails.
    `predicted`: the device type of a verdict for a device not visible here (the failure is a prediction for a
    machine with one; matrix/hub_offline.toml says for which repositories it was seen on a GPU)."""
    said = f"{res.kernels_error.rstrip('.')}; " if res.kernels_error else ""
    off = ("or set USE_HUB_KERNELS=0 for the job to keep the pip packages (from_pretrained then loads no Hub "
           "kernel)" if by_default else "or drop use_kernels=True from the job (or set USE_HUB_KERNELS=0)")
    head = f"{res.spec} (for {names}) cannot be resolved here: {said}{res.error}. kernels raises"
    if predicted:
        head = (f"on a {predicted.upper()} device this load fails: {res.spec} (for {names}) cannot be resolved from "
                f"this cache: {said}{res.error}. On such a device kernels raises")
        if res.repo_id not in prediction.confirmed_repos(m=m):
            head = f"{head} (not yet confirmed on a GPU for {res.repo_id})"
    return Finding(
        "hub-not-listable", Severity.BROKEN,
        f"{head} instead of falling back (offline: ValueError 'not available in the local cache'; online: a "
        "connection error), so the model load fails.",
        f"kernelcheck hub --model {q} --prefetch --lock kernels.lock{f' --device {predicted}' if predicted else ''}  "
        "(online, e.g. in the docker build stage), "
        f"then run the job with HF_HUB_OFFLINE=1; {off}",
        "kernels _versions.py resolve_version_spec_as_ref; layer.py kernelize_layer", fns)


def _index_hint(variant: str | None) -> str:
    """pip's index for the torch build a CUDA variant wants (download.pytorch.org/whl/cuXY)."""
    import re

    m = re.search(r"-(cu\d+)-", variant or "")
    return f" (pip install torch from https://download.pytorch.org/whl/{m.group(1)})" if m else ""
