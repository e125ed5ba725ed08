"""verify --packing --batch in process: the measurement's findings and verdict from typed values, the section's
JSON (read back typed, valid against the shipped schema), its text (the one wording test), and the flags.
The real runs (tiny layers on CPU, packed vs alone) are tests/integration/test_packing_batch.py."""

from __future__ import annotations

import pytest

from kernelcheck.core import decide
from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import EXIT_CODE
from kernelcheck.report.packing_batch import (
    BatchInfo,
    BatchSection,
    Control,
    FunctionReach,
    Payoff,
    SegmentDiff,
    render,
)
from kernelcheck.verify import packing_controls
from kernelcheck.verify.packing_batch import measured_findings

GUARD = ("ValueError: `causal_conv1d_fn` can't keep packed sequences apart without `causal_conv1d`. Install "
         "`causal_conv1d` to train on packed sequences.")


def _section(segments: list[SegmentDiff] | None = None, error: str | None = None,
             reach: list[FunctionReach] | None = None) -> BatchSection:
    info = BatchInfo("b.pt", 140, {"input_ids": ("int64", (1, 140)), "cu_seq_lens_q": ("int32", (4,))},
                     ((0, 40), (40, 110), (110, 140)), "cu_seq_lens_q")
    return BatchSection(info, "cpu", "float32", 1e-4, reach or [], segments or [], error)


def _seg(i: int, wrong: bool, layer: str | None = None) -> SegmentDiff:
    a, b = ((0, 40), (40, 110), (110, 140))[i]
    return SegmentDiff(i, a, b, 0.04 if wrong else 0.0, 0.02 if wrong else 0.0, 1.0, 0.03 if wrong else 0.0, wrong,
                       layer)


def _exit(found: list) -> int:
    return EXIT_CODE[decide.verdict([], found)]


def test_a_segment_measured_wrong_is_broken_and_names_the_segment_with_a_layer():
    sec = _section([_seg(0, True), _seg(1, True, "layer 0 (linear_attention)"), _seg(2, False)])
    found = measured_findings(sec, ("causal_conv1d_fn",))
    assert [f.id for f in found] == ["packing-segment-mixed"] and _exit(found) == 4
    ok = measured_findings(_section([_seg(0, False), _seg(1, False), _seg(2, False)]), ())
    assert [f.id for f in ok] == ["packing-segments-match"] and _exit(ok) == 0


def test_a_raise_is_a_fallback_on_the_torch_paths_refusal_and_broken_elsewhere():
    conv = FunctionReach("causal_conv1d_fn", "transformers...causal_conv1d_fn", False, 1,
                         ("cu_seq_lens_q", "seq_idx"), (), GUARD)
    refused = measured_findings(_section(error=GUARD, reach=[conv]), ("causal_conv1d_fn",))
    assert [f.id for f in refused] == ["packing-torch-path-refuses"] and _exit(refused) == 3
    crash = FunctionReach("causal_conv1d_fn", "causal_conv1d.causal_conv1d_interface.causal_conv1d_fn", True, 1,
                          ("cu_seq_lens_q", "seq_idx"), ("seq_idx",), "RuntimeError: CUDA error: illegal memory access")
    broke = measured_findings(_section(error=crash.error, reach=[crash]), ("causal_conv1d_fn",))
    assert [f.id for f in broke] == ["packing-batch-raises"] and broke[0].functions == ("causal_conv1d_fn",)
    assert _exit(broke) == 4


def test_the_section_reads_back_typed_and_matches_the_schema():
    import jsonschema

    from kernelcheck import schemas
    from kernelcheck.core import matrix
    from kernelcheck.integrations import transformers_models
    from kernelcheck.verify import packing_batch_report

    reach = [FunctionReach("chunk_gated_delta_rule", "fla.ops.gated_delta_rule.chunk.chunk_gated_delta_rule", True, 1,
                           ("cu_seqlens",), ("cu_seqlens",))]
    sec = _section([_seg(0, False), _seg(1, True, "layer 0 (linear_attention)"), _seg(2, False)], reach=reach)
    sec.payoff = Payoff("full", "NVIDIA H100", 16, 13186, 65536, 1.2, 0.4, 0.798, 4.97)
    assert BatchSection.from_json(sec.to_json()) == sec
    found = measured_findings(sec, ("chunk_gated_delta_rule",))
    model = transformers_models.resolve("qwen3.8-27b", m=matrix.load())
    doc = packing_batch_report.to_json(model, sec, None, found)
    jsonschema.validate(doc, schemas.load("verify-packing"))
    assert doc["exit_code"] == 4 and doc["payoff"]["ratio"] == 3.0 and doc["segments"][1]["first_layer"] == (
        "layer 0 (linear_attention)")


