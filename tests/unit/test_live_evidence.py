"""verify's live evidence is a value (verify/live_evidence.py): the broken-or-not decision reads its fields, and its
JSON is the evidence block verify has always printed, key for key."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from kernelcheck.core import matrix
from kernelcheck.verify.live_evidence import DirectComparison, LiveEvidence, RunError
from kernelcheck.verify.statuses import _broken_reason, function_evidence
from tests.unit.test_report_readback import sample
from tests.unit.test_verify_live_items import run

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _blocks(data: dict) -> list[dict]:
    return [f["evidence"] for f in data.get("functions") or [] if f.get("evidence") and "per_layer" in f["evidence"]]


def _printed_blocks() -> list[dict]:
    """The evidence blocks of the sample reports and of every verify report the GPU machines printed (the
    differential archives under docs/)."""
    blocks = [b for name in ("verify", "verify_step") for b in _blocks(json.loads(sample(name)[0]))]
    for archive in sorted(DOCS.rglob("*differential*.tgz")):
        with tarfile.open(archive) as tar:
            for m in tar.getmembers():
                fh = tar.extractfile(m) if m.name.endswith(("verify-train.json", "verify-infer.json")) else None
                try:
                    data = json.loads(fh.read()) if fh is not None else {}
                except json.JSONDecodeError:  # a run that printed no report
                    continue
                if data.get("schema") == "kernelcheck.verify/1":  # this kernelcheck's reports, not 0.1's
                    blocks += _blocks(data)
    return blocks


def test_every_printed_evidence_block_is_a_live_evidence_value_key_for_key() -> None:
    blocks = _printed_blocks()
    assert len(blocks) > 50 and any("vs_reference" in b for b in blocks) and any("backends" in b for b in blocks)
    for b in blocks:
        err = RunError(**b["error"]) if "error" in b else None
        vs = DirectComparison(**b["vs_reference"]) if "vs_reference" in b else None
        fields = {k: v for k, v in b.items() if k not in ("error", "vs_reference")}
        ev = LiveEvidence(**fields, error=err, vs_reference=vs)
        assert json.dumps(ev.to_json()) == json.dumps(b)


def test_an_inline_function_says_so_and_is_not_broken() -> None:
    r = run(inline={"causal_conv1d_fn": "Qwen3_5GatedDeltaNet.forward"})
    ev = function_evidence(r, "causal_conv1d_fn", m=matrix.load())
    assert ev is not None and ev.path == "torch" and ev.calls == 0 and ev.inline_note
    assert list(ev.to_json()) == ["device", "path", "calls", "implementation_called", "note"]
    assert _broken_reason("causal_conv1d_fn", ev, r) is None


def test_broken_or_not_is_decided_on_the_fields() -> None:
    r = run()
    ok = LiveEvidence("cuda", "fast", 3, "fla.ops.chunk_gated_delta_rule",
                      vs_reference=DirectComparison(True, rel_err=0.001, tolerance=0.02, ok=True))
    assert _broken_reason("f", ok, r) is None
    off = LiveEvidence("cuda", "fast", 3, "impl", vs_reference=DirectComparison(True, rel_err=0.5, tolerance=0.02,
                                                                                 ok=False))
    assert "0.5 > 0.02" in (_broken_reason("f", off, r) or "")
    raised = LiveEvidence("cuda", "fast", 3, "impl", error=RunError("backward", "train", "ValueError: x", "impl"))
    assert "first backward" in (_broken_reason("f", raised, r) or "")
    nan = LiveEvidence("cuda", "fast", 3, "impl", nonfinite_output=True)
    assert "NaN" in (_broken_reason("f", nan, r) or "")
    again = LiveEvidence("cuda", "fast", 3, "impl", vs_reference=DirectComparison(False, error="RuntimeError: y"))
    assert "RuntimeError: y" in (_broken_reason("f", again, r) or "")
    assert _broken_reason("f", LiveEvidence("cuda", "torch", 3, "impl",
                                            vs_reference=DirectComparison(False, error="RuntimeError: y")), r) is None
