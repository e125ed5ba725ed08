"""The Hub section holds typed values (report/hub.py HubTransformers and HubMapEntry, kernels_hub.Resolution for
the repositories): hub/check.py fills them from what transformers and kernels said, they write the JSON the section
always printed (keys in the same order), and real reports read back into them."""

from __future__ import annotations

import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from kernelcheck.integrations.kernels_hub import Resolution, VariantDecision
from kernelcheck.integrations.transformers_hub import HubRepo, MappingEntry, TransformersHub
from kernelcheck.report.hub import HubMapEntry, HubTransformers, RepoCheckLines
from kernelcheck.report.model import HubSection, Report, render_json

REPO = Path(__file__).resolve().parents[2]
HUB_SAMPLE = REPO / "tests" / "data" / "reports" / "hub.json"
DIFFERENTIAL = REPO / "docs" / "measurements" / "2026-12-04-h200-differential-2ef81b4" / "differential-2ef81b4.tgz"

FLA = MappingEntry("chunk_gated_delta_rule", "cuda", ("TRAINING",), HubRepo("kernels-community/fla",
                   "chunk_gated_delta_rule", version=2))
GDN = MappingEntry("Qwen3_5GatedDeltaNet", "rocm", ("FALLBACK", "INFERENCE"),
                   HubRepo("Atlas-Inference/gdn", "Qwen3_5GatedDeltaNet", revision="13462bf5"), capability=(115, 115))
TH = TransformersHub("5.25.0", "0.19.1", ("0.19.1", "0.20.0"), "import_utils", True, "YES", False, True, True,
                     "modeling_utils.py line 4224", True, (FLA, GDN), "hub_kernels.py", None, ("a lambda",))
RES = Resolution("kernels-community/fla", 2, None, "hf-cache", "/c", "v2", "0123456789abcdef",
                 (VariantDecision("torch29-cu128", False, "Torch version"),
                  VariantDecision("torch-universal", True, chosen=True)),
                 "torch-universal", notes=("the Hub failed; the cache answered",),
                 hub_unreachable="the Hub failed; the cache answered")


def _old_transformers(th: TransformersHub) -> dict:
    """What hub/check.py stored before the section was typed."""
    return {k: v for k, v in th.to_json().items() if k != "mapping"}


def _old_mapping(e: MappingEntry) -> dict:
    return {"name": e.name, "device": e.device, "modes": list(e.modes), "repo": e.repo.spec,
            "layer": e.repo.layer_name, "capability": e.capability}


def test_the_typed_values_write_what_the_dicts_wrote_key_for_key() -> None:
    t = HubTransformers.of(TH)
    assert t.window == ">=0.19.1,<0.20.0" and t.unread == ("a lambda",) and t.kernels == "0.19.1"
    assert json.dumps(t.to_json()) == json.dumps(_old_transformers(TH))
    assert HubTransformers.of(replace(TH, window=None)).to_json()["window"] is None
    for e in (FLA, GDN):
        m = HubMapEntry.of(e)
        assert json.dumps(m.to_json()) == json.dumps(_old_mapping(e))
    assert HubMapEntry.of(GDN) == HubMapEntry("Qwen3_5GatedDeltaNet", "rocm", ("FALLBACK", "INFERENCE"),
                                              "Atlas-Inference/gdn@13462bf5", "Qwen3_5GatedDeltaNet", (115, 115))


def test_the_values_read_back_equal() -> None:
    t = HubTransformers.of(TH)
    assert HubTransformers.from_json(json.loads(json.dumps(t.to_json()))) == t
    for e in (FLA, GDN):
        m = HubMapEntry.of(e)
        assert HubMapEntry.from_json(json.loads(json.dumps(m.to_json()))) == m
    back = Resolution.from_json(json.loads(json.dumps(RES.to_json())))
    # hub_unreachable is printed only as one of the notes: everything else is the same value
    assert back == replace(RES, hub_unreachable=None) and back.to_json() == RES.to_json()
    assert back.decisions[1].chosen and isinstance(back.decisions[0], VariantDecision)
    assert isinstance(back.notes, tuple)


def test_a_section_with_a_repo_check_writes_typed_repos_and_reads_them_back() -> None:
    """What `kernelcheck hub --repo` adds (commands/hub.judge_repo): a Resolution in `repos`, its lines in `items`."""
    from kernelcheck.commands.hub import judge_repo

    rep = Report("hub", None, None, "train")
    rep.hub = HubSection([], False, "use_kernels is off", "cuda", "train", True, HubTransformers.of(TH),
                         [HubMapEntry.of(FLA)], [], [])
    judge_repo(rep, rep.hub, RES)
    assert rep.hub.repos == [RES] and rep.hub.items == [RepoCheckLines(RES)]
    data = json.loads(render_json(rep))
    assert data["hub"]["repos"] == [RES.to_json()]
    assert data["hub"]["mapping"][0]["repo"] == "kernels-community/fla@v2"
    back = Report.from_json(data)
    assert back.hub is not None and back.hub.repos[0].chosen == "torch-universal"
    assert render_json(back) == render_json(rep)


def test_the_cpu_hub_sample_reads_back_typed_in_key_order() -> None:
    data = json.loads(HUB_SAMPLE.read_text())
    sec = HubSection.from_json(data["hub"])
    assert sec.transformers.transformers == "5.24.0" and sec.transformers.window_met is False
    assert sec.transformers.kernels == "0.17.2" and sec.transformers.refuses_when_unusable is True
    gdn = next(m for m in sec.mapping if m.device == "rocm")
    assert gdn.capability == (115, 115) and gdn.modes == ("FALLBACK",)
    assert {m.device for m in sec.mapping if m.name == "RMSNormGated"} == {"cuda", "xpu"}
    assert json.dumps(sec.to_json()) == json.dumps(data["hub"])


def _differential() -> list[tuple[str, dict]]:
    with tarfile.open(DIFFERENTIAL) as tar:
        out = []
        for m in tar.getmembers():
            if m.name.endswith(".json") and "truth" not in m.name:
                fh = tar.extractfile(m)
                assert fh is not None
                out.append((m.name, json.loads(fh.read())))
        return out


DIFF = _differential()


@pytest.mark.parametrize("name,data", DIFF, ids=[n.removeprefix("./") for n, _ in DIFF])
def test_the_h200s_hub_sections_read_back_typed_in_key_order(name: str, data: dict) -> None:
    sec = HubSection.from_json(data["hub"])
    assert json.dumps(sec.to_json()) == json.dumps(data["hub"]), name  # the order of every key too
    if "t525_offline" in name:
        assert (sec.transformers.transformers, sec.transformers.kernels) == ("5.25.0", "0.19.1")
        assert sec.transformers.window_met and sec.transformers.use_kernels_default is True
        assert len(sec.mapping) == 29 and all(isinstance(m.modes, tuple) for m in sec.mapping)
        fla = next(r for r in sec.repos if r.repo_id == "kernels-community/fla")
        assert fla.version == 3 and fla.source == "none" and fla.chosen is None
        assert fla.kernels_error and fla.kernels_error.startswith("kernels' own lookup raises ValueError")
    else:
        assert sec.repos == [] and sec.transformers.kernels is None
