"""What the installed transformers says about Hub kernels, read from its source without importing it.

- the `kernels` window it accepts (KERNELS_MIN_VERSION/KERNELS_MAX_VERSION), `USE_HUB_KERNELS` and the
  `use_kernels` default of `from_pretrained` (5.25: None -> True unless USE_HUB_KERNELS disables kernels);
- its Hub mapping (`_build_kernel_mapping` or `_KERNEL_MAPPING`), evaluated with recording stand-ins;
- `select_entry`: which mapping entry kernelize picks for a device, capability and mode.
kernels_hub.py resolves the chosen repositories with kernels' own code.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core import environment, matrix, settings
from kernelcheck.core.status import Mode

# ---------------------------------------------------------------------------------------------------------------
# Plain data
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubRepo:
    """One repository a transformers mapping points at."""

    repo_id: str
    layer_name: str
    version: int | None = None
    revision: str | None = None
    trust_remote_code: bool = False

    @property
    def spec(self) -> str:
        return f"{self.repo_id}@v{self.version}" if self.version is not None else f"{self.repo_id}@{self.revision}"


@dataclass(frozen=True)
class MappingEntry:
    """One (name, device, capability range, modes) -> repository line of transformers' Hub mapping."""

    name: str  # the mapping key: a layer name (RMSNormGated) or a function name (chunk_gated_delta_rule)
    device: str  # cuda | rocm | xpu | cpu | mps | npu ...
    modes: tuple[str, ...]  # ("TRAINING",), ("INFERENCE", "TORCH_COMPILE"), ("FALLBACK",)
    repo: HubRepo
    capability: tuple[int, int] | None = None  # (min, max) as kernels encodes it: 90 = sm_90


@dataclass(frozen=True)
class TransformersHub:
    """What the installed transformers says about Hub kernels."""

    transformers: str | None
    kernels: str | None
    window: tuple[str, str] | None  # (min inclusive, max exclusive)
    window_source: str
    window_met: bool
    use_hub_kernels: str  # the value transformers reads (default applied)
    use_hub_kernels_set: bool  # whether the variable is set in the environment
    hub_enabled_by_env: bool
    use_kernels_default: bool | None
    use_kernels_source: str
    refuses_when_unusable: bool  # set_use_kernels raises when kernels is unusable (read from source)
    mapping: tuple[MappingEntry, ...]
    mapping_source: str
    error: str | None = None
    unread: tuple[str, ...] = ()  # what the static reader found but did not understand (a warning each)
    eval_at_load: bool = True  # from_pretrained calls model.eval() before it kernelizes: the load is INFERENCE

    @property
    def window_text(self) -> str:
        return f">={self.window[0]},<{self.window[1]}" if self.window else "unknown"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["mapping"] = [asdict(m) for m in self.mapping]
        d.pop("eval_at_load")  # the rows' `phase` says it
        d["window"] = self.window_text if self.window else None
        return d



# ---------------------------------------------------------------------------------------------------------------
# What transformers says (read from the installed package)
# ---------------------------------------------------------------------------------------------------------------


class _RecordedRepo:
    """Stands in for kernels' LayerRepository/FuncRepository while transformers' mapping is evaluated:
    records the arguments without touching the network or depending on the kernels version."""

    def __init__(self, repo_id: Any = None, *args: Any, **kw: Any) -> None:
        self.repo_id = str(repo_id if repo_id is not None else kw.get("repo_path", ""))
        self.layer_name = kw.get("layer_name") or kw.get("func_name") or (args[0] if args else "")
        self.version = kw.get("version")
        self.revision = kw.get("revision")
        self.trust_remote_code = bool(kw.get("trust_remote_code", False))


