"""The kernels adapter's decisions, in process: which generation reads which release, what an unknown layout
becomes, and kernelcheck's words about kernels' variants. The real releases:
tests/integration/test_kernels_releases.py."""

from __future__ import annotations

import pytest

from kernelcheck.integrations import kernels_api
from kernelcheck.integrations.kernels_api import Decision, Gen015, Gen017, Gen018, Gen019, Unsupported, VariantInfo
from kernelcheck.integrations.kernels_variants import nearest, would_match


def _all_present(_: kernels_api.KernelsApi) -> list[str]:
    return []


@pytest.mark.parametrize(("version", "generation"), [
    ("0.15.2", Gen015), ("0.16.0", Gen015), ("0.17.2", Gen017), ("0.18.3", Gen018), ("0.18.2", Gen018),
    ("0.19.1", Gen019), ("0.19.9.dev0", Gen019)])
def test_each_release_generation_gets_its_own_adapter(version: str, generation: type) -> None:
    got = kernels_api.choose(version, probe=_all_present)
    assert type(got) is generation and got.version == version and got.newer_than_known is None


def test_a_newer_kernels_whose_layout_matches_the_newest_adapter_is_read_with_it_and_says_so() -> None:
    got = kernels_api.choose("0.21.0", probe=_all_present)
    assert isinstance(got, Gen019) and got.newer_than_known == "0.21.0"


def test_a_newer_kernels_that_moved_only_0_19s_names_falls_back_to_an_older_layout_that_fits() -> None:
    def probe(a: kernels_api.KernelsApi) -> list[str]:
        return ["kernels._internals.variants"] if isinstance(a, Gen019) else []

    got = kernels_api.choose("0.20.0", probe=probe)
    assert isinstance(got, Gen018) and got.newer_than_known == "0.20.0"


def test_a_newer_kernels_with_an_unknown_layout_is_unsupported_with_the_missing_names() -> None:
    def probe(a: kernels_api.KernelsApi) -> list[str]:
        return [f"{a.prefix}.variants.get_variants_local"]

    got = kernels_api.choose("0.20.0", probe=probe)
    assert isinstance(got, Unsupported) and got.version == "0.20.0"
    assert "newer than kernelcheck knows: Hub variants not listed" in got.reason  # wording: renderer test
    assert got.missing == ("kernels._internals.variants.get_variants_local",)


def test_a_known_release_that_lacks_its_generations_names_is_unsupported_not_guessed() -> None:
    got = kernels_api.choose("0.19.1", probe=lambda a: ["kernels._internals.backends._backend"])
    assert isinstance(got, Unsupported) and got.missing == ("kernels._internals.backends._backend",)
    assert got.version == "0.19.1"


@pytest.mark.parametrize("version", ["0.14.0", "not-a-version", None])
def test_older_unparsable_or_absent_kernels_never_raise(version: str | None) -> None:
    got = kernels_api.choose(version, probe=lambda a: ["kernels.variants"])
    assert isinstance(got, Unsupported)


def test_the_installed_kernels_gets_an_adapter() -> None:
    """The base venv's kernels (a real release) is read by its generation, with every name found."""
    got = kernels_api.adapter()
    assert isinstance(got, kernels_api.KernelsApi) and got.probe() == []


CUDA_211 = VariantInfo("torch211-cxx11-cu130-x86_64-linux", "arch", "torch", (2, 11), True, "cuda", (13, 0), "cu130",
                       "x86_64", "linux")
CUDA_29 = VariantInfo("torch29-cxx11-cu126-x86_64-linux", "arch", "torch", (2, 9), True, "cuda", (12, 6), "cu126",
                      "x86_64", "linux")
STABLE = VariantInfo("torch-stable-abi-2.10-cuda-12.8-cpython-3.9-abi3-x86_64-linux", "arch", "torch-stable-abi",
                     (2, 10), None, "cuda", (12, 8), "cuda-12.8", "x86_64", "linux")
HERE = {"cpu": "x86_64", "os": "linux", "torch": (2, 13), "backend": "cuda", "cuda": (13, 0)}


def test_would_match_says_the_environment_kernels_accepts_in_words() -> None:
    assert would_match(CUDA_211) == "torch 2.11 (cxx11 ABI) built for CUDA 13.0 or a later 13.x, on x86_64-linux"
    assert would_match(STABLE) == "torch >= 2.10 built for CUDA 12.8 or a later 12.x, on x86_64-linux"
    assert would_match(VariantInfo("torch-universal", "noarch", backend="universal")) == "any torch"
    assert would_match(VariantInfo("torch-cuda", "noarch", backend="cuda")) == "any torch build for cuda"


def test_nearest_is_the_rejected_build_with_the_closest_torch_and_cuda() -> None:
    rejected = [Decision(CUDA_29, False, "Torch version (2.9) ..."), Decision(CUDA_211, False, "Torch version (2.11)")]
    assert nearest(rejected, HERE) == (CUDA_211.variant, would_match(CUDA_211))
    assert nearest([], HERE) == (None, None)
