"""The packed-batch lint (kernelcheck/packing/lint.py) on batches from transformers' own collator and on hand-made
tensors that reproduce each cited bug; the batch file checks (packing/batchfile.py: bad input names the key and
its shape, exit 2).

TRL's padding-free collator is not installed here (it pulls datasets and accelerate); its batch is rebuilt by
hand as TRL's sft_trainer.DataCollatorForLanguageModeling(padding_free=True) returns it before trl 1.16.0:
input_ids, position_ids restarting at 0, labels with -100 at each sequence start, no attention_mask. The real
collator (trl 1.15.0 and 1.16.0, which adds cu_seq_lens_q/k and seq_idx) runs in
tests/integration/test_packing_trl.py."""

from __future__ import annotations

import pytest
import torch

from kernelcheck.core.errors import BadInput
from kernelcheck.packing import batchfile, lint

SEQS = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]


def _qwen_keys() -> frozenset[str]:
    from transformers import Qwen3_5ForCausalLM

    keys = lint.accepted_keys(Qwen3_5ForCausalLM.forward)
    assert keys is not None
    return keys


ACCEPTED = _qwen_keys()


def _collated(**flags: bool) -> dict:
    from transformers import DataCollatorWithFlattening

    return dict(DataCollatorWithFlattening(**flags)([{"input_ids": s} for s in SEQS]))


def _ids(batch: dict) -> list[str]:
    return [p.id for p in lint.lint(batchfile.check(batch, "t").view, ACCEPTED)]


def _hand(cu: list[int], **extra: object) -> dict:
    n = cu[-1] if cu else 9
    return {"input_ids": torch.arange(n)[None], "cu_seq_lens_q": torch.tensor(cu, dtype=torch.int32),
            "cu_seq_lens_k": torch.tensor(cu, dtype=torch.int32), **extra}


def test_the_real_forward_signature_gives_the_keys_transformers_reads():
    assert {"input_ids", "position_ids", "labels", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "seq_idx",
            "attention_mask"} <= ACCEPTED
    assert "cu_seqlens" not in ACCEPTED and "cu_seqlens_q_padded" not in ACCEPTED

    def untyped(input_ids: int, **kwargs: object) -> None: ...

    assert lint.accepted_keys(untyped) is None  # anything goes: nothing can be called dropped


def test_the_collators_flash_batch_is_clean_and_its_segments_are_the_sequences():
    batch = _collated(return_flash_attn_kwargs=True, return_seq_idx=True)
    assert _ids(batch) == []
    view = batchfile.check(batch, "t").view
    assert lint.segments(view) == (((0, 3), (3, 5), (5, 9)), "cu_seq_lens_q")


def test_position_ids_only_from_the_collators_defaults_and_trl_padding_free():
    got = lint.lint(batchfile.check(_collated(), "t").view, ACCEPTED)
    assert [p.id for p in got] == ["packing-position-ids-only"] and got[0].finding.severity == "warning"
    assert (got[0].key, got[0].index) == ("position_ids", 3)  # the first restart, named
    trl = {"input_ids": torch.tensor([SEQS[0] + SEQS[1] + SEQS[2]]), "position_ids": torch.tensor([[0, 1, 2, 0, 1,
                                                                                                  0, 1, 2, 3]]),
           "labels": torch.tensor([[-100, 6, 7, -100, 9, -100, 11, 12, 13]])}
    assert _ids(trl) == ["packing-position-ids-only"]
    assert lint.segments(batchfile.check(trl, "t").view)[0] == ((0, 3), (3, 5), (5, 9))
    # an attention-only model keeps the sequences apart from position_ids alone
    assert lint.lint(batchfile.check(trl, "t").view, ACCEPTED, stateful=False) == []
    # with cu_seq_lens_q under a name the forward reads, the restart is not position_ids-only
    assert "packing-position-ids-only" not in _ids({**trl, "cu_seq_lens_q": torch.tensor([0, 3, 5, 9])})


@pytest.mark.parametrize(("cu", "index"), [([0, 3, 2, 9], 2), ([1, 3, 9], 0), ([0, 3, 5], 2), ([0, 3, 5, 10], 3)])
def test_offsets_that_do_not_start_at_0_decrease_or_miss_the_token_count(cu, index):
    batch = _hand(cu)
    batch["input_ids"] = torch.arange(9)[None]
    got = [p for p in lint.lint(batchfile.check(batch, "t").view, ACCEPTED)
           if p.id == "packing-cu-seqlens-not-monotonic"]
    assert [(p.key, p.index) for p in got] == [("cu_seq_lens_q", index)]  # k holds the same: one finding
    assert got[0].finding.severity == "broken" and got[0].finding.fix


