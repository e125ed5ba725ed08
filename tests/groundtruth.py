"""Ground truth for doctor: build each model type tiny, run it on the CPU, record which callable really ran.

For every model type kernelcheck knows (matrix/models.toml), a child process with the chosen transformers
first on sys.path builds the model's own causal-LM class from its config with random weights (verify's
tiny-model builder, kernelcheck/verify/layers.py), runs a train step (forward + backward) and a prefill plus
one cached decode step (verify's steps), while recording wrappers sit on every fast-function slot the
modeling module binds:
- `use_kernel_func_from_hub_with_fallback` wrappers (transformers >= 5.15): the closure cells
  `implementation` and `torch_function`, so whichever callable really executes records itself (the 5.25
  per-call device check included);
- module-level names (transformers <= 5.14): kernel-package callables and the `torch_*` references, before
  and after the model is built (5.13/5.14's Mamba mixers assign them in `__init__` via `lazy_load_kernel`);
- layer methods: `torch_forward` / `slow_forward` (torch path) and `cuda_kernels_forward` (fast path) of the
  Mamba-family mixers, and a layer attribute that is None while its forward runs (inline torch code).

The truth's exit code per mode: 4 if building the model or a step raised, 3 if any slot ran a torch path,
0 if every slot called ran its fast kernel. "Building" includes the job's load: the tiny model is saved and
loaded back with `from_pretrained` (5.25 turns Hub kernels on there). It is compared with `kernelcheck doctor
--model TYPE --mode MODE --json` run in the same environment: the exit code, and per function that ran: doctor
reports it, as used in this mode, not fast when its torch path ran and fast when only its kernel ran.

    python -m tests.groundtruth                                  # installed transformers, every type
    python -m tests.groundtruth --transformers 5.13.1 --types mamba,zamba --modes train
    python -m tests.groundtruth --transformers 5.25.0 --env USE_HUB_KERNELS=0   # with the kernels 0.19.1 it requires
    python -m tests.groundtruth --transformers 5.25.0 --no-deps        # the base's kernels, outside its window
    python -m tests.groundtruth --site DIR --site DIR2 --env HF_HUB_OFFLINE=1 --json
    /path/to/cuda-torch-venv/bin/python -m tests.groundtruth --transformers 5.25.0 --types qwen3_5,llama,mamba2
                                                                 # a CUDA torch build without a GPU

Runs without pytest (tests/envs.py imports it only under pytest). The truth runs on this machine's CPU, so doctor
runs with `--device cpu`: its verdict for running here, whatever the torch build.

Exit 0 when doctor agrees with the truth everywhere, 1 when it disagrees anywhere, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from tests.groundtruth_compare import compare, table  # noqa: E402 - the comparison, re-exported

# "recording": a prefill, then one forward of DRAFTS tokens with a cache that keeps their intermediate recurrent
# states (Cache.activate_past_recording, as 5.25's speculative and MTP generation do), compared with doctor's train
# mode: there transformers 5.25's chunked path calls the recurrent ("decode") function for those tokens
MODES = {"train": ("train",), "infer": ("prefill", "decode"), "recording": ("prefill", "drafts")}
DOCTOR_MODE = {"train": "train", "infer": "infer", "recording": "train"}
DRAFTS = 3
TOKENS = 64
LAYER_TORCH = ("torch_forward", "slow_forward")  # Mamba-family mixers' torch paths
LAYER_FAST = ("cuda_kernels_forward",)


# ----------------------------------------------------------------------------------------------------------
# child: build, run, record (runs with the chosen transformers first on sys.path)
# ----------------------------------------------------------------------------------------------------------
class Recorder:
    """Recording wrappers on every slot of one modeling module; `calls` collects (step, slot, callable, fast)."""

    def __init__(self, module: Any, slots: dict[str, str]):
        self.module = module
        self.slots = slots  # module-level name -> slot name (fast functions, their torch references, aliases)
        self.step = "build"
        self.calls: list[dict[str, Any]] = []
        self._wrapped: dict[int, Any] = {}  # id(original) -> recorder
        self._done: set[int] = set()

    def _record(self, slot: str, name: str, fast: bool) -> None:
        entry = {"step": self.step, "slot": slot, "callable": name, "fast": fast}
        if entry not in self.calls:
            self.calls.append(entry)

    def wrap(self, slot: str, real: Any, fast: bool) -> Any:
        if id(real) in self._done:
            return real
        if id(real) in self._wrapped:
            return self._wrapped[id(real)]
        from kernelcheck.verify.instrument import dotted

        name = dotted(real)

        @functools.wraps(real)
        def recorder(*args: Any, **kwargs: Any) -> Any:
            self._record(slot, name, fast)
            return real(*args, **kwargs)

        self._wrapped[id(real)] = recorder
        self._done.add(id(recorder))
        return recorder

    def patch_module(self) -> None:
        """Module-level slots: decorated wrappers' cells, kernel-package callables, torch references."""
        from kernelcheck.integrations.transformers import _unwrap_kernels_func
        from kernelcheck.verify.instrument import _closure_cells

        mod = self.module
        for attr, obj in list(vars(mod).items()):
            if obj is None or id(obj) in self._done or isinstance(obj, type):
                continue
            inner = _unwrap_kernels_func(obj)
            cells = _closure_cells(inner) if callable(inner) else {}
            if cells:
                if id(inner) in self._done:
                    continue
                self._done.add(id(inner))
                slot = _cell_value(cells, "func_name") or self.slots.get(attr, attr)
                tf = _cell_value(cells, "torch_function")
                for cell_name in ("implementation", "torch_function"):
                    real = _cell_value(cells, cell_name)
                    if real is not None and id(real) not in self._done:
                        fast = cell_name == "implementation" and real is not tf
                        cells[cell_name].cell_contents = self.wrap(slot, real, fast)
                continue
            if callable(obj) and hasattr(obj, "__module__") and attr in self.slots:
                self._patch_global(attr, obj)

    def _patch_global(self, attr: str, obj: Any) -> None:
        mod = self.module
        top = (getattr(obj, "__module__", "") or "").split(".")[0]
        if top not in ("transformers", "torch", "builtins", ""):
            setattr(mod, attr, self.wrap(self.slots[attr], obj, True))  # a kernel package's function
        elif getattr(obj, "__module__", "") == mod.__name__:
            if attr == self.slots[attr] and attr in self._own():
                return  # the module's own torch code under the kernel's name, no kernel bound: no fallback
            setattr(mod, attr, self.wrap(self.slots[attr], obj, False))  # the module's own torch reference

    def _own(self) -> tuple[str, ...]:
        """Top-level undecorated defs of the module's source (transformers 5.23 lfm3's torch-only
        causal_conv1d_fn: "the hub causal_conv1d kernels serve widths 2-4, LFM3 uses 7")."""
        import ast

        from kernelcheck.integrations.transformers import own_functions

        try:
            return own_functions(ast.parse(Path(self.module.__file__).read_text(encoding="utf-8")))
        except (OSError, SyntaxError, TypeError):
            return ()

    def patch_model(self, model: Any) -> None:
        """Layer attributes and methods: bound functions, inline torch code (attribute None), mixer paths."""
        import types

        for sub in model.modules():
            cls = type(sub)
            attrs = vars(sub)
            for attr, val in list(attrs.items()):
                if attr in self.slots and callable(val) and not isinstance(val, type) and id(val) not in self._done:
                    top = (getattr(val, "__module__", "") or "").split(".")[0]
                    setattr(sub, attr, self.wrap(self.slots[attr], val, top not in ("transformers", "torch")))
            inline = [self.slots[a] for a, v in attrs.items() if a in self.slots and v is None]
            if inline and "forward" not in attrs:
                sub.forward = self._inline_forward(sub, cls.__name__, inline)
            if any(hasattr(cls, m) for m in LAYER_FAST) and any(hasattr(cls, m) for m in LAYER_TORCH):
                for meth in (*LAYER_TORCH, *LAYER_FAST):
                    if hasattr(cls, meth):
                        bound = types.MethodType(getattr(cls, meth), sub)
                        setattr(sub, meth, self.wrap(f"{cls.__name__}.{meth}", bound, meth in LAYER_FAST))

    def _inline_forward(self, sub: Any, cls_name: str, slots: list[str]) -> Any:
        real = sub.forward

        @functools.wraps(real)
        def forward(*args: Any, **kwargs: Any) -> Any:
            for s in slots:
                self._record(s, f"inline torch code in {cls_name}.forward (its attribute is None)", False)
            return real(*args, **kwargs)

        return forward


