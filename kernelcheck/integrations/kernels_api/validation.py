"""kernels' own validators of a cached build variant, as plain values: the digest check, the sigstore signature
check of `metadata.json.sigstore` and its receipt, the publisher trust check, a repository's redirect
(`kernel-status.toml`), the kernel dependencies a variant's metadata declares, and whether kernels honours
`UNSTABLE_KERNELS_ALL_LATEST`.

Every method is feature-detected by name (the generation's module prefix: `kernels.digest` in 0.18,
`kernels._internals.digest` in 0.19): a release without the validator answers `Check("not-checked", ...)`, which the
caller reports as "not checked by this kernels", never an error. Only kernels' own functions decide; nothing here
re-implements a check.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelcheck.core.errors import LayoutError


@dataclass(frozen=True)
class Check:
    """One validator's answer: status ok | failed | missing | skipped | not-checked, and kernels' own words."""

    status: str
    detail: str = ""


class Validators:
    """The validator methods every generation's adapter carries (mixed into KernelsApi)."""

    version: str | None

    def name(self, module: str, attr: str) -> Any:  # pragma: no cover - KernelsApi's
        raise NotImplementedError

    def metadata_class(self) -> Any:  # pragma: no cover - KernelsApi's
        raise NotImplementedError

    def _absent(self, what: str) -> Check:
        return Check("not-checked", f"not checked by this kernels ({self.version}): it has no {what}")

    def _location(self, repo_id: str, commit: str, variant: str) -> Any:
        rust = __import__("kernels._rust", fromlist=["KernelLocation"])
        return rust.KernelLocation.remote(repo_id, rust.Oid.from_str(commit), variant)

    def check_digest(self, variant_path: Path) -> Check:
        """kernels' `verify_digest` (no receipt used): ok, failed (kernels raises at load), missing (kernels warns)."""
        try:
            verify = self.name("digest", "verify_digest")
            result_cls = self.name("digest", "DigestVerificationResult")
        except LayoutError:
            return self._absent("digest validator")
        meta = self.metadata_class().read_from_file(variant_path / "metadata.json")
        got = verify(variant_path, metadata=meta, location=None, cache=False)
        if isinstance(got, result_cls.Success):
            return Check("ok", str(got))
        if isinstance(got, result_cls.DigestMissing):
            return Check("missing", str(got))
        return Check("failed", str(got))

    def check_signature(self, variant_path: Path, repo_id: str, commit: str) -> Check:
        """kernels' `verify_signature` with its receipt cache, as the load calls it (offline: a stored receipt is
        what lets it succeed). ok; missing (unsigned: kernels warns); failed (kernels warns); skipped (sigstore is
        not installed: kernels skips the check)."""
        try:
            has_sigstore = self.name("compat", "has_sigstore")
        except LayoutError:
            return self._absent("signature validator")
        if not has_sigstore:
            return Check("skipped", "the sigstore package is not installed, so kernels skips the signature check "
                                    "(pip install 'kernels[sigstore]')")
        try:
            verify = self.name("verify", "verify_signature")
            result_cls = self.name("verify", "SignatureVerificationResult")
        except LayoutError:
            return self._absent("signature validator")
        got = verify(variant_path, location=self._location(repo_id, commit, variant_path.name))
        if isinstance(got, result_cls.Success):
            return Check("ok", str(got))
        if isinstance(got, result_cls.SignatureBundleMissing):
            return Check("missing", str(got))
        return Check("failed", str(got).replace("\n", " "))

    def signature_receipt(self, repo_id: str, commit: str, variant: str) -> Check:
        """Whether kernels' signature receipt store (in the kernels cache) holds a receipt for this variant."""
        try:
            store_cls = self.name("_rust", "SignatureReceiptStore")
        except LayoutError:
            return self._absent("signature receipt store")
        try:
            found = store_cls.in_kernels_cache().load(self._location(repo_id, commit, variant))
        except Exception as exc:  # noqa: BLE001 - kernels' ReceiptError: unusable, counted as absent by kernels
            return Check("failed", f"{type(exc).__name__}: {exc}")
        return Check("ok", "a receipt is stored") if found is not None else Check("missing", "no receipt is stored")

    def store_signature_receipt(self, repo_id: str, commit: str, variant: str) -> None:
        """kernels' own receipt writer (used only where kernels' signature check itself passed)."""
        rust = __import__("kernels._rust", fromlist=["SignatureReceipt"])
        rust.SignatureReceiptStore.in_kernels_cache().store(
            rust.SignatureReceipt(self._location(repo_id, commit, variant)))

    def publisher_trust(self, repo_id: str) -> Check:
        """kernels' `_check_trust_remote_code(trust_remote_code=False)` against the Hub (online only)."""
        try:
            check = self.name("hf_hub", "_check_trust_remote_code")
        except LayoutError:
            return self._absent("publisher trust check")
        try:
            check(repo_id=repo_id, local_files_only=False, trust_remote_code=False)
        except Exception as exc:  # noqa: BLE001 - kernels' ValueError (untrusted / not verifiable) or an HTTP error
            return Check("failed", str(exc).splitlines()[0])
        return Check("ok", f"'{repo_id.split('/')[0]}' is a trusted kernel publisher on the Hub")

    def redirect(self, api: Any, repo_id: str, revision: str) -> Check:
        """kernels' `KernelStatus.check_status` (kernel-status.toml): ok (no redirect) or the redirect's target."""
        try:
            status = self.name("status", "KernelStatus")
        except LayoutError:
            return self._absent("redirect reader (kernel-status.toml)")
        try:
            got = status.check_status(api, repo_id, revision)
        except Exception as exc:  # noqa: BLE001
            return Check("failed", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        if got is None:
            return Check("ok", "no redirect")
        return Check("redirect", f"{got.destination}@{got.revision}")

    def kernel_depends(self, metadata_path: Path) -> list[tuple[str, int | None, str | None]] | None:
        """The kernel dependencies a variant's metadata declares (repo, version, revision); None: not readable."""
        try:
            meta = self.metadata_class().read_from_file(metadata_path)
        except (LayoutError, ImportError):
            return None
        deps = getattr(meta, "kernel_depends", None)
        if deps is None:
            return None
        out: list[tuple[str, int | None, str | None]] = []
        for d in deps:
            v = d.version
            out.append((str(d.repo_id), getattr(v, "version", None), getattr(v, "revision", None)))
        return out

    def honours_all_latest(self) -> bool | None:
        """Whether kernels reads UNSTABLE_KERNELS_ALL_LATEST, and if so whether it is on here (kernels' own
        `_use_latest_kernels`); None where this kernels has no such switch."""
        try:
            fn = self.name("load", "_use_latest_kernels")
        except LayoutError:
            return None
        return bool(fn())


def all_latest_set() -> bool:
    """UNSTABLE_KERNELS_ALL_LATEST read as kernelcheck reads a switch (for a kernels that lacks it)."""
    from kernelcheck.core.settings import is_yes

    return is_yes(os.environ.get("UNSTABLE_KERNELS_ALL_LATEST"))
