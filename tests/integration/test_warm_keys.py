"""The cache proof with a real Triton (3.6.0's wheel, which reads its key and runs its bundled ptxas without a GPU):
the key parts read the way that version computes them, and `doctor --cache-dir` in both directions - a hit for the
node the manifest was written for, a miss naming the part after one part is changed (the manifest's Triton build,
or a cache-invalidating variable of the job's). Compiling a kernel needs a GPU: benchmarks/gpu/gpu_warm.sh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core import entry
from kernelcheck.doctor import cacheproof
from tests import envs

pytestmark = pytest.mark.integration
TABLE = entry.matrix().table("jit_caches.toml")


@pytest.fixture(scope="module")
def triton_site() -> Path:
    return envs.site("triton==3.6.0")


def _keys(site: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(envs.REPO)]), **(env or {})}
    res = subprocess.run([sys.executable, "-m", "kernelcheck.integrations.jit_caches", "sm_90"], capture_output=True,
                         text=True, env=e, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out: dict[str, Any] = json.loads(res.stdout.splitlines()[-1])
    return out


def _manifest(folder: Path, keys: dict[str, Any]) -> None:
    (folder / "triton" / "abc").mkdir(parents=True)
    cacheproof.write(str(folder), cacheproof.Manifest(
        model="qwen3.8-27b", mode="train", shapes=["tiny"], tokens={"tiny": 128}, compile=False, keys=keys,
        compiled={"triton": {"entries": 1, "bytes": 10, "seconds": 30.0}}, recheck={"triton": {"entries_added": 0}},
        variables={"TRITON_CACHE_DIR": "triton", "TILELANG_CACHE_DIR": "tilelang",
                   "TILELANG_TMP_DIR": "tilelang/tmp"}))


def test_triton_3_6_key_parts_are_read_and_a_variable_in_its_key_changes_them(triton_site: Path) -> None:
    first, again = _keys(triton_site), _keys(triton_site)
    t = first["triton"]
    assert t["version"] == "3.6.0" and t["triton"].startswith("3.6.0+") and "layout" not in t
    assert t["ptxas"] and t["ptxas"][0].isdigit()  # the bundled ptxas ran
    assert again["triton"] == t  # the same installation, the same key
    changed = _keys(triton_site, {"TRITON_DEFAULT_FP_FUSION": "0"})["triton"]
    assert changed["triton_env"] != t["triton_env"]
    m = cacheproof.Manifest(model="m", mode="train", shapes=["tiny"], tokens={}, compile=False, keys=first,
                            compiled={"triton": {"entries": 1, "bytes": 1, "seconds": 1.0}})
    miss = [f for f in cacheproof.compare(m, {**first, "triton": changed}, TABLE) if f.id == "jit-cache-miss"]
    assert len(miss) == 1 and "TRITON_DEFAULT_FP_FUSION absent baked" in miss[0].message


def test_doctor_cache_dir_says_hit_then_names_the_changed_part(triton_site: Path, tmp_path: Path) -> None:
    _manifest(tmp_path, _keys(triton_site))
    env = {"TRITON_CACHE_DIR": str(tmp_path / "triton"), "TILELANG_CACHE_DIR": str(tmp_path / "tilelang"),
           "TILELANG_TMP_DIR": str(tmp_path / "tilelang" / "tmp")}
    args = ["doctor", "--model", "qwen3.8-27b", "--arch", "9.0", "--cache-dir", str(tmp_path)]
    _code, hit = envs.run_json(args, triton_site, env=env)
    cache = [f for f in hit["findings"] if f["id"].startswith("jit-cache")]
    assert [f["id"] for f in cache] == ["jit-cache-hit"], cache
    path = tmp_path / cacheproof.MANIFEST
    data = json.loads(path.read_text())
    data["keys"]["triton"]["triton"] = "3.5.1+0000000000000000"  # baked by another Triton
    path.write_text(json.dumps(data))
    _code, miss = envs.run_json(args, triton_site, env=env)
    cache = [f for f in miss["findings"] if f["id"].startswith("jit-cache")]
    assert [f["id"] for f in cache] == ["jit-cache-miss"]
    assert "3.5.1+0000000000000000 baked, 3.6.0+" in cache[0]["message"]
    _code, lost = envs.run_json(args, triton_site)  # the job's variables do not point at the folder
    assert "jit-cache-not-found" in [f["id"] for f in lost["findings"]]


_AUTOTUNE = """
import json
from triton import Config
from triton.runtime.autotuner import Autotuner
from kernelcheck.integrations import jit_caches

ran = []
def _base(x, n): pass
class Fn:
    fn = staticmethod(_base)
    def run(self, *args, **kw):
        ran.append(kw.get("BLOCK"))
def bench(kernel_call, quantiles):  # BLOCK 32 fails as out of resources does: the autotuner's infinite timing
    kernel_call()
    return [float("inf")] * 3 if ran[-1] == 32 else [1.0, 1.0, 1.0]
def tuned():
    t = Autotuner(Fn(), ["x", "n"], [Config({"BLOCK": b}) for b in (32, 64, 128, 256)], ["n"], None, None,
                  do_bench=bench)
    t.run(0, 10)
    out = list(ran)
    ran.clear()
    return out
out = {"full": tuned()}
with jit_caches.first_config_only() as on:
    out["trimmed"], out["on"] = tuned(), on
out["after"] = tuned()
print(json.dumps(out))
"""


def test_a_check_shape_takes_the_first_working_config_of_triton_3_6s_autotuner(triton_site: Path) -> None:
    """verify tiny (and warm for it): each autotuned kernel compiles configs only until one works, not all."""
    e = {**os.environ, "PYTHONPATH": os.pathsep.join([str(triton_site), str(envs.REPO)])}
    res = subprocess.run([sys.executable, "-c", _AUTOTUNE], capture_output=True, text=True, env=e, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.splitlines()[-1])
    assert out["full"] == [32, 64, 128, 256, 64]  # every config benchmarked, then the best runs
    assert out["on"] is True and out["trimmed"] == [32, 64, 64]  # 32 fails, 64 works: 128 and 256 never compile
    assert out["after"] == out["full"]  # restored when the check ends