def _kernels_namespace() -> dict[str, Any]:
    """Mode/Device/...Properties for evaluating the mapping: kernels' own classes when importable."""
    ns: dict[str, Any] = {"LayerRepository": _RecordedRepo, "FuncRepository": _RecordedRepo,
                          "LocalLayerRepository": _RecordedRepo, "LocalFuncRepository": _RecordedRepo}
    try:
        import kernels

        for name in ("Mode", "Device", "CUDAProperties", "ROCMProperties"):
            if hasattr(kernels, name):
                ns[name] = getattr(kernels, name)
    except Exception:  # noqa: BLE001 - kernels absent: simple stand-ins below
        pass
    if "Mode" not in ns:
        from enum import Flag, auto

        class Mode(Flag):
            FALLBACK = auto()
            TRAINING = auto()
            INFERENCE = auto()
            TORCH_COMPILE = auto()

        ns["Mode"] = Mode
    for name in ("Device", "CUDAProperties", "ROCMProperties"):
        if name not in ns:
            ns[name] = _simple_record(name)
    return ns


def _simple_record(name: str) -> type:
    def __init__(self: Any, **kw: Any) -> None:
        self.__dict__.update(kw)
        self.__dict__.setdefault("properties", None)

    return type(name, (), {"__init__": __init__})


def _module_source(dotted: str) -> tuple[str | None, str | None]:
    """Source text of a transformers module, read from the installed files without importing transformers
    (importing `transformers.utils` alone costs seconds; doctor stays static)."""
    try:
        spec = importlib.util.find_spec(dotted.split(".")[0])
    except (ImportError, ValueError):
        return None, None
    if spec is None or not spec.origin:
        return None, None
    path = Path(spec.origin).parent.joinpath(*dotted.split(".")[1:]).with_suffix(".py")
    if not path.is_file():
        return None, None
    return path.read_text(encoding="utf-8"), str(path)


def _mapping_from_source(src: str) -> dict[str, Any] | None:
    """Evaluate transformers' `_build_kernel_mapping()` (>= 5.2x) or `_KERNEL_MAPPING = {...}` (older)."""
    tree = ast.parse(src)
    ns = _kernels_namespace()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_build_kernel_mapping":
            mod = ast.Module(body=[node], type_ignores=[])
            # trusted: the installed transformers' own source
            exec(compile(mod, "<transformers _build_kernel_mapping>", "exec"), ns)
            built: dict[str, Any] = ns["_build_kernel_mapping"]()
            return built
    for node in ast.walk(tree):
        target: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "_KERNEL_MAPPING" and isinstance(node.value, ast.Dict):
            mod = ast.Module(body=[ast.Assign(targets=[ast.Name("_KERNEL_MAPPING", ast.Store())], value=node.value,
                                              lineno=node.lineno, col_offset=0)], type_ignores=[])
            ast.fix_missing_locations(mod)
            exec(compile(mod, "<transformers _KERNEL_MAPPING>", "exec"), ns)
            literal: dict[str, Any] = ns["_KERNEL_MAPPING"]
            return literal
    return None


def _mode_names(mode: Any) -> tuple[str, ...]:
    names = [m for m in ("TRAINING", "INFERENCE", "TORCH_COMPILE", "FALLBACK")
             if getattr(type(mode), m, None) is not None and getattr(type(mode), m) in mode]
    return tuple(names) or (str(mode),)


def _entries(mapping: dict[str, Any]) -> tuple[MappingEntry, ...]:
    out = []
    for name, per_device in mapping.items():
        if not isinstance(per_device, dict):
            continue
        for dev, repos in per_device.items():
            if isinstance(dev, str):
                dtype, cap = dev, None
            else:
                dtype = getattr(dev, "type", str(dev))
                props = getattr(dev, "properties", None)
                cap = (int(props.min_capability), int(props.max_capability)) if props is not None else None
            items = repos.items() if isinstance(repos, dict) else [(None, repos)]
            for mode, repo in items:
                if not isinstance(repo, _RecordedRepo):
                    continue
                modes = ("FALLBACK",) if mode is None else _mode_names(mode)
                out.append(MappingEntry(str(name), dtype, modes, HubRepo(repo.repo_id, str(repo.layer_name),
                                                                          repo.version, repo.revision,
                                                                          repo.trust_remote_code), cap))
    return tuple(out)