def _cell_value(cells: dict[str, Any], name: str) -> Any:
    cell = cells.get(name)
    try:
        return cell.cell_contents if cell is not None else None
    except ValueError:
        return None


def _slot_names(module_name: str) -> dict[str, str]:
    """module-level / layer attribute name -> slot (kernelcheck's function name where it has one)."""
    from kernelcheck.core import matrix as matrix_mod

    m = matrix_mod.load()
    out: dict[str, str] = {}
    for fn, info in m.functions.items():
        out[fn] = fn
        fb = info.torch_fallback.split(" ")[0]
        if fb.startswith("torch_") and fb.isidentifier():
            out[fb] = fn
    for e in m.transformers.get("misnamed", []):
        out[e["registered"]] = e["function"]
    out["falcon_mamba_inner_fn"] = "mamba_inner_fn"  # 5.13/5.14 falcon_mamba's name for mamba_inner_fn
    return out


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def observe(model_type: str, modes: tuple[str, ...]) -> dict[str, Any]:
    """Build `model_type` tiny on the CPU and run each mode's steps; what ran, per mode."""
    import importlib
    import warnings

    from kernelcheck.core import matrix as matrix_mod
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import layers as layers_mod

    warnings.simplefilter("ignore")
    out: dict[str, Any] = {"model_type": model_type}
    try:
        model = transformers_models.resolve(model_type, m=matrix_mod.load())
    except Exception as exc:  # noqa: BLE001
        return {**out, "error": f"kernelcheck cannot resolve it: {first_line(exc)}"}
    dotted = f"transformers.models.{model.spec.module}.modeling_{model.spec.module}"
    try:
        mod = importlib.import_module(dotted)
    except Exception as exc:  # noqa: BLE001
        err = f"import {dotted}: {first_line(exc)}"
        return {**out, "build_error": err, "modes": _all_raised(modes, err)}
    rec = Recorder(mod, _slot_names(model.spec.module))
    rec.patch_module()
    try:
        built = layers_mod.build(model, "tiny", "cpu", "float32", None, m=matrix_mod.load())
    except Exception as exc:  # noqa: BLE001 - a crash while building is the truth (exit 4)
        if "could not shrink" in str(exc):  # verify's tiny-shape table cannot make this config: no truth
            return {**out, "untested": first_line(exc), "modes": {}}
        if "Unrecognized configuration class" in str(exc):  # a vision/audio sub-config: no causal LM
            return {**out, **_tower(model, rec, modes)}
        return {**out, "build_error": first_line(exc), "modes": _all_raised(modes, first_line(exc))}
    load = _load_error(built.model)
    if isinstance(load, _LoadUnchecked):
        out["load_unchecked"] = str(load)
    elif load is not None:  # the job's from_pretrained raises (5.25: Hub kernels on by default, kernels unusable)
        return {**out, "build_error": load, "modes": _all_raised(modes, load)}
    rec.patch_module()  # names the layers' __init__ assigned (5.13/5.14 lazy_load_kernel)
    rec.patch_model(built.model)
    out["class"] = built.model_class
    out["modes"] = {}
    for mode in modes:
        out["modes"][mode] = _observe_mode(built, rec, mode)
    return out


