"""`kernelcheck hub --verify-bundle FILE` on the air-gapped node: will the job's offline Kernel Hub load succeed
from this bundle?

The bundle is unpacked into a temporary folder (nothing of this machine changes) and kernels' own offline code
is run on it in a child process (bundle_probe.py: KERNELS_CACHE and HF_HUB_CACHE pointed at the copy,
HF_HUB_OFFLINE=1): its version lookup (refs/vN -> commit), its variant resolver for the bundle's target, its digest
check (a mismatch raises at load), its signature check of metadata.json.sigstore with the receipt the bundle
carries (a failure warns), and UNSTABLE_KERNELS_ALL_LATEST (which ignores the lock and the requested versions).
The verdict is "the offline load will succeed" (exit 0) only when every repository the load resolves (the
manifest's `required`, and every kernel dependency) is in the bundle and validates; else exit 4 naming what is
missing or invalid. A file that is not a bundle: exit 2.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import Finding, Severity
from kernelcheck.hub.bundle import MANIFEST, SCHEMA, BundleReport, run_probe

REFERENCE = "https://github.com/huggingface/kernels"
FIX_BUILD = "rebuild the bundle where the Hub is reachable: kernelcheck hub --model M --bundle FILE"


def _spec(e: dict[str, Any]) -> str:
    return f"{e['repo_id']}@{'v' + str(e['version']) if e.get('version') is not None else e.get('revision')}"


def read(file: str, into: Path) -> dict[str, Any]:
    """Unpack FILE into `into` and return its manifest; BadInput (exit 2) for anything that is not a bundle."""
    p = Path(file)
    if not p.is_file():
        raise BadInput(f"--verify-bundle {file}: no such file. Give the file `kernelcheck hub --bundle` wrote.")
    try:
        with tarfile.open(p, "r:*") as tar:
            names = tar.getnames()
            if MANIFEST not in names:
                raise BadInput(f"--verify-bundle {file} is a tar file but not a kernelcheck bundle (no {MANIFEST} "
                               "in it). Give the file `kernelcheck hub --bundle` wrote.")
            tar.extractall(into, filter="data")  # no absolute paths, no links out of `into`
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BadInput(f"--verify-bundle {file} cannot be read as a bundle ({type(exc).__name__}: {exc}): a "
                       "truncated or corrupt copy? Copy it again, or rebuild it with kernelcheck hub --bundle.") \
            from None
    try:
        manifest: dict[str, Any] = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInput(f"--verify-bundle {file}: its {MANIFEST} is not JSON ({exc}).") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA or not isinstance(
            manifest.get("entries"), list):
        raise BadInput(f"--verify-bundle {file}: its {MANIFEST} is not a {SCHEMA} manifest (schema "
                       f"{manifest.get('schema') if isinstance(manifest, dict) else None!r}).")
    return manifest


def _changed_files(root: Path, files: dict[str, str]) -> list[str]:
    out = []
    for rel, digest in files.items():
        f = root / rel
        if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            out.append(rel)
    return out


def verify(file: str) -> BundleReport:
    with tempfile.TemporaryDirectory(prefix="kernelcheck-verify-bundle-") as tmp:
        root = Path(tmp)
        manifest = read(file, root)
        bundled = [e for e in manifest["entries"] if e.get("status") == "bundled"]
        probe = run_probe(root / "cache", [{k: e.get(k) for k in ("repo_id", "version", "revision", "commit",
                                                                    "variant")} for e in bundled],
                          manifest.get("target"), online=False)
        changed = {_spec(e): _changed_files(root, e.get("files", {})) for e in manifest["entries"]}
    report = BundleReport("verify-bundle", file, manifest, kernels=probe.get("kernels"))
    report.checks, report.findings = evaluate(manifest, probe, changed)
    return report


def evaluate(manifest: dict[str, Any], probe: dict[str, Any],
             changed: dict[str, list[str]]) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Per entry what kernels' offline code said, and the findings: the decision of --verify-bundle."""
    findings: list[Finding] = []
    checks: list[dict[str, Any]] = []
    if probe.get("error") or probe.get("unusable"):
        findings.append(Finding("hub-bundle-unchecked", Severity.BROKEN,
                                f"kernels could not check the bundle here: {probe.get('error') or probe['unusable']}",
                                "install the kernels release the job uses (pip install kernels)"))
    got = {(p["repo_id"], p.get("version"), p["variant"]): p for p in probe.get("entries", [])}
    present = {(e["repo_id"], e.get("version")) for e in manifest["entries"] if e.get("status") in ("bundled", "local")}
    for e in manifest["entries"]:
        spec = _spec(e)
        if e.get("status") == "missing":
            findings.append(Finding("hub-bundle-missing", Severity.BROKEN,
                                    f"{spec} ({e.get('required_by') or 'asked for'}) is not in the bundle: "
                                    f"{e.get('how')}. Offline, the job's load raises for it.", FIX_BUILD))
            continue
        if e.get("status") == "local":
            checks.append({"spec": spec, "variant": e.get("variant"), "local": True})
            continue
        p = got.get((e["repo_id"], e.get("version"), e.get("variant")), {})
        checks.append(_check_row(spec, e, p))
        findings.extend(_entry_findings(spec, e, p, changed.get(spec, []), present))
    findings.extend(_latest(manifest, probe, got))
    return checks, findings


