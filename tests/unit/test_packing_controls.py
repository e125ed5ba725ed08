"""The packed-vs-alone comparison's controls and what the reach decides alone (verify/packing_controls.py), in
process: the decision from measured separation (the figures an H100 gave in bfloat16), the per-token distance on
real tensors, every boundary source at once, and the certain findings from a reach record. The real runs are
tests/integration/test_packing_controls.py."""

from __future__ import annotations

import pytest
import torch

from kernelcheck.core import decide, matrix
from kernelcheck.core.status import EXIT_CODE
from kernelcheck.packing import batchfile, lint
from kernelcheck.report.packing_batch import BatchInfo, BatchSection, Control, FunctionReach, SegmentDiff
from kernelcheck.verify import packing_controls
from kernelcheck.verify.packing_batch import measured_findings

SEGS = ((0, 40), (40, 110), (110, 140))


def _facts() -> dict:
    from kernelcheck.packing.decide import load_facts

    return load_facts(m=matrix.load())


def _view(**tensors: torch.Tensor) -> lint.BatchView:
    return batchfile.check({"input_ids": torch.arange(1, 141)[None], **tensors}, "t").view


def _positions() -> torch.Tensor:
    return torch.cat([torch.arange(b - a) for a, b in SEGS])[None]


def _exit(found: list) -> int:
    return EXIT_CODE[decide.verdict([], found)]


def _sec(ctl, segs: list[SegmentDiff]) -> BatchSection:
    info = BatchInfo("b.pt", 140, {"input_ids": ("int64", (1, 140))}, SEGS, "position_ids")
    return BatchSection(info, "cuda:0", "bfloat16", 5e-2, [], segs, None, None, True, ctl)


def test_the_threshold_sits_between_the_controls_and_a_mix_under_the_old_tolerance_is_broken():
    """The H100's bfloat16 figures: clean 0.0025, mixed 0.021-0.044, all under the old fixed 0.05."""
    ctl = packing_controls.decide(Control("clean", 0.0025, (0.0, 0.0, 0.0025)),
                                  Control("boundaries-removed", 0.044, (0.044, 0.038, 0.035)))
    assert ctl.decided and 0.0025 < ctl.threshold < 0.021 and ctl.separation == pytest.approx(17.6)
    seg = SegmentDiff(1, 40, 110, 0.1, 0.021, 0.1, 0.038, ctl.threshold < 0.021, "layer 0 (linear_attention)",
                      0.021, 0)
    found = measured_findings(_sec(ctl, [seg]), ("chunk_gated_delta_rule",))
    assert [f.id for f in found] == ["packing-segment-mixed"] and _exit(found) == 4


def test_a_positive_control_not_told_apart_is_cannot_decide_never_segments_match():
    ctl = packing_controls.decide(Control("clean", 0.0025), Control("boundaries-removed", 0.006))
    assert not ctl.decided and ctl.threshold is None
    seg = SegmentDiff(1, 40, 110, 0.0, 0.001, 0.0, 0.001, False, None, 0.002, 0)
    found = measured_findings(_sec(ctl, [seg]), ("chunk_gated_delta_rule",))
    assert [f.id for f in found] == ["packing-control-cannot-decide"] and _exit(found) == 3
    raised = packing_controls.decide(Control("clean", 0.0), Control("boundaries-removed", float("nan"), (), "E: x"))
    assert not raised.decided
    assert [f.id for f in measured_findings(_sec(raised, [seg]), ())] == ["packing-control-cannot-decide"]


def test_the_json_carries_both_controls_and_reads_back():
    import jsonschema

    from kernelcheck import schemas
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import packing_batch_report

    ctl = packing_controls.decide(Control("clean", 0.0, (0.0, 0.0)), Control("boundaries-removed", 0.9, (0.3, 0.9)))
    sec = _sec(ctl, [SegmentDiff(0, 0, 40, 0.0, 0.0, 0.0, 0.0, False, None, 0.0, 3)])
    assert BatchSection.from_json(sec.to_json()) == sec
    model = transformers_models.resolve("qwen3.8-27b", m=matrix.load())
    doc = packing_batch_report.to_json(model, sec, None, measured_findings(sec, ()))
    jsonschema.validate(doc, schemas.load("verify-packing"))
    assert doc["controls"]["positive"]["distance"] == 0.9 and doc["controls"]["decided"] is True
    assert doc["controls"]["negative"]["kind"] == "clean" and doc["exit_code"] == 0