def test_areal_duplicated_tail_offset_and_megatron_cuda_graph_tail_padding_are_zero_length_segments():
    areal = lint.lint(batchfile.check(_hand([0, 3, 5, 9, 9]), "t").view, ACCEPTED)  # AReaL#1103
    zero = [p for p in areal if p.id == "packing-zero-length-segment"]
    assert [(p.key, p.index) for p in zero] == [("cu_seq_lens_q", 4)]
    assert "packing-cu-seqlens-not-monotonic" not in {p.id for p in areal}
    megatron = _hand([0, 3, 5, 9, 9, 9, 9])  # Megatron-LM#3282: static shape, repeated final offsets
    assert "packing-zero-length-segment" in _ids(megatron)
    inner = lint.lint(batchfile.check(_hand([0, 3, 3, 9]), "t").view, ACCEPTED)
    assert next(p for p in inner if p.id == "packing-zero-length-segment").index == 2
    # the sequences compared are the non-empty ones
    assert lint.segments(batchfile.check(megatron, "t").view)[0] == ((0, 3), (3, 5), (5, 9))


def test_verl_and_mcore_bridge_padded_offsets_say_how_they_are_consumed():
    padded = torch.tensor([0, 4, 8, 12], dtype=torch.int32)  # each sequence padded to a multiple of 4 (CP 2 x 2)
    layout_padded_unpadded_cu = {**_hand([0, 3, 5, 9]), "input_ids": torch.arange(12)[None],
                                 "cu_seqlens_q_padded": padded}
    got = lint.lint(batchfile.check(layout_padded_unpadded_cu, "t").view, ACCEPTED)
    ids = [p.id for p in got]
    assert "packing-padded-offsets" in ids and "packing-metadata-dropped" not in ids  # one finding per key
    pad = next(p for p in got if p.id == "packing-padded-offsets")
    assert (pad.key, pad.index) == ("cu_seqlens_q_padded", 1)  # where the offsets kernels get first differ
    unpadded_layout = {**_hand([0, 3, 5, 9]), "cu_seqlens_q_padded": padded}
    assert "packing-padded-offsets" in _ids(unpadded_layout)


def test_veomni_seq_idx_that_counts_an_empty_segment_disagrees_with_the_offsets():
    cu = [0, 3, 3, 9]  # an empty segment; fla's offsets skip it, a seq_idx built by counting segments does not
    batch = _hand(cu, seq_idx=torch.tensor([[0, 0, 0, 2, 2, 2, 2, 2, 2]], dtype=torch.int32))
    got = {p.id: p for p in lint.lint(batchfile.check(batch, "t").view, ACCEPTED)}
    assert got["packing-seq-idx-mismatch"].index == 3
    moved = _hand([0, 3, 9], seq_idx=torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1]], dtype=torch.int32))
    assert {p.id: p for p in lint.lint(batchfile.check(moved, "t").view, ACCEPTED)}[
        "packing-seq-idx-mismatch"].index == 2
    good = _hand([0, 3, 9], seq_idx=torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 1]], dtype=torch.int32))
    assert "packing-seq-idx-mismatch" not in _ids(good)


def test_an_attention_mask_beside_restarting_position_ids_hides_the_boundaries():
    batch = {**_collated(), "attention_mask": torch.ones(1, 9, dtype=torch.long)}  # TRL's warning, reproduced
    got = {p.id: p for p in lint.lint(batchfile.check(batch, "t").view, ACCEPTED, stateful=False)}
    assert set(got) == {"packing-attention-mask-hides-boundaries"}
    assert (got["packing-attention-mask-hides-boundaries"].key, got["packing-attention-mask-hides-boundaries"].index) \
        == ("attention_mask", 3)
    padded = {"input_ids": torch.arange(9)[None], "attention_mask": torch.ones(1, 9, dtype=torch.long)}
    assert lint.lint(batchfile.check(padded, "t").view, ACCEPTED) == []  # one sequence: nothing to hide


def test_slime_style_keys_the_forward_does_not_take_are_dropped():
    batch = {"input_ids": torch.arange(9)[None], "position_ids": torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3]]),
             "cu_seqlens": torch.tensor([0, 3, 5, 9], dtype=torch.int32)}
    got = {p.id: p for p in lint.lint(batchfile.check(batch, "t").view, ACCEPTED)}
    assert set(got) == {"packing-metadata-dropped", "packing-position-ids-only"}
    assert got["packing-metadata-dropped"].key == "cu_seqlens"
    assert "packing-metadata-dropped" not in {p.id for p in lint.lint(batchfile.check(batch, "t").view, None)}


