"""The hostile-input battery (bad input, faults, interruptions, hostile environments) as one command.

    python scripts/fault_battery.py [-k WORD] [--list]

Each case builds its input in a temporary folder (files, FIFOs, a shadowing torch, a broken copy of the matrix,
a corrupt manifest, a read-only HOME), runs the command with a time limit, and passes when the exit code is an
expected one (never 1), the output has no traceback and no "internal error", and (where given) it holds the
expected words. Most cases run in this process through the CLI's main (scripts/fault_cases_env.py: the files the
environment provides, the paths and values a user names; a SIGALRM guard bounds each); the cases that need a
process of their own (a shadowing torch, a closed pipe, a read-only mount, a real install) run as
`python -m kernelcheck`. Prints one line per case and the counts, last line "N passed, M failed"; exits 1 when any
failed. Offline (HF_HUB_OFFLINE=1, KERNELCHECK_OFFLINE=1); a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
LIMIT_S = 120
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
    env: dict[str, str] = field(default_factory=dict)  # extra variables; {d} is the case's folder
    read_only: str = ""  # a folder under the case's, mounted read-only (a private mount namespace) for the run


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


def _torch_raising(statement: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        (d / "torch").mkdir()
        (d / "torch" / "__init__.py").write_text(statement + "\n")
        return ["verify", "--model", "qwen3.8-27b"]
    return make


def _copied_matrix(d: Path) -> list[str]:
    shutil.copytree(REPO / "matrix", d / "m", ignore=shutil.ignore_patterns("__pycache__"))
    with open(d / "m" / "models.toml", "a", encoding="utf-8") as fh:
        fh.write("[[[oops\n")
    return ["doctor", "--model", "qwen3.8-27b"]


def _process_cases() -> list[Case]:
    """The cases that need a process of their own (or show the repro as a user types it)."""
    ro_install = ["install", "--model", "qwen3.8-27b", "--offline"]
    return [
        Case("verify with a torch whose import raises", _torch_raising('raise RuntimeError("boom")'), 4,
             sites=("{d}",)),
        Case("verify without torch", _torch_raising('raise ModuleNotFoundError("No module named torch", '
                                                    'name="torch")'), 4, sites=("{d}",)),
        Case("verify with a torch that calls sys.exit()", _torch_raising('import sys; sys.exit("no")'), 4,
             sites=("{d}",)),
        Case("doctor KERNELCHECK_MANIFEST random bytes", _file("m.json", b"\x89\xff\x00garbage", "doctor",
                                                              "--model", "qwen3.8-27b"), 2, "m.json",
             env={"KERNELCHECK_MANIFEST": "{d}/m.json"}),
        Case("doctor KERNELCHECK_MATRIX_DIR malformed models.toml", _copied_matrix, 2, "models.toml",
             env={"KERNELCHECK_MATRIX_DIR": "{d}/m"}),
        Case("padding --batching budget:99999999999999999999",
             _file("l.txt", "12\n40\n", "padding", "{f}", "--batching", "budget:99999999999999999999"), 2),
        Case("install --torch Arabic-Indic digits", lambda d: ["install", "--dry-run", "--model", "qwen3.8-27b",
                                                               "--torch", "\u0662.\u0661\u0661"], 2),
        Case("install with a read-only HOME", lambda d: ro_install, 2, "KERNELCHECK_HOME",
             env={"HOME": "{d}/ro"}, read_only="ro"),
        Case("install with a read-only KERNELCHECK_HOME", lambda d: ro_install, 2, "KERNELCHECK_HOME",
             env={"KERNELCHECK_HOME": "{d}/ro"}, read_only="ro"),
        Case("install with KERNELCHECK_HOME under a file", _file("f", "", *ro_install), 2, "KERNELCHECK_HOME",
             env={"KERNELCHECK_HOME": "{d}/f/kc"}),
        Case("install --target with a 300-byte name", lambda d: [*ro_install, "--target", str(d / ("a" * 300))], 2,
             "--target"),
    ]


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
        Case("compare device a string", lambda d: _two(d, {"device": "cuda"}), 2, 'field "device"'),
        Case("compare device.type a number", lambda d: _two(d, {"device": {"type": 5}}), 2, 'field "device.type"'),
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
    return cases + _process_cases()


def _command(case: Case, d: Path, cmd: list[str]) -> list[str] | None:
    """`cmd`, inside a private mount namespace with case.read_only mounted read-only when asked (as root, which
    writes through permission bits; a container's read-only bind mount). None where that cannot be made here."""
    if not case.read_only:
        return cmd
    ro = d / case.read_only
    ro.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        ro.chmod(0o555)
        return cmd
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o ro none "{ro}"'], capture_output=True)
    if probe.returncode != 0:
        return None
    return ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o ro none "{ro}" && exec "$0" "$@"', *cmd]


def _run(case: Case, d: Path) -> tuple[bool | None, str]:
    args = case.make(d)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HF_HUB_OFFLINE": "1", "HOME": str(d / "home"),
           "PYTHONPATH": os.pathsep.join([*(s.replace("{d}", str(d)) for s in case.sites), str(REPO)]),
           **{k: v.replace("{d}", str(d)) for k, v in case.env.items()}}
    cmd = _command(case, d, [sys.executable, "-m", "kernelcheck", *args])
    if cmd is None:
        return None, "no read-only mount can be made here"
    if case.shell:
        line = " ".join(cmd)
        line = f"{line} | true; exit ${{PIPESTATUS[0]}}" if "<(" not in line else line
        res = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, timeout=LIMIT_S,
                             cwd=REPO)
    else:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=LIMIT_S, cwd=REPO)
    return _judge(res.returncode, (case.code,), res.stderr, res.stdout, case.words)


