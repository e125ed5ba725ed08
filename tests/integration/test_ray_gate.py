"""kernelcheck.ray on a real local Ray cluster (ray from PyPI in a test site, CPU only): three trainer workers
gated by `worker_process_setup_hook`, one of them in a second venv that has fla-core + triton (its actor's
runtime_env py_executable), and a READY control actor whose code must run. The job stops before its first step,
the driver's fleet table names the odd worker, and the codes 3 and 4 reach the driver
(tests/programs/ray_fleet.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.fleet.table import FLEET_SCHEMA
from tests import envs

pytestmark = pytest.mark.integration

RAY = ("ray==2.60.0", "msgpack", "protobuf")  # ray's imports beside what the test venv has (click, requests, ...)
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
         "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ray_site, fla = envs.site(*RAY), envs.site("fla-core==0.6.0", "einops", "triton==3.6.0")
    out = tmp_path_factory.mktemp("ray")
    # the second environment: a venv of its own (another interpreter path) that sees fla-core + triton first
    odd = out / "odd-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(odd)], check=True, capture_output=True)
    (site_packages,) = (odd / "lib").glob("python*/site-packages")
    main_site = next(p for p in sys.path if p.endswith("site-packages") and Path(p, "torch").is_dir())
    (site_packages / "kc_test_second_env.pth").write_text(f"{fla}\n{main_site}\n")
    llama = out / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps(LLAMA))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELCHECK_", "RAY_"))}
    env.update(PYTHONPATH=f"{envs.REPO}:{ray_site}", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               KERNELCHECK_HOME=str(out / "home"), RAY_USAGE_STATS_ENABLED="0")
    program = envs.REPO / "tests" / "programs" / "ray_fleet.py"
    res = subprocess.run([sys.executable, str(program), str(out), "qwen3.8-27b", str(llama),
                          str(odd / "bin" / "python")], capture_output=True, text=True, env=env, cwd=str(out),
                         timeout=420)
    fleet_file = out / "fleet.json"
    assert fleet_file.exists(), f"exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    return {"rc": res.returncode, "stdout": res.stdout, "out": out, "fleet": json.loads(fleet_file.read_text()),
            "control": json.loads((out / "control.json").read_text()),
            "errors": {w: (out / f"error-{w}.txt").read_text() if (out / f"error-{w}.txt").exists() else None
                       for w in ("w0", "w1", "w2")}}


def test_the_job_stops_before_training_and_the_driver_exits_with_the_worst_workers_code(job: dict[str, Any]) -> None:
    assert job["rc"] == 4, job["stdout"]
    assert not [p.name for p in job["out"].glob("started-w*")]  # no trainer's actor code ran
    fleet = job["fleet"]
    assert fleet["schema"] == FLEET_SCHEMA and fleet["launcher"] == "ray" and fleet["exit_code"] == 4
    assert [r["exit_code"] for r in fleet["ranks"]] == [3, 4, 3]
    assert [r["rank"] for r in fleet["ranks"]] == [0, 1, 2] and fleet["missing"] == []


def test_the_fleet_table_names_the_odd_worker_and_what_differs(job: dict[str, Any]) -> None:
    (odd,) = job["fleet"]["differences"]
    assert len(odd["ranks"]) == 1 and odd["ranks"][0].startswith("rank 1 (")
    fields = {f["field"]: f for f in odd["fields"]}
    assert fields["kernel packages"]["value"] == "fla-core 0.6.0" and fields["kernel packages"]["others"] == "none"
    assert fields["verdict"]["value"] == "broken" and fields["verdict"]["others"] == "fallback"
    assert "ODD rank 1 (" in job["stdout"] and "kernelcheck.ray.gather · 3 workers" in job["stdout"]


def test_each_failed_worker_error_carries_the_verdict_the_fix_and_its_record(job: dict[str, Any]) -> None:
    errors = job["errors"]
    assert all(errors.values()), errors
    assert "verdict: BROKEN" in errors["w1"] and "(exit 4) · device cpu" in errors["w1"]
    assert "odd-venv/bin/python" in errors["w1"]  # the worker's own interpreter was checked
    assert "chunk_gated_delta_rule (fla-core): broken" in errors["w1"] and "fix: pip uninstall" in errors["w1"]
    for w in ("w0", "w2"):
        assert "verdict: FALLBACK" in errors[w] and "(exit 3)" in errors[w] and "fix: kernelcheck install" in errors[w]
    assert all("kernelcheck gate stopped this Ray worker before actor code" in e for e in errors.values())


def test_workers_of_one_environment_on_a_node_pay_one_check(job: dict[str, Any]) -> None:
    # w0 and w2 (and any worker Ray starts for the job's own runtime_env) share one verdict; w1 and the control
    # have their own environments: three cache entries, and at least one of w0/w2 read the other's verdict
    entries = sorted((job["out"] / "home" / "ray-gate").glob("*.json"))
    assert len(entries) == 3, [e.name for e in entries]
    assert any("verdict reused from the check of pid" in job["errors"][w] for w in ("w0", "w2"))
    assert "; checked in " in job["errors"]["w1"]  # its own environment: its own check


def test_a_ready_worker_starts_and_runs_its_actor_code(job: dict[str, Any]) -> None:
    control = job["control"]
    assert control["said"] == "trained" and control["exit_code"] == 0
    assert (job["out"] / "started-control").exists()
    assert [r["verdict"] for r in control["fleet"]["ranks"]] == ["ready"]
