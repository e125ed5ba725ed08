"""Regenerate the output samples in README.md and docs/*.md from real runs, so the docs cannot drift.

    python scripts/doc_samples.py            # rewrite every marked sample
    python scripts/doc_samples.py --check    # exit 1 and show a diff when a doc differs from a real run

A sample is a ```text block right after a marker line:

    <!-- sample: doctor-cpu -->

Each marker names an entry of SAMPLES below: either a command run here (`python -m kernelcheck ...`, stdout
piped, so wrapped at 100 columns as a user's pipe or CI log shows it), or a report recorded on real hardware
(a `--json` file under docs/measurements/) rendered by today's text renderer. Runs use HF_HUB_OFFLINE=1, NO_COLOR=1 and
KERNELCHECK_IMPORT_CACHE=0 (no cache note with a date in the sample). The CPU samples are of this repository's
CI machine (2 cores, torch CPU build) with the stack the README's own set-up installs today (README_STACK:
`pip install torch==2.13.0` then `pip install -e '.[test]'` resolves transformers 5.25.0, which requires kernels
0.19.1), put first on the path from the test cache (tests/envs.py `site`), so a sample is what a newcomer who
follows the README sees. tests/integration/test_doc_samples.py runs `--check`; tests/unit/test_doc_samples.py checks
that the README names that stack and that its samples show it.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
README_STACK = ("transformers==5.25.0", "kernels==0.19.1")  # beside torch 2.13.0 (CPU build): the README's set-up


@dataclass(frozen=True)
class Sample:
    doc: str  # file, relative to the repository
    args: tuple[str, ...]  # the kernelcheck command line shown after "$ kernelcheck"
    recorded: str | None = None  # a --json report to render instead of running `args` here
    pick: str | None = None  # keep only the line containing this text and its continuation lines
    files: tuple[tuple[str, str], ...] = ()  # (name, text) written to a temporary folder the command runs in


SAMPLES: dict[str, Sample] = {
    "doctor-cpu": Sample("README.md", ("doctor", "--model", "qwen3.8-27b")),
    "doctor-h200-train": Sample("README.md", ("doctor", "--model", "qwen3.8-27b", "--mode", "train"),
                                recorded="docs/measurements/2026-12-02-h200-doctor-7552758/doctor_train.json"),
    "install-cpu": Sample("README.md", ("install", "--model", "qwen3.8-27b", "--dry-run")),
    "trace-fallback": Sample("README.md", ("trace", "tests/data/gpu/gdn_fallback.json.gz")),
    "trace-fast": Sample("README.md", ("trace", "tests/data/gpu/gdn_fast.json.gz")),
    "models": Sample("README.md", ("models",)),
    "trace-budget": Sample("docs/trace.md", ("trace", "tests/data/gpu/step-fast.json.gz", "--budget", "--model",
                                             "qwen3.8-27b", "--tokens", "8192", "--checkpointing"),
                           pick="step budget of"),
    "padding-seq": Sample("docs/packing.md", ("padding", "lengths.txt", "--batching", "batch:10"),
                          files=(("lengths.txt", "".join(f"{i}\n" for i in range(1, 101))),)),
    "packing-line": Sample("docs/packing.md", ("doctor", "--model", "qwen3.8-27b", "--verbose"), pick="[packing]"),
    "packing-batch-collator": Sample("docs/packing.md", ("verify", "--model", "qwen3.8-27b", "--packing", "--collator",
                                                         "transformers:DataCollatorWithFlattening", "--lengths",
                                                         "tests/data/packing/lengths.txt")),
    "packing-batch-zero": Sample("docs/packing.md", ("verify", "--model", "qwen3.8-27b", "--packing", "--batch",
                                                     "tests/data/packing/zero_length.safetensors")),
}
MARKER = re.compile(r"^<!-- sample: ([a-z0-9-]+) -->\n```text\n(.*?)^```$", re.M | re.S)


def _stack_site() -> str:
    """The README's stack as a folder first on the path (built once into the test cache: tests/envs.py)."""
    from tests import envs

    return str(envs.site(*README_STACK, deps=True))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "KERNELCHECK_VERBOSE")}
    env.update(PYTHONPATH=os.pathsep.join([_stack_site(), str(REPO)]), HF_HUB_OFFLINE="1", NO_COLOR="1",
               KERNELCHECK_IMPORT_CACHE="0", HF_HUB_CACHE=_EMPTY_CACHE)
    return env


_EMPTY_CACHE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "kernelcheck-doc-samples-empty-hf-cache")


def _render_recorded(path: Path) -> str:
    from kernelcheck.report.model import Report
    from kernelcheck.report.terminal import PIPED_WIDTH, Terminal, present
    from kernelcheck.report.text import render_text

    rep = Report.from_json(json.loads(path.read_text()))
    return present(render_text(rep, verbose=False), Terminal(width=PIPED_WIDTH)) + "\n"


def _pick(text: str, needle: str) -> str:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if needle in ln)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
        end += 1
    return "\n".join(lines[start:end]) + "\n"


def produce(name: str) -> str:
    """The sample's text: the command line, then what kernelcheck prints."""
    s = SAMPLES[name]
    if s.recorded:
        out = _render_recorded(REPO / s.recorded)
    else:
        out = _run(s)
    if s.pick:
        out = _pick(out, s.pick)
    return f"$ kernelcheck {' '.join(s.args)}\n{out}"


def _run(s: Sample) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in s.files:
            (Path(tmp) / name).write_text(text)
        res = subprocess.run([sys.executable, "-m", "kernelcheck", *s.args], capture_output=True, text=True,
                             env=_env(), cwd=tmp if s.files else REPO, timeout=600)
    return res.stdout


def update(doc: Path, made: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in SAMPLES:
            raise SystemExit(f"{doc}: unknown sample {name!r} (scripts/doc_samples.py SAMPLES)")
        if name not in made:
            made[name] = produce(name)
        return f"<!-- sample: {name} -->\n```text\n{made[name]}```"

    return MARKER.sub(one, doc.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    check = "--check" in argv
    made: dict[str, str] = {}
    stale = 0
    for doc in sorted({REPO / s.doc for s in SAMPLES.values()}):
        old, new = doc.read_text(encoding="utf-8"), update(doc, made)
        if old == new:
            continue
        stale += 1
        if check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       f"{doc.name} (docs)", f"{doc.name} (real run)"))
        else:
            doc.write_text(new, encoding="utf-8")
            print(f"updated {doc.relative_to(REPO)}")
    missing = sorted(set(SAMPLES) - set(made))
    if missing:
        print(f"samples with no marker in their doc: {', '.join(missing)}")
        return 1
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
