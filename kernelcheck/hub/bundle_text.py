"""The text of `kernelcheck hub --bundle` / `--verify-bundle` (100 columns at most)."""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 100


def _wrap(text: str, indent: str = "    ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False) or [indent]


def _status(c: dict[str, Any] | None) -> str:
    return "-" if not c else str(c.get("status"))


def render(r: Any) -> str:
    """`r`: a hub.bundle.BundleReport (not imported: bundle imports this module)."""
    m = r.manifest
    lines = _wrap(f"kernelcheck hub {'--bundle' if r.action == 'bundle' else '--verify-bundle'} {r.file}", "")
    lines += _wrap(f"model {m.get('model') or '-'}, mode {m.get('mode')}, device {m.get('device')}, target torch "
                   f"{(m.get('target') or {}).get('torch')} / {_cuda((m.get('target') or {}).get('cuda'))}; "
                   f"kernels {r.kernels or 'not installed'}", "  ")
    checks = {c["spec"]: c for c in r.checks}
    for e in m.get("entries", []):
        spec = f"{e['repo_id']}@{'v' + str(e['version']) if e.get('version') is not None else e.get('revision')}"
        lines.append(f"  {spec} -> {str(e.get('commit') or '-')[:12]}  {e.get('status')}")
        lines += _wrap(f"variant {e.get('variant') or '-'} ({len(e.get('why', {}).get('rejected', {}))} other(s) "
                       f"rejected by kernels' resolver); {e.get('how')}")
        c = checks.get(spec)
        if r.action == "verify-bundle" and c is not None:
            lines += _wrap(f"offline: lookup {c.get('version_lookup')}, variant {c.get('resolved_variant')}, "
                           f"digest {_status(c.get('digest'))}, signature {_status(c.get('signature'))}, "
                           f"receipt {_status(c.get('receipt'))}, trust skipped offline")
        elif r.action == "bundle":
            lines += _wrap(f"digest {_status(e.get('digest'))}, signature {_status(e.get('signature'))}, receipt "
                           f"{_status(e.get('receipt'))}, trust {_status(e.get('trust'))}, redirect "
                           f"{_status(e.get('redirect'))}, kernel deps {len(e.get('depends') or [])}")
    env = m.get("job_environment", {})
    lines.append("  the job's environment (DIR: where the bundle is unpacked):")
    for k, v in env.items():
        if k != "note":
            lines += _wrap(f"{k}={v}")
    lines += _wrap(f"verdict for {m.get('device')}: {_verdict(r)}", "")
    for f in r.findings:
        lines += _wrap(f"{str(f.severity).upper()} {f.id}: {f.message}", "  ")
        if f.fix:
            lines += _wrap(f"fix: {f.fix}", "    ")
    return "\n".join(lines)


def _cuda(cuda: str | None) -> str:
    return "CPU" if cuda == "" else f"CUDA {cuda}" if cuda else "this torch build"


def _verdict(r: Any) -> str:
    if r.action == "bundle":
        return ("READY: every repository the load resolves is in the bundle" if r.exit_code == 0
                else "BROKEN: the bundle lacks what the offline load needs")
    if r.exit_code == 0:
        return "READY: the offline load will succeed (all it resolves is bundled and validates)"
    return "BROKEN: the offline load will fail (see below)"
