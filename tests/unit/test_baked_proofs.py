"""Proofs made when an image is built (`kernelcheck warm`, warm/proofs.py) and found on a node through
KERNELCHECK_PROOF_DIR: the JIT probe's baked pass (its probe process stood in for: it needs a GPU; the real one is
benchmarks/gpu/gpu_warm.sh gate), the import key's portability (what cannot change an answer is out of it, what can is
in), and the variable itself. A real doctor process on a baked import proof: tests/integration/test_baked_proofs.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core import matrix, settings
from kernelcheck.core.errors import BadInput
from kernelcheck.doctor import jitprobe, proofcache
from kernelcheck.integrations import jit_caches
from kernelcheck.warm import proofs
from tests.unit.test_jitprobe import _report


def _printed(folder: Path) -> dict[str, str]:
    """`kernelcheck warm --print-env`'s variables for `folder` (the JIT caches and KERNELCHECK_PROOF_DIR)."""
    table = matrix.load().table("jit_caches.toml")
    return jit_caches.env_for(str(folder), table, False)


def _bake_then_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[list[tuple[str, str]], Path]:
    """The JIT probes passed at bake time into the folder (as warm's doctor child: the job's variables, HOME the
    build's, KERNELCHECK_HOME in the folder), then this process set up as the job (another HOME, an empty
    KERNELCHECK_HOME). Returns the probes run and the folder."""
    baked = tmp_path / "jit-cache"
    seen: list[tuple[str, str]] = []

    def fake(jit: str, mode: str, arch: str, tc: Any, timeout: float = 0) -> dict[str, Any]:
        seen.append((jit, mode))
        return {"ok": True, "stage": mode, "error": None, "seconds": 4.2}

    monkeypatch.setattr(jitprobe, "run_probe", fake)
    for k, v in proofs.job_env(str(baked), _printed(baked), {"HOME": str(tmp_path / "build-home")}).items():
        monkeypatch.setenv(k, v)
    (tmp_path / "build-home").mkdir()
    jitprobe.attach(_report("triton", "tilelang"), m=matrix.load())
    assert sorted(seen) == [("tilelang", "run"), ("triton", "run")]
    assert len(list((baked / "kernelcheck" / "jit-proofs").glob("*.json"))) == 2  # stored in the folder
    seen.clear()
    (tmp_path / "node-home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "node-home"))
    monkeypatch.setenv("KERNELCHECK_HOME", str(tmp_path / "node-home" / ".cache" / "kernelcheck"))  # empty
    return seen, baked


def test_a_jit_probe_passed_at_bake_time_is_found_in_the_proof_dir_and_says_so(monkeypatch, tmp_path) -> None:
    seen, baked = _bake_then_job(monkeypatch, tmp_path)
    rep = _report("triton", "tilelang")
    jitprobe.attach(rep, m=matrix.load())
    assert seen == []  # neither probe ran on the node
    passed = [f for f in rep.findings if f.id == "jit-probe-passed"]
    assert len(passed) == 2 and all("proven at bake time (20" in f.message and "not on this node" in f.message
                                    for f in passed)  # wording: the baked pass's one test
    assert not (tmp_path / "node-home" / ".cache" / "kernelcheck").exists()  # nothing written on a hit
    # --no-cache probes afresh, the folder is never written by the node
    jitprobe.attach(_report("triton", "tilelang"), m=matrix.load(), use_cache=False)
    assert sorted(seen) == [("tilelang", "run"), ("triton", "run")]


def test_a_variable_in_the_jit_key_changed_on_the_node_is_a_miss_probed_and_stored_in_home(monkeypatch,
                                                                                           tmp_path) -> None:
    seen, baked = _bake_then_job(monkeypatch, tmp_path)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    rep = _report("triton", "tilelang")
    jitprobe.attach(rep, m=matrix.load())
    assert sorted(seen) == [("tilelang", "run"), ("triton", "run")]
    assert all("bake time" not in f.message for f in rep.findings)
    assert len(list((baked / "kernelcheck" / "jit-proofs").glob("*.json"))) == 2  # read only: nothing added
    assert len(list((tmp_path / "node-home" / ".cache" / "kernelcheck" / "jit-proofs").glob("*.json"))) == 2
    seen.clear()  # the node's own passes now: "passed before", not "bake time"
    again = _report("triton", "tilelang")
    jitprobe.attach(again, m=matrix.load())
    assert seen == [] and all("passed before" in f.message for f in again.findings if f.id == "jit-probe-passed")


def test_a_corrupt_or_failed_baked_probe_is_a_miss_never_an_error(monkeypatch, tmp_path) -> None:
    seen, baked = _bake_then_job(monkeypatch, tmp_path)
    files = sorted((baked / "kernelcheck" / "jit-proofs").glob("*.json"))
    files[0].write_text("{not json")
    files[1].write_text(files[1].read_text().replace('"ok": true', '"ok": false'))
    jitprobe.attach(_report("triton", "tilelang"), m=matrix.load())
    assert sorted(seen) == [("tilelang", "run"), ("triton", "run")]


def test_the_import_key_holds_what_can_change_an_answer_and_nothing_a_node_or_user_changes(monkeypatch,
                                                                                            tmp_path) -> None:
    m = matrix.load()
    for name in ("a", "b"):
        (tmp_path / name / "home").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), *sys.path[1:]])
    monkeypatch.setenv("HOME", str(tmp_path / "a" / "home"))
    monkeypatch.setenv("KERNELCHECK_HOME", str(tmp_path / "a" / "kc"))
    monkeypatch.chdir(tmp_path / "a")
    base = proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 2, m))
    # another HOME, KERNELCHECK_HOME, current folder (with the same importable names: none), proof dir, host name
    monkeypatch.setattr(sys, "path", [str(tmp_path / "b"), *sys.path[1:]])
    monkeypatch.setenv("HOME", str(tmp_path / "b" / "home"))
    monkeypatch.setenv("KERNELCHECK_HOME", str(tmp_path / "b" / "kc"))
    monkeypatch.setenv("KERNELCHECK_PROOF_DIR", str(tmp_path / "a" / "kc"))
    monkeypatch.chdir(tmp_path / "b")
    monkeypatch.setattr("socket.gethostname", lambda: "another-node")
    assert proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 2, m)) == base
    # what can change an answer: a dispatch variable, a module importable from the first sys.path entry, a HOME
    # that is not there, the number of children
    monkeypatch.setenv("FLA_TILELANG", "0")
    assert proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 2, m)) != base
    monkeypatch.delenv("FLA_TILELANG")
    (tmp_path / "b" / "einops.py").write_text("raise ImportError('shadowed')\n")
    assert proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 2, m)) != base
    (tmp_path / "b" / "einops.py").unlink()
    monkeypatch.setenv("HOME", str(tmp_path / "nowhere"))
    assert proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 2, m)) != base
    monkeypatch.setenv("HOME", str(tmp_path / "b" / "home"))
    assert proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 3, m)) != base
    assert proofcache.key_of(proofcache.fingerprint("qwen3.8-27b", False, 2, m)) == base


