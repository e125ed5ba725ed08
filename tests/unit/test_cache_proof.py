"""The JIT cache: warm's env lines, its manifest (round trip), the cache proof (a hit, a miss naming the key part that
differs, the driver that no key holds, TileLang's hit measured, never assumed), and warm's plumbing with a stand-in
run that writes into the folders the environment names, as the JITs do (compiling needs a GPU:
benchmarks/gpu/gpu_warm.sh runs the real thing)."""

from __future__ import annotations

import copy
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kernelcheck.core import entry
from kernelcheck.core.errors import BadInput
from kernelcheck.doctor import cacheproof
from kernelcheck.integrations import jit_caches
from kernelcheck.warm import run as warm_run

TABLE = entry.matrix().table("jit_caches.toml")
NODE = {"arch": "sm_90", "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.65.06", "python": "3.12.3"}
TRITON = {"version": "3.6.0", "triton": "3.6.0+0123456789abcdef", "ptxas": "12.8.93", "triton_env": {},
          "arch": "sm_90", "sources": {"fla-core": "0.6.0", "flash-linear-attention": "0.6.0"}}
TILELANG = {"arch": "sm_90", "tilelang": "0.1.7", "tvm_ffi": "0.1.2", "nvcc": "13.0", "sources": TRITON["sources"]}


def keys() -> dict[str, Any]:
    return copy.deepcopy({"node": NODE, "triton": TRITON, "tilelang": TILELANG,
                          "flash_qla": {"absent": "flash-qla is not installed"},
                          "inductor": {"arch": "sm_90", "torch": "2.11.0+cu130", "cuda": "13.0",
                                       "gpu": NODE["gpu"], "triton": TRITON["triton"]}})


def manifest(tilelang_again: int | None = 0) -> cacheproof.Manifest:
    return cacheproof.Manifest(
        model="qwen3.8-27b", mode="train", shapes=["tiny"], tokens={"tiny": 128}, compile=False, keys=keys(),
        compiled={"triton": {"entries": 41, "bytes": 9_000_000, "seconds": 38.5},
                  "tilelang": {"entries": 3, "bytes": 400_000, "seconds": 12.9}},
        timing={"shapes": {"tiny": {"cold_s": 61.0, "warm_s": 2.0, "tokens": 128}}},
        recheck={"triton": {"entries_added": 0}, **({} if tilelang_again is None else
                                                    {"tilelang": {"entries_added": tilelang_again}})},
        variables={"TRITON_CACHE_DIR": "triton", "TILELANG_CACHE_DIR": "tilelang",
                   "TILELANG_TMP_DIR": "tilelang/tmp"})


def by_id(found: list[Any], fid: str) -> list[Any]:
    return [f for f in found if f.id == fid]


# -- env lines --------------------------------------------------------------------------------------------------------
def test_env_lines_point_every_jit_into_the_folder_and_inductor_only_with_compile(tmp_path: Path) -> None:
    lines = cacheproof.env_lines(str(tmp_path), None, TABLE, False)
    assert lines == [f"TRITON_CACHE_DIR={tmp_path}/triton", f"TILELANG_CACHE_DIR={tmp_path}/tilelang",
                     f"TILELANG_TMP_DIR={tmp_path}/tilelang/tmp", f"KERNELCHECK_PROOF_DIR={tmp_path}/kernelcheck"]
    assert f"TORCHINDUCTOR_CACHE_DIR={tmp_path}/inductor" in cacheproof.env_lines(str(tmp_path), None, TABLE, True)


def test_env_lines_follow_the_folder_where_the_image_has_it() -> None:
    """warm ran in /tmp/bake; the image COPYs the folder to /opt/jit-cache: the lines name /opt/jit-cache."""
    lines = cacheproof.env_lines("/opt/jit-cache", manifest(), TABLE, False)
    assert lines[0] == "TRITON_CACHE_DIR=/opt/jit-cache/triton" and len(lines) == 3


# -- manifest ---------------------------------------------------------------------------------------------------------
def test_the_manifest_round_trips(tmp_path: Path) -> None:
    m = manifest()
    path = cacheproof.write(str(tmp_path), m)
    assert path.name == cacheproof.MANIFEST and m.created
    assert cacheproof.read(str(tmp_path)) == m


