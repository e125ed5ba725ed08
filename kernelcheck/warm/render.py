"""warm's output: what each JIT compiled into the folder, the key it depends on, the time, and the env lines."""

from __future__ import annotations

from typing import Any

from kernelcheck.doctor import cacheproof
from kernelcheck.integrations import jit_caches
from kernelcheck.report.terminal import wrap_line
from kernelcheck.warm import proofs
from kernelcheck.warm.run import WarmResult

WIDTH = 100
GPU_NOTE = ("Warming needs a GPU of the job's architecture (the JITs compile for the GPU they run on): warm on a GPU "
            "builder and COPY the folder into the image, or let the first job write to a shared volume mounted "
            "at the same path on every node.")


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.0f} kB"


def _key_text(parts: dict[str, Any], key: tuple[str, ...], names: dict[str, str]) -> str:
    if "absent" in parts:
        return "not installed"
    if parts.get("layout"):
        return f"key unreadable: {parts['layout']}"
    shown = []
    for p in key:
        v = parts.get(p)
        if isinstance(v, dict):
            v = ", ".join(f"{k} {x}" for k, x in sorted(v.items())) or "none set"
        shown.append(f"{names.get(p, p)} {v if v is not None else '?'}")
    return "; ".join(shown)


def lines(result: WarmResult, table: dict[str, Any]) -> list[str]:
    m = result.manifest
    out = [f"kernelcheck warm: cache folder {result.cache_dir}"]
    if result.error or m is None:
        out.append(f"the run failed: {result.error}")
        out.append("nothing was recorded; the folder may hold part of the kernels.")
        return out
    where = f"{result.device}" + (f" ({result.gpu}, {m.keys.get('node', {}).get('arch')})" if result.gpu else "")
    out.append(f"model {m.model}, {m.mode}, shapes {', '.join(m.shapes)}, on {where}")
    out.append("")
    lays = jit_caches.layouts(table)
    names: dict[str, str] = dict(table.get("part", {}))
    for jit, done in m.compiled.items():
        lay = lays[jit]
        parts = m.keys.get(jit, {})
        if "absent" in parts and not done.get("entries"):
            out.extend(wrap_line(f"{lay.title}: not installed here, nothing compiled", WIDTH))
            continue
        secs = done.get("seconds")
        again = m.recheck.get(jit, {}).get("entries_added")
        head = (f"{lay.title}: {done.get('entries', 0)} entries compiled ({_size(int(done.get('bytes', 0)))}), "
                f"{f'{secs:.1f} s in its compiler' if secs else 'compile time not attributed'}"
                + (f"; a fresh process compiled {again} more" if again is not None else ""))
        out.extend(wrap_line(head, WIDTH))
        out.extend(wrap_line(f"    key: {_key_text(parts, lay.key, names)}", WIDTH))
    node = m.keys.get("node", {})
    out.extend(wrap_line(f"node: {node.get('gpu') or 'no GPU'}, arch {node.get('arch') or 'none'}, driver "
                         f"{node.get('driver') or 'none'} (the driver is in no JIT's key)", WIDTH))
    out.append("")
    for shape, row in m.timing.get("shapes", {}).items():
        fresh = m.timing.get("recheck", {}).get(shape)
        text = (f"time, {shape} ({row.get('tokens')} tokens, {'+'.join(row.get('steps', []))}): cold "
                f"{row.get('cold_s')} s, again in the same process {row.get('warm_s')} s"
                + (f", a fresh process on the warmed folder {fresh} s" if fresh is not None else ""))
        comp = row.get("compile")
        if isinstance(comp, dict):
            text += (f"; torch.compile step: {comp['error']}" if comp.get("error") else
                     f"; torch.compile step cold {comp.get('cold_s')} s, warm {comp.get('warm_s')} s")
        out.extend(wrap_line(text, WIDTH))
    if m.timing.get("packing_s") is not None:
        out.append(f"time, verify --packing's measurement: {m.timing['packing_s']} s")
    static = result.proofs.get("static") or {}
    if static.get("ok"):
        passed = sum(1 for k, v in result.proofs.items() if k == "jit-probe-passed" and v.get("ok"))
        out.extend(wrap_line(
            f"the gate's proofs: {proofs.proof_dir(result.cache_dir)} (import proof {static.get('import_proof')}"
            + (", JIT probes passed" if passed else ", no JIT probe: no GPU" if not result.device.startswith("cuda")
               else "") + f"; {static.get('seconds')} s): a node with KERNELCHECK_PROOF_DIR finds them, not redone",
            WIDTH))
    for note in result.notes:
        out.extend(wrap_line(f"note: {note}", WIDTH))
    if not result.device.startswith("cuda"):
        out.extend(wrap_line("note: no CUDA GPU here, so the layers ran their torch reference and no JIT compiled "
                             "a GPU kernel: warm on the GPU node.", WIDTH))
    out.append("")
    out.extend(wrap_line(f"manifest: {result.cache_dir}/{cacheproof.MANIFEST} (the cache proof reads it: "
                         "doctor --cache-dir DIR)", WIDTH))
    out.append("environment for the job (Dockerfile, with the folder at this path):")
    out.extend(f"  ENV {line}" for line in result.env)
    out.append("job spec / shell:")
    out.extend(f"  export {line}" for line in result.env)
    out.extend(wrap_line(GPU_NOTE, WIDTH))
    return out