def _tower(model: Any, rec: Recorder, modes: tuple[str, ...]) -> dict[str, Any]:
    """A sub-config type that is no causal LM (qwen3_5_vision): the model transformers builds for it
    (`AutoModel.from_config`, tiny), and which of its modules are of a class whose source uses a fast-function
    slot. None: nothing in the model can call one, truth 0 in every mode (the build ran, recorded). Some, in a
    text tower (token ids in): its forward runs as a job runs it (_observe_text_tower). Some elsewhere: no truth
    (a vision or audio tower's inputs are pixels or frames, and the harness runs no forward for them)."""
    import inspect

    from transformers import AutoModel

    from kernelcheck.core import matrix as matrix_mod
    from kernelcheck.verify import layers as layers_mod

    cfg, _ = layers_mod.shaped_config(model, "tiny", m=matrix_mod.load())
    try:
        tower = AutoModel.from_config(cfg)
    except Exception as exc:  # noqa: BLE001 - transformers cannot build it either: the job's build raises
        err = f"AutoModel.from_config: {first_line(exc)}"
        return {"build_error": err, "modes": _all_raised(modes, err)}
    rec.patch_module()
    rec.patch_model(tower)
    holders = set()
    for sub in tower.modules():
        try:
            src = inspect.getsource(type(sub))
        except (OSError, TypeError):
            continue
        if type(sub).__module__ == rec.module.__name__ and any(slot in src for slot in rec.slots):
            holders.add(type(sub).__name__)
    out: dict[str, Any] = {"class": type(tower).__name__, "tower": sorted(holders)}
    if holders and _takes_token_ids(tower, cfg):  # a text tower (glm5_next_text): token ids in, a forward to run
        return {**out, "modes": {m: _observe_text_tower(tower, cfg, rec, m) for m in modes}}
    if holders:
        return {**out, "untested": f"{type(tower).__name__} holds {sorted(holders)}: no forward for a tower",
                "modes": {}}
    calls = list(rec.calls)  # what building it called (nothing expected)
    code = 3 if any(not c["fast"] for c in calls) else 0
    return {**out, "modes": {m: {"exit": code, "error": None, "calls": calls} for m in modes}}


