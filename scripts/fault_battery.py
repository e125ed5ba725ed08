"""The hostile-input battery of issues 16 and 26 as one command: every case a real `python -m kernelcheck` run.

    python scripts/fault_battery.py [-k WORD] [--list]

Each case builds its input in a temporary folder (files, FIFOs, a shadowing torch), runs the command with a
time limit, and passes when the exit code is the expected one, stderr has no traceback and no "internal error",
and (where given) stderr holds the expected words. Prints one line per case and the counts, last line
"N passed, M failed"; exits 1 when any failed. Offline (HF_HUB_OFFLINE=1); about a second a case.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "kernelcheck.report/1"


def _report(**changes: object) -> str:
    rep = {"schema": SCHEMA, "command": "doctor", "verdict": "fallback", "exit_code": 3,
           "environment": {"python": "3.11", "torch": {"version": "2.13.0", "cuda": None}, "gpus": [], "packages": {}},
           "functions": [{"name": "chunk_gated_delta_rule", "package": "fla-core", "status": "fallback",
                          "implementation": "torch"}], "findings": []}
    rep.update(changes)
    return json.dumps(rep)


@dataclass
class Case:
    name: str
    make: Callable[[Path], list[str]]  # builds the input under the folder, returns the command's arguments
    code: int
    words: str = ""
    shell: bool = False
    sites: tuple[str, ...] = ()


def _file(name: str, text: str | bytes, *args: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        p = d / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        return [a.replace("{f}", str(p)).replace("{d}", str(d)) for a in args]
    return make


def _fifo(d: Path) -> list[str]:
    os.mkfifo(d / "fifo")
    return ["trace", str(d / "fifo")]


def _two(d: Path, changes: dict) -> list[str]:
    (d / "a.json").write_text(_report())
    (d / "b.json").write_text(_report(**changes))
    return ["compare", str(d / "a.json"), str(d / "b.json")]


def _tokenizer(content: dict[str, bytes]) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        (d / "tok").mkdir()
        for name, data in content.items():
            (d / "tok" / name).write_bytes(data)
        (d / "d.jsonl").write_text('{"text": "hello"}\n')
        return ["padding", str(d / "d.jsonl"), "--tokenizer", str(d / "tok")]
    return make


def _torch_exits(d: Path) -> list[str]:
    (d / "torch").mkdir()
    (d / "torch" / "__init__.py").write_text('import sys\nsys.exit("torch refuses to load")\n')
    return ["doctor", "--model", "qwen3.8-27b"]


def _cases() -> list[Case]:
    rows = {"string": '{"length": "abc"}', "null": '{"length": null}', "nan": '{"length": NaN}',
            "1e400": '{"length": 1e400}', "object": '{"length": {"a": 1}}', "input_ids-string": '{"input_ids": "hi"}',
            "negative": '{"length": -4}'}
    cases = [Case(f"padding jsonl length {k}", _file("d.jsonl", '{"length": 3}\n' + v + "\n", "padding", "{f}"), 2,
                  "line 2:") for k, v in rows.items()]
    cases += [
        Case("padding 100k nested arrays", _file("d.jsonl", "[" * 100_000 + "]" * 100_000, "padding", "{f}"), 2,
             "too deeply"),
        Case("padding negative length in a lengths file", _file("l.txt", "12\n-4\n", "padding", "{f}"), 2, "line 2"),
        Case("padding lengths file", _file("l.txt", "12\n40\n" * 100, "padding", "{f}", "--json"), 0),
        Case("padding /dev/urandom", lambda d: ["padding", "/dev/urandom"], 2, "character device"),
        Case("padding closed pipe", _file("l.txt", "12\n40\n", "padding", "{f}", "--json"), 0,
             shell=True),
        Case("padding tokenizer.json invalid", _tokenizer({"tokenizer.json": b"{nope"}), 2, "cannot load"),
        Case("padding tokenizer_class unknown",
             _tokenizer({"tokenizer_config.json": b'{"tokenizer_class": "NoSuchTokenizer"}'}), 2, "cannot load"),
        Case("padding tokenizer binary", _tokenizer({"tokenizer.json": b"\x89PNG\xff\xfe\x00"}), 2, "cannot load"),
        Case("compare functions oops", lambda d: _two(d, {"functions": "oops"}), 2, 'field "functions"'),
        Case("compare non-object items", lambda d: _two(d, {"functions": [1]}), 2, 'field "functions[0]"'),
        Case("compare exit_code abc", lambda d: _two(d, {"exit_code": "abc"}), 2, 'field "exit_code"'),
        Case("compare exit_code 99", lambda d: _two(d, {"exit_code": 99}), 2, 'field "exit_code"'),
        Case("compare environment null", lambda d: _two(d, {"environment": None}), 2, 'field "environment"'),
        Case("compare verdict excellent", lambda d: _two(d, {"verdict": "excellent"}), 2, 'field "verdict"'),
        Case("compare deep nesting", _file("a.json", "[" * 100_000 + "]" * 100_000, "compare", "{f}"), 2,
             "too deeply"),
        Case("compare same file twice --expect 2", _file("a.json", _report(), "compare", "{f}", "{f}", "--expect",
                                                         "2"), 4, "counted once"),
        Case("compare closed pipe", _file("a.json", _report(), "compare", "{f}"), 3, shell=True),
        Case("trace FIFO without a writer", _fifo, 2, "named pipe"),
        Case("trace <(false)", lambda d: ["trace", "<(false)"], 2, "not a regular file", shell=True),
        Case("doctor --model /dev/null", lambda d: ["doctor", "--model", "/dev/null"], 2, "character device"),
        Case("doctor --model 20 MB JSON", _file("c.json", json.dumps({"model_type": "llama", "x": "a" * (20 << 20)}),
                                                "doctor", "--model", "{f}"), 2, "too large"),
        Case("doctor with a torch that calls sys.exit()", _torch_exits, 4, "torch refuses to load",
             sites=("{d}",)),
        Case("doctor binary config.json", _file("config.json", b"\x89PNG\xff\xfe", "doctor", "--model", "{d}"), 2,
             "not UTF-8"),
    ]
    return cases


def _run(case: Case, d: Path) -> tuple[bool, str]:
    args = case.make(d)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([*(s.replace("{d}", str(d)) for s in case.sites), str(REPO)])}
    cmd = [sys.executable, "-m", "kernelcheck", *args]
    if case.shell:
        line = " ".join(cmd)
        line = f"{line} | true; exit ${{PIPESTATUS[0]}}" if "<(" not in line else line
        res = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    else:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=REPO)
    problems = []
    if res.returncode != case.code:
        problems.append(f"exit {res.returncode}, wanted {case.code}")
    if "Traceback" in res.stderr or "internal error" in res.stderr or "BrokenPipe" in res.stderr:
        problems.append("traceback or internal error on stderr")
    if case.words and case.words not in res.stderr + res.stdout:
        problems.append(f"no {case.words!r} in the output")
    return not problems, "; ".join(problems) or res.stderr.strip().splitlines()[0][:70] if res.stderr.strip() else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only the cases whose name holds this word")
    ap.add_argument("--list", action="store_true", help="list the cases and stop")
    args = ap.parse_args()
    cases = [c for c in _cases() if args.k in c.name]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    passed = failed = 0
    for case in cases:
        t = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            try:
                ok, why = _run(case, Path(tmp))
            except subprocess.TimeoutExpired:
                ok, why = False, "ran past 120 s"
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'PASS' if ok else 'FAIL'}  {case.name:<46} {time.monotonic() - t:5.1f}s  {why}")
    print(f"{len(cases)} cases")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
