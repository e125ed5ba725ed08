"""One real packed batch, as the job's collator yields it: read from a file (a torch.save'd dict of tensors, or
.safetensors) or made by the job's own collator, and checked as data. A bad file is BadInput (exit 2) naming the
key and its shape; the checked batch is a dict of tensors plus its `lint.BatchView`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.packing.lint import POS, SEQ_IDX, TOKENS_KEY, BatchView, Field, is_offsets

PER_TOKEN = (TOKENS_KEY, POS, SEQ_IDX, "labels", "attention_mask")  # (1, T) or (T,), T the token count
SCALARS = ("max_length_q", "max_length_k")


@dataclass
class LoadedBatch:
    tensors: dict[str, Any]  # key -> torch.Tensor, or int for max_length_q/k
    view: BatchView
    source: str  # the file, or `module:callable over N lengths`


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def _bad(where: str, key: str, t: Any, must: str) -> BadInput:
    what = (f"a {_dtype(t)} tensor of shape {tuple(t.shape)}" if hasattr(t, "shape")
            else f"a {type(t).__name__} ({t!r:.40})")
    return BadInput(f"{where}: key {key!r} is {what}; {must}. Fix the batch (the dict the job's collator returns) "
                    "and run again; nothing was run.")


def _is_int(t: Any) -> bool:
    import torch

    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


def _check(where: str, key: str, t: Any, tokens: int | None) -> Any:
    """The value, checked (per-token keys reshaped to (1, T)); BadInput naming the key and its shape."""
    import torch

    if key in SCALARS:
        if isinstance(t, int) and not isinstance(t, bool):
            return t
        if isinstance(t, torch.Tensor) and t.numel() == 1 and _is_int(t):
            return int(t.item())
        raise _bad(where, key, t, "it must be an integer (the longest sequence's length)")
    if not isinstance(t, torch.Tensor):
        raise _bad(where, key, t, "every value must be a tensor")
    if t.layout != torch.strided or t.is_meta or t.device.type != "cpu":
        kind = "meta" if t.is_meta else str(t.layout).removeprefix("torch.") if t.layout != torch.strided else (
            t.device.type)
        raise BadInput(f"{where}: key {key!r} is a {kind} tensor; a packed batch holds dense tensors with their "
                       "values (save the batch the collator returns, before any .to_sparse() or device='meta'). "
                       "Nothing was run.")
    if key in PER_TOKEN:
        ok = _is_int(t) or (key == "attention_mask" and t.dtype == torch.bool)
        if not ok or t.dim() not in (1, 2) or (t.dim() == 2 and t.shape[0] != 1) or t.numel() == 0:
            raise _bad(where, key, t, "a packed batch holds it as one row of integers, shape (1, T)")
        if tokens is not None and t.numel() != tokens:
            raise _bad(where, key, t, f"it must hold one value per token, like input_ids ({tokens} tokens)")
        return t.reshape(1, -1)
    if is_offsets(key) and (not _is_int(t) or t.dim() != 1):
        raise _bad(where, key, t, "offsets are a 1-D integer tensor [0, ..., total tokens]")
    return t


def check(raw: object, where: str) -> LoadedBatch:
    """A loaded object as a packed batch: a dict of str -> tensor with input_ids, each key checked."""
    if not isinstance(raw, Mapping):
        raise BadInput(f"{where} holds a {type(raw).__name__}, not a dict of tensors: save the dict the job's "
                       "collator returns (torch.save(batch, FILE) or safetensors' save_file). Nothing was run.")
    bad_key = next((k for k in raw if not isinstance(k, str)), None)
    if bad_key is not None:
        raise BadInput(f"{where}: key {bad_key!r} is not a string; a batch maps key names (input_ids, "
                       "position_ids, cu_seq_lens_q, ...) to tensors. Nothing was run.")
    if TOKENS_KEY not in raw:
        raise BadInput(f"{where} has no input_ids (keys: {', '.join(sorted(raw)) or 'none'}): a packed batch holds "
                       "its tokens as input_ids, shape (1, T). Nothing was run.")
    ids = _check(where, TOKENS_KEY, raw[TOKENS_KEY], None)
    tokens = int(ids.numel())
    out = {TOKENS_KEY: ids, **{k: _check(where, k, v, tokens) for k, v in raw.items() if k != TOKENS_KEY}}
    return LoadedBatch(out, view_of(out), where)


def view_of(tensors: Mapping[str, Any]) -> BatchView:
    """The lint's view: dtype, shape and the values of every integer tensor."""
    import torch

    fields: dict[str, Field] = {}
    for k, v in tensors.items():
        if isinstance(v, torch.Tensor):
            vals = tuple(int(x) for x in v.reshape(-1).tolist()) if _is_int(v) else None
            fields[k] = Field(_dtype(v), tuple(v.shape), vals)
        else:
            fields[k] = Field("int", (), (int(v),))
    return BatchView(fields)


