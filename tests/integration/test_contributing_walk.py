"""CONTRIBUTING.md "Adding a kernel package" is true: each block it shows is verbatim in the shipped matrix/, and
each one is load-bearing. A copy of matrix/ without one block (KERNELCHECK_MATRIX_DIR) makes kernelcheck notice:
doctor exits 2 naming the file, `models` stops listing the type, or trace exits 2 naming the signature that the
package's kernel names left dangling."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```toml\n# (matrix/[\w.]+)\n(.*?)```", re.S)


def _walk() -> list[tuple[str, str]]:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Adding a kernel package", 1)[1].split("\n## ", 1)[0]
    return BLOCK.findall(section)


def _run(matrix_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELCHECK_MATRIX_DIR": str(matrix_dir), "KERNELCHECK_IMPORT_CACHE": "0"}
    return subprocess.run([sys.executable, "-m", "kernelcheck", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def _doctor(matrix_dir: Path) -> tuple[int, dict | None, str]:
    res = _run(matrix_dir, "doctor", "--model", "mamba", "--mode", "train", "--json")
    try:
        data = json.loads(res.stdout)
    except json.JSONDecodeError:
        data = None
    return res.returncode, data, res.stderr


def _knows_kernels(matrix_dir: Path) -> bool:
    code = "from kernelcheck.core import entry; print('mamba_ssm' in entry.matrix().signatures.fast_kernels)"
    env = {**os.environ, "KERNELCHECK_MATRIX_DIR": str(matrix_dir), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip() == "True"


def test_every_block_of_the_walk_is_verbatim_in_the_shipped_matrix() -> None:
    blocks = _walk()
    assert {f for f, _ in blocks} == {"matrix/packages.toml", "matrix/functions.toml", "matrix/models.toml",
                                      "matrix/signatures.toml"}
    for rel, body in blocks:
        assert body in (ROOT / rel).read_text(encoding="utf-8"), f"CONTRIBUTING's block for {rel} drifted:\n{body}"


def test_each_step_of_the_walk_is_needed(tmp_path: Path) -> None:
    full = tmp_path / "full"
    shutil.copytree(ROOT / "matrix", full)
    code, data, err = _doctor(full)
    assert code == 3 and data is not None, err
    fns = {f["name"]: f for f in data["functions"]}
    assert fns["selective_scan_fn"]["package"] == "mamba-ssm" and fns["selective_scan_fn"]["status"] == "fallback"
    assert fns["mamba_inner_fn"]["package"] == "mamba-ssm"
    assert _knows_kernels(full)
    for i, (rel, body) in enumerate(_walk()):
        copy = tmp_path / f"without{i}"
        shutil.copytree(ROOT / "matrix", copy)
        path = copy / rel.removeprefix("matrix/")
        path.write_text(path.read_text(encoding="utf-8").replace(body, "", 1), encoding="utf-8")
        if rel == "matrix/signatures.toml":  # mamba-ssm-torch-fallback still names the package: trace refuses the
            res = _run(copy, "trace", str(ROOT / "tests" / "data" / "gpu" / "gdn_fast.json.gz"))  # copy, naming it
            assert res.returncode == 2 and "signatures.toml: [[signature]] mamba-ssm-torch-fallback" in res.stderr, \
                f"exit {res.returncode}: {res.stderr}"  # wording: renderer test (exit-2 message)
            continue
        if "[model_types.mamba]" in body:  # doctor still finds the type transformers registers; `models` lists
            listed = json.loads(_run(copy, "models", "--json").stdout)["model_types"]  # only the matrix's types
            assert "mamba" not in {t["model_type"] for t in listed}
            continue
        code, data, err = _doctor(copy)
        # the load names the file and entry the missing block leaves dangling (bad input, never an internal error)
        assert code == 2 and re.search(r"\w+\.toml: \[", err), f"{rel}: exit {code}: {err}"
