"""Read Dockerfile.build the way a builder does, so tests run its exact commands outside docker.

Only what the file uses: global and stage ARGs with defaults, FROM ... AS name, SHELL, ENV,
WORKDIR, COPY (context and --from), RUN with --mount options. A test that runs these commands
fails as soon as the Dockerfile drifts from what was tested, because the commands are read from
the file, not copied into the test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile.build"


@dataclass
class Instruction:
    keyword: str
    flags: dict[str, str]  # --mount=..., --from=...
    args: str  # the rest, as written (continuations joined)
    line: int


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r}: {[s.name for s in self.stages]}")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by docker too
        if not buf:
            start = n
        if raw.rstrip().endswith("\\"):
            buf += raw.rstrip()[:-1]  # docker drops the escape and the newline
            continue
        buf += raw
        out.append((start, buf.strip()))
        buf = ""
    if buf:
        out.append((start, buf.strip()))
    return out


def parse(path: Path) -> Dockerfile:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line, text in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, rest = text.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        flags: dict[str, str] = {}
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            k, _, v = flag[2:].partition("=")
            flags[k] = v
            rest = rest.lstrip()
        if keyword == "FROM":
            m = re.match(r"^(\S+)(?:\s+AS\s+(\S+))?$", rest, re.IGNORECASE)
            assert m, f"line {line}: cannot read FROM {rest!r}"
            stages.append(Stage(m.group(2) or str(len(stages)), m.group(1)))
            continue
        if not stages:
            assert keyword == "ARG", f"line {line}: only ARG may precede FROM, found {keyword}"
            k, _, v = rest.partition("=")
            global_args[k] = v
            continue
        stages[-1].instructions.append(Instruction(keyword, flags, rest, line))
    return Dockerfile(global_args, stages)


def expand(value: str, env: dict[str, str]) -> str:
    """Dockerfile variable substitution: $VAR and ${VAR} from `env` (unset -> empty)."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def stage_env(df: Dockerfile, stage: Stage, base_env: dict[str, str], build_args: dict[str, str]) -> dict[str, str]:
    """The environment a RUN in `stage` sees: base image env, ARGs (build-arg or default), ENVs in order."""
    env = dict(base_env)
    for ins in stage.instructions:
        if ins.keyword == "ARG":
            k, _, v = ins.args.partition("=")
            env[k] = build_args.get(k, v)
        elif ins.keyword == "ENV":
            # ENV a=b c=d: each value is expanded with the environment before this instruction.
            before = dict(env)
            for item in shlex.split(ins.args):
                k, _, v = item.partition("=")
                env[k] = expand(v, before)
    return env


def shell(stage: Stage) -> list[str]:
    sh = stage.of("SHELL")
    return json.loads(sh[-1].args) if sh else ["/bin/sh", "-c"]


class Emulated:
    """Paths the Dockerfile uses, mapped into a temp folder, and the RUN steps with their environment."""

    def __init__(self, root: Path, kc_bin: Path | None = None, build_args: dict[str, str] | None = None,
                 base_python: Path | None = None, timeout: float = 900):
        self.root = root
        self.timeout = timeout  # one RUN step's limit (a real compile of the kernels takes longer)
        self.df = parse(DOCKERFILE)
        self.map = {"/opt/kernels": str(root / "opt" / "kernels"), "/wheelhouse": str(root / "wheelhouse"),
                    "/src/kernelcheck": str(root / "src" / "kernelcheck")}
        (root / "wheelhouse").mkdir(parents=True, exist_ok=True)  # a cache mount always exists in a build
        self.build_args = build_args or {}
        # The "base image": this test's Python (or `base_python`'s venv) with its torch/transformers/pip, nothing
        # from the caller.
        base_bin = (base_python or Path(sys.executable)).parent
        base_path = os.pathsep.join([str(base_bin), "/usr/local/bin", "/usr/bin", "/bin"])
        self.base_env = {"PATH": base_path, "HOME": str(root / "home"), "HF_HUB_OFFLINE": "1", "LANG": "C.UTF-8"}
        for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT", "SSL_CERT_FILE",
                  "KERNELCHECK_TEST_CACHE", "TMPDIR"):
            if k in os.environ:  # how this machine reaches PyPI, as a base image's pip config would
                self.base_env[k] = os.environ[k]

    def path(self, p: str) -> str:
        for src, dst in sorted(self.map.items(), key=lambda kv: -len(kv[0])):
            p = p.replace(src, dst)
        return p

    def steps(self, stage_name: str):
        """(instruction, env, cwd) for each RUN/COPY/WORKDIR of the stage, in order."""
        stage = self.df.stage(stage_name)
        env = dict(self.base_env)
        cwd = self.root
        for ins in stage.instructions:
            if ins.keyword == "ARG":
                k, _, v = ins.args.partition("=")
                env[k] = self.build_args.get(k, self.df.global_args.get(k, v) if not v else v)  # noqa: SIM212
            elif ins.keyword == "ENV":
                before = dict(env)
                for item in shlex.split(ins.args):
                    k, _, v = item.partition("=")
                    env[k] = expand(self.path(v), before)  # map literals once, then expand
            elif ins.keyword == "WORKDIR":
                cwd = Path(self.path(expand(ins.args, env)))
                cwd.mkdir(parents=True, exist_ok=True)
            yield ins, dict(env), cwd

    def copy_context(self, ins: Instruction, cwd: Path) -> None:
        *srcs, dst = shlex.split(ins.args)
        target = Path(self.path(dst)) if dst.startswith("/") else cwd / dst
        for src in srcs:
            s = REPO / src.rstrip("/")
            if s.is_dir():
                shutil.copytree(s, target / s.name if not src.endswith("/") else target,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, target / s.name)

    def run(self, stage: str, ins: Instruction, env: dict[str, str], cwd: Path,
            extra: list[str] = ()) -> subprocess.CompletedProcess:
        cmd = self.path(ins.args) + ("".join(f" {shlex.quote(a)}" for a in extra))
        sh = shell(self.df.stage(stage))
        return subprocess.run([*sh, cmd], capture_output=True, text=True, env=env, cwd=cwd, timeout=self.timeout)