def _takes_token_ids(tower: Any, cfg: Any) -> bool:
    import inspect

    return bool(getattr(cfg, "vocab_size", None)) and "input_ids" in inspect.signature(tower.forward).parameters


def _observe_text_tower(tower: Any, cfg: Any, rec: Recorder, mode: str) -> dict[str, Any]:
    """A text tower's mode as a job runs it through its base model: train, a forward with use_cache=False and a
    backward of its hidden states; infer, a prefill with the cache and one cached decode step. Recording needs the
    causal LM's cache hooks: no truth."""
    import torch

    if mode == "recording":
        return {"exit": None, "error": None, "calls": [], "untested": "recording runs through a causal LM's cache"}
    ids = torch.randint(0, int(cfg.vocab_size), (1, TOKENS))
    rec.calls, error = [], None
    try:
        if mode == "train":
            rec.step = "train"
            tower.train()
            tower(input_ids=ids, use_cache=False).last_hidden_state.float().sum().backward()
        else:
            tower.eval()
            with torch.no_grad():
                rec.step = "prefill"
                out = tower(input_ids=ids, use_cache=True)
                rec.step = "decode"
                tower(input_ids=ids[:, -1:], past_key_values=out.past_key_values, use_cache=True)
    except Exception as exc:  # noqa: BLE001 - the forward raising is the truth (exit 4)
        error = f"{rec.step}: {first_line(exc)}"
    calls = list(rec.calls)
    code = 4 if error else 3 if any(not c["fast"] for c in calls) else 0
    return {"exit": code, "error": error, "calls": calls}


def _observe_mode(built: Any, rec: Recorder, mode: str) -> dict[str, Any]:
    """Run one mode's steps on the built model: its exit code, the error that stopped it, and the calls seen."""
    from kernelcheck.verify.steps import Steps

    inst = _StepState()
    steps = Steps(built, inst, "train", TOKENS)  # type: ignore[arg-type]
    rec.calls = []
    error = None
    for step in MODES[mode]:
        rec.step = inst.step = step
        try:
            if step == "drafts":
                _drafts(steps)
            else:
                steps.run(step)
        except _NoRecording as exc:
            error = f"untested: {exc}"
            break
        except Exception as exc:  # noqa: BLE001 - the forward raising is the truth (exit 4)
            error = f"{step}: {first_line(getattr(exc, 'original', exc))}"
            break
    calls = list(rec.calls)
    if error and error.startswith("untested: "):
        return {"exit": None, "error": None, "calls": [], "untested": error[len("untested: "):]}
    code = 4 if error else 3 if any(not c["fast"] for c in calls) else 0
    return {"exit": code, "error": error, "calls": calls}


