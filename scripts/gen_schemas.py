"""Write kernelcheck/schemas/<kind>.schema.json: one self-contained JSON Schema (draft 2020-12) per report kind.

    python scripts/gen_schemas.py          # rewrite the files
    python scripts/gen_schemas.py --check  # exit 1 when a file differs from what this script makes

The shapes are written here once and the shared parts (environment, model, functions, findings) are copied
into each file, so a consumer validates with any JSON Schema tool without resolving references across
files. tests/unit/test_json_schemas.py checks that the shipped files are this script's output and validates
every command's real `--json` against them. New optional fields keep a schema's version; removing a field
or changing its meaning bumps it (kernelcheck/schemas/__init__.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "kernelcheck" / "schemas"
sys.path.insert(0, str(ROOT))
from kernelcheck.core.device import ORIGINS as DEVICE_ORIGINS  # noqa: E402 - the origins' one home
from kernelcheck.core.plan_step import RejectKind, StepKind  # noqa: E402 - the kinds' one home
from kernelcheck.fleet.gather import KINDS as MISSING_KINDS  # noqa: E402 - why a rank is missing: its one home

S = dict[str, Any]
STR, INT, BOOL, NUM = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "number"}
OBJ: S = {"type": "object"}
ARR: S = {"type": "array"}


def opt(t: S) -> S:
    """`t` or null."""
    return {"anyOf": [t, {"type": "null"}]}


def obj(required: dict[str, S], optional: dict[str, S] | None = None, closed: bool = False) -> S:
    out: S = {"type": "object", "required": list(required), "properties": {**required, **(optional or {})}}
    if closed:
        out["additionalProperties"] = False
    return out


def arr(items: S) -> S:
    return {"type": "array", "items": items}


VERDICT = {"enum": ["ready", "fallback", "broken"]}

NMS = opt(NUM)
BUDGET_CLASS = obj({"id": STR, "title": STR, "measured_ms": NUM, "share": NUM, "count": INT, "floor_ms": NMS,
                    "floor_by": opt({"enum": ["compute", "memory", "zero"]}), "flops": NMS, "bytes": NMS,
                    "floor_formula": opt(STR), "gap_ms": NMS,
                    "causes": arr(obj({"id": STR, "cause": STR, "fix": STR, "reference": STR, "ms": NUM,
                                       "count": INT}, closed=True))}, closed=True)
BUDGET_STEP = obj({"name": STR, "gpu_time_ms": NUM, "sum_ms": NUM, "overlap_ms": NUM, "activities": INT,
                   "host_syncs": INT, "coverage": NUM, "classes": arr(BUDGET_CLASS),
                   "unclassified": obj({"ms": NUM, "share": NUM, "distinct": INT,
                                        "kernels": arr(obj({"name": STR, "ms": NUM, "count": INT}))}),
                   "step_ms_at_floors": NMS, "mfu": opt(OBJ)})
BUDGET = obj({"source": STR, "device": opt(STR), "peak": opt(obj({"gpu": STR, "bf16_tflops": NUM, "hbm_tb_s": NUM,
                                                                  "reference": STR})),
              "model": opt(OBJ), "steps": arr(BUDGET_STEP), "steps_without_gpu_activity": arr(STR),
              "notes": arr(STR), "rules": arr(OBJ)})

SEVERITY = {"enum": ["info", "warning", "fallback", "broken"]}
STATUS = {"enum": ["fast", "fallback", "broken", "unsupported"]}
DEFS: S = {
    "environment": obj({"python": STR, "platform": STR, "torch": opt(obj({"version": STR, "cuda": opt(STR),
                                                                               "cxx11abi": opt(BOOL)})),
                        "triton": opt(STR), "transformers": opt(STR), "gpus": arr(obj({"name": STR,
                                                                                         "capability": STR})),
                        "driver": opt(STR), "nvcc": opt(STR)},
                       {"kernels": opt(STR), "packages": OBJ, "cuda_home": opt(STR), "env": OBJ}),
    "model": opt(obj({"query": STR, "id": opt(STR), "model_type": opt(STR), "source": opt(STR)})),
    "function": obj({"name": STR, "package": STR, "status": STATUS, "implementation": opt(STR), "reason": opt(STR),
                     "fix": opt(STR)}, {"used": BOOL, "phase": opt(STR), "evidence": opt(OBJ),
                                       "provider": opt(STR)}),
    "finding": obj({"id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9:_.-]*$"}, "severity": SEVERITY,
                    "message": STR, "fix": opt(STR), "reference": opt(STR), "functions": arr(STR)},
                   {"decorators": arr(STR)}),
}
REF = {k: {"$ref": f"#/$defs/{k}"} for k in DEFS}
# verify --compile (report/compiled.py)
COMPILED = obj({"backend": STR, "shape": STR, "device": STR, "dtype": STR, "tokens": {"type": "integer"},
                "passes": arr(obj({"pass": STR, "graphs": {"type": "integer"}, "graph_breaks": {"type": "integer"},
                                   "breaks": arr(OBJ), "parts": arr(OBJ), "eager_ms": opt({"type": "number"}),
                                   "compiled_ms": opt({"type": "number"}), "compile_s": opt({"type": "number"}),
                                   "error": opt(STR)},
                                  {"fused_ops": arr(obj({"function": STR, "fast": opt(STR), "compiler_disabled": BOOL,
                                                         "calls": INT, "traced": INT, "runs": INT,
                                                         "exercised": BOOL}))}))})
# a timed ratio's controls (verify/timing_controls.py), a $def of verify's schema
TIMING_CONTROLS: S = {"type": "object",
                      "description": "a timed ratio's controls (kernelcheck/verify/timing_controls.py): "
                                     "the bound path timed again (A/A) and with a known injected slowdown",
                      **{k: v for k, v in obj({"repeats": INT, "baseline_ms": NUM, "repeat_ms": NUM, "aa_ratio": NUM,
                                               "noise_band": NUM, "injected_fraction": NUM, "injected_ms": NUM,
                                               "slowed_ms": NUM, "measured_slowdown": NUM, "detected": BOOL,
                                               "expected_slowdown": NUM, "ratio": opt(NUM),
                                               "decided": BOOL}).items() if k != "type"}}
CONTROLS_REF = {"$ref": "#/$defs/timing_controls"}
HUB = obj({"lines": arr(STR), "used": BOOL, "why": opt(STR), "device": STR, "mode": STR, "offline": BOOL,
           "transformers": OBJ, "mapping": arr(OBJ), "names": arr(OBJ), "repos": arr(OBJ)})
# Why a step is there and why a candidate was rejected (kernelcheck/core/plan_step.py); an install step has both,
# a Kernel Hub pre-fetch step neither (its action says it).
STEP_KIND = {"enum": [k.value for k in StepKind if k != StepKind.HUB]}
REJECT_KIND = {"enum": [k.value for k in RejectKind if k != RejectKind.HUB_VARIANT]}
PLAN_STEP = obj({"package": STR, "action": STR, "source": STR, "spec": opt(STR), "reason": STR},
                {"command": opt(STR), "rejected": arr(obj({"candidate": STR, "reason": STR}, {"kind": REJECT_KIND})),
                 "kind": STEP_KIND, "rules": arr(STR)})
IMPORT_PROOF = obj({"source": {"enum": ["proven", "cache"]},
                    "cache": {"enum": ["off", "hit", "baked", "stored", "not stored"]},
                    "file": opt(STR), "proven_at": opt(STR)}, closed=True)
PACKING = obj({"declared": opt(STR), "guard_in_source": opt(BOOL), "functions": OBJ,
               "modes": arr(obj({"mode": STR, "outcome": {"enum": ["correct", "raises", "mixed"]}, "reason": STR,
                                 "fix": opt(STR)})), "reference": STR})
LIVE = obj({"ran": BOOL, "lines": arr(STR)})
VERIFY_LIVE = obj({"ran": BOOL, "lines": arr(STR)},
                  {"benchmark": opt({"type": "object", "properties": {  # null: no --benchmark
                      "controls": CONTROLS_REF,
                      "passes": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                          "controls": CONTROLS_REF}}}}})})
# verify --packing --batch / --benchmark (kernelcheck/report/packing_batch.py); the mode run has none of these
PACKING_KEYS = ("cu_seqlens", "cu_seq_lens_q", "cu_seq_lens_k", "seq_idx")
PAYOFF = obj({"shape": {"enum": ["tiny", "full"]}, "device": STR, "lengths": INT, "real_tokens": INT,
              "padded_tokens": INT, "padded_s": NUM, "packed_s": NUM, "padding_fraction": NUM,
              "packing_speedup_bound": NUM, "packed_with": STR, "ratio": NUM, "padded_tokens_per_s": opt(NUM),
              "packed_tokens_per_s": opt(NUM)})
CONTROL = obj({"kind": {"enum": ["clean", "rerun", "boundaries-removed"]}, "distance": NUM, "per_segment": arr(NUM),
               "error": opt(STR)})
PACKING_BATCH: S = {
    "findings": arr(REF["finding"]),
    "batch": obj({"source": STR, "tokens": INT, "keys": {"type": "object", "additionalProperties": obj(
        {"dtype": STR, "shape": arr(INT)})}, "segments": arr(arr(INT)),
        "segments_from": STR, "remapped_ids": BOOL},
        {}),
    "dtype": STR, "tolerance": NUM, "error": opt(STR), "ran": BOOL,
    "reach": arr(obj({"function": STR, "implementation": STR, "fast": BOOL, "calls": INT,
                      "received": arr({"enum": list(PACKING_KEYS)}), "passed": arr({"enum": list(PACKING_KEYS)}),
                      "error": opt(STR), "traced": BOOL})),
    "segments": arr(obj({"index": INT, "start": INT, "end": INT, "output_max_abs": NUM, "output_rel_l2": NUM,
                         "grad_max_abs": NUM, "grad_rel_l2": NUM, "wrong": BOOL, "first_layer": opt(STR),
                         "token_distance": NUM, "worst_token": INT})),
    "payoff": opt(PAYOFF),
    "controls": opt(obj({"negative": CONTROL, "positive": CONTROL, "threshold": opt(NUM), "separation": opt(NUM),
                         "decided": BOOL, "margin": NUM})),
}
DEVICE = obj({"type": STR, "origin": {"enum": list(DEVICE_ORIGINS)}, "visible": BOOL}, closed=True)
COUNTS = obj({"cpu_ops": INT, "kernels": INT, "memcpy": INT, "memset": INT, "gpu_busy_us": NUM, "cpu_span_us": NUM})


def report(kind: str, required: dict[str, S], optional: dict[str, S], title: str, defs: S | None = None) -> S:
    """A Report (report/model.py): the common head and the kind's sections (and the kind's own `defs`)."""
    head = {"schema": {"const": f"kernelcheck.{kind}/1"}, "command": {"const": kind}, "verdict": VERDICT,
            "exit_code": {"enum": [0, 3, 4]}, "environment": OBJ if kind == "trace" else REF["environment"],
            "model": REF["model"], "mode": opt(STR), "functions": arr(REF["function"]),
            "findings": arr(REF["finding"])}
    return {**obj({**head, **required}, optional), "title": title, "$defs": {**DEFS, **(defs or {})}}


def kinds() -> dict[str, S]:
    return {
        "doctor": report("doctor", {}, {"needs": obj({"functions": arr(STR), "packages": arr(STR),
                                                      "attn_implementation": STR}),
                                        "bindings": obj({"regime": STR, "module": STR}), "hub": HUB, "live": LIVE,
                                        "packing": PACKING, "import_proof": IMPORT_PROOF, "step": OBJ,
                                        "device": DEVICE},
                         "kernelcheck doctor --json"),
        "verify": report("verify", {}, {"live": VERIFY_LIVE, "step": {"type": "object", "properties": {
                                            "controls": CONTROLS_REF}},
                                        "hub": HUB, "packing": PACKING, "device": DEVICE, "compiled": COMPILED},
                         "kernelcheck verify --json", {"timing_controls": TIMING_CONTROLS}),
        "install": report("install", {"before": obj({"verdict": VERDICT, "functions": OBJ}),
                                      "plan": arr(PLAN_STEP)},
                          {"predicted": VERDICT, "executed": BOOL, "lock": opt(STR), "installed": arr(OBJ),
                           "manifest": {}, "install_seconds": NUM, "doctor_after": opt(OBJ)},
                          "kernelcheck install --json (--dry-run: predicted/executed; after an install: installed)"),
        "hub": report("hub", {"hub": HUB}, {"plan": arr(OBJ), "predicted": VERDICT, "executed": BOOL,
                                            "lock": opt(STR), "device": DEVICE}, "kernelcheck hub --json"),
        "trace": report("trace", {"trace": obj({"file": STR, "events": INT, "cpu_only": BOOL,
                                                "diagnosis": STR}),
                                  "summary": COUNTS, "steps": arr(COUNTS)}, {"breakdown": OBJ},
                        "kernelcheck trace --json"),
        "padding": {**obj({"schema": {"const": "kernelcheck.padding/1"}, "command": {"const": "padding"},
                           "verdict": {"const": "ready"}, "exit_code": {"const": 0}, "data": STR,
                           "padding": obj({"rule": STR, "examples": INT, "steps": INT, "real_tokens": INT,
                                           "padded_tokens": INT, "pad_tokens": INT, "padding_fraction": NUM,
                                           "wasted_tokens_per_step": NUM, "packing_speedup_bound": NUM,
                                           "longest": INT, "median": INT, "truncated_examples": INT}),
                           "plot": opt(obj({"file": STR, "format": {"enum": ["svg", "png"]}, "bins": INT,
                                            "scale": {"enum": ["linear", "log"]}}))}),
                    "title": "kernelcheck padding --json"},
        "models": {**obj({"schema": {"const": "kernelcheck.models/1"}, "command": {"const": "models"},
                          "aliases": arr(obj({"alias": STR, "id": STR, "model_type": STR})),
                          "model_types": arr(obj({"model_type": STR, "family": STR, "functions": arr(STR)}))},
                         {"verdict": {"const": "ready"}, "exit_code": {"const": 0},
                          "families": arr(obj({"name": STR, "title": STR, "functions": arr(STR)})),
                          "transformers": opt(STR)}),
                   "title": "kernelcheck models --json"},
        "verify-packing": {**obj({"schema": {"const": "kernelcheck.verify-packing/1"}, "command": {"const": "verify"},
                                  "verdict": VERDICT, "exit_code": {"enum": [0, 3, 4]},
                                  "model": OBJ, "device": STR, "packing": arr(OBJ)}, PACKING_BATCH),
                           "title": "kernelcheck verify --packing --json (--batch/--collator: the job's own batch; "
                                    "--benchmark: the payoff)",
                           "$defs": DEFS},
        "fleet": {**obj({"schema": {"const": "kernelcheck.fleet/1"}, "command": STR, "kernelcheck": STR,
                         "verdict": opt(VERDICT), "exit_code": INT, "size": INT, "message": opt(STR),
                         "groups": arr(arr(STR)), "differences": arr(OBJ),
                         "missing": arr(obj({"rank": INT, "reason": STR},
                                            {"kind": {"enum": list(MISSING_KINDS)}})), "ranks": arr(OBJ)}),
                  "title": "kernelcheck compare --json, doctor/verify --all-ranks --json"},
        "forecast": {**obj({"schema": {"const": "kernelcheck.forecast/1"}, "command": {"const": "doctor --upgrade"},
                            "specs": arr(STR), "verdict": VERDICT, "exit_code": {"enum": [0, 3, 4]},
                            "changes": arr(obj({"name": STR, "before": opt(STR), "after": STR, "url": opt(STR)},
                                                   closed=True)),
                            "diff": obj({"verdict_before": VERDICT, "verdict_after": VERDICT,
                                         "exit_before": {"enum": [0, 3, 4]}, "exit_after": {"enum": [0, 3, 4]},
                                         "functions": arr(obj({"name": STR, "before_status": opt(STR),
                                                               "after_status": opt(STR),
                                                               "before_implementation": opt(STR),
                                                               "after_implementation": opt(STR)})),
                                         "findings_added": arr(STR), "findings_removed": arr(STR),
                                         "worse": BOOL, "better": BOOL}),
                            "torch_drift": arr(obj({"distribution": STR, "version": STR, "built_for": opt(STR),
                                                    "evidence": {"enum": ["manifest", "version-tag", "symbols",
                                                                          "unknown"]},
                                                    "missing_symbols": opt(INT),
                                                    "outcome": {"enum": ["import-error", "silent-fallback",
                                                                         "unknown"]},
                                                    "fix": STR})),
                            "before": OBJ, "after": OBJ}, {"device": DEVICE}),
                     "title": "kernelcheck doctor --upgrade --json (before and after: doctor reports)"},
        "warm": {**obj({"schema": {"const": "kernelcheck.warm/1"}, "command": {"const": "warm"},
                        "verdict": {"enum": ["ready", "broken"]}, "exit_code": {"enum": [0, 4]}, "cache_dir": STR,
                        "env": arr({"type": "string", "pattern": "^[A-Z_]+=.+"}), "device": opt(STR),
                        "error": opt(STR),
                        "manifest": opt(obj({"format": {"const": 1}, "model": STR, "mode": STR, "shapes": arr(STR),
                                             "tokens": OBJ, "compile": BOOL, "keys": OBJ,
                                             "compiled": {"type": "object", "additionalProperties": obj(
                                                 {"entries": INT, "bytes": INT, "seconds": opt(NUM)})},
                                             "timing": OBJ, "recheck": OBJ, "variables": OBJ, "created": STR,
                                             "kernelcheck": STR})),
                        "fresh_process_added": opt(OBJ), "notes": arr(STR)}),
                 "title": "kernelcheck warm --json (--print-env: env only, manifest null)"},
        "hub-bundle": {**obj({"schema": {"const": "kernelcheck.hub-bundle/1"}, "command": {"const": "hub"},
                              "action": {"enum": ["bundle", "verify-bundle"]}, "verdict": VERDICT,
                              "exit_code": {"enum": [0, 3, 4]}, "file": STR, "kernels": opt(STR), "model": opt(STR),
                              "mode": opt(STR), "device": opt(STR),
                              "target": opt(obj({"torch": opt(STR), "cuda": opt(STR)})), "required": arr(STR),
                              "entries": arr(obj({"repo_id": STR, "version": opt(INT), "revision": opt(STR),
                                                  "commit": opt(STR), "variant": opt(STR), "status": {
                                                      "enum": ["bundled", "local", "missing"]},
                                                  "why": OBJ, "files": OBJ})),
                              "job_environment": OBJ, "checks": arr(obj({"spec": STR})),
                              "findings": arr(obj({"id": STR, "severity": {"enum": ["broken", "fallback", "warning",
                                                                                     "info"]},
                                                   "message": STR, "fix": opt(STR), "reference": opt(STR)}))}),
                       "title": "kernelcheck hub --bundle FILE / --verify-bundle FILE --json"},
        "budget": {**obj({"schema": {"const": "kernelcheck.budget/1"},
                          "paths": {"type": "object", "additionalProperties": BUDGET}}),
                   "title": "the step budget of trace --budget and verify --step --budget (the reports' `budget` key):"
                            " per path, per profiled step, the op classes measured vs floor, MFU, causes and fixes"},
        "error": {**obj({"schema": {"const": "kernelcheck.error/1"}, "command": STR, "verdict": {"type": "null"},
                         "exit_code": INT, "error": STR}),
                  "title": "any --json run that stopped before its report (bad input, internal error, interrupted)"},
    }


def files() -> dict[str, str]:
    out = {}
    for kind, body in kinds().items():
        doc = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"kernelcheck.{kind}/1", **body}
        out[f"{kind}.schema.json"] = json.dumps(doc, indent=2) + "\n"
    return out


def main(argv: list[str]) -> int:
    made = files()
    if "--check" in argv:
        stale = [n for n, text in made.items() if not (OUT / n).is_file() or (OUT / n).read_text() != text]
        print("\n".join(f"stale: kernelcheck/schemas/{n}" for n in stale) or "schemas up to date")
        return 1 if stale else 0
    for name, text in made.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(made)} schemas to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
