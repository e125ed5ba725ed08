"""Drift: where this environment no longer fits what kernelcheck installed into it (core/manifest.py's record
against the environment probed now): a package replaced since, a compiled extension built for another torch minor,
a build that carries no code for this GPU."""

from __future__ import annotations

from kernelcheck.core import manifest
from kernelcheck.core.environment import Environment, torch_minor
from kernelcheck.core.gpu import arch_serves, cap_to_sm
from kernelcheck.core.status import Finding, Severity


def explain(env: Environment) -> list[Finding]:
    """Findings where the environment no longer fits what kernelcheck installed (manifest vs now)."""
    out: list[Finding] = []
    torch_v = env.torch.version if env.torch else None
    mm = torch_minor(torch_v)
    for name, e in manifest.read()["packages"].items():
        st = env.packages.get(name)
        dist = e.get("distribution", name)
        how = f"{dist} {e.get('version')} was installed by kernelcheck from {e.get('source')} ({e.get('wheel')}"
        how += f", GPU code {', '.join(e['so_arches'])})" if e.get("so_arches") else ")"
        fix = f"kernelcheck install --model M --source build --package {dist}"
        if st is not None and st.installed and st.version and e.get("version") and st.version != e["version"]:
            out.append(Finding("manifest-replaced", Severity.INFO, f"{how}; {dist} {st.version} is installed now: "
                               "something else replaced it after kernelcheck's install."))
            continue
        if e.get("so_arches") and mm and e.get("torch_mm") and e["torch_mm"] != mm:
            out.append(Finding("manifest-torch-changed", Severity.WARNING,
                               f"{how}, built for torch {e['torch_mm']}; torch is now {torch_v}: a compiled "
                               "extension is tied to one torch minor (expect 'undefined symbol').", fix))
        if e.get("so_arches"):
            for cap in env.capabilities:
                if arch_serves(tuple(e["so_arches"]), cap) is None:
                    out.append(Finding("manifest-arch-missing", Severity.WARNING,
                                       f"{how}; this GPU is sm_{cap_to_sm(cap)}, which that build does not carry: "
                                       "its kernels cannot run here.", fix + f" --arch {cap}"))
    return out