def test_a_three_token_leak_is_diluted_by_a_segment_norm_and_not_by_the_worst_token():
    torch.manual_seed(0)
    alone = torch.randn(1, 70, 64)
    packed = alone.clone()
    packed[:, :3] += 0.2 * alone[:, :3].norm(dim=-1, keepdim=True) / 8  # the conv window over the boundary
    whole = float((packed - alone).norm() / alone.norm())
    dist, tok = packing_controls.token_distance(packed, alone)
    assert whole < 0.05 < dist and tok < 3


def test_every_boundary_source_counts_where_the_offsets_cover_the_row_as_one_segment():
    one = torch.tensor([0, 140], dtype=torch.int32)
    view = _view(position_ids=_positions(), cu_seq_lens_q=one, cu_seq_lens_k=one,
                 seq_idx=torch.zeros(1, 140, dtype=torch.int32))
    assert lint.segments(view)[0] == ((0, 140),)
    assert packing_controls.boundaries(view) == SEGS


def _reach(fn: str, passed: tuple[str, ...], fast: bool = True, traced: bool = True) -> FunctionReach:
    return FunctionReach(fn, f"x.{fn}", fast, 2, passed, passed, None, traced)


def test_a_recurrent_kernel_without_a_boundary_on_several_segments_is_broken_from_the_reach_alone():
    view = _view(position_ids=_positions())
    reach = [_reach("chunk_gated_delta_rule", ()), _reach("causal_conv1d_fn", ()), _reach("attention", ())]
    found = packing_controls.certain_findings(reach, view, SEGS, _facts())
    assert [(f.id, f.functions) for f in found] == [
        ("packing-kernel-gets-no-boundary", ("chunk_gated_delta_rule",)),
        ("packing-kernel-gets-no-boundary", ("causal_conv1d_fn",))]
    assert _exit(found) == 4
    assert packing_controls.certain_findings(reach, view, ((0, 140),), _facts()) == []  # one sequence
    untraced = [_reach("chunk_gated_delta_rule", (), traced=False)]
    assert packing_controls.certain_findings(untraced, view, SEGS, _facts()) == []  # not known: not certain


@pytest.mark.parametrize(("has", "gdn", "conv", "want"), [
    ("cu", ("cu_seqlens",), (), [("packing-kernel-gets-no-boundary", "causal_conv1d_fn")]),  # conv window crosses
    ("seq_idx", (), ("seq_idx",), [("packing-kernel-gets-no-boundary", "chunk_gated_delta_rule")]),  # GDN crosses
    ("both", ("cu_seqlens",), ("seq_idx",), []),
])
def test_partial_metadata_names_the_kernel_that_misses_its_key(has, gdn, conv, want):
    cu = torch.tensor([0, 40, 110, 140], dtype=torch.int32)
    sidx = torch.cat([torch.full((b - a,), k, dtype=torch.int32) for k, (a, b) in enumerate(SEGS)])[None]
    keys = {"position_ids": _positions(), **({"cu_seq_lens_q": cu} if has in ("cu", "both") else {}),
            **({"seq_idx": sidx} if has in ("seq_idx", "both") else {})}
    reach = [_reach("chunk_gated_delta_rule", gdn), _reach("causal_conv1d_fn", conv)]
    found = packing_controls.certain_findings(reach, _view(**keys), SEGS, _facts())
    assert [(f.id, f.functions[0]) for f in found] == want


def test_offsets_that_cover_the_row_as_one_segment_miss_the_starts_the_position_ids_show():
    one = torch.tensor([0, 140], dtype=torch.int32)
    view = _view(position_ids=_positions(), cu_seq_lens_q=one, seq_idx=torch.zeros(1, 140, dtype=torch.int32))
    reach = [_reach("chunk_gated_delta_rule", ("cu_seqlens",)), _reach("causal_conv1d_fn", ("seq_idx",))]
    found = packing_controls.certain_findings(reach, view, packing_controls.boundaries(view), _facts())
    assert [f.id for f in found] == ["packing-kernel-misses-boundary"] * 2 and _exit(found) == 4
    assert "token 40" in found[0].message
