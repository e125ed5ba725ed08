"""Paths and values a user names, checked once: an OSError on a named path is exit 2
through one checked opener (core/paths.py), a read-only wheelhouse or --target is exit 2 before the lock
(install/writable.py), a batching rule past any real batch and a target no plan fits are exit 2."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck.cli.main import main
from kernelcheck.core import paths
from kernelcheck.core.capability import Capability
from kernelcheck.core.errors import BadInput
from kernelcheck.core.targets import parse_target
from kernelcheck.install import writable
from kernelcheck.padding.waste import Rule

LONG = "a" * 300


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    assert "internal error" not in res.output and "Traceback" not in res.output, res.output
    return res.exit_code, res.output


# -- 6: one checked opener -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,flag", [
    (["doctor", "--model", f"/tmp/{LONG}/x"], "--model"),
    (["verify", "--model", f"/tmp/{LONG}"], "--model"),
    (["doctor", "--model", "qwen3.8-27b", "--no-hub", "--junit", f"/tmp/{LONG}/j.xml"], "--junit"),
    (["doctor", "--model", "qwen3.8-27b", "--no-hub", "-o", f"/tmp/{LONG}/o.json"], "-o"),
    (["compare", f"/tmp/{LONG}.json"], "the report"),
    (["install", "--model", "qwen3.8-27b", "--target", f"/tmp/{LONG}/t"], "--target"),
    (["padding", f"/tmp/{LONG}"], "the data file"),
    (["trace", f"/tmp/{LONG}"], "trace"),
])
def test_a_path_component_over_255_bytes_is_exit_2_naming_the_flag(args: list[str], flag: str) -> None:
    code, out = _cli(*args)
    assert code == 2 and flag in out


@pytest.mark.parametrize("err", [errno.ENAMETOOLONG, errno.EROFS, errno.EACCES, errno.ENOTDIR, errno.ELOOP])
def test_the_checked_opener_turns_each_oserror_into_bad_input(monkeypatch, tmp_path: Path, err: int) -> None:
    def refuse(*_a, **_k):
        raise OSError(err, "refused")

    monkeypatch.setattr("builtins.open", refuse)
    with pytest.raises(BadInput) as exc:
        paths.open_checked(tmp_path / "f", "w", "--junit")
    assert "--junit" in exc.value.message  # wording: renderer test (names the flag)


def test_checked_lets_a_missing_path_through_for_its_caller_to_judge(tmp_path: Path) -> None:
    assert paths.checked(tmp_path / "absent", "--model") == tmp_path / "absent"
    assert paths.checked("/etc/hostname/x" if Path("/etc/hostname").is_file() else tmp_path, "--model")
    with pytest.raises(BadInput):
        paths.checked("a\0b", "--model")


def test_an_output_under_a_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    code, out = _cli("doctor", "--model", "qwen3.8-27b", "--no-hub", "-o", str(tmp_path / "f" / "o.json"))
    assert code == 2


def test_the_opener_says_what_the_errno_means_once() -> None:
    msg = paths.os_error("/x", "--junit", OSError(errno.ENAMETOOLONG, "File name too long")).message
    assert msg.startswith("--junit /x: ") and "255 bytes" in msg and "\n" not in msg  # wording: renderer test


# -- 5: a read-only HOME or KERNELCHECK_HOME -------------------------------------------------------------------------

@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES, errno.EPERM])
def test_an_unwritable_default_wheelhouse_is_bad_input_with_the_way_out(monkeypatch, tmp_path: Path,
                                                                        err: int) -> None:
    def refuse(self, *_a, **_k):
        raise OSError(err, "Read-only file system")

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(BadInput) as exc:
        writable.wheelhouse(tmp_path / "home" / "wheelhouse", named=False)
    assert "KERNELCHECK_HOME" in exc.value.message and "--wheelhouse" in exc.value.message  # wording: renderer test
    with pytest.raises(BadInput):
        writable.target(str(tmp_path / "t"))


def test_a_writable_wheelhouse_is_created(tmp_path: Path) -> None:
    assert writable.wheelhouse(tmp_path / "w", named=True).is_dir()
    assert list((tmp_path / "w").iterdir()) == []  # the probe is gone


# -- 7: a batching rule past any batch -------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["budget:99999999999999999999", "batch:1000000000001", "packing:" + "9" * 40,
                                  "budget:٢", "budget:8192\u0660"])
def test_a_batching_rule_past_any_batch_or_in_unicode_digits_is_bad_input(text: str) -> None:
    with pytest.raises(BadInput):
        Rule.parse(text)


def test_padding_with_a_huge_budget_is_exit_2_not_an_overflow(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_text("12\n40\n")
    code, _ = _cli("padding", str(f), "--batching", "budget:99999999999999999999")
    assert code == 2
    assert Rule.parse("budget:1000000000000").value == 10 ** 12


# -- 10: ASCII versions, possible targets ----------------------------------------------------------------------------

@pytest.mark.parametrize("torch_v,cuda_v,python_v", [
    ("٢.١١", None, None), (None, "١٣.٠", None), (None, None, "٣.١٢"),  # Unicode digits match \d
    ("0.1", None, None), ("1.13", None, None), (None, "99.0", None), (None, "9.2", None), (None, None, "2.7"),
    (None, None, "4.0"),
])
def test_unicode_digits_and_impossible_targets_are_bad_input(torch_v, cuda_v, python_v) -> None:
    with pytest.raises(BadInput):
        parse_target(torch_v, cuda_v, python_v)


def test_real_targets_still_parse() -> None:
    t = parse_target("2.11", "13.0", "3.12")
    assert (t.torch, t.cuda, t.python) == ("2.11", "13.0", "3.12")
    assert parse_target("2.8", "cpu").cuda == ""
    assert parse_target(None, "11.8", "3.9").cuda == "11.8"


def test_install_refuses_an_impossible_target_with_exit_2() -> None:
    code, _ = _cli("install", "--model", "qwen3.8-27b", "--dry-run", "--torch", "٢.١١")
    assert code == 2


@pytest.mark.parametrize("text", ["٩.٠", "sm_٩٠", "９.0"])
def test_a_capability_in_unicode_digits_is_not_one(text: str) -> None:
    with pytest.raises(ValueError):
        Capability.parse(text)