def test_the_proof_dir_variable_is_an_absolute_folder_and_read_after_home(tmp_path) -> None:
    s = settings.Settings.from_environ({"KERNELCHECK_PROOF_DIR": "/opt/jit-cache/kernelcheck"})
    assert s.proof_dir == Path("/opt/jit-cache/kernelcheck") and settings.Settings.from_environ({}).proof_dir is None
    with pytest.raises(BadInput) as got:
        settings.check_environ({"KERNELCHECK_PROOF_DIR": "jit-cache/kernelcheck"})
    assert "KERNELCHECK_PROOF_DIR" in got.value.message and got.value.exit_code == 2


def test_print_env_names_the_proof_dir_and_the_bake_stores_there(tmp_path) -> None:
    printed = _printed(tmp_path)
    assert printed["KERNELCHECK_PROOF_DIR"] == str(tmp_path / "kernelcheck") == proofs.proof_dir(str(tmp_path))
    assert "KERNELCHECK_HOME" not in printed  # the node's home stays its own (wheelhouse, verdicts, new proofs)
    env = proofs.job_env(str(tmp_path), printed, {"HOME": "/root", "KERNELCHECK_HOME": "/elsewhere"})
    assert env["KERNELCHECK_HOME"] == str(tmp_path / "kernelcheck") and env["HOME"] == "/root"


def test_the_bake_starts_kernelcheck_as_this_process_was_started(tmp_path) -> None:
    script = tmp_path / "kernelcheck"
    script.write_text("#!/usr/bin/env python\n")
    assert proofs.self_command(str(script)) == [sys.executable, str(script)]  # sys.path[0]: the script's folder
    main = os.path.join(os.path.dirname(proofs.__file__), "..", "__main__.py")
    assert proofs.self_command(main) == [sys.executable, "-m", "kernelcheck"]
    assert proofs.self_command("/usr/bin/pytest") == [sys.executable, "-m", "kernelcheck"]


def test_warm_hands_the_gate_the_job_variables_and_says_where_its_proofs_are(tmp_path) -> None:
    from kernelcheck.warm import render
    from kernelcheck.warm import run as warm_run
    from tests.unit.test_cache_proof import TABLE, _stand_in

    seen: list[dict[str, str]] = []

    def bake(first: dict[str, Any], env: dict[str, str], say: Any, spec: Any) -> dict[str, Any]:
        seen.append(env)
        return {"static": {"ok": True, "seconds": 9.5, "import_proof": "stored"},
                "jit-probe-passed": {"ok": True, "error": None}}

    spec = warm_run.spec_of("qwen3.8-27b", "train", ("tiny",), None, False, False)
    res = warm_run.warm(spec, str(tmp_path), TABLE, "0.1.0", lambda s: None, child=_stand_in(), probe=bake)
    printed = dict(line.split("=", 1) for line in res.env)
    assert {k: seen[0][k] for k in printed} == printed  # the gate proves under exactly the job's variables
    assert seen[0]["KERNELCHECK_HOME"] == printed["KERNELCHECK_PROOF_DIR"] == str(tmp_path / "kernelcheck")
    text = " ".join(" ".join(render.lines(res, TABLE)).split())
    # wording: warm's proof line, its one test
    assert f"the gate's proofs: {tmp_path}/kernelcheck (import proof stored, JIT probes passed" in text