@pytest.mark.parametrize("content", [None, "{not json", json.dumps({"format": 99, "keys": {}}),
                                     json.dumps({"format": 1, "keys": {}})])
def test_a_folder_warm_did_not_write_is_bad_input(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / cacheproof.MANIFEST).write_text(content)
    with pytest.raises(BadInput) as exc:
        cacheproof.read(str(tmp_path))
    assert exc.value.exit_code == 2 and "kernelcheck warm" in exc.value.message
    with pytest.raises(BadInput):
        cacheproof.read(str(tmp_path / "absent"))


# -- the proof --------------------------------------------------------------------------------------------------------
def test_the_node_it_was_baked_on_hits_every_jit() -> None:
    found = cacheproof.compare(manifest(), keys(), TABLE)
    assert [(f.id, f.severity) for f in found] == [("jit-cache-hit", "info"), ("jit-cache-hit", "info")]
    assert "38.5 s" in found[0].message  # what a miss costs, from warm's own measurement


@pytest.mark.parametrize(("jit", "part", "value", "named"), [
    ("triton", "ptxas", "13.0.88", "ptxas: 12.8.93 baked, 13.0.88 here"),
    ("triton", "triton", "3.5.1+ffffffffffffffff", "Triton build (version and source hash): 3.6.0+0123456789abcdef "
                                                   "baked, 3.5.1+ffffffffffffffff here"),
    ("triton", "arch", "sm_100", "GPU architecture: sm_90 baked, sm_100 here"),
    ("triton", "sources", {"fla-core": "0.5.2", "flash-linear-attention": "0.6.0"},
     "kernel packages: fla-core 0.6.0 baked, 0.5.2 here"),
    ("triton", "triton_env", {"TRITON_DEFAULT_FP_FUSION": "0"},
     "Triton's cache-invalidating variables: TRITON_DEFAULT_FP_FUSION absent baked, 0 here"),
    ("tilelang", "nvcc", "12.8", "nvcc: 13.0 baked, 12.8 here"),
])
def test_a_changed_key_part_is_a_miss_that_names_it(jit: str, part: str, value: Any, named: str) -> None:
    here = keys()
    here[jit][part] = value
    found = cacheproof.compare(manifest(), here, TABLE)
    miss = by_id(found, "jit-cache-miss")
    assert len(miss) == 1 and miss[0].severity == "warning" and named in miss[0].message
    assert miss[0].reference == jit_caches.layouts(TABLE)[jit].reference
    assert len(by_id(found, "jit-cache-hit")) == 1  # the other JIT still hits


def test_an_edited_manifest_part_is_named_the_same_way(tmp_path: Path) -> None:
    """The GPU script's proof in the other direction: change one part in the manifest file, read it back."""
    cacheproof.write(str(tmp_path), manifest())
    path = tmp_path / cacheproof.MANIFEST
    data = json.loads(path.read_text())
    data["keys"]["triton"]["triton"] = "3.5.0+0000000000000000"
    path.write_text(json.dumps(data))
    miss = by_id(cacheproof.compare(cacheproof.read(str(tmp_path)), keys(), TABLE), "jit-cache-miss")
    assert [f.message.split(":")[0] for f in miss] == ["Triton would miss the baked cache here, its key differs in "
                                                       "Triton build (version and source hash)"]


def test_the_driver_is_in_no_key_a_difference_is_said_but_is_no_miss() -> None:
    here = keys()
    here["node"]["driver"] = "575.57.08"
    found = cacheproof.compare(manifest(), here, TABLE)
    assert [f.id for f in found] == ["jit-cache-hit", "jit-cache-hit", "jit-cache-node-differs"]
    assert "580.65.06 baked, 575.57.08 here" in found[-1].message


@pytest.mark.parametrize(("again", "fid"), [(0, "jit-cache-hit"), (2, "jit-cache-undecided"),
                                            (None, "jit-cache-undecided")])
def test_tilelang_hits_only_where_a_fresh_process_measured_it(again: int | None, fid: str) -> None:
    found = cacheproof.compare(manifest(tilelang_again=again), keys(), TABLE)
    tl = [f for f in found if f.reference in (jit_caches.layouts(TABLE)["tilelang"].reference,
                                              jit_caches.layouts(TABLE)["tilelang"].unstable)]
    assert [f.id for f in tl] == [fid]
    if fid != "jit-cache-hit":
        assert tl[0].reference == "https://github.com/tile-ai/tilelang/issues/2662"


