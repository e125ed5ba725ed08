"""--verify-bundle's decisions from what kernels' offline checks returned (bundle_probe's answer), and what a file
that is not a bundle gives. The checks themselves run against the real kernels in
tests/integration/test_hub_bundle.py."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from kernelcheck.core.errors import BadInput
from kernelcheck.hub import bundle_verify
from kernelcheck.hub.bundle import SCHEMA, BundleReport

COMMIT = "a" * 40
VARIANT = "torch211-cxx11-cu130-x86_64-linux"


def _manifest(*deps: tuple[str, int | None, str | None]) -> dict[str, Any]:
    e = {"repo_id": "kernels-community/activation", "version": 1, "revision": None, "commit": COMMIT,
         "variant": VARIANT, "status": "bundled", "required_by": "SiLU", "why": {}, "files": {}}
    return {"schema": SCHEMA, "model": "llama", "mode": "train", "device": "cuda",
            "target": {"torch": "2.11", "cuda": "13.0"}, "entries": [e], "job_environment": {"HF_HUB_OFFLINE": "1"}}


def _probe(**over: Any) -> dict[str, Any]:
    p = {"repo_id": "kernels-community/activation", "version": 1, "variant": VARIANT, "present": True,
         "cached_commit": COMMIT, "latest_cached": 1, "latest_commit": COMMIT, "lookup_error": None,
         "resolved": VARIANT, "rejected": {}, "digest": {"status": "ok", "detail": ""},
         "signature": {"status": "ok", "detail": ""}, "receipt": {"status": "ok", "detail": ""}, "depends": []}
    p.update(over)
    return {"kernels": "0.19.1", "all_latest": {"set": False, "honoured": True}, "entries": [p]}


def _ids(probe: dict[str, Any], manifest: dict[str, Any] | None = None) -> dict[str, str]:
    _, findings = bundle_verify.evaluate(manifest or _manifest(), probe, {})
    return {f.id: str(f.severity) for f in findings}


def test_every_check_passing_is_ready() -> None:
    assert _ids(_probe()) == {}


def test_a_kernel_dependency_outside_the_bundle_is_broken() -> None:
    assert _ids(_probe(depends=[["kernels-community/triton-layer-norm", 1, None]])) == {"hub-bundle-missing": "broken"}


def test_another_variant_chosen_or_a_ref_elsewhere_is_broken() -> None:
    assert _ids(_probe(resolved="torch211-cxx11-cu126-x86_64-linux")) == {"hub-bundle-variant": "broken"}
    assert _ids(_probe(cached_commit="b" * 40)) == {"hub-bundle-lookup": "broken"}


def test_all_latest_is_broken_only_when_it_moves_a_pin() -> None:
    p = _probe(latest_cached=2, latest_commit="c" * 40)
    p["all_latest"]["set"] = True
    assert _ids(p) == {"hub-bundle-all-latest": "broken"}
    p = _probe()
    p["all_latest"] = {"set": True, "honoured": False}
    assert _ids(p) == {"hub-bundle-all-latest": "info"}


def test_an_unsigned_build_warns_and_says_whether_a_receipt_is_held() -> None:
    ids = _ids(_probe(signature={"status": "failed", "detail": "no network"}, receipt={"status": "missing"}))
    assert ids == {"hub-bundle-signature": "warning"}


def test_a_corrupt_or_foreign_file_is_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "b.tar.gz"
    bad.write_bytes(b"\x1f\x8b truncated")
    with pytest.raises(BadInput, match="cannot be read as a bundle"):
        bundle_verify.read(str(bad), tmp_path / "x")
    foreign = tmp_path / "f.tar"
    with tarfile.open(foreign, "w") as tar:
        tar.add(__file__, arcname="x.py")
    with pytest.raises(BadInput, match="not a kernelcheck bundle"):
        bundle_verify.read(str(foreign), tmp_path / "y")
    wrong = tmp_path / "w.tar"
    (tmp_path / "kernelcheck-bundle.json").write_text(json.dumps({"schema": "other/1"}))
    with tarfile.open(wrong, "w") as tar:
        tar.add(tmp_path / "kernelcheck-bundle.json", arcname="kernelcheck-bundle.json")
    with pytest.raises(BadInput, match="not a kernelcheck.hub-bundle/1 manifest"):
        bundle_verify.read(str(wrong), tmp_path / "z")


def test_the_text_fits_100_columns_and_names_the_device() -> None:
    manifest = _manifest()
    checks, findings = bundle_verify.evaluate(manifest, _probe(depends=[["kernels-community/x", 1, None]]), {})
    r = BundleReport("verify-bundle", "/very/long/path/" * 4 + "kernels.tar.gz", manifest, findings, checks, "0.19.1")
    text = r.render(False)
    assert max(len(line) for line in text.splitlines()) <= 100, text
    assert "verdict for cuda: BROKEN" in text and r.exit_code == 4
    assert json.loads(r.render(True))["schema"] == SCHEMA
