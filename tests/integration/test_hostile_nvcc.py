"""A hostile or broken nvcc is bounded: `nvcc --version` that writes forever is ended (not read whole into memory),
the TileLang JIT probe's compile has a time limit, a hanging nvcc's process tree is ended with the probe and leaves
no kc-jit-* folder in TMPDIR, and an "nvcc" that exits 0 without writing the object file is not compiling. Real
processes: shell scripts standing in for nvcc, a stand-in `tilelang` package (empty) so the probe reaches nvcc."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernelcheck.core import environment
from kernelcheck.doctor import jit_child, jitprobe

pytestmark = pytest.mark.integration


def _nvcc(home: Path, body: str) -> Path:
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n" + body + "\n")
    nvcc.chmod(0o755)
    return nvcc


def test_an_nvcc_version_that_writes_forever_is_ended(tmp_path: Path) -> None:
    nvcc = _nvcc(tmp_path / "cuda", "yes 'Cuda compilation tools, release 13.0, V13.0.48'")
    t = time.monotonic()
    assert environment._run([str(nvcc), "--version"]) is None  # ended after 1 MiB; was read whole: 8 GiB in 14 s
    environment.nvcc_version(str(tmp_path / "cuda"))  # the next candidate (nvcc on PATH) may answer
    assert time.monotonic() - t < 8


def test_an_nvcc_that_exits_0_without_the_object_is_not_compiling(tmp_path: Path) -> None:
    nvcc = _nvcc(tmp_path / "cuda", "exit 0")
    got = jit_child._nvcc_compile(str(nvcc), "sm_90", [])
    assert got["ok"] is False and "without writing the object file" in str(got["error"])
    real = _nvcc(tmp_path / "ok", 'while [ "$1" != "-o" ]; do shift; done; echo obj > "$2"')  # writes it: compiles
    assert jit_child._nvcc_compile(str(real), "sm_90", [])["ok"] is True


def test_a_hanging_nvcc_is_ended_with_its_tree_and_leaves_no_temporary_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    nvcc = _nvcc(tmp_path / "cuda", f"sleep 1000 & echo $! >> {pids}; echo $$ >> {pids}; wait")
    (tmp_path / "site" / "tilelang").mkdir(parents=True)
    (tmp_path / "site" / "tilelang" / "__init__.py").write_text("")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TMPDIR", str(tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read afresh in this process too
    tc = jitprobe.Toolchain(str(tmp_path / "cuda"), "CUDA_HOME", str(nvcc), (), None)
    t = time.monotonic()
    got = jitprobe.run_probe("tilelang", "compile", "sm_90", tc, timeout=8)
    assert got.get("timed_out") and time.monotonic() - t < 30, got
    deadline = time.monotonic() + 5
    started = [int(p) for p in pids.read_text().split()]
    while any(Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split()[2]
              for p in started if Path(f"/proc/{p}").exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = [p for p in started if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"]
    assert alive == [], f"nvcc's processes {alive} outlived the probe"
    assert [p.name for p in tmp.iterdir()] == []  # no kc-jit-* (nor the probe's own folder) left