def test_a_part_that_cannot_be_read_here_leaves_the_hit_undecided() -> None:
    here = keys()
    for jit in ("triton", "tilelang"):
        here[jit]["arch"] = None  # no GPU visible, no --arch
    assert [f.id for f in cacheproof.compare(manifest(), here, TABLE)] == ["jit-cache-undecided"] * 2


def test_an_unknown_triton_layout_or_a_failed_read_is_undecided_never_a_crash() -> None:
    here = keys()
    here["triton"] = {"version": "4.0.0", "layout": "Triton 4.0.0 has no triton_key"}
    assert by_id(cacheproof.compare(manifest(), here, TABLE), "jit-cache-undecided")[0].message.startswith(
        "Triton's cache key could not be read")
    assert [f.id for f in cacheproof.compare(manifest(), {"error": "timed out"}, TABLE)] == ["jit-cache-undecided"]


def test_variables_that_would_not_find_the_folder_are_named(tmp_path: Path) -> None:
    m = manifest()
    want = dict(x.split("=", 1) for x in cacheproof.env_lines(str(tmp_path), m, TABLE, False))
    assert cacheproof.not_found(str(tmp_path), m, want, TABLE) == []
    found = cacheproof.not_found(str(tmp_path), m, {**want, "TRITON_CACHE_DIR": "/root/.triton/cache"}, TABLE)
    assert [f.id for f in found] == ["jit-cache-not-found"]
    assert "TRITON_CACHE_DIR is '/root/.triton/cache'" in found[0].message
    assert f"TRITON_CACHE_DIR={tmp_path}/triton" in str(found[0].fix)
    m.variables = {**m.variables, "KERNELCHECK_HOME": "kernelcheck"}  # warmed before KERNELCHECK_PROOF_DIR existed
    assert cacheproof.env_lines(str(tmp_path), m, TABLE, False)[-1] == f"KERNELCHECK_PROOF_DIR={tmp_path}/kernelcheck"
    found = cacheproof.not_found(str(tmp_path), m, want, TABLE)  # the JIT caches found, the gate's proofs not
    assert [f.id for f in found] == ["jit-cache-not-found"] and "KERNELCHECK_PROOF_DIR is unset" in found[0].message
    assert "proves again what warm proved" in found[0].message and "default folders" not in found[0].message
    assert f"KERNELCHECK_PROOF_DIR={tmp_path}/kernelcheck" in str(found[0].fix)


# -- Triton's key, read the way the installed version computes it -----------------------------------------------------
def _fake_triton(monkeypatch: pytest.MonkeyPatch, with_key: bool) -> None:
    mods = {n: types.ModuleType(n) for n in ("triton", "triton.runtime", "triton.runtime.cache", "triton._C",
                                             "triton._C.libtriton", "triton.backends", "triton.backends.nvidia",
                                             "triton.backends.nvidia.compiler", "triton.compiler",
                                             "triton.compiler.compiler")}
    mods["triton"].__version__ = "3.6.0"  # type: ignore[attr-defined]
    if with_key:
        mods["triton.runtime.cache"].triton_key = lambda: "3.6.0abc-def"  # type: ignore[attr-defined]
    mods["triton._C.libtriton"].get_cache_invalidating_env_vars = lambda: {"TRITON_F": "1"}  # type: ignore[attr-defined]
    mods["triton.backends.nvidia.compiler"].get_ptxas_version = (  # type: ignore[attr-defined]
        lambda arch: "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 12.8, V12.8.93\n")
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)


def test_triton_key_parts_are_read_from_where_the_installed_triton_computes_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_triton(monkeypatch, with_key=True)
    got = jit_caches._triton_keys("sm_90")
    assert got["triton"].startswith("3.6.0+") and got["ptxas"] == "12.8.93" and got["triton_env"] == {"TRITON_F": "1"}
    _fake_triton(monkeypatch, with_key=False)
    got = jit_caches._triton_keys("sm_90")
    assert "triton_key" in got["layout"] and "triton" not in got


