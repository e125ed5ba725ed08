"""Every file kernelcheck reads from the environment has one checked reader: the install manifest
(KERNELCHECK_MANIFEST, a --target folder's .kernelcheck-manifest.json), the matrix folder (KERNELCHECK_MATRIX_DIR)
and the team's measured steps (KERNELCHECK_MEASUREMENTS). A bad one is BadInput (exit 2) naming the file and the
key; the tests assert the key and the exit code, the wording once."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import manifest, matrix, matrix_shape
from kernelcheck.core.errors import BadInput
from kernelcheck.doctor import cost

REPO = Path(__file__).resolve().parents[2]
DEEP = "[" * 100_000 + "]" * 100_000


# -- 1: the install manifest ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("data,key", [
    (b"\x89PNG\xff\xfe\x00garbage", "(whole file)"),
    (b"", "(whole file)"),
    (b"{nope", "(whole file)"),
    (DEEP.encode(), "(whole file)"),
    (b"[1, 2]", "(top level)"),
    (b'{"packages": ["fla-core"]}', "packages"),
    (b'{"packages": {"fla-core": "oops"}}', "packages.fla-core"),
    (b'{"packages": {"fla-core": {"version": 6}}}', "packages.fla-core.version"),
    (b'{"packages": {"fla-core": {"so_arches": "sm_90"}}}', "packages.fla-core.so_arches"),
    (b'{"packages": {"fla-core": {"so_arches": [90]}}}', "packages.fla-core.so_arches"),
])
def test_a_corrupt_manifest_is_bad_input_naming_the_file_and_the_key(tmp_path: Path, monkeypatch, data: bytes,
                                                                      key: str) -> None:
    p = tmp_path / "manifest.json"
    p.write_bytes(data)
    monkeypatch.setenv("KERNELCHECK_MANIFEST", str(p))
    with pytest.raises(BadInput) as exc:
        manifest.read()
    assert f"{p}: {key}:" in exc.value.message  # wording: renderer test (the exit-2 message names file and key)
    with pytest.raises(BadInput):
        manifest.built_nvcc()  # what doctor reads: exit 2, never a TypeError in a gate


def test_a_corrupt_manifest_in_a_target_folder_on_sys_path_is_bad_input(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELCHECK_MANIFEST", str(tmp_path / "none.json"))
    (tmp_path / manifest.TARGET_NAME).write_text('{"packages": {"causal_conv1d": {"nvcc": ["13.0"]}}}')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BadInput) as exc:
        manifest.read()
    assert "packages.causal_conv1d.nvcc" in exc.value.message  # wording: renderer test (names the key)


def test_a_missing_manifest_is_empty_and_a_good_one_reads_back(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "m.json"
    monkeypatch.setenv("KERNELCHECK_MANIFEST", str(p))
    assert manifest.read() == {"packages": {}}
    manifest.record("causal_conv1d", {"distribution": "causal-conv1d", "version": "1.7.0", "nvcc": "13.0",
                                      "so_arches": ["sm_90"], "torch": None})
    assert manifest.built_nvcc() == {"causal_conv1d": "13.0"}


def test_an_install_refuses_a_corrupt_manifest_before_pip_changes_anything(tmp_path: Path) -> None:
    p = tmp_path / "m.json"
    p.write_text('{"packages": {"x": 1}}')
    with pytest.raises(BadInput):
        manifest.check(p)
    manifest.check(tmp_path / "absent.json")  # none yet: fine


def test_the_manifest_message_is_one_paragraph_with_the_fix(tmp_path: Path, monkeypatch) -> None:
    p = tmp_path / "m.json"
    p.write_text('{"packages": {"fla-core": "oops"}}')
    monkeypatch.setenv("KERNELCHECK_MANIFEST", str(p))
    with pytest.raises(BadInput) as exc:
        manifest.read()
    msg = exc.value.message
    assert "\n" not in msg and "delete the file" in msg and "KERNELCHECK_MANIFEST" in msg  # wording: renderer test


# -- 2: the matrix folder --------------------------------------------------------------------------------------------

def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "m"
    shutil.copytree(REPO / "matrix", root, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return root


def _drop_tokens(root: Path) -> None:
    text = (root / "verify.toml").read_text()
    start = text.index("[tokens]")
    end = text.index("[tolerance]")
    (root / "verify.toml").write_text(text[:start] + text[end:])


MATRIX_CASES = {
    "models.toml malformed": (lambda r: (r / "models.toml").open("a").write("[[[oops\n"), "models.toml",
                              "(whole file)"),
    "models.toml binary": (lambda r: (r / "models.toml").write_bytes(b"\x89\xff\x00"), "models.toml", "(whole file)"),
    "models.toml empty": (lambda r: (r / "models.toml").write_text(""), "models.toml", "families"),
    "models.toml wrong-typed": (lambda r: (r / "models.toml").write_text("families = 3\n"), "models.toml",
                                "families"),
    "models.toml alias key unknown": (lambda r: (r / "models.toml").open("a").write('[aliases."x"]\nid = "a/b"\n'
                                                                                   'confg = "c"\n'),
                                      "models.toml", "aliases.x.confg"),
    "packages.toml missing": (lambda r: (r / "packages.toml").unlink(), "packages.toml", "(whole file)"),
    "functions.toml missing": (lambda r: (r / "functions.toml").unlink(), "functions.toml", "(whole file)"),
    "configs/ missing": (lambda r: shutil.rmtree(r / "configs"), "configs/qwen3.8-27b.json", "(whole file)"),
    "config JSON broken": (lambda r: (r / "configs" / "qwen3.8-27b.json").write_text("{oops"),
                           "configs/qwen3.8-27b.json", "(whole file)"),
    "config JSON without model_type": (lambda r: (r / "configs" / "qwen3.8-27b.json").write_text("[]"),
                                       "configs/qwen3.8-27b.json", "model_type"),
    "verified.toml malformed": (lambda r: (r / "verified.toml").open("a").write("[[[x\n"), "verified.toml",
                                "(whole file)"),
    "verified.toml measured zero": (lambda r: (r / "verified.toml").open("a").write(
        '[[measured]]\nmodel_type = "x"\nbound_tokens_per_s = 1.0\nreference_tokens_per_s = 0\n'),
        "verified.toml", "measured[1].reference_tokens_per_s"),
    "packing.toml malformed": (lambda r: (r / "packing.toml").open("a").write("[[[x\n"), "packing.toml",
                               "(whole file)"),
    "gpus.toml malformed": (lambda r: (r / "gpus.toml").open("a").write("[[[x\n"), "gpus.toml", "(whole file)"),
    "gpus.toml not a capability": (lambda r: (r / "gpus.toml").write_text('[capabilities]\nknown = ["nine"]\n'),
                                   "gpus.toml", "capabilities.known[0]"),
    "verify.toml without tokens": (_drop_tokens, "verify.toml", "tokens"),
    "verify.toml step tokens negative": (lambda r: (r / "verify.toml").write_text(
        (r / "verify.toml").read_text().replace("tokens = { tiny = 64", "tokens = { tiny = -64")),
        "verify.toml", "step.tokens.tiny"),
}


@pytest.mark.parametrize("case", sorted(MATRIX_CASES))
def test_a_bad_matrix_folder_is_bad_input_naming_the_file_and_key(tmp_path: Path, monkeypatch, case: str) -> None:
    from kernelcheck.core import gpu

    change, name, key = MATRIX_CASES[case]
    root = _copy(tmp_path)
    change(root)
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(root))
    with pytest.raises(BadInput) as exc:
        gpu.known(m=matrix.load())  # the folder's own files, read from the matrix it gives
    assert f"{root / name}: {key}:" in exc.value.message  # wording: renderer test (names file and key)


@pytest.mark.parametrize("args", [["models"], ["doctor", "--model", "qwen3.8-27b", "--no-hub"],
                                  ["install", "--dry-run", "--arch", "9.0", "--model", "qwen3.8-27b"],
                                  ["verify", "--model", "qwen3.8-27b"]])
def test_every_command_refuses_a_bad_matrix_folder_with_exit_2(tmp_path: Path, monkeypatch, args: list[str]) -> None:
    root = _copy(tmp_path)
    (root / "models.toml").open("a").write("[[[oops\n")
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(root))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, (res.output, res.exception)
    assert "internal error" not in res.output and str(root / "models.toml") in res.output


def test_an_intact_copy_of_the_matrix_loads_as_the_shipped_one(tmp_path: Path, monkeypatch) -> None:
    shipped = matrix.load()
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(_copy(tmp_path)))
    assert matrix.load().model_types == shipped.model_types


def test_every_shipped_matrix_file_has_its_shape() -> None:
    for name in matrix_shape.SHAPES:
        matrix._load(name, REPO / "matrix")  # raises on a shape the shipped data does not have


def test_the_matrix_message_names_the_way_back_to_the_shipped_data(tmp_path: Path) -> None:
    msg = matrix_shape.bad(tmp_path / "models.toml", "families", "missing").message
    assert "\n" not in msg and "unset KERNELCHECK_MATRIX_DIR" in msg  # wording: renderer test


# -- 3: measured steps ----------------------------------------------------------------------------------------------

GOOD = {"model_type": "qwen3_5", "bound_tokens_per_s": 3000.0, "reference_tokens_per_s": 600.0, "gpu": "H200"}


@pytest.mark.parametrize("line,key", [
    (json.dumps(GOOD | {"reference_tokens_per_s": 0}), "reference_tokens_per_s"),
    (json.dumps(GOOD | {"reference_tokens_per_s": -5}), "reference_tokens_per_s"),
    (json.dumps(GOOD | {"bound_tokens_per_s": math.inf}), "line 1"),  # Infinity: not a JSON number
    ('{"model_type": "qwen3_5", "bound_tokens_per_s": 1e400, "reference_tokens_per_s": 5}', "bound_tokens_per_s"),
    (json.dumps(GOOD | {"bound_tokens_per_s": math.nan}), "line 1"),
    (json.dumps(GOOD | {"bound_tokens_per_s": "fast"}), "bound_tokens_per_s"),
    (json.dumps(GOOD | {"bound_tokens_per_s": True}), "bound_tokens_per_s"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "model_type"}), "model_type"),
    (json.dumps(GOOD | {"gpu": 7}), "gpu"),
    ("[1, 2]", "line 1"),
    ("not json", "line 1"),
    (DEEP, "line 1"),
])
def test_a_bad_measured_step_is_bad_input_naming_the_line_and_key(tmp_path: Path, monkeypatch, line: str,
                                                                   key: str) -> None:
    rec = tmp_path / "m.jsonl"
    rec.write_text(line + "\n")
    monkeypatch.setenv("KERNELCHECK_MEASUREMENTS", str(rec))
    with pytest.raises(BadInput) as exc:
        cost.measurements(m=matrix.load())
    assert f"{rec}: line 1" in exc.value.message and key in exc.value.message  # wording: renderer test (line, key)


def test_good_measured_steps_are_read_and_blank_lines_skipped(tmp_path: Path, monkeypatch) -> None:
    rec = tmp_path / "m.jsonl"
    rec.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(GOOD | {"model_type": None}) + "\n")
    monkeypatch.setenv("KERNELCHECK_MEASUREMENTS", str(rec))
    mine = [m for m in cost.measurements(m=matrix.load()) if m.get("recorded_in") == str(rec)]
    assert [m["model_type"] for m in mine] == ["qwen3_5", None]


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_measurements_variable_naming_no_file_is_a_finding_not_silence(tmp_path: Path, monkeypatch,
                                                                         kind: str) -> None:
    target = tmp_path / "m.jsonl"
    if kind == "folder":
        target.mkdir()
    monkeypatch.setenv("KERNELCHECK_MEASUREMENTS", str(target))
    f = cost.record_unread()
    assert f is not None and f.id == "measurements-unread" and f.severity == "warning"
    assert cost.measurements(m=matrix.load())  # the shipped ones still count
    monkeypatch.delenv("KERNELCHECK_MEASUREMENTS")
    assert cost.record_unread() is None


# -- 4: verify without a torch that imports --------------------------------------------------------------------------

@pytest.mark.parametrize("raised", [ImportError("No module named 'torch'"), RuntimeError("boom"), SystemExit("no")])
def test_verify_leaves_a_torch_that_does_not_import_to_the_static_check(monkeypatch, raised: BaseException) -> None:
    """verify asked torch for the device before the static check, so a torch whose import raises was an internal
    error (exit 1) where doctor says 4; now the static check judges it, as doctor does."""
    from kernelcheck.verify import run

    def device() -> tuple[str, str]:
        raise raised

    monkeypatch.setattr(run, "_device", device)
    assert run._early_device("tiny") is None
    monkeypatch.setattr(run, "_gpu_device_files", lambda: False)
    assert run._early_device("full") == "cpu"


# -- kernelcheck's own import-proof cache under KERNELCHECK_HOME: a corrupt file is no proof, never exit 1 ----------

@pytest.mark.parametrize("text", [DEEP, "{nope", '{"format": 1, "key": "k", "children": ["x"]}'])
def test_a_corrupt_import_proof_is_no_proof(tmp_path: Path, monkeypatch, text: str) -> None:
    from kernelcheck.doctor import proofcache

    monkeypatch.setenv("KERNELCHECK_HOME", str(tmp_path))
    proofcache.folder().mkdir(parents=True)
    (proofcache.folder() / "k.json").write_text(text.replace('"format": 1', f'"format": {proofcache.FORMAT}'))
    assert proofcache.load("k") is None


# -- deeply nested TOML, and --version with a broken matrix folder ----------------------------------------------

@pytest.mark.parametrize("name", ["models.toml", "data.toml", "packages.toml"])
def test_deeply_nested_toml_in_the_matrix_folder_is_bad_input(tmp_path: Path, monkeypatch, name: str) -> None:
    """tomllib reads nested arrays recursively: a RecursionError was exit 1."""
    root = tmp_path / "m"
    shutil.copytree(REPO / "matrix", root, ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / name, "a", encoding="utf-8") as fh:
        fh.write("\nnested = " + "[" * 100_000 + "]" * 100_000 + "\n")
    monkeypatch.setenv("KERNELCHECK_MATRIX_DIR", str(root))
    for cached in (matrix._checked_root, matrix._load_matrix, matrix._load_signatures):
        cached.cache_clear()
    try:
        res = CliRunner().invoke(main, ["models"])
        assert res.exit_code == 2 and f"{root / name}" in res.output, res.output
        version = CliRunner().invoke(main, ["--version"])  # printed a traceback; now the version, date unknown
        assert version.exit_code == 0 and version.output.startswith("kernelcheck ") and version.exception is None
    finally:
        for cached in (matrix._checked_root, matrix._load_matrix, matrix._load_signatures):
            cached.cache_clear()


@pytest.mark.parametrize("device,field", [("cuda", "device"), ({"type": 5}, "device.type"), ([1], "device")])
def test_compare_rejects_a_device_that_is_not_the_schemas_object(tmp_path: Path, device: object, field: str) -> None:
    rep = {"schema": "kernelcheck.report/1", "command": "doctor", "verdict": "fallback", "exit_code": 3,
           "environment": {"python": "3.11", "torch": {"version": "2.13.0", "cuda": None}, "gpus": [], "packages": {}},
           "functions": [{"name": "f", "package": "p", "status": "fallback", "implementation": "torch"}],
           "findings": [], "device": device}
    (tmp_path / "a.json").write_text(json.dumps(rep))
    res = CliRunner().invoke(main, ["compare", str(tmp_path / "a.json")])
    assert res.exit_code == 2 and f'field "{field}"' in res.output, res.output
