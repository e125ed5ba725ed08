"""`kernelcheck doctor --report-issue`: one markdown block to paste into a bug report (as `python -m
torch.utils.collect_env` and `transformers env` give): versions, OS and glibc, driver, cuDNN, NCCL, the kernel
packages, what each function will run, the findings and the verdict.

`system()` reads what the report does not hold (the edge: platform, glibc, cuDNN/NCCL from the imported torch);
`render(report, system)` is pure.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from kernelcheck.core.status import WORDS, Verdict
from kernelcheck.report.model import Report
from kernelcheck.report.sections import EnvironmentView


def system() -> dict[str, str]:
    """OS, glibc, cuDNN, NCCL, huggingface_hub and kernelcheck's own version line, as text ("none" if absent)."""
    from kernelcheck.core import environment, version

    libc, libc_v = platform.libc_ver()
    out = {"os": _os(), "glibc": f"{libc_v}" if libc == "glibc" and libc_v else (libc or "none"),
           "kernelcheck": version.info().line().removeprefix("kernelcheck "),
           "huggingface_hub": environment.dist_version("huggingface_hub") or "absent",
           "cudnn": "none", "nccl": "none"}
    torch = sys.modules.get("torch")  # imported by the probe already; never imported here only for this
    if torch is not None:
        out["cudnn"], out["nccl"] = _cudnn(torch), _nccl(torch)
    return out


def _os() -> str:
    """Kernel, machine and distribution, without platform.platform() (which runs `uname -p`)."""
    try:
        distro = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        distro = ""
    return f"{platform.system()} {platform.release()} {platform.machine()}" + (f" ({distro})" if distro else "")


def _cudnn(torch: Any) -> str:
    try:
        v = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - a broken CUDA runtime: say so, never fail the report
        return "unknown (torch.backends.cudnn.version() failed)"
    if not v:
        return "none"
    if v >= 10000:  # cuDNN 9: 91002 is 9.10.2
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100} ({v})"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100} ({v})"  # cuDNN 8: 8902 is 8.9.2


def _nccl(torch: Any) -> str:
    if not getattr(torch.version, "cuda", None):
        return "none"
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001
        return "unknown (torch.cuda.nccl.version() failed)"
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def _torch(env: EnvironmentView | None) -> str:
    t = env.torch if env is not None else None
    if not t:
        return "absent"
    return f"{t.version} (CUDA {t.cuda or 'none'}, cxx11abi {t.cxx11abi})"


def _gpus(env: EnvironmentView | None) -> str:
    return ", ".join(f"{g.name} ({g.capability.sm})" for g in (env.gpus if env is not None else ())) or "none"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: Report, sysinfo: dict[str, str], argv: list[str] | None = None) -> str:
    """The markdown block (pure)."""
    env = report.environment
    verdict = Verdict(report.verdict)
    model = report.model
    rows = [("kernelcheck", sysinfo.get("kernelcheck", "?")),
            ("command", "`kernelcheck " + " ".join(argv or ["doctor"]) + "`"),
            ("verdict", f"**{WORDS[verdict]}** (exit {report.exit_code})"),
            ("model", f"{model.id if model else '-'} ({model.model_type if model else '-'}), "
                      f"mode {report.mode or '-'}"),
            ("OS", sysinfo.get("os", "?")), ("glibc", sysinfo.get("glibc", "?")),
            ("Python", f"{env.python} ({env.python_tag}, {env.platform})" if env else "-"),
            ("torch", _torch(env)), ("cuDNN", sysinfo.get("cudnn", "?")), ("NCCL", sysinfo.get("nccl", "?")),
            ("triton", (env and env.triton) or "absent"), ("transformers", (env and env.transformers) or "absent"),
            ("kernels", (env and env.kernels) or "absent"), ("huggingface_hub", sysinfo.get("huggingface_hub", "?")),
            ("GPUs", _gpus(env)), ("driver", (env and env.driver) or "none"), ("nvcc", (env and env.nvcc) or "none")]
    out = ["<details open><summary>kernelcheck doctor --report-issue</summary>", "", "| | |", "|---|---|"]
    out += [f"| {k} | {_cell(v)} |" for k, v in rows]
    out += ["", "Kernel packages:", "", "| package | version | imports | error |", "|---|---|---|---|"]
    pkgs = env.packages if env is not None else {}
    out += [f"| {_cell(p.distribution or n)} | {_cell(p.version or '-')} | "
            f"{'yes' if p.imports else 'no'} | {_cell((p.error or '')[:200])} |"
            for n, p in pkgs.items() if p.installed] or ["| (none installed) | | | |"]
    if report.functions:
        out += ["", "Functions:", "", "| function | status | implementation |", "|---|---|---|"]
        out += [f"| {_cell(f.name)} | {f.status}{'' if f.used else ' (not used)'} | {_cell(f.implementation)} |"
                for f in report.functions]
    out += ["", "Findings: " + (", ".join(f"`{f.id}` ({f.severity})" for f in report.findings) or "none")]
    variables = env.env if env is not None else {}
    if variables:
        out += ["", "Variables: " + ", ".join(f"`{k}={_cell(v)}`" for k, v in sorted(variables.items()))]
    out += ["", "</details>"]
    return "\n".join(out)