# -- warm's plumbing, with a stand-in for the run ---------------------------------------------------------------------
def _stand_in(tilelang_each_process: int = 0) -> Any:
    """A run that writes into the folders its environment names, as Triton and TileLang do: Triton a folder per
    kernel hash (the same hashes again: no new entry), TileLang `tilelang_each_process` new entries per process."""
    calls: list[dict[str, Any]] = []

    def child(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
        calls.append({"spec": dict(spec), "env": dict(env)})
        for h in ("a1", "b2", "c3"):
            Path(env["TRITON_CACHE_DIR"], h).mkdir(parents=True, exist_ok=True)
            Path(env["TRITON_CACHE_DIR"], h, "k.cubin").write_bytes(b"x" * 1000)
        for _ in range(tilelang_each_process):
            Path(env["TILELANG_CACHE_DIR"], f"k{len(calls)}-{_}").mkdir(parents=True)
        return {"device": "cuda:0", "gpu": NODE["gpu"], "keys": keys(), "missing": [],
                "timers": {"seconds": {"triton": 30.0, "triton-autotune": 8.5, "tilelang": 4.0}},
                "shapes": {s: {"tokens": 128, "steps": ["train", "prefill", "decode"], "cold_s": 60.0,
                               "warm_s": 2.0} for s in spec["shapes"]}}
    child.calls = calls  # type: ignore[attr-defined]
    return child


def m_env(res: Any) -> dict[str, str]:
    return dict(line.split("=", 1) for line in res.env)


def test_warm_writes_into_the_folder_records_keys_and_measures_the_fresh_process(tmp_path: Path) -> None:
    child = _stand_in()
    spec = warm_run.spec_of("qwen3.8-27b", "train", ("tiny",), None, False, False)
    before = dict(os.environ)
    probed: list[str] = []

    def probe(first: dict[str, Any], env: dict[str, str], say: Any, spec: Any) -> dict[str, Any]:
        probed.append(env["TRITON_CACHE_DIR"])
        Path(env["TRITON_CACHE_DIR"], "probe").mkdir()  # verify's probe kernel, cached in the folder too
        return {"static": {"ok": True, "seconds": 1.5}}

    res = warm_run.warm(spec, str(tmp_path / "cache"), TABLE, "0.1.0", lambda s: None, child=child, probe=probe)
    assert probed == [str(tmp_path / "cache" / "triton")]
    assert m_env(res)["KERNELCHECK_PROOF_DIR"] == str(tmp_path / "cache" / "kernelcheck")  # the gate's own proofs
    assert dict(os.environ) == before  # the variables went to the children only
    assert [c["env"]["TRITON_CACHE_DIR"] for c in child.calls] == [str(tmp_path / "cache" / "triton")] * 2
    assert child.calls[1]["spec"]["repeat"] is False  # the second is the fresh-process check, once per shape
    m = cacheproof.read(str(tmp_path / "cache"))
    assert m == res.manifest
    assert m.compiled["triton"]["entries"] == 4 and m.compiled["triton"]["seconds"] == 38.5  # 3 kernels + probe
    assert m.timing["probes_s"] == {"static": 1.5}
    assert m.recheck == {"triton": {"entries_added": 0}, "tilelang": {"entries_added": 0}}
    assert [f.id for f in cacheproof.compare(m, keys(), TABLE)] == ["jit-cache-hit"]  # TileLang compiled nothing


def test_a_tilelang_that_compiles_again_in_a_fresh_process_is_not_called_a_hit(tmp_path: Path) -> None:
    spec = warm_run.spec_of("qwen3.8-27b", "train", ("tiny",), None, False, False)
    res = warm_run.warm(spec, str(tmp_path), TABLE, "0.1.0", lambda s: None, child=_stand_in(2),
                        probe=lambda *a: {})
    assert res.manifest is not None and res.manifest.recheck["tilelang"] == {"entries_added": 2}
    found = cacheproof.compare(res.manifest, keys(), TABLE)
    assert [f.id for f in found] == ["jit-cache-hit", "jit-cache-undecided"]


def test_a_run_that_fails_writes_no_manifest(tmp_path: Path) -> None:
    res = warm_run.warm(warm_run.spec_of("m", "train", ("tiny",), None, False, False), str(tmp_path), TABLE, "0",
                        lambda s: None, child=lambda spec, env: {"error": "ValueError: boom"})
    assert res.error == "ValueError: boom" and not (tmp_path / cacheproof.MANIFEST).exists()


@pytest.mark.parametrize(("shapes", "tokens"), [(("huge",), None), ((), None), (("tiny",), 0)])
def test_bad_shapes_or_tokens_are_bad_input(shapes: tuple[str, ...], tokens: int | None) -> None:
    with pytest.raises(BadInput):
        warm_run.spec_of("m", "train", shapes, tokens, False, False)


# -- the command line -------------------------------------------------------------------------------------------------
def test_print_env_runs_nothing_and_prints_an_env_file(tmp_path: Path) -> None:
    from kernelcheck.cli.main import main

    res = CliRunner().invoke(main, ["warm", "--cache-dir", str(tmp_path), "--print-env"])
    assert res.exit_code == 0 and res.stdout.splitlines()[0] == f"TRITON_CACHE_DIR={tmp_path}/triton"
    res = CliRunner().invoke(main, ["warm", "--cache-dir", str(tmp_path), "--print-env", "--json"])
    from tests.unit.test_json_schemas import validate

    out = json.loads(res.stdout)
    assert validate(out) == "warm" and out["manifest"] is None and len(out["env"]) == 4


@pytest.mark.parametrize("args", [["warm", "--cache-dir", "X"], ["warm", "--cache-dir", "X", "--model", "m",
                                                                 "--shape", "huge"],
                                  ["doctor", "--model", "qwen3.8-27b", "--cache-dir", "NOPE"]])
def test_usage_errors_exit_2_with_a_message(args: list[str], tmp_path: Path) -> None:
    from kernelcheck.cli.main import main

    res = CliRunner().invoke(main, [a.replace("NOPE", str(tmp_path / "nope")) for a in args])
    assert res.exit_code == 2 and "Traceback" not in res.output


# -- the check's shape autotunes one working config (the real Triton: tests/integration/test_warm_keys.py) ------------
def test_first_config_only_changes_nothing_without_triton_or_with_another_layout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    with jit_caches.first_config_only() as on:
        assert on is False
    mod = types.ModuleType("triton.runtime.autotuner")
    mod.Autotuner = type("Autotuner", (), {})  # type: ignore[attr-defined]  # no _bench: another layout
    for name, m in {"triton": types.ModuleType("triton"), "triton.runtime": types.ModuleType("triton.runtime"),
                    "triton.runtime.autotuner": mod}.items():
        monkeypatch.setitem(sys.modules, name, m)
    sys.modules["triton.runtime"].autotuner = mod  # type: ignore[attr-defined]
    with jit_caches.first_config_only() as on:
        assert on is False and not hasattr(mod.Autotuner, "_bench")
    with jit_caches.first_config_only(False) as on:
        assert on is False


def test_a_folder_warmed_without_a_gpu_holds_nothing_to_hit() -> None:
    m = manifest()
    m.compiled = {j: {**v, "entries": 0} for j, v in m.compiled.items()}
    m.keys["node"]["gpu"] = None
    found = cacheproof.compare(m, keys(), TABLE)
    assert [f.id for f in found] == ["jit-cache-undecided"] and "no GPU" in found[0].message


def test_warms_json_and_text_from_a_run(tmp_path: Path) -> None:
    from kernelcheck.commands.warm import WarmRun
    from kernelcheck.core.status import Verdict
    from tests.unit.test_json_schemas import validate

    spec = warm_run.spec_of("qwen3.8-27b", "train", ("tiny",), None, False, False)
    res = warm_run.warm(spec, str(tmp_path), TABLE, "0.1.0", lambda s: None, child=_stand_in(), probe=lambda *a: {})
    run = WarmRun(res.cache_dir, res.env, Verdict.READY, res, TABLE)
    out = run.to_json()
    assert validate(out) == "warm" and out["manifest"]["compiled"]["triton"]["entries"] == 3
    text = run.render(False)
    assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith(("  ENV", "  export")))
    assert f"  ENV TRITON_CACHE_DIR={tmp_path}/triton" in text.splitlines()
