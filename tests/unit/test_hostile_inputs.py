"""Every input is data, never a crash. Each case asserts what the user sees: the exit code and the
error's words once (the line or field it names); the in-process ones run through click's CliRunner."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelcheck import SCHEMA
from kernelcheck.cli.main import main
from kernelcheck.core import matrix, models
from kernelcheck.core.errors import BadInput
from kernelcheck.report.progress import Progress

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def _one_paragraph(out: str) -> None:
    assert "Traceback" not in out and "internal error" not in out
    assert out.strip().count("\n") == 0, out


# -- 1 and 12: wrong-typed and negative lengths ---------------------------------------------------------------------

@pytest.mark.parametrize("row,shown", [
    ('{"length": "abc"}', "length 'abc'"),
    ('{"length": null}', "length null"),
    ('{"length": NaN}', "length NaN"),
    ('{"length": 1e400}', "length Infinity"),
    ('{"length": {"a": 1}}', 'length {"a": 1}'),
    ('{"length": -4}', "length -4"),
    ('{"length": true}', "length true"),
    ('{"length": 2.5}', "length 2.5"),
    ('{"num_tokens": 99999999999999999999}', "num_tokens 99999999999999999999"),
    ('{"input_ids": "hello"}', "input_ids 'hello'"),
])
def test_a_wrong_typed_length_in_jsonl_is_exit_2_naming_the_line(tmp_path: Path, row: str, shown: str) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"length": 12}\n' + row + "\n")
    code, out = _cli("padding", str(f))
    assert code == 2, out
    assert f"line 2: {shown} is" in out  # wording: renderer test
    _one_paragraph(out)


def test_the_wording_of_a_bad_length_names_what_a_length_must_be(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"length": 12}\n{"length": "abc"}\n')
    out = _cli("padding", str(f))[1]
    assert "line 2: length 'abc' is not a non-negative integer" in out  # wording: renderer test


def test_deeply_nested_rows_are_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, out = _cli("padding", str(f))
    assert code == 2 and "line 1 nests JSON too deeply" in out  # wording: renderer test
    _one_paragraph(out)


def test_a_negative_length_in_a_lengths_file_is_exit_2_naming_the_line(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_text("12\n-4\n")
    code, out = _cli("padding", str(f))
    assert code == 2 and "line 2: length -4 is not a non-negative integer" in out  # wording: renderer test
    _one_paragraph(out)


@pytest.mark.parametrize("text,line", [("1\n2\n3.5\n", 3), ("1\n\n\n 7 \nx\n", 5), ("5\n" * 3 + "1" * 30 + "\n", 4)])
def test_lengths_file_errors_name_the_right_line(tmp_path: Path, text: str, line: int) -> None:
    f = tmp_path / "l.txt"
    f.write_text(text)
    code, out = _cli("padding", str(f))
    assert code == 2 and f"line {line}" in out, out  # wording: renderer test


def test_whitespace_and_crlf_around_lengths_are_read(tmp_path: Path) -> None:
    f = tmp_path / "l.txt"
    f.write_bytes(b"100\r\n 300 \n\n100\t\n300")
    code, out = _cli("padding", str(f), "--batching", "batch:2", "--json")
    assert code == 0, out
    assert json.loads(out)["padding"]["real_tokens"] == 800


# -- 2: a broken tokenizer folder -----------------------------------------------------------------------------------

@pytest.mark.parametrize("files", [
    {"tokenizer.json": b"{not json"},
    {"tokenizer_config.json": json.dumps({"tokenizer_class": "NoSuchTokenizerFast"}).encode()},
    {"tokenizer.json": b"\x89PNG\r\n\x1a\n\xff\xfe\x00binary", "tokenizer_config.json": b"\xff\xfe\x00"},
], ids=["invalid-tokenizer-json", "unknown-tokenizer-class", "binary"])
def test_a_broken_tokenizer_folder_is_exit_2(tmp_path: Path, files: dict[str, bytes]) -> None:
    tok = tmp_path / "tok"
    tok.mkdir()
    for name, data in files.items():
        (tok / name).write_bytes(data)
    f = tmp_path / "d.jsonl"
    f.write_text('{"text": "hello world"}\n')
    code, out = _cli("padding", str(f), "--tokenizer", str(tok))
    assert code == 2, out
    assert "transformers cannot load this tokenizer" in out  # wording: renderer test
    _one_paragraph(out)


# -- 15: what a path really is; configs too large to be one ---------------------------------------------------------

def test_a_character_device_is_named_for_what_it_is() -> None:
    code, out = _cli("padding", "/dev/urandom")
    assert code == 2 and "/dev/urandom is a character device, not a regular file" in out  # wording: renderer test
    _one_paragraph(out)
    with pytest.raises(BadInput, match="/dev/null is a character device"):
        models.resolve("/dev/null", m=matrix.load())


def test_a_missing_data_file_still_says_so(tmp_path: Path) -> None:
    code, out = _cli("padding", str(tmp_path / "nope.txt"))
    assert code == 2 and "does not exist" in out  # wording: renderer test


def test_a_config_over_the_size_limit_is_refused_before_parsing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(models, "CONFIG_MAX_BYTES", 1000)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "pad": "x" * 2000}))
    with pytest.raises(BadInput, match="too large for a transformers config.json"):
        models.resolve(str(tmp_path), m=matrix.load())


# -- 5: malformed reports for compare -------------------------------------------------------------------------------

def _report(**changes: object) -> dict:
    rep = {"schema": SCHEMA, "command": "doctor", "verdict": "fallback", "exit_code": 3,
           "environment": {"python": "3.11.7", "torch": {"version": "2.13.0", "cuda": None}, "gpus": [],
                           "packages": {}},
           "model": {"query": "qwen3.8-27b", "model_type": "qwen3_5"}, "mode": "train",
           "functions": [{"name": "chunk_gated_delta_rule", "package": "fla-core", "status": "fallback",
                          "implementation": "torch"}],
           "findings": [{"id": "fla-missing", "severity": "fallback", "message": "m"}]}
    rep.update(changes)
    return rep


def _write(tmp_path: Path, name: str, data: object) -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_a_well_formed_pair_of_reports_compares(tmp_path: Path) -> None:
    a, b = _write(tmp_path, "a.json", _report()), _write(tmp_path, "b.json", _report())
    assert _cli("compare", str(a), str(b))[0] == 3


@pytest.mark.parametrize("changes,field", [
    ({"functions": "oops"}, '"functions"'),
    ({"functions": [1, 2]}, '"functions[0]"'),
    ({"functions": [{"name": "f", "status": "excellent"}]}, '"functions[0].status"'),
    ({"exit_code": "abc"}, '"exit_code"'),
    ({"exit_code": 99}, '"exit_code"'),
    ({"exit_code": 0}, '"exit_code"'),
    ({"environment": None}, '"environment"'),
    ({"environment": {"packages": [1]}}, '"environment.packages"'),
    ({"environment": {"gpus": ["H200"]}}, '"environment.gpus[0]"'),
    ({"verdict": "excellent"}, '"verdict"'),
    ({"findings": "none"}, '"findings"'),
    ({"model": "qwen"}, '"model"'),
    ({"verdict": None, "error": "stopped", "exit_code": 99}, '"exit_code"'),
])
def test_a_malformed_report_is_exit_2_naming_the_file_and_the_field(tmp_path: Path, changes: dict,
                                                                     field: str) -> None:
    good = _write(tmp_path, "good.json", _report())
    bad = _write(tmp_path, "bad.json", _report(**changes))
    code, out = _cli("compare", str(good), str(bad))
    assert code == 2, out
    assert str(bad) in out and f"field {field}" in out  # wording: renderer test
    _one_paragraph(out)


def test_a_deeply_nested_report_is_exit_2(tmp_path: Path) -> None:
    bad = _write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    code, out = _cli("compare", str(bad))
    assert code == 2 and "nests JSON too deeply" in out  # wording: renderer test


def test_the_same_report_twice_is_one_node_and_does_not_pass_expect_2(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json", _report(verdict="ready", exit_code=0, functions=[]))
    res = CliRunner().invoke(main, ["compare", str(a), str(tmp_path / "." / "a.json"), str(tmp_path),
                                    "--expect", "2", "--json"])
    assert res.exit_code == 4, res.output  # one node of the two expected: a missing rank
    report = json.loads(res.stdout)
    assert [r["label"] for r in report["ranks"]] == ["a"] and report["groups"] == [["a"]]
    assert [m["rank"] for m in report["missing"]] == [1]


# -- 16: trace progress on a non-terminal ---------------------------------------------------------------------------

class _Log(io.StringIO):
    def isatty(self) -> bool:
        return False


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_to_a_log_has_no_carriage_return_and_a_plain_line_per_interval() -> None:
    log = _Log()
    bar = Progress(100 << 20, "reading trace", stream=log, every_s=0.0)
    for done in range(0, 100 << 20, 10 << 20):
        bar.update(done)
    bar.close()
    assert "\r" not in log.getvalue()  # wording: renderer test
    assert log.getvalue().count("\n") == 10
    assert "reading trace: 50% (52 / 105 MB" in log.getvalue()  # wording: renderer test
    quiet = _Log()
    slow = Progress(100 << 20, "reading trace", stream=quiet)  # 30 s between lines: a short read prints nothing
    slow.update(50 << 20)
    slow.close()
    assert quiet.getvalue() == ""


def test_progress_on_a_terminal_is_redrawn_in_place() -> None:
    tty = _Tty()
    bar = Progress(100, "data.txt", stream=tty, unit="rows")
    bar.update(50)
    bar.update(100)
    bar.close()
    assert tty.getvalue().count("\r") == 2 and tty.getvalue().endswith("(100 / 100 rows)\n")


def test_trace_progress_to_a_file_writes_no_carriage_return(capsys) -> None:
    from kernelcheck.trace.render import progress_to_stderr

    for done in (0, 16 << 20, 64 << 20):
        progress_to_stderr(done, 64 << 20)
    assert "\r" not in capsys.readouterr().err  # wording: renderer test


# -- processes: a FIFO, a closed pipe, a torch that exits in its import ---------------------------------------------

def _env() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