def _in_window(version: str | None, window: tuple[str, str] | None) -> bool:
    if not version or not window:
        return False
    from packaging.version import Version

    try:
        v = Version(version)
        return Version(window[0]) <= v < Version(window[1])
    except Exception:  # noqa: BLE001
        return False


def _kernels_window(tv: str, iu_src: str | None, m: matrix.Matrix) -> tuple[tuple[str, str] | None, str]:
    """The kernels window: transformers.utils.import_utils (no need to import transformers' heavy parts)."""
    if iu_src:
        mn = re.search(r'^KERNELS_MIN_VERSION\s*=\s*["\']([^"\']+)["\']', iu_src, re.M)
        mx = re.search(r'^KERNELS_MAX_VERSION\s*=\s*["\']([^"\']+)["\']', iu_src, re.M)
        if mn and mx:
            return (mn.group(1), mx.group(1)), "transformers.utils.import_utils KERNELS_MIN_VERSION/KERNELS_MAX_VERSION"
    from kernelcheck.core import rules

    for w in m.transformers.get("kernels_window", []):
        if rules.version_in(tv, w["transformers"]):
            lo = re.search(r">=\s*([\w.]+)", w["kernels"])
            hi = re.search(r"<\s*([\w.]+)", w["kernels"])
            if lo and hi:
                return (lo.group(1), hi.group(1)), "matrix/transformers.toml kernels_window"
    return None, "not declared by this transformers"


def _use_hub_kernels(hk_src: str | None, iu_src: str | None) -> tuple[str, bool]:
    """(the value transformers reads, whether it enables the Hub decorators), with transformers' own default
    and truth set read from its source (5.25: `is_env_variable_true("USE_HUB_KERNELS", default="YES")`)."""
    default = "YES"
    m = re.search(r'USE_HUB_KERNELS["\']\s*,\s*(?:default\s*=\s*)?["\'](\w+)["\']', hk_src or "")
    if m:
        default = m.group(1)
    raw = os.environ.get("USE_HUB_KERNELS", default).upper()
    if "is_env_variable_true(\"USE_HUB_KERNELS\"" in (hk_src or ""):
        truthy = _literal_values(r"def is_env_variable_true\(.*?in\s*(\([^)]*\))", iu_src, re.S)
    else:
        truthy = _literal_values(r"^ENV_VARS_TRUE_VALUES\s*=\s*(\{[^}]*\})", iu_src, re.M)
    return raw, raw in (truthy or settings.YES)  # else the one yes-set (core/settings.py), transformers' own too


def _literal_values(pattern: str, source: str | None, flags: int) -> set[str] | None:
    """The upper-cased strings of the tuple/set literal `pattern` captures in `source`, if it parses."""
    m = re.search(pattern, source or "", flags)
    if not m:
        return None
    try:
        return {str(x).upper() for x in ast.literal_eval(m.group(1))}
    except (ValueError, SyntaxError):
        return None


def _line(src: str, pos: int) -> int:
    return src[:pos].count("\n") + 1


