"""A damaged Hugging Face cache entry (a refs file binary, huge or pointing outside, huggingface_hub's cached tree
listing nested past reading, a list, or {"files": 5}) is the Resolution's error naming the file (the doctor's and
hub's "could not list builds" finding), never an exception that ends every gate on the machine as exit 1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kernelcheck.integrations import kernels_hub
from tests.kernel_repos import cache_repo

REPO_ID = "kernels-community/fla"
VARIANTS = ["torch211-cxx11-cu130-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux"]


def _ref(data: bytes) -> Callable[[Path, str], Path]:
    def damage(base: Path, commit: str) -> Path:
        (base / "refs" / "v2").write_bytes(data)
        return base / "refs" / "v2"
    return damage


def _tree(text: str) -> Callable[[Path, str], Path]:
    def damage(base: Path, commit: str) -> Path:
        (base / "trees").mkdir(exist_ok=True)
        (base / "trees" / f"{commit}.json").write_text(text)
        return base / "trees" / f"{commit}.json"
    return damage


DAMAGE = {"ref binary": _ref(bytes(range(200, 256))), "ref huge": _ref(b"a" * 5_000_000),
          "ref outside": _ref(b"../../../../etc"), "ref empty": _ref(b""),
          "tree nested": _tree("[" * 100_000 + "]" * 100_000), "tree list": _tree("[1, 2]"),
          "tree files 5": _tree('{"files": 5}'), "tree not json": _tree("\x00\x01"),
          "tree files of numbers": _tree('{"files": [1, 2]}')}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("KERNELS_CACHE", raising=False)
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    commit = cache_repo(tmp_path, REPO_ID, VARIANTS, versions=(2,))
    return tmp_path / "kernels--kernels-community--fla", commit


@pytest.mark.parametrize("what", sorted(DAMAGE))
def test_a_damaged_entry_is_an_error_naming_the_file(cache: tuple[Path, str], what: str) -> None:
    base, commit = cache
    path = DAMAGE[what](base, commit)
    res = kernels_hub.resolve_repo(REPO_ID, version=2, source="cache")
    assert res.chosen is None and res.error is not None and str(path) in res.error, res.error


def test_an_intact_entry_still_resolves(cache: tuple[Path, str]) -> None:
    res = kernels_hub.resolve_repo(REPO_ID, version=2, source="cache")
    assert res.source == "hf-cache" and res.error is None and res.chosen is not None
