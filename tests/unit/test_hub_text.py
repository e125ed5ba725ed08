"""The Hub section's wording, tested once, here: report/hub_text.py writes each kind of line from its values
(hub/check.py and `kernelcheck hub --repo` only add the values)."""

from __future__ import annotations

from kernelcheck.integrations.kernels_hub import Resolution, VariantDecision
from kernelcheck.report import hub_text
from kernelcheck.report.hub import (
    HubRow,
    KernelsAbsentLine,
    LayoutUnknownLine,
    ListingLine,
    PrintedLine,
    RepoCheckLines,
    ResolutionLines,
    RowLine,
    SwitchLine,
    TargetLine,
    UseLine,
    WindowLine,
)

RES = Resolution("kernels-community/fla", 1, None, "hf-cache", "/c", commit="0123456789abcdef",
                 decisions=(VariantDecision("torch213-cpu", True, chosen=True),
                            VariantDecision("torch211-cu130", False, "torch 2.11 wanted")),
                 chosen="torch213-cpu", notes=("n1",))


def test_each_line_kind_has_its_sentence() -> None:
    got = hub_text.lines([
        WindowLine("5.24.0", ">=0.10,<0.20", "transformers/utils/hub_kernels.py", "0.21", False, refused=True),
        SwitchLine("1", False, True, False, "modeling_utils.py"),
        UseLine(False, "use_kernels is off"),
        ListingLine("cpu", "torch-build", "train", "cache", used=False),
        TargetLine("2.11", "13.0", "sm_90"), TargetLine(None, "", None),
        KernelsAbsentLine(default_refuses=False), LayoutUnknownLine("kernels 9.0 has no adapter"),
        PrintedLine("as printed"),
    ])
    assert got == [
        "transformers 5.24.0 accepts kernels >=0.10,<0.20 (transformers/utils/hub_kernels.py); installed kernels "
        "0.21: OUTSIDE the window -> from_pretrained refuses to load (ValueError)",
        "USE_HUB_KERNELS=1 (transformers' default: Hub decorators on) · from_pretrained use_kernels default: False "
        "(modeling_utils.py)",
        "Hub kernels in this job: no - use_kernels is off",
        "device cpu (from the torch build) · mode train · variants listed from LOCAL_KERNELS and the Hugging Face "
        "cache only (Hub kernels are not in use)",
        "resolving for torch 2.11, CUDA 13.0, GPU sm_90 (--torch/--cuda/--arch): kernels' resolver with these "
        "values instead of this machine's",
        "resolving for torch as installed, CPU (--torch/--cuda/--arch): kernels' resolver with these values "
        "instead of this machine's",
        "kernels is not installed: transformers loads no Hub kernel here, so no variant is resolved",
        "kernels 9.0 has no adapter: the builds kernels would load are not listed",
        "as printed",
    ]


def test_rows_say_the_build_and_the_path_the_job_runs() -> None:
    row = HubRow("chunk_gated_delta_rule", "function", True, repo="kernels-community/fla@v1", layer="GDN",
                 source="hf-cache", variant="torch213-cpu", path="hub")
    unmapped = HubRow("causal_conv1d_fn", "function", False, note="transformers maps no Hub kernel to it",
                      path="torch", implementation="torch")
    assert hub_text.lines([RowLine(row, True), RowLine(row, False), RowLine(unmapped, True)]) == [
        "chunk_gated_delta_rule (function) -> kernels-community/fla@v1 layer GDN: build torch213-cpu will be used "
        "(from hf-cache) -> the Hub path runs",
        "chunk_gated_delta_rule (function) -> kernels-community/fla@v1 layer GDN: build torch213-cpu would be used "
        "(from hf-cache)",
        "causal_conv1d_fn (function): transformers maps no Hub kernel to it -> the torch path runs (torch)",
    ]
    assert row.to_json() == {"name": "chunk_gated_delta_rule", "kind": "function", "mapped": True,
                             "repo": "kernels-community/fla@v1", "layer": "GDN", "source": "hf-cache",
                             "variant": "torch213-cpu", "nearest": None, "would_match": None, "error": None,
                             "problem": None, "blocked": None, "path": "hub"}
    assert HubRow.from_json(unmapped.to_json()) == unmapped


def test_a_repository_lists_its_variants() -> None:
    assert hub_text.lines([ResolutionLines(RES.spec, RES)]) == [
        "kernels-community/fla@v1 from hf-cache (/c) commit 0123456789ab:",
        "    chosen   torch213-cpu", "    rejected torch211-cu130: torch 2.11 wanted", "    note: n1"]
    assert hub_text.lines([RepoCheckLines(RES)]) == [
        "kernels-community/fla@v1 from hf-cache (/c): build torch213-cpu will be used",
        "    chosen torch213-cpu", "    rejected torch211-cu130: torch 2.11 wanted"]


def test_rows_that_say_the_same_fold_into_one_line_and_the_default_is_said_once() -> None:
    cpu = "no Hub kernel for cpu (mapped only for cuda, rocm, xpu): the path bound at import stays"
    rows = [HubRow(n, "function", True, note=cpu, path="torch", implementation=f"m.torch_{n}")
            for n in ("causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule")]
    unmapped = [HubRow(n, "layer", False, note="transformers maps no Hub kernel to it", path="torch")
                for n in ("causal_conv1d_forward", "RMSNormZeroCentered")]
    source = "None -> True unless USE_HUB_KERNELS disables kernels (transformers/modeling_utils.py line 4224)"
    who = f"from_pretrained's use_kernels default is True ({source})"
    got = hub_text.lines([
        SwitchLine("YES", False, True, True, source),
        UseLine(True, f"{who}; kernels 0.19.1 is inside transformers' window; USE_HUB_KERNELS=YES", said_above=who),
        RowLine(unmapped[0], True), RowLine(rows[0], True), RowLine(unmapped[1], True), RowLine(rows[1], True),
        RowLine(rows[2], True),
    ])
    assert got == [
        f"USE_HUB_KERNELS=YES (transformers' default: Hub decorators on) · from_pretrained use_kernels default: "
        f"True ({source})",
        "Hub kernels in this job: YES - the use_kernels default, the kernels window and USE_HUB_KERNELS above all "
        "allow them",
        "causal_conv1d_forward, RMSNormZeroCentered (layers, each): transformers maps no Hub kernel to it",
        f"causal_conv1d_fn, causal_conv1d_update, chunk_gated_delta_rule (functions, each): {cpu} -> the torch "
        "path runs",
    ]
    assert sum("line 4224" in ln for ln in got) == 1  # wording: renderer test
    not_used = hub_text.lines([UseLine(False, f"{who}: transformers loads no Hub kernel", said_above=who)])
    assert not_used == ["Hub kernels in this job: no - by the use_kernels default above: transformers loads no Hub "
                        "kernel"]