def _use_kernels_default(mu_src: str | None, enabled: bool) -> tuple[bool | None, str, bool, tuple[str, ...]]:
    """(from_pretrained's effective use_kernels default, where it was read, whether set_use_kernels raises when
    kernels is unusable, what the reader did not understand).

    <= 5.24: `kwargs.pop("use_kernels", False)` (or a `use_kernels: bool = False` parameter).
    5.25: `kwargs.pop("use_kernels", None)`, then `if not _kernels_enabled(): use_kernels = False` /
    `elif use_kernels is None: use_kernels = True`: Hub kernels are on unless USE_HUB_KERNELS disables them."""
    if not mu_src:
        return None, "modeling_utils.py not found", False, ("transformers/modeling_utils.py could not be read",)
    sm = re.search(r"def set_use_kernels\(.*?(?=\n    def |\n    @)", mu_src, re.S)
    refuses = bool(sm and "is_kernels_available()" in sm.group(0) and "raise ValueError" in sm.group(0))
    m = re.search(r'kwargs\.pop\(\s*["\']use_kernels["\']\s*,\s*(True|False|None)\s*\)', mu_src)
    if m is None:
        m = re.search(r'\buse_kernels\s*:\s*bool\s*=\s*(True|False)', mu_src)
    if m is None:
        return None, "not found in modeling_utils.py", refuses, (
            "from_pretrained's use_kernels default (no `kwargs.pop(\"use_kernels\", ...)` in modeling_utils.py)",)
    where = f"transformers/modeling_utils.py line {_line(mu_src, m.start())}"
    if m.group(1) != "None":
        return m.group(1) == "True", where, refuses, ()
    on = re.search(r"elif\s+use_kernels\s+is\s+None\s*:\s*\n\s*use_kernels\s*=\s*(True|False)", mu_src)
    if on is None:
        return None, f"{where}: None, resolved later in a way kernelcheck does not read", refuses, (
            f"how from_pretrained resolves use_kernels=None ({where})",)
    gated = "_kernels_enabled()" in mu_src[max(0, on.start() - 600):on.start()]
    value = (on.group(1) == "True") and (enabled or not gated)
    how = "unless USE_HUB_KERNELS disables kernels" if gated else "always"
    return value, (f"None -> {on.group(1)} {how} ({where} and line {_line(mu_src, on.start())})"), refuses, ()


def transformers_hub(*, m: matrix.Matrix) -> TransformersHub:
    """Read the installed transformers: kernels window (the matrix `m`'s where transformers declares none),
    USE_HUB_KERNELS, use_kernels default, Hub mapping."""
    tv = environment.dist_version("transformers")
    kv = environment.dist_version("kernels")
    if not tv:
        return TransformersHub(None, kv, None, "transformers not installed", False, "", False, False, None,
                               "transformers not installed", False, (), "none", "transformers is not installed")
    errors = []
    iu_src, _ = _module_source("transformers.utils.import_utils")
    window, wsrc = _kernels_window(tv, iu_src, m)
    hk_src, _ = _module_source("transformers.integrations.hub_kernels")
    raw, enabled = _use_hub_kernels(hk_src, iu_src)
    mu_src, _ = _module_source("transformers.modeling_utils")
    uk_default, uk_src, refuses, unread = _use_kernels_default(mu_src, enabled)
    mapping: tuple[MappingEntry, ...] = ()
    msrc = "none"
    eval_at_load = bool(mu_src and re.search(r"model\.eval\(\)[^\n]*\n\s*model\.set_use_kernels\(", mu_src))
    if hk_src:
        try:
            got = _mapping_from_source(hk_src)
            if got is not None:
                mapping = _entries(got)
                msrc = "transformers/integrations/hub_kernels.py (" + (
                    "_build_kernel_mapping" if "_build_kernel_mapping" in hk_src else "_KERNEL_MAPPING") + \
                    ", read from the installed source)"
        except Exception as exc:  # noqa: BLE001 - a newer layout must not crash doctor
            errors.append(f"could not read transformers' Hub mapping: {type(exc).__name__}: {exc}")
    return TransformersHub(
        transformers=tv, kernels=kv, window=window, window_source=wsrc,
        window_met=_in_window(kv, window) if window else bool(kv),
        use_hub_kernels=raw, use_hub_kernels_set="USE_HUB_KERNELS" in os.environ, hub_enabled_by_env=enabled,
        use_kernels_default=uk_default, use_kernels_source=uk_src, refuses_when_unusable=refuses,
        mapping=mapping, mapping_source=msrc, error="; ".join(errors) or None, unread=unread,
        eval_at_load=eval_at_load,
    )