def _judge(code: int, codes: tuple[int, ...], err: str, out: str, words: str) -> tuple[bool, str]:
    problems = []
    if code not in codes:
        problems.append(f"exit {code}, wanted {' or '.join(map(str, codes))}")
    if "Traceback" in err or "internal error" in err or "BrokenPipe" in err:
        problems.append("traceback or internal error on stderr")
    if words and words not in err + out:
        problems.append(f"no {words!r} in the output")
    first = err.strip().splitlines()[0][:70] if err.strip() else ""
    return not problems, "; ".join(problems) or first


class CaseTimeout(BaseException):
    """SIGALRM: an in-process case ran past LIMIT_S (the guard; click's runner does not catch a BaseException)."""


def _alarm(_sig: int, _frame: object) -> None:
    raise CaseTimeout


def _reset() -> None:
    """What one in-process case could leave for the next: the per-folder caches of the matrix (its small tables are
    kept with each Matrix value)."""
    from kernelcheck.core import matrix

    for cached in (matrix._checked_root, matrix._load_matrix, matrix._load_signatures):
        cached.cache_clear()


def _run_inproc(case: object, d: Path) -> tuple[bool, str]:
    from click.testing import CliRunner

    from kernelcheck.cli.main import main

    args, env, paths = case.make(d)  # type: ignore[attr-defined]
    _reset()
    saved = list(sys.path)
    sys.path[:0] = paths
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT_S)
    try:
        res = CliRunner().invoke(main, args, env=env)
    finally:
        signal.alarm(0)
        sys.path[:] = saved
        _reset()
    out = res.output
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        out += f"\nTraceback: {type(res.exception).__name__}: {res.exception}"
    return _judge(res.exit_code, case.codes, out, "", case.words)  # type: ignore[attr-defined]


def _isolate() -> Path:
    """The in-process cases' environment: offline, kernelcheck's own files in a folder of their own."""
    home = Path(tempfile.mkdtemp(prefix="kernelcheck-battery-"))
    os.environ.update(HF_HUB_OFFLINE="1", KERNELCHECK_OFFLINE="1", KERNELCHECK_HOME=str(home / "kc"),
                      HF_HUB_CACHE=str(home / "hf"), KERNELCHECK_PROGRESS="0")
    for name in ("KERNELCHECK_MATRIX_DIR", "KERNELCHECK_MANIFEST", "KERNELCHECK_MEASUREMENTS", "KERNELCHECK_DEBUG"):
        os.environ.pop(name, None)
    os.environ["KERNELCHECK_MANIFEST"] = str(home / "manifest.json")
    return home


def main() -> int:
    import fault_cases_env
    import fault_cases_faults

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only the cases whose name holds this word")
    ap.add_argument("--list", action="store_true", help="list the cases and stop")
    args = ap.parse_args()
    inproc = [c for c in [*fault_cases_env.cases(), *fault_cases_faults.inproc()] if args.k in c.name]
    procs = [c for c in [*_cases(), *fault_cases_faults.processes()] if args.k in c.name]
    if args.list:
        print("\n".join(c.name for c in [*inproc, *procs]))
        return 0
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    home = _isolate()
    runs: list[tuple[object, Callable[[object, Path], tuple[bool | None, str]]]] = [
        *((c, _run_inproc) for c in inproc), *((c, _run) for c in procs)]
    try:
        for case, runner in runs:
            t = time.monotonic()
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    ok, why = runner(case, Path(tmp))
                except (subprocess.TimeoutExpired, CaseTimeout):
                    ok, why = False, f"ran past {LIMIT_S} s"
            verdict = "SKIP" if ok is None else "PASS" if ok else "FAIL"
            counts[verdict] += 1
            print(f"{verdict}  {case.name[:70]:<70} {time.monotonic() - t:5.1f}s  {why}", flush=True)  # type: ignore
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"{len(runs)} cases ({len(inproc)} in process, {len(procs)} as processes)")
    skipped = f", {counts['SKIP']} skipped" if counts["SKIP"] else ""
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed{skipped}")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