def _torch_save_header(path: Path, path_str: str) -> None:
    """torch.save writes a zip archive (since torch 1.6) or, in the legacy format, a pickle: a file that starts as
    neither is not one, and saying so beats quoting the unpickler's error."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise BadInput(f"--batch {path_str} cannot be read ({exc.strerror or exc}). Nothing was run.") from None
    if head[:4] == b"PK\x03\x04" or head[:1] == b"\x80":
        return
    what = "is empty" if not head else f"starts with {head!r}"
    raise BadInput(f"--batch {path_str} is not a torch.save file: it {what}, where torch.save writes a zip archive "
                   "(or a pickle in its legacy format). Save the batch with torch.save(batch, FILE), or "
                   "safetensors' save_file to a .safetensors file. Nothing was run.")


def load(path_str: str) -> LoadedBatch:
    """--batch FILE: a .safetensors file, or a torch.save'd dict (read with weights_only=True)."""
    path = Path(path_str)
    if not path.is_file():
        why = "does not exist" if not path.exists() else "is not a regular file"
        raise BadInput(f"--batch {path_str} {why}: give the file the job's batch was saved to (torch.save(batch, "
                       "FILE) or safetensors' save_file). Nothing was run.")
    if path.suffix != ".safetensors":
        _torch_save_header(path, path_str)
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            raw: object = load_file(str(path))
        else:
            import torch

            raw = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any reader error is a bad file
        kind = "a .safetensors file" if path.suffix == ".safetensors" else "a torch.save'd dict of tensors"
        raise BadInput(f"--batch {path_str} is not readable as {kind} ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0][:160] if str(exc) else 'no detail'}); torch.save files are read "
                       "with weights_only=True, so they may hold tensors, numbers and containers only. Nothing was "
                       "run.") from None
    return check(raw, path_str)


def collator(spec: str) -> Any:
    """--collator module:callable, imported from the current folder or the installed packages; a class (such as
    transformers' DataCollatorWithFlattening) is built with no arguments."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise BadInput(f"--collator {spec!r} is not module:callable (e.g. my_data:collate or "
                       "transformers:DataCollatorWithFlattening). Nothing was run.")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 - the job's module, any import error
        raise BadInput(f"--collator {spec}: cannot import it ({type(exc).__name__}: {exc}). Run from the folder "
                       "that holds the module, or install it. Nothing was run.") from None
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise BadInput(f"--collator {spec} is a class that cannot be built without arguments ({exc}); point "
                           "to a function (or an instance) that takes a list of examples. Nothing was run.") from None
    if not callable(obj):
        raise BadInput(f"--collator {spec} is a {type(obj).__name__}, not callable. Nothing was run.")
    return obj


COLLATOR_LIMIT_S = 120.0  # seconds the job's collator (its import and one call) may take


def collate(spec: str, lengths: list[int], vocab: int, seed: int = 0) -> LoadedBatch:
    """The job's collator over examples of `lengths` tokens ({"input_ids": [...]} each, random ids < vocab), run
    in a child process (packing/collate_child.py) bounded in time: the job's code calling sys.exit/os._exit,
    raising a BaseException or never returning is bad input naming what it did, never kernelcheck's exit code."""
    import json
    import tempfile

    if not lengths or min(lengths) <= 0:
        raise BadInput("--lengths needs at least one positive length to build a batch with --collator. "
                       "Nothing was run.")
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise BadInput(f"--collator {spec!r} is not module:callable (e.g. my_data:collate or "
                       "transformers:DataCollatorWithFlattening). Nothing was run.")
    from kernelcheck.core import child

    with tempfile.TemporaryDirectory(prefix="kc-collator-") as tmp:
        folder = Path(tmp)
        (folder / "job.json").write_text(json.dumps({"spec": spec, "lengths": lengths, "vocab": vocab, "seed": seed,
                                                     "sys_path": list(sys.path)}), encoding="utf-8")
        root = str(Path(__file__).resolve().parents[2])  # where this kernelcheck is imported from
        code = f"import sys; sys.path.insert(0, {root!r}); import kernelcheck.packing.collate_child as c; c.main()"
        done = child.run([sys.executable, "-c", code, str(folder)], COLLATOR_LIMIT_S)
        result_file = folder / "result.json"
        result: dict[str, Any] = (json.loads(result_file.read_text(encoding="utf-8")) if result_file.is_file()
                                  else {})
        what = f"--collator {spec} on {len(lengths)} examples"
        if done.ended == "flood":
            raise BadInput(f"{what} wrote over {child.LIMIT >> 20} MiB of output; it was stopped. Nothing was run.")
        if done.code is None:
            raise BadInput(f"{what} did not return within {COLLATOR_LIMIT_S:g} s; it was stopped. A collator "
                           "builds one batch in well under a second: check that it does not wait for input, a "
                           "lock or the network. Nothing was run.")
        if "error" in result:
            raise BadInput(str(result["error"]))
        if "exited" in result:
            raise BadInput(f"{what} called sys.exit({result['exited']}) instead of returning a batch (the job's "
                           "code, or its module's import). Nothing was run.")
        if "raised" in result:
            raise BadInput(f"{what} raised {result['raised']} instead of returning a batch. Nothing was run.")
        if not result.get("ok") or not (folder / "batch.pt").is_file():
            last = done.output.strip().splitlines()[-1:] or ["no output"]
            raise BadInput(f"{what} ended its process (exit code {done.code}) without returning a batch (os._exit "
                           f"or a crash in the job's code; last output: {last[0][:160]}). Nothing was run.")
        import torch

        raw = torch.load(str(folder / "batch.pt"), map_location="cpu", weights_only=True)
    return check(raw, f"--collator {spec}")
