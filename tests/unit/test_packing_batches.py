"""verify --packing on the collator's batches: the batch each mode builds, the verdict logic, and the root
cause of the old `flash mixed` on the H200 (a forward with a cache), measured on CPU with transformers 5.24.

On CPU the torch path runs, which refuses cu_seq_lens/seq_idx (5.20+), so the fast kernels' correctness
needs the GPU: `kernelcheck verify --model qwen3.8-27b --packing flash` there (docs/packing.md)."""

from __future__ import annotations

from kernelcheck.core import matrix
from kernelcheck.packing import batches
from kernelcheck.packing.decide import fix_text, load_facts
from kernelcheck.verify import packing, packing_report

FACTS = load_facts(m=matrix.load())


def test_each_mode_is_built_by_the_collator_with_the_flags_doctor_names():
    seqs = [[5, 6, 7], [8, 9]]
    got = {m: batches.packed_batch(m, seqs, FACTS) for m in packing.MODES}
    assert batches.packed_kwargs(got["position_ids"]) == ("position_ids",)
    assert batches.packed_kwargs(got["cu_seq_lens"]) == ("position_ids", "cu_seq_lens_q", "cu_seq_lens_k",
                                                         "max_length_q", "max_length_k")
    flash = got["flash"]
    assert batches.packed_kwargs(flash)[-1] == "seq_idx"
    assert flash["input_ids"].tolist() == [[5, 6, 7, 8, 9]] and flash["position_ids"].tolist() == [[0, 1, 2, 0, 1]]
    assert flash["cu_seq_lens_q"].tolist() == [0, 3, 5] and flash["max_length_q"] == 3
    assert flash["seq_idx"].tolist() == [[0, 0, 0, 1, 1]] and str(flash["seq_idx"].dtype) == "torch.int32"
    assert "labels" not in flash
    # doctor's fix is the collator call of the mode verify judges by default
    assert fix_text(FACTS).startswith(batches.collator_call(batches.collator_flags(packing_report.RECOMMENDED, FACTS)))
    assert batches.collator_call(batches.collator_flags("flash", FACTS)) == (
        "DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)")


def test_the_lengths_sit_below_around_and_above_the_chunk_size():
    chunk = 64
    short, around, long_ = (batches.LENGTHS[k] for k in ("short", "chunk", "long"))
    assert sum(short) < chunk and around[0] < chunk < sum(around) and min(long_) > 2 * chunk


def _result(mode: str, outcomes: list[str], doctor: str | None = None) -> packing.PackingResult:
    rows = [packing.LengthResult(n, (1, 1), o, 0.0 if o == "correct" else (None if o == "raises" else 0.3))
            for n, o in zip(("short", "chunk", "long"), outcomes, strict=True)]
    return packing.PackingResult(mode, packing.combine(rows), rows, "", doctor)


def test_a_mode_is_as_bad_as_its_worst_length_and_the_verdict_is_the_judged_modes():
    res = [_result("position_ids", ["mixed"] * 3), _result("cu_seq_lens", ["correct", "mixed", "correct"]),
           _result("flash", ["correct"] * 3)]
    assert [r.outcome for r in res] == ["mixed", "mixed", "correct"]
    assert _result("flash", ["correct", "raises", "mixed"]).outcome == "raises"
    assert packing_report.verdict(res, None) == ("ready", 0)  # the recommended mode: flash
    assert packing_report.verdict(res, "position_ids") == ("broken", 4)  # as doctor --packing position_ids
    assert packing_report.verdict(res, "none") == ("ready", 0)


def test_a_disagreement_with_doctor_is_named_and_the_measurement_decides():
    res = [_result("position_ids", ["mixed"] * 3, "mixed"), _result("cu_seq_lens", ["mixed"] * 3, "mixed"),
           _result("flash", ["mixed", "correct", "correct"], "correct")]
    assert [r.as_dict()["agrees"] for r in res] == [True, True, False]
    text = "\n".join(packing_report._tail(res, None, packing_report.verdict(res, None)[1]))
    assert "mode flash: measured mixed, doctor decides correct" in text and "BROKEN" in text  # wording: renderer test


def test_transformers_fallback_lines_are_held_back_while_verify_measures():
    """The wording and the logger are the installed transformers' own (its hub_kernels.py source), so a change
    there fails here; outside the block the line goes through again."""
    import logging
    from pathlib import Path

    import transformers

    from kernelcheck.integrations import transformers_logs

    src = (Path(transformers.__file__).parent / "integrations" / "hub_kernels.py").read_text(encoding="utf-8")
    assert transformers_logs._TEXTS[0] in src
    lg = logging.getLogger("transformers.integrations.hub_kernels")
    seen: list[str] = []
    h = logging.Handler()
    h.emit = lambda rec: seen.append(rec.getMessage())  # type: ignore[method-assign]
    lg.addHandler(h)
    msg = ("`causal_conv1d_fn` is falling back to its reference PyTorch implementation because `causal_conv1d` "
           "is not installed.")
    try:
        with transformers_logs.quiet_fallback_lines() as held:
            lg.warning(msg)
            lg.warning("something else")
        lg.warning(msg)
    finally:
        lg.removeHandler(h)
    assert held == [msg] and seen == ["something else", msg]


def test_doctor_warns_that_packing_needs_a_forward_without_a_cache_when_the_installed_source_says_so(tmp_path):
    from kernelcheck.packing.decide import section, transformers_dir
    from kernelcheck.packing.findings import findings

    gdn = {"causal_conv1d_fn": "fast", "chunk_gated_delta_rule": "fast"}
    sec = section(gdn, "flash", FACTS, transformers_dir())  # the venv's transformers 5.24 carries the condition
    assert sec is not None and sec.cache_skips_packing is True
    got = {f.id: f for f in findings(sec)}
    assert got["packing-declared"].severity == "info"  # flash with both kernels bound: correct
    assert got["packing-needs-no-cache"].severity == "warning" and "use_cache = False" in (got[
        "packing-needs-no-cache"].fix or "")
    assert "packing-needs-no-cache" not in {f.id for f in findings(section(gdn, "none", FACTS, transformers_dir()))}
    (tmp_path / "masking_utils.py").write_text("def f(): pass\n")  # a source without the condition
    assert section(gdn, "flash", FACTS, tmp_path).cache_skips_packing is False
