"""The integration half of tests/unit/test_hostile_inputs.py: processes, pip or builds (the in-process tests
are there).

Every input is data, never a crash. Each case asserts what the user sees: the exit code and the"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import envs
from tests.unit.test_hostile_inputs import (  # helpers and fixtures of the in-process half
    REPO,
    _env,
    _report,
    _write,
)


@pytest.mark.integration
def test_trace_of_a_fifo_without_a_writer_is_exit_2_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    res = subprocess.run([sys.executable, "-m", "kernelcheck", "trace", str(fifo)], capture_output=True, text=True,
                         env=_env(), cwd=REPO, timeout=60)
    assert res.returncode == 2 and "is a named pipe (FIFO)" in res.stderr  # wording: renderer test (exit-2 message)
    res = subprocess.run(["bash", "-c", f"{sys.executable} -m kernelcheck trace <(false)"], capture_output=True,
                         text=True, env=_env(), cwd=REPO, timeout=60)
    assert res.returncode == 2 and "not a regular file" in res.stderr  # wording: renderer test (exit-2 message)


@pytest.mark.integration
@pytest.mark.parametrize("command", ["padding", "compare"])
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_closed_pipe_keeps_padding_and_compare_quiet(tmp_path: Path, command: str, json_flag: list[str]) -> None:
    if command == "padding":
        arg = _write(tmp_path, "l.txt", "12\n40\n" * 1000)
        want = 0
    else:
        arg = _write(tmp_path, "a.json", _report())
        want = 3
    proc = subprocess.Popen([sys.executable, "-m", "kernelcheck", command, str(arg), *json_flag],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| true`: the reader left before anything was written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == want, err
    assert "BrokenPipe" not in err and "internal error" not in err


@pytest.mark.integration
def test_a_torch_whose_import_calls_sys_exit_is_broken_with_a_paragraph(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('import sys\nsys.exit("torch refuses to load")\n')
    res = envs.run(["doctor", "--model", "qwen3.8-27b"], tmp_path)
    assert res.returncode == 4, res.stderr
    assert "BROKEN: torch is installed but its import fails here (SystemExit: torch refuses to load)" \
        in res.stderr  # wording: renderer test (exit-4 paragraph)
    assert "Traceback" not in res.stderr and res.stderr.strip().count("\n") == 0


@pytest.mark.integration
@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
@pytest.mark.parametrize("name,values,words", [
    ("length", ["a", "b"], "row 1 (a column of string): length 'a' is not a non-negative integer"),
    ("length", [1, None], "row 2: length null is not"),
    ("length", [1.0, float("nan")], "row 2: length NaN is not"),
    ("num_tokens", [1, -3], "row 2: num_tokens -3 is not"),
    ("input_ids", [[1, 2], None], "row 2: input_ids null is not a list of token ids"),
    ("length", [10, 20, 30], None),
])
def test_parquet_and_arrow_length_columns_are_checked(tmp_path: Path, suffix: str, name: str, values: list,
                                                      words: str | None) -> None:
    site = envs.site("pyarrow==25.0.1")
    f = tmp_path / f"d{suffix}"
    subprocess.run([sys.executable, str(REPO / "tests" / "programs" / "write_columnar.py"), str(f), name,
                    json.dumps(values)], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(site)})
    if words is None:
        res = envs.run(["padding", str(f), "--json"], site)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["padding"]["real_tokens"] == sum(values)  # every row read, as its length
        return
    res = envs.run(["padding", str(f)], site)
    assert res.returncode == 2 and words in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.strip().count("\n") == 0