def _check_row(spec: str, e: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    return {"spec": spec, "commit": e.get("commit"), "variant": e.get("variant"), "present": p.get("present", False),
            "version_lookup": "ok" if p.get("present") and not p.get("lookup_error") else p.get("lookup_error"),
            "resolved_variant": p.get("resolved"), "digest": p.get("digest"), "signature": p.get("signature"),
            "receipt": p.get("receipt"),
            "trust": {"status": "skipped", "detail": "kernels skips the publisher trust check offline; at build: "
                      + str((e.get("trust") or {}).get("status", "unknown"))},
            "redirect": e.get("redirect")}


def _entry_findings(spec: str, e: dict[str, Any], p: dict[str, Any], changed: list[str],
                    present: set[tuple[str, int | None]]) -> list[Finding]:
    out: list[Finding] = []
    variant = e.get("variant")

    if changed:
        out.append(Finding("hub-bundle-files-changed", Severity.BROKEN,
                           f"{spec}/{variant}: {len(changed)} file(s) differ from the manifest's sha256 (e.g. "
                           f"{changed[0]}): the bundle was changed after it was built", FIX_BUILD))
    if not p.get("present"):
        out.append(Finding("hub-bundle-missing", Severity.BROKEN,
                           f"{spec}: the variant {variant} is not in the bundle's cache", FIX_BUILD))
        return out
    if p.get("lookup_error"):
        out.append(Finding("hub-bundle-lookup", Severity.BROKEN, f"{spec}: kernels' offline version lookup fails "
                           f"on the bundle: {str(p['lookup_error']).splitlines()[0]}", FIX_BUILD, REFERENCE))
    elif e.get("version") is not None and p.get("cached_commit") != e.get("commit"):
        out.append(Finding("hub-bundle-lookup", Severity.BROKEN,
                           f"{spec}: the bundle's ref v{e['version']} points at {str(p.get('cached_commit'))[:12]}, "
                           f"the manifest pins {str(e.get('commit'))[:12]}", FIX_BUILD, REFERENCE))
    if e.get("problem"):
        out.append(Finding("hub-bundle-variant", Severity.BROKEN, f"{spec}: {e['problem']} (found when it was built)",
                           FIX_BUILD, REFERENCE))
    if p.get("resolved") != variant:
        why = p.get("rejected", {}).get(variant)
        out.append(Finding("hub-bundle-variant", Severity.BROKEN,
                           f"{spec}: for the bundle's target kernels chooses {p.get('resolved') or 'no variant'} "
                           f"among the bundled ones, not {variant}" + (f" ({why})" if why else ""),
                           FIX_BUILD, REFERENCE))
    out.extend(_validator_findings(spec, variant, p))
    for repo_id, version, revision in p.get("depends") or []:
        if (repo_id, version) not in present:
            dep = f"{repo_id}@{'v' + str(version) if version is not None else revision}"
            out.append(Finding("hub-bundle-missing", Severity.BROKEN, f"{dep} (a kernel dependency of {spec}) is not "
                               "in the bundle: offline, the load raises for it", FIX_BUILD))
    return out


def _validator_findings(spec: str, variant: str | None, p: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    digest, sig = p.get("digest") or {}, p.get("signature") or {}
    where = f"{spec}/{variant}"
    if digest.get("status") == "failed":
        out.append(Finding("hub-bundle-digest", Severity.BROKEN, f"{where}: kernels' digest check fails ("
                           f"{' '.join(str(digest.get('detail')).split())}): kernels raises RuntimeError at load",
                           FIX_BUILD, REFERENCE))
    elif digest.get("status") == "missing":
        out.append(Finding("hub-bundle-digest", Severity.WARNING, f"{where}: {digest.get('detail')} (kernels loads "
                           "it with a warning)", None, REFERENCE))
    for name, c in (("digest", digest), ("signature", sig)):
        if c.get("status") == "not-checked":
            out.append(Finding("hub-bundle-not-checked", Severity.INFO, f"{where}: {name} {c.get('detail')}",
                               "kernels>=0.19.1 checks it at load", REFERENCE))
    if sig.get("status") == "skipped":
        out.append(Finding("hub-bundle-not-checked", Severity.INFO, f"{where}: signature {sig.get('detail')}",
                           None, REFERENCE))
    elif sig.get("status") in ("failed", "missing"):
        receipt = (p.get("receipt") or {}).get("status")
        out.append(Finding("hub-bundle-signature", Severity.WARNING,
                           f"{where}: kernels' signature check says: {sig.get('detail')}"
                           + ("" if receipt == "ok" else "; the bundle holds no signature receipt, and offline "
                              "kernels cannot verify the signature without one")
                           + ". kernels warns and loads (it says a future release will raise)",
                           "rebuild online with sigstore installed (pip install 'kernels[sigstore]')", REFERENCE))
    return out


def _latest(manifest: dict[str, Any], probe: dict[str, Any],
            got: dict[tuple[str, int | None, str], dict[str, Any]]) -> list[Finding]:
    """UNSTABLE_KERNELS_ALL_LATEST: kernels then ignores the lock and every requested version, and loads the newest
    vN its cache records (kernels' LatestHubResolver)."""
    latest = probe.get("all_latest") or {}
    if not latest.get("set"):
        return []
    if not latest.get("honoured"):
        return [Finding("hub-bundle-all-latest", Severity.INFO, f"UNSTABLE_KERNELS_ALL_LATEST is set; kernels "
                        f"{probe.get('kernels')} does not read it, so the pinned versions load")]
    moved = []
    for (repo_id, version, _), p in got.items():
        pinned: dict[str, Any] = next((e for e in manifest["entries"]
                                       if e["repo_id"] == repo_id and e.get("version") == version), {})
        if p.get("latest_commit") and p.get("latest_commit") != pinned.get("commit"):
            moved.append(f"{repo_id}: v{p.get('latest_cached')} instead of v{version}")
    if moved:
        return [Finding("hub-bundle-all-latest", Severity.BROKEN, "UNSTABLE_KERNELS_ALL_LATEST is set: kernels "
                        "ignores the lock and the requested versions and loads the newest cached version, which is "
                        f"not the build the bundle pins ({'; '.join(moved)})", "unset UNSTABLE_KERNELS_ALL_LATEST",
                        REFERENCE)]
    return [Finding("hub-bundle-all-latest", Severity.WARNING, "UNSTABLE_KERNELS_ALL_LATEST is set: kernels ignores "
                    "the lock and the requested versions and loads the newest version in the cache; in this bundle "
                    "that is the pinned build of every repository, so the same builds load",
                    "unset UNSTABLE_KERNELS_ALL_LATEST",
                    REFERENCE)]