def model_hub_names(modeling_module: str) -> dict[str, str]:
    """Names the model's modeling module registers for Hub kernels: {name: "layer"|"function"}."""
    src, _ = _module_source(modeling_module)
    out: dict[str, str] = {}
    if not src:
        return out
    for m in re.finditer(r'@use_kernel_forward_from_hub\(\s*["\'](\w+)["\']', src):
        out.setdefault(m.group(1), "layer")
    for m in re.finditer(r'@use_kernel_func_from_hub(?:_with_fallback)?\(\s*["\'](\w+)["\']', src):
        out.setdefault(m.group(1), "function")
    return out


# ---------------------------------------------------------------------------------------------------------------
# Mapping lookup for a device and mode (kernels' own mode fallback order)
# ---------------------------------------------------------------------------------------------------------------


def _mode_priority(mode: str) -> list[tuple[str, ...]]:
    """kernels' `_MODE_FALLBACK_PRIORITY` for train/infer, as tuples of mode names."""
    try:
        from kernels import Mode as KernelsMode  # public

        from kernelcheck.integrations.kernels_api import Unsupported, adapter

        got = adapter()
        if isinstance(got, Unsupported):
            raise LookupError(got.reason)
        key = KernelsMode.TRAINING if mode == Mode.TRAIN else KernelsMode.INFERENCE
        return [_mode_names(m) for m in got.mode_priority()[key]]
    except Exception:  # noqa: BLE001 - same order as kernels 0.15-0.19
        if mode == Mode.TRAIN:
            return [("TRAINING",), ("TRAINING", "TORCH_COMPILE"), ("FALLBACK",)]
        return [("INFERENCE",), ("INFERENCE", "TORCH_COMPILE"), ("TRAINING",), ("TRAINING", "TORCH_COMPILE"),
                ("FALLBACK",)]


def _cap(c: int) -> str:
    return f"{c // 10}.{c % 10}"


def select_entry(entries: list[MappingEntry], device: str, mode: str,
                 capability: int | None) -> tuple[MappingEntry | None, str]:
    """The entry kernelize would pick for `device`/`mode`, or None and why it keeps the torch forward."""
    dev = [e for e in entries if e.device == device]
    if not dev:
        devices = sorted({e.device for e in entries})
        return None, f"no Hub kernel for {device} (mapped only for {', '.join(devices)}): the torch forward stays"
    if device in ("cuda", "rocm"):
        ranged = [(e, e.capability) for e in dev if e.capability is not None]
        plain = [e for e in dev if e.capability is None]
        if capability is None:
            cand = plain
            if not cand:
                caps = ", ".join(_cap(lo) if lo == hi else f"{_cap(lo)}-{_cap(hi)}"
                                 for lo, hi in sorted({c for _, c in ranged}))
                return None, (f"mapped for {device} only on compute capability {caps}; no GPU here to compare "
                              "(on any other GPU the torch forward stays)")
        else:
            fits = [(e, c) for e, c in ranged if c[0] <= capability <= c[1]]
            if fits:  # kernels takes the smallest interval
                width = min(c[1] - c[0] for _, c in fits)
                cand = [e for e, c in fits if c[1] - c[0] == width]
            else:
                cand = plain
            if not cand:
                return None, (f"no Hub kernel for {device} compute capability {_cap(capability)}: the torch "
                              "forward stays")
        dev = cand
    for modes in _mode_priority(mode):
        for e in dev:
            if tuple(sorted(e.modes)) == tuple(sorted(modes)):
                return e, ""
    have = sorted({"|".join(e.modes) for e in dev})
    return None, (f"the {device} mapping has no kernel usable in {mode} mode (has {', '.join(have)}): "
                  "the torch forward stays")