def test_the_lint_words_name_the_key_the_index_and_the_fix():
    """The one wording test of the lint: its messages are made here, where the finding is built."""
    got = {p.id: p.finding for p in lint.lint(batchfile.check(_hand([0, 3, 9, 9]), "t").view, ACCEPTED)}
    f = got["packing-zero-length-segment"]
    assert f.message.startswith("cu_seq_lens_q[3] repeats 9 (tail padding") and "unique_consecutive" in (f.fix or "")
    dropped = lint.lint(batchfile.check({"input_ids": torch.arange(4)[None], "cu_seqlens": torch.tensor([0, 4])},
                                        "t").view, ACCEPTED)
    said = dropped[0].finding
    assert "cu_seqlens (2,)" in said.message and "cu_seq_lens_q" in (said.fix or "")  # wording: renderer test


# -- bad input: one paragraph naming the key and the shape (exit 2) -------------------------------------------

@pytest.mark.parametrize(("raw", "words"), [
    ([1, 2], "holds a list"),
    ({"position_ids": torch.zeros(1, 3, dtype=torch.long)}, "no input_ids"),
    ({"input_ids": torch.zeros(1, 4)}, "'input_ids' is a float32 tensor of shape (1, 4)"),
    ({"input_ids": torch.zeros(2, 4, dtype=torch.long)}, "'input_ids' is a int64 tensor of shape (2, 4)"),
    ({"input_ids": torch.zeros(1, 4, dtype=torch.long), "position_ids": torch.zeros(1, 5, dtype=torch.long)},
     "'position_ids' is a int64 tensor of shape (1, 5)"),
    ({"input_ids": torch.zeros(1, 4, dtype=torch.long), "cu_seq_lens_q": torch.zeros(2, 2, dtype=torch.int32)},
     "'cu_seq_lens_q' is a int32 tensor of shape (2, 2)"),
    ({"input_ids": torch.zeros(1, 4, dtype=torch.long), "extra": "text"}, "'extra' is a str"),
    ({"input_ids": torch.zeros(1, 4, dtype=torch.long), "max_length_q": 2.5}, "'max_length_q' is a float"),
])
def test_a_bad_batch_is_bad_input_naming_the_key_and_its_shape(raw, words):
    with pytest.raises(BadInput) as exc:
        batchfile.check(raw, "b.pt")
    assert words in str(exc.value) and "\n" not in str(exc.value)  # wording: the exit-2 message of bad input


def test_files_are_read_with_weights_only_and_safetensors_is_read_too(tmp_path):
    batch = _collated(return_flash_attn_kwargs=True, return_seq_idx=True)
    pt = tmp_path / "b.pt"
    torch.save(batch, pt)
    assert batchfile.load(str(pt)).view.tokens == 9
    from safetensors.torch import save_file

    st = tmp_path / "b.safetensors"
    save_file({k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}, str(st))
    assert lint.segments(batchfile.load(str(st)).view)[0] == ((0, 3), (3, 5), (5, 9))

    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    evil = tmp_path / "evil.pt"
    torch.save({"input_ids": torch.zeros(1, 2, dtype=torch.long), "x": Evil()}, evil)
    for path, words in ((evil, "weights_only=True"), (tmp_path / "missing.pt", "does not exist"),
                        (tmp_path, "is not a regular file")):
        with pytest.raises(BadInput) as exc:
            batchfile.load(str(path))
        assert words in str(exc.value)
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(BadInput, match="not readable as a .safetensors file"):
        batchfile.load(str(tmp_path / "junk.safetensors"))


def test_a_collator_that_is_not_module_callable_is_refused_before_it_runs():
    """The job's collator itself runs in a child process: tests/integration/test_hostile_collator.py."""
    with pytest.raises(BadInput, match="not module:callable"):
        batchfile.collate("nope", [3], vocab=128)


def test_any_lengths_the_collator_packs_lint_clean_and_split_back_into_them():
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from transformers import DataCollatorWithFlattening

    collate = DataCollatorWithFlattening(return_flash_attn_kwargs=True, return_seq_idx=True)

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.integers(1, 90), min_size=1, max_size=8))
    def check(lengths: list[int]) -> None:
        batch = dict(collate([{"input_ids": list(range(1, n + 1))} for n in lengths]))
        view = batchfile.check(batch, "t").view
        assert lint.lint(view, ACCEPTED) == []
        segs, src = lint.segments(view)
        assert [b - a for a, b in segs] == lengths and src == "cu_seq_lens_q"
        # the same row with a tail pad offset: one zero-length finding, the same segments
        cu = batch["cu_seq_lens_q"]
        padded = {**batch, "cu_seq_lens_q": torch.cat([cu, cu[-1:]]), "cu_seq_lens_k": torch.cat([cu, cu[-1:]])}
        got = lint.lint(batchfile.check(padded, "t").view, ACCEPTED)
        assert [(p.id, p.index) for p in got] == [("packing-zero-length-segment", len(lengths) + 1)]

    check()
