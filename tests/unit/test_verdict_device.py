"""The device a verdict is for (core/device.py): one value per report, named in the headline and in the JSON as
`device: {type, origin, visible}`; a verdict for a device not visible here is a prediction and says so."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kernelcheck.core import device, gpu, matrix
from kernelcheck.core.environment import TorchInfo
from kernelcheck.hub import check as hub_check
from kernelcheck.integrations.kernels_hub import Resolution
from kernelcheck.report.device_text import device_words
from kernelcheck.report.model import Report, render_json
from tests.environments import make_env

M = matrix.load()

CPU_TORCH = make_env(None, torch="2.13.0+cpu", cuda=None, triton=None)
CUDA_TORCH_NO_GPU = make_env(None, torch="2.14.1+cu130", cuda="13.0")
GPU = make_env("9.0", gpu_source="torch")
ARCH = make_env("9.0")  # GPUs from --arch: gpu_source "override"


def test_the_default_is_the_gpu_here_else_the_torch_build() -> None:
    assert device.choose(CPU_TORCH) == device.Device("cpu", "torch-build", True)
    # a login node or a docker build stage with a CUDA torch: the job runs on a CUDA machine, predicted as such
    assert device.choose(CUDA_TORCH_NO_GPU) == device.Device("cuda", "torch-build", False)
    assert device.choose(CUDA_TORCH_NO_GPU).predicted
    assert device.choose(GPU) == device.Device("cuda", "gpu-visible", True)
    rocm = replace(CUDA_TORCH_NO_GPU, torch=TorchInfo("2.13.0+rocm6.4", None, True, "6.4"))
    assert device.choose(rocm) == device.Device("rocm", "torch-build", False)


def test_arch_implies_a_cuda_device_even_on_a_cpu_torch_build() -> None:
    """The upgrade gate `doctor --arch 9.0 --upgrade ... --if-worse` must not judge the CPU silently."""
    cpu_box_arch = replace(ARCH, torch=CPU_TORCH.torch)
    assert device.choose(cpu_box_arch) == device.Device("cuda", "arch", False)
    assert gpu.default_device(cpu_box_arch) == "cuda"  # the Hub mapping and the prefetch take the same device
    assert device.choose(ARCH, "cpu") == device.Device("cpu", "flag", True)  # --device wins


def test_device_flag_and_verify_run_here() -> None:
    assert device.choose(CUDA_TORCH_NO_GPU, "cpu") == device.Device("cpu", "flag", True)
    assert device.choose(CUDA_TORCH_NO_GPU, "cuda") == device.Device("cuda", "flag", False)
    assert device.choose(GPU, "cuda").visible
    assert device.choose(CUDA_TORCH_NO_GPU, run_here=True) == device.Device("cpu", "run-here", True)
    assert device.choose(GPU, run_here=True) == device.Device("cuda", "run-here", True)


def test_the_device_is_in_the_json_and_reads_back() -> None:
    rep = Report("doctor", None, None, "train")
    rep.device = device.Device("cuda", "torch-build", False)
    data = json.loads(render_json(rep))
    assert data["device"] == {"type": "cuda", "origin": "torch-build", "visible": False}
    back = Report.from_json(data)
    assert back.device == rep.device and render_json(back) == render_json(rep)


def test_headline_wording_of_a_prediction() -> None:
    """The one wording test of the device's words (report/text.py device_words)."""
    assert device_words(device.Device("cpu", "flag", True)) == "device cpu (from --device)"
    said = device_words(device.Device("cuda", "torch-build", False))
    assert said == ("device cuda (from the torch build; no CUDA device here: the verdict is a prediction for a CUDA "
                    "machine)")


def _offline(repo: str) -> Resolution:
    return Resolution(repo, 3, None, "none", None, error="not in the cache", kernels_error="ValueError: Version 3 of "
                      f"'{repo}' is not available in the local cache and Hugging Face Hub is in offline mode")


def test_hub_not_listable_as_a_prediction_says_so_and_names_what_no_gpu_confirmed() -> None:
    """One wording test of the prediction form (hub/check.py _not_listable); ids and severities are unchanged."""
    here = hub_check._not_listable(_offline("kernels-community/rotary"), "rotary_pos_emb (layer)", "llama", True, (),
                                   m=M)
    assert here.id == "hub-not-listable" and here.severity == "broken"
    assert "cannot be resolved here" in here.message and "CUDA device" not in here.message  # wording: renderer test
    llama = hub_check._not_listable(_offline("kernels-community/liger-kernels"), "RMSNorm (layer)", "llama", True,
                                    (), predicted="cuda", m=M)
    assert llama.id == "hub-not-listable" and llama.severity == "broken"
    assert llama.message.startswith("on a CUDA device this load fails: kernels-community/liger-kernels@v3")
    assert "not yet confirmed on a GPU for kernels-community/liger-kernels" in llama.message  # wording: renderer test
    rotary = hub_check._not_listable(_offline("kernels-community/rotary"), "rotary_pos_emb (layer)", "llama", True,
                                     (), predicted="cuda", m=M)
    assert "not yet confirmed" not in rotary.message  # the H100 load of a tiny Llama raised it (hub_offline.toml)
    fla = hub_check._not_listable(_offline("kernels-community/fla"), "chunk_gated_delta_rule (function)", "q", True,
                                  (), predicted="cuda", m=M)
    assert fla.message.startswith("on a CUDA device this load fails")
    assert "not yet confirmed" not in fla.message  # wording: renderer test (the prediction form's caveat)


def test_the_hub_listing_names_the_verdicts_device_and_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor's Hub section lists variants for the verdict's device and says where that device came from: the torch
    build unless --device was given (it used to say "--device" for a device doctor chose itself); verify's (and
    verify --step's) static check names the device the model runs on, in the headline and the Hub section alike."""
    from kernelcheck.doctor import run
    from kernelcheck.report.hub import ListingLine

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for flag, origin, here in ((None, "torch-build", False), ("cpu", "flag", False), (None, "run-here", True)):
        rep = run.doctor("qwen3.8-27b", "train", env=CPU_TORCH, hub=True, hub_device=flag, m=matrix.load(),
                         run_here=here)
        assert rep.hub is not None and rep.device is not None
        (listing,) = [i for i in rep.hub.items if isinstance(i, ListingLine)]
        assert (listing.device, listing.origin) == ("cpu", origin) == (rep.device.type, rep.device.origin)


def test_verify_and_verify_step_name_the_device_they_run_on_in_every_section() -> None:
    """verify and verify --step run the static check for the device the model runs on: the report's device comes
    from that call (run_here), so the headline and the Hub listing say "from where it runs" alike (verify --step
    used to say "the torch build", verify's Hub section "--device" when no --device was given)."""
    import ast
    from pathlib import Path

    import kernelcheck.verify

    calls = []
    for path in sorted(Path(kernelcheck.verify.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "run_doctor":
                calls.append((path.name, {k.arg: ast.unparse(k.value) for k in node.keywords}))
    assert sorted(name for name, _ in calls) == ["run.py", "step.py"]
    assert all(kw.get("run_here") == "True" and "hub_device" not in kw for _, kw in calls), calls
    assert all("report.device =" not in p.read_text()
               for p in Path(kernelcheck.verify.__file__).parent.glob("*.py"))