class _NoRecording(Exception):
    """This transformers' cache cannot keep intermediate recurrent states: the recording mode has no truth."""


def _drafts(steps: Any) -> None:
    """One forward of DRAFTS tokens after the prefill, the cache recording their intermediate states."""
    import torch

    cache = steps.cache
    if cache is None or not hasattr(cache, "activate_past_recording"):
        raise _NoRecording(f"{type(cache).__name__} has no activate_past_recording (transformers < 5.25)")
    cache.activate_past_recording(recurrent_states_to_keep=DRAFTS)
    with torch.no_grad():
        steps.built.model(input_ids=steps.ids[:, :DRAFTS], use_cache=True, **{steps.built.cache_kwarg: cache})


class _LoadUnchecked(str):
    """The harness could not save the tiny model: the load is not checked (the steps still run)."""


def _load_error(lm: Any) -> str | None:
    """What a job's load does: the tiny model saved to a temporary folder and loaded back with its own class's
    `from_pretrained` (transformers 5.25 turns Hub kernels on there by default and raises when `kernels` is
    unusable; building from a config does not). The error's first line, or None when it loads."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kc-groundtruth-") as folder:
        try:
            lm.save_pretrained(folder)
        except Exception as exc:  # noqa: BLE001 - saving is the harness's step, not the job's: no load truth
            return _LoadUnchecked(f"save_pretrained of the tiny model failed ({first_line(exc)})")
        try:
            type(lm).from_pretrained(folder)
        except Exception as exc:  # noqa: BLE001 - the job's load raising is the truth (exit 4)
            return f"from_pretrained: {first_line(exc)}"
    return None


class _StepState:
    step = "?"
    mark_backward = False


def _all_raised(modes: tuple[str, ...], error: str) -> dict[str, Any]:
    return {m: {"exit": 4, "error": f"building the model raised: {error}", "calls": []} for m in modes}


def child_main(types: list[str], modes: tuple[str, ...]) -> None:
    import logging

    logging.disable(logging.WARNING)
    for t in types:
        t0 = time.perf_counter()
        got = observe(t, modes)
        got["seconds"] = round(time.perf_counter() - t0, 2)
        print("GROUNDTRUTH " + json.dumps(got), flush=True)


# ----------------------------------------------------------------------------------------------------------
# parent: truth in a child, doctor in subprocesses, comparison
# ----------------------------------------------------------------------------------------------------------
def _env(sites: list[Path], extra: dict[str, str]) -> dict[str, str]:
    e = dict(os.environ)
    for k in ("KERNELCHECK_DEBUG", "PYTHONPATH"):
        e.pop(k, None)
    e["PYTHONPATH"] = os.pathsep.join([*(str(s) for s in sites), str(REPO)])
    e.setdefault("HF_HUB_OFFLINE", "1")
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e.update(extra)
    return e


def truth(types: list[str], modes: tuple[str, ...], sites: list[Path], extra: dict[str, str],
          timeout: float = 1800) -> dict[str, dict[str, Any]]:
    """{model_type: observation}, from one child process (one transformers import for every type)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", ",".join(types), "--modes", ",".join(modes)]
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env(sites, extra), cwd=str(REPO), timeout=timeout)
    got = {}
    for line in res.stdout.splitlines():
        if line.startswith("GROUNDTRUTH "):
            obs = json.loads(line[len("GROUNDTRUTH "):])
            got[obs["model_type"]] = obs
    for t in types:
        if t not in got:  # the child died on this type (a segfault, an abort): that is a crash too
            err = (f"the child process died (exit {res.returncode}): "
                   f"{res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ''}")
            got[t] = {"model_type": t, "build_error": err, "modes": _all_raised(modes, err)}
            break
    return got