def test_the_text_names_each_kernels_keys_and_each_segment():
    """The one wording test of the section (report/packing_batch.py writes it)."""
    reach = [FunctionReach("causal_conv1d_fn", "x.causal_conv1d_fn", True, 2, ("cu_seq_lens_q", "seq_idx"), ())]
    text = "\n".join(render(_section([_seg(0, True), _seg(1, True, "layer 0 (linear_attention)")], reach=reach),
                            "qwen3.8-27b"))
    line = "causal_conv1d_fn         kernel     given cu_seq_lens_q, seq_idx; reached it: none (2 calls)"
    assert line in text  # wording: renderer test
    assert "segment 1 [40:110]" in text and "WRONG from layer 0 (linear_attention)" in text  # wording: renderer test
    assert "WRONG in the backward only" in text  # wording: renderer test
    sec = _section([_seg(0, False), _seg(1, True, "layer 0 (linear_attention)")], reach=reach)
    sec.controls = packing_controls.decide(Control("clean", 0.0025), Control("boundaries-removed", 0.044))
    text = "\n".join(render(sec, "qwen3.8-27b"))
    assert "worst token (threshold 0.01)" in text  # wording: renderer test
    assert ("controls, same weights and tokens: must be equal (clean) 0.0025; boundaries removed 0.044; 17.6x "
            "apart") in text  # wording: renderer test


@pytest.mark.parametrize(("kw", "flag"), [({"packing": None, "batch": "b.pt"}, "--batch"),
                                          ({"packing": None, "lengths": "l.txt"}, "--lengths"),
                                          ({"packing": "all", "batch": "b.pt", "collator": "m:f"}, "--batch and"),
                                          ({"packing": "all", "collator": "m:f"}, "--collator needs --lengths"),
                                          ({"packing": "flash", "batch": "b.pt"}, "--packing flash"),
                                          ({"packing": "none", "benchmark": True}, "--packing none")])
def test_batch_flags_belong_to_packing_and_need_their_partner(kw, flag):
    from kernelcheck.commands import verify
    from kernelcheck.commands.context import Context

    with pytest.raises(BadInput, match=flag):
        verify.check(verify.Request("qwen3.8-27b", **kw), Context.from_environ())


def test_benchmark_with_packing_is_the_payoff_not_a_refused_flag():
    from kernelcheck.commands import verify
    from kernelcheck.commands.context import Context

    verify.check(verify.Request("qwen3.8-27b", packing="all", benchmark=True), Context.from_environ())
    with pytest.raises(BadInput, match="--tokens does not apply with --packing"):
        verify.check(verify.Request("qwen3.8-27b", packing="all", tokens=128), Context.from_environ())


def test_a_packing_payoff_row_in_verified_toml_is_not_taken_for_a_training_step():
    from kernelcheck.doctor import cost

    step = {"model_type": "qwen3_5", "date": "2026-12-03", "bound_tokens_per_s": 2320.5,
            "reference_tokens_per_s": 540.5}
    payoff = {"model_type": "qwen3_5", "date": "2026-12-08", "kind": "packing-payoff", "ratio": 2.1}
    assert cost.choose([step, payoff], "qwen3_5", {})[0] is step
    assert cost.choose([payoff], "qwen3_5", {})[0] is None


@pytest.mark.parametrize(("content", "said"), [(b"", "is empty"), (b"root:x:0:0:root:/root:/bin/bash\n", "starts with"),
                                               (b"{\"input_ids\": [1, 2]}", "starts with")])
def test_a_file_that_is_no_torch_save_is_named_as_such(tmp_path, content, said):
    from kernelcheck.packing import batchfile

    f = tmp_path / "batch.pt"
    f.write_bytes(content)
    with pytest.raises(BadInput, match=f"not a torch.save file: it {said}") as err:
        batchfile.load(str(f))
    assert "Error" not in str(err.value)  # no reader's exception name


def test_a_truncated_torch_save_is_still_a_bad_file_not_a_traceback(tmp_path):
    import torch

    from kernelcheck.packing import batchfile

    f = tmp_path / "batch.pt"
    torch.save({"input_ids": torch.arange(8)[None]}, f)
    f.write_bytes(f.read_bytes()[:40])
    with pytest.raises(BadInput, match="not readable as a torch.save'd dict"):
        batchfile.load(str(f))
