"""install installs exactly the bytes it verified: each wheel is copied into the install's own temporary folder,
verified there (sha256, tags, arches) and that copy is handed to pip. A wheel swapped in the wheelhouse (an atomic
rename) after its check, the moment pip starts, is not what gets installed. Real pip, a real --target."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import types
import zipfile
from pathlib import Path

import pytest

from kernelcheck.install import apply, wheels

pytestmark = pytest.mark.integration  # pip runs
PY_TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
NAME = "kctiny-1.0-py3-none-any.whl"


def _wheel(path: Path, value: str) -> str:
    files = {"kctiny.py": f"VALUE = {value!r}\n",
             "kctiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: kctiny\nVersion: 1.0\n",
             "kctiny-1.0.dist-info/WHEEL": ("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                        "Tag: py3-none-any\n")}
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("kctiny-1.0.dist-info/RECORD,,")
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr("kctiny-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheels.sha256_file(path)


def test_a_wheel_swapped_after_its_check_is_not_what_pip_installs(tmp_path: Path) -> None:
    wh, priv, site = tmp_path / "wh", tmp_path / "install-tmp" / "verified", tmp_path / "site"
    wh.mkdir()
    priv.parent.mkdir()
    verified_sha = _wheel(wh / NAME, "verified")
    plan = types.SimpleNamespace(target=wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", None, True, ()))
    info = apply._verify(None, wh / NAME, plan, None, verified_sha, private=priv)  # type: ignore[arg-type]
    assert Path(info.path).parent == priv and info.sha256 == verified_sha
    # the swap: another wheel of the same name renamed over the checked one
    _wheel(tmp_path / NAME, "swapped")
    os.replace(tmp_path / NAME, wh / NAME)
    constraints = tmp_path / "install-tmp" / "constraints.txt"
    constraints.write_text("")
    apply._pip_install([info.path], constraints, str(site), lambda s: None)
    assert (site / "kctiny.py").read_text() == "VALUE = 'verified'\n"
    assert wheels.sha256_file(info.path) == verified_sha  # the manifest's hash is the installed file's


def test_a_wheel_changed_before_its_check_is_refused(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    wh.mkdir()
    planned_sha = _wheel(wh / NAME, "planned")
    _wheel(wh / NAME, "changed")
    plan = types.SimpleNamespace(target=wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", None, True, ()))
    with pytest.raises(apply.InstallFailed, match="sha256"):
        apply._verify(None, wh / NAME, plan, None, planned_sha, private=tmp_path / "priv")  # type: ignore[arg-type]


@pytest.mark.parametrize("folder", ["wh;x", "wh; python_version < '3'", "wh #1"])
def test_a_wheelhouse_path_pip_would_read_as_a_marker_installs(tmp_path: Path, folder: str) -> None:
    """A `;` in --wheelhouse made install BROKEN (pip reads `path;...` as a requirement with a marker); pip is
    handed the private copy, whose path is kernelcheck's own."""
    wh, priv, site = tmp_path / folder, tmp_path / "install-tmp" / "verified", tmp_path / "site"
    wh.mkdir()
    priv.parent.mkdir()
    sha = _wheel(wh / NAME, "ok")
    plan = types.SimpleNamespace(target=wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", None, True, ()))
    info = apply._verify(None, wh / NAME, plan, None, sha, private=priv)  # type: ignore[arg-type]
    constraints = tmp_path / "install-tmp" / "constraints.txt"
    constraints.write_text("")
    apply._pip_install([info.path], constraints, str(site), lambda s: None)
    assert (site / "kctiny.py").read_text() == "VALUE = 'ok'\n"


def test_the_dry_runs_hash_travels_to_the_real_run(tmp_path: Path) -> None:
    """install --expect-plan FILE (the dry run's -o JSON): a wheel changed since the dry run is refused, even when
    the real run's own listing of the wheelhouse would have taken the new file's hash."""
    import json

    from kernelcheck.core.plan_step import Step
    from kernelcheck.install import expected, plan_types

    wh = tmp_path / "wh"
    wh.mkdir()
    dry_sha = _wheel(wh / NAME, "reviewed")
    (tmp_path / "plan.json").write_text(json.dumps({"plan": [{"package": "kctiny", "action": "install",
                                                              "artifact": str(wh / NAME), "sha256": dry_sha}]}))
    now_sha = _wheel(wh / NAME, "changed after review")
    step = Step.from_json({"package": "kctiny", "action": "install", "source": "wheelhouse", "spec": "kctiny==1.0",
                           "reason": "r", "artifact": str(wh / NAME), "sha256": now_sha, "kind": "dependency"})
    plan = plan_types.Plan((step,), wheels.WheelFit(PY_TAG, "linux_x86_64", "2.14", None, True, ()), False)
    pinned = expected.pin(plan, expected.read(str(tmp_path / "plan.json")))
    assert pinned.steps[0].sha256 == dry_sha
    (tmp_path / "install-tmp").mkdir()
    with pytest.raises(apply.InstallFailed, match="sha256"):
        apply._verify(pinned.steps[0], wh / NAME, pinned, None, pinned.steps[0].sha256,
                      private=tmp_path / "install-tmp" / "verified")