def doctor(model_type: str, mode: str, sites: list[Path], extra: dict[str, str]) -> dict[str, Any]:
    # the truth runs on this machine's CPU: doctor's verdict for running here is `--device cpu` (with a CUDA torch
    # build and no GPU, doctor's default is a prediction for a CUDA machine, not what happens here)
    cmd = [sys.executable, "-m", "kernelcheck", "doctor", "--model", model_type, "--mode", mode, "--json",
           "--device", "cpu"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=_env(sites, extra), cwd=str(REPO), timeout=600)
    try:
        rep = json.loads(res.stdout)
    except json.JSONDecodeError:
        rep = {"error": (res.stderr.strip().splitlines() or ["no output"])[-1]}
    return {"exit": res.returncode, "report": rep}


def run(types: list[str], modes: tuple[str, ...], sites: list[Path], extra: dict[str, str] | None = None,
        jobs: int = 2) -> list[dict[str, Any]]:
    """Every (type, mode) row: the truth's child and the doctor runs side by side."""
    extra = extra or {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        obs_f = pool.submit(truth, types, modes, sites, extra)
        doc_f = {(t, d): pool.submit(doctor, t, d, sites, extra)
                 for t in types for d in dict.fromkeys(DOCTOR_MODE[m] for m in modes)}
        obs = obs_f.result()
        return [compare(obs[t], doc_f[(t, DOCTOR_MODE[m])].result(), m) for t in types for m in modes]


def known_types() -> list[str]:
    from kernelcheck.core import matrix as matrix_mod

    return list(matrix_mod.load().model_types)


def _installed_types() -> list[str]:
    """Types the installed transformers registers (sub-configs such as qwen3_5_vision): `--types` may name them."""
    from kernelcheck.integrations import transformers_types

    return list(transformers_types.known_model_types() or {})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.groundtruth", description=__doc__.split("\n\n")[0])
    ap.add_argument("--transformers", help="a transformers version to test (installed into a cached test site)")
    ap.add_argument("--no-deps", action="store_true",
                    help="install --transformers without its dependencies: the base environment's serve (e.g. 5.25.0 "
                         "with the base's kernels, outside its window, instead of the kernels 0.19.1 it requires)")
    ap.add_argument("--site", action="append", default=[], type=Path,
                    help="a folder put first on sys.path (e.g. one made with pip install --target); repeatable")
    ap.add_argument("--with", dest="extra_reqs", action="append", default=[],
                    help="another requirement for a cached test site (e.g. kernels==0.15.2); repeatable")
    ap.add_argument("--types", help="comma-separated model types (default: every type kernelcheck knows)")
    ap.add_argument("--modes", default="train,infer",
                    help="train, infer and/or recording (5.25+: drafts with a recording cache, against doctor train)")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both runs; repeatable")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    modes = tuple(m for m in a.modes.split(",") if m)
    if any(m not in MODES for m in modes):
        ap.error(f"--modes takes {', '.join(MODES)}, not {a.modes}")
    if a.child is not None:
        child_main([t for t in a.child.split(",") if t], modes)
        return 0
    extra = {}
    for kv in a.env:
        if "=" not in kv:
            ap.error(f"--env takes KEY=VALUE, not {kv}")
        k, _, v = kv.partition("=")
        extra[k] = v
    sites = [s.resolve() for s in a.site]
    for s in sites:
        if not s.is_dir():
            ap.error(f"--site {s}: no such folder")
    if a.transformers or a.extra_reqs:
        from tests.envs import site

        # transformers' own closure first: a --with package's dependencies (a newer huggingface_hub) must not
        # shadow the versions that transformers release resolved to
        made = [site(f"transformers=={a.transformers}", deps=not a.no_deps)] if a.transformers else []
        if a.extra_reqs:
            made.append(site(*a.extra_reqs, deps=True))
        sites = made + sites
    types = [t for t in (a.types or "").split(",") if t] or known_types()
    unknown = sorted(set(types) - set(known_types()) - set(_installed_types()))
    if unknown:
        ap.error(f"unknown model types {unknown}; kernelcheck knows {known_types()}")
    rows = run(types, modes, sites, extra, a.jobs)
    print(json.dumps(rows, indent=1) if a.json else table(rows))
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
