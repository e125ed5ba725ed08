"""The catalogue of finding ids: every id a kernelcheck report can carry, with its severities and meaning.

Decisions and tests use these ids (and the finding's fields), never its wording; the wording is made and tested
once, where a report is rendered. tests/unit/test_findings_catalogue.py scans the package for every `Finding(...)`
and fails when an emitted id is missing here, or an id here is never emitted; docs/findings.md is this table
(`python -m kernelcheck.core.findings_catalogue > docs/findings.md` writes it).

An entry's `id` is either one id or a family with one `{placeholder}` (`install-{action}`). A family's members
are listed (`members`) when the code knows them, or come from the data (`source`): the package keys of
matrix/packages.toml, the fast-kernel packages or signature ids of matrix/signatures.toml. The rules of
matrix/breakages.toml ([[breakage]] and [[import_error]]) are findings too: their ids and severities are read
from there (`data_entries`), not copied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kernelcheck.core import matrix
from kernelcheck.core.status import Severity

B, F, W, I_ = Severity.BROKEN, Severity.FALLBACK, Severity.WARNING, Severity.INFO


@dataclass(frozen=True)
class Entry:
    id: str  # an id, or a family: one `{placeholder}` in it
    severities: tuple[Severity, ...]
    by: str  # the command(s) whose report carries it
    meaning: str
    members: tuple[str, ...] = ()  # a family's values, when the code knows them
    source: str = ""  # a family's values from data: "packages", "fast-packages", "signatures"

    @property
    def pattern(self) -> str:
        """The id with its placeholder as `{}` (an f-string's shape)."""
        return re.sub(r"\{[^}]*\}", "{}", self.id)


_D, _H, _I, _T, _V = "doctor", "hub", "install", "trace", "verify"
_DHI = "doctor, hub, install"

ENTRIES: tuple[Entry, ...] = (
    # doctor: the environment
    Entry("no-gpu", (I_,), _D, "torch is a CUDA build but no GPU is visible"),
    Entry("torch-cpu-build", (I_,), _D, "torch is a CPU build: no CUDA kernel can run"),
    Entry("gpu-target", (I_,), _D, "the GPUs come from --arch, not from probing this machine"),
    Entry("{package}-import-fails", (W,), _D, "an installed kernel package does not import (no [[import_error]] rule "
          "matched the error)", source="packages"),
    Entry("dispatch-env", (I_,), _D, "variables that change which kernel runs are set here"),
    Entry("unsloth-replaces-fla", (W,), _D, "unsloth_zoo's bundled fla replaces the installed one on `import unsloth`"),
    Entry("kernels-window", (I_,), _D, "kernels is outside the window this transformers accepts"),
    Entry("bound-at-import", (I_,), _D, "transformers picks each kernel once, at import of the modeling module"),
    Entry("fla-dispatch-unknown", (W,), _D, "fla's backend dispatch has a layout kernelcheck does not know"),
    Entry("fla-backend", (I_,), _D, "the fla backend an op runs on this GPU"),
    Entry("fallback-cost", (W,), _D, "the measured slowdown of the torch path for this model"),
    Entry("fallback-cost-unmeasured", (I_,), _D, "no measured step for this model family: the fallback's cost is "
          "unknown"),
    Entry("measurements-unread", (W,), _D, "KERNELCHECK_MEASUREMENTS names no file: the team's measured steps were "
          "not read"),
    Entry("install-interrupted", (W,), _D, "an install was interrupted while pip ran: the next `kernelcheck install` "
          "puts the environment back"),
    Entry("manifest-replaced", (I_,), _D, "a package kernelcheck installed was replaced since"),
    Entry("manifest-torch-changed", (W,), _D, "a compiled package was built for another torch minor"),
    Entry("manifest-arch-missing", (W,), _D, "a compiled package was built without this GPU's arch"),
    # doctor: the model
    Entry("no-model", (F,), _D, "no model was named: only the environment was checked"),
    Entry("transformers-too-old", (B,), _D, "this transformers does not have the model type"),
    Entry("transformers-newer-than-tested", (W,), _D, "transformers is newer than the matrix was tested through"),
    Entry("modeling-import-fails", (B,), _D, "the model's modeling module does not import"),
    Entry("sub-model-without-kernels", (I_,), _D, "the model is a sub-model whose class holds none of the parent's "
          "fast-kernel layers"),
    Entry("lazy-hub-fetch-offline", (B,), _D, "a lazily loaded Hub kernel cannot be fetched offline"),
    Entry("lazy-hub-kernels", (W,), _D, "transformers fetches kernels from the Hub when a layer is built"),
    Entry("lazy-kernels-raise", (B,), _D, "the model's forward raises here (see its functions)"),
    Entry("kernelize-hooks", (I_,), _D, "functions that `kernelize` would replace from the Hub"),
    Entry("kernel-decorator-unread", (W,), _D, "transformers uses kernel decorators kernelcheck cannot read"),
    Entry("decode-function-in-prefill", (I_,), _D, "a decode function also runs outside single-token decode"),
    Entry("packing", (I_,), _D, "packing not declared: what each packing mode would do"),
    Entry("packing-declared", (I_, B), _D, "the declared packing mode's outcome (broken: raises or mixes sequences)"),
    Entry("packing-{mode}", (I_,), _D, "another packing mode's outcome",
          members=("none", "position_ids", "cu_seq_lens", "flash")),
    Entry("packing-needs-no-cache", (W,), _D, "packed rows stay apart only when the forward runs without a cache"),
    Entry("advice-{package}", (I_,), _D, "transformers' own warning names another distribution for the same kernels",
          source="packages"),
    # Hub kernels (doctor and hub)
    Entry("hub-mapping-unreadable", (W,), _DHI, "transformers' Hub kernel mapping could not be read"),
    Entry("transformers-unread", (W,), _DHI, "part of transformers could not be read: the Hub answer may be wrong"),
    Entry("hub-kernels-unusable", (B, W), _DHI, "the job asks for Hub kernels but kernels is outside the window"),
    Entry("hub-client-broken", (B,), _DHI, "kernels' own Hub client cannot send a request"),
    Entry("hub-not-used", (I_,), _DHI, "Hub kernels are not loaded in this job (says why)"),
    Entry("hub-kernels-absent", (B, I_), _DHI, "kernels is not installed (broken when the job asks for Hub kernels)"),
    Entry("hub-kernels-layout-unknown", (F,), _DHI, "the installed kernels has a layout no adapter knows"),
    Entry("hub-kernels-newer", (I_,), _DHI, "kernels is newer than kernelcheck knows; read with the nearest layout"),
    Entry("hub-unreachable", (B,), _DHI, "online and the Hub cannot be reached, though the cache holds the build"),
    Entry("hub-snapshot-incomplete", (F,), _DHI, "the cached build's snapshot lists files that are not there"),
    Entry("hub-build-fails", (B,), _DHI, "the chosen build fails kernels' arch or version check"),
    Entry("hub-no-variant", (F, I_), _DHI, "no build for this torch/CUDA (info when the package path is fast)"),
    Entry("hub-not-listable", (B,), _DHI, "the repository's builds cannot be listed here (offline, not cached)"),
    Entry("hub-load-device", (I_,), "doctor, hub", "the Hub answer holds for a load that kernelizes on the GPU "
          "(device_map); a CPU load then .to() resolves other repositories"),
    Entry("jit-probe-failed", (B,), "doctor --jit-probe, verify", "a JIT compiler the chosen implementation uses "
          "could not compile (or run) a trivial kernel here"),
    Entry("jit-probe-passed", (I_,), "doctor --jit-probe, verify", "a JIT compiler compiled and ran a trivial kernel"),
    Entry("jit-run-unchecked", (W,), "doctor --jit-probe, verify", "no GPU visible: the JIT's compile was checked, "
          "its run was not"),
    Entry("jit-precondition", (B, F), "doctor --jit-probe, verify", "a runtime precondition of a JIT is broken "
          "(cache folder, C compiler, CUDA_VISIBLE_DEVICES, TRITON_INTERPRET)"),
    Entry("jit-cache-hit", (I_,), "doctor --cache-dir, verify --cache-dir", "this node's key parts equal those a JIT's "
          "baked cache was written under (TileLang: and a fresh process hit it at warm time)"),
    Entry("jit-cache-miss", (W,), "doctor --cache-dir, verify --cache-dir", "a JIT would miss the baked cache: the "
          "key parts that differ, and what the miss costs"),
    Entry("jit-cache-undecided", (W,), "doctor --cache-dir, verify --cache-dir", "whether a JIT hits the baked cache "
          "cannot be decided (a key part unreadable here, an unknown key layout, TileLang's hit not measured)"),
    Entry("jit-cache-node-differs", (W,), "doctor --cache-dir, verify --cache-dir", "a part of the node no JIT key "
          "holds (the driver) differs from the node the cache was baked on: no miss, said"),
    Entry("jit-cache-not-found", (W,), "doctor --cache-dir, verify --cache-dir", "the process's variables do not "
          "point the JITs at the baked cache folder: the env lines to set"),
    Entry("compile-graph-breaks-static", (I_,), _D, "fla wraps the ops it dispatches in torch.compiler.disable: a "
          "graph break at every call under torch.compile"),
    Entry("compile-unknown", (I_,), _D, "whether torch.compile runs the fla ops compiled is known only by running "
          "them (verify --compile)"),
    Entry("compile-failed", (B,), "verify --compile", "torch.compile of a pass raised"),
    Entry("compile-runs-eager", (F,), "verify --compile", "under torch.compile the decoder loop or the GDN layers run "
          "eagerly"),
    Entry("compile-graph-breaks", (W,), "verify --compile", "graph breaks, while the decoder loop and GDN layers "
          "still run compiled"),
    Entry("verify-hub-not-applied", (I_,), "verify", "the job loads Hub builds for some functions; verify's layers "
          "(built from the config) load none"),
    Entry("compile-ok", (I_,), "verify --compile", "the pass compiles with no graph break"),
    Entry("compile-op-not-exercised", (F,), "verify --compile", "a fused function the pass calls whose fast "
          "implementation the compiled run never reached: its graph breaks, 0 or not, decide nothing about it"),
    Entry("compile-static-contradicted", (I_,), "verify --compile", "the compiled run reached a fused op that "
          "doctor's static reading says breaks the graph at every call, with 0 graph breaks: both are shown"),
    Entry("hub-fla-backend-fails", (B,), _D, "the Hub fla build that replaces pip's fla fails on the backend its own "
          "dispatch picks here (TileLang's JIT without nvcc: fla#949; the fla#640 guard)"),
    Entry("hub-fla-layout-assumed", (W,), _D, "the Hub fla build is not on disk: its dispatch is judged from the "
          "layout recorded for that Hub version"),
    Entry("hub-all-latest", (W,), _D, "UNSTABLE_KERNELS_ALL_LATEST makes kernels load the newest version of every "
          "Hub repository, ignoring the requested version and lockfile pins"),
    Entry("hub-variant-names-unreadable", (W,), _D, "the installed kernels cannot read some build variant names "
          "(kernels 0.19's naming)"),
    Entry("hub-decides-nothing", (F,), _H, "--model M and Hub kernels are not used by this job, or none applies on "
          "the device"),
    Entry("hub-repo-unresolved", (F,), _H, "--repo R cannot be resolved here"),
    Entry("hub-prefetch-{action}", (F,), "hub, install", "a build could not be fetched into the cache",
          members=("failed", "skipped")),
    Entry("hub-prefetch-missing", (F,), "hub, install", "no build matches, so nothing was fetched"),
    Entry("hub-bundle-missing", (B,), _H, "--bundle/--verify-bundle: a repository the load resolves (or a kernel "
          "dependency) is not in the bundle, so the offline load raises"),
    Entry("hub-bundle-digest", (B, W), _H, "--bundle/--verify-bundle: kernels' digest check fails (it raises at "
          "load) or the metadata records no digest (warning)"),
    Entry("hub-bundle-signature", (W,), _H, "--verify-bundle: kernels' signature check of metadata.json.sigstore "
          "fails or finds no signature (kernels warns)"),
    Entry("hub-bundle-not-checked", (I_,), _H, "--verify-bundle: a check the installed kernels does not make"),
    Entry("hub-bundle-lookup", (B,), _H, "--verify-bundle: kernels' offline version lookup fails on the bundle"),
    Entry("hub-bundle-variant", (B,), _H, "--verify-bundle: kernels chooses another variant than the bundled one"),
    Entry("hub-bundle-files-changed", (B,), _H, "--verify-bundle: files differ from the manifest's sha256"),
    Entry("hub-bundle-all-latest", (B, W, I_), _H, "--verify-bundle: UNSTABLE_KERNELS_ALL_LATEST is set (kernels "
          "ignores the lock and the requested versions)"),
    Entry("hub-bundle-redirect", (W,), _H, "--verify-bundle: a bundled repository's kernel-status.toml redirects "
          "to another repository"),
    Entry("hub-bundle-unchecked", (B,), _H, "--verify-bundle: kernels could not run its checks here"),
    # install
    Entry("build-target", (I_, W), _I, "the target environment the plan is made for (warning: parts unknown)"),
    Entry("install-{action}", (F,), _I, "a plan step refuses or is blocked", members=("refuse", "blocked")),
    Entry("install-predicts-broken", (B,), _I, "a plan step predicts a broken function"),
    Entry("install-failed", (B,), _I, "the install failed (and was rolled back)"),
    Entry("install-unverified", (F,), _I, "doctor did not run after the install"),
    Entry("install-for-arch", (I_,), _I, "installed for the --arch GPUs, not this machine's"),
    Entry("install-nothing-to-change", (I_,), _I, "every package is already installed as planned"),
    Entry("install-leaves-package", (F, B), _I, "a package outside this install keeps its functions' status"),
    Entry("install-stopped", (F,), _I, "the plan needs a pinned package changed: nothing was installed"),
    # trace
    Entry("{package}-kernels-ran", (I_,), _T, "a package's fast kernels ran in the trace", source="fast-packages"),
    Entry("launch-bound", (F,), _T, "the GPU waits for the CPU to launch kernels"),
    Entry("gpu-busy", (I_,), _T, "the GPU's busy fraction of the wall time"),
    Entry("trace-cpu-only", (I_,), _T, "a CPU-only trace: GPU numbers need a GPU trace"),
    Entry("trace-cpu-only-torch-path", (F,), _T, "no GPU activity recorded and the stacks show a torch reference "
          "path: record with ProfilerActivity.CUDA"),
    Entry("trace-malformed-events", (W,), _T, "events with fields of the wrong type were skipped"),
    Entry("trace-no-steps", (I_,), _T, "no ProfilerStep#N: the whole trace is one step"),
    # verify
    Entry("verify-not-run", (B,), _V, "the model could not be built: its modeling module does not import"),
    Entry("verify-cpu", (I_,), _V, "no CUDA GPU: the layers ran their torch code on the CPU"),
    Entry("verify-mismatch", (B,), _V, "the fast path's results disagree with the torch reference"),
    Entry("verify-control-cannot-decide", (F,), _V, "fast within the tolerance of the reference, but a perturbed "
          "gate/state (the positive control) is not told apart either: the match proves nothing here"),
    Entry("verify-step-failed", (B,), _V, "the step failed outside the fast functions, or on the bound path"),
    Entry("verify-incomplete", (W,), _V, "the model failed in torch code before any fast kernel ran"),
    # verify --packing --batch: the lint of the job's own batch (packing/lint.py), then the measurement
    Entry("packing-cu-seqlens-not-monotonic", (B,), _V, "cu_seqlens do not start at 0, decrease, or do not end at the "
          "token count: no forward is run"),
    Entry("packing-zero-length-segment", (W,), _V, "a repeated offset (an empty segment, tail padding included)"),
    Entry("packing-padded-offsets", (W,), _V, "SP/CP-padded offsets: transformers does not read them; how the "
          "layout and cu_seq_lens_q must relate"),
    Entry("packing-seq-idx-mismatch", (W,), _V, "seq_idx puts a token in another segment than cu_seqlens"),
    Entry("packing-position-ids-only", (W,), _V, "position_ids restart but neither cu_seq_lens nor seq_idx reaches "
          "the model"),
    Entry("packing-metadata-dropped", (W,), _V, "batch keys the model's forward does not take by name (read by no "
          "transformers code)"),
    Entry("packing-attention-mask-hides-boundaries", (W,), _V, "an attention_mask beside restarting position_ids: "
          "the attention finds no packed boundaries"),
    Entry("packing-kernel-gets-no-boundary", (B,), _V, "a recurrent kernel (GDN, KDA, Mamba, conv) ran on a row of "
          "several sequences and got no cu_seqlens / seq_idx: broken from the reach alone"),
    Entry("packing-kernel-misses-boundary", (B,), _V, "a recurrent kernel got offsets or seq_idx that miss a sequence "
          "start the row shows (offsets covering the row as one segment)"),
    Entry("packing-control-cannot-decide", (F,), _V, "the positive control (boundaries removed) is not told apart "
          "from the negative one (the same segments packed clean) at this shape and dtype"),
    Entry("packing-segment-mixed", (B,), _V, "a segment packed differs from it alone beyond the threshold between "
          "the comparison's controls (names the segment, its worst token and the first layer)"),
    Entry("packing-segments-match", (I_,), _V, "every segment packed matches it alone, forward and backward, within "
          "the threshold its controls placed"),
    Entry("packing-torch-path-refuses", (F,), _V, "transformers' torch path refuses the batch's cu_seqlens/seq_idx "
          "(no fla-core / causal-conv1d): not compared"),
    Entry("packing-batch-raises", (B,), _V, "the packed forward raised (names the function)"),
    Entry("packing-payoff", (I_,), _V, "a training step padded to the longest vs packed, on the same tokens"),
    Entry("verify-step-out-of-memory", (F,), _V, "a step ran out of memory on this machine (a limit of the check)"),
    Entry("verify-step-same-path", (I_,), _V, "both step paths ran the same implementations on the GPU: measured, no "
          "speedup or projection"),
    Entry("verify-step-reference-failed", (W,), _V, "the torch-reference step failed: no speedup to report"),
    Entry("step-control-cannot-decide", (F, I_), _V, "the step's speedup is not claimed: fallback where a known "
          "injected slowdown (the positive control) is not detected, info where the ratio lies inside the noise band "
          "of the bound path timed twice (the negative control)"),
    Entry("benchmark-control-cannot-decide", (F, I_), _V, "a benchmark pass's speedup is not claimed: fallback "
          "where a known injected slowdown is not detected, info where the ratio lies inside the A/A noise band"),
    Entry("step-{signature}", (F,), _V, "the bound path's step still shows a torch-reference signature",
          source="signatures"),
    Entry("step-launch-bound", (F,), _V, "the bound path's step is launch-bound"),
)

# An id the code builds for a decision and never puts in a report.
INTERNAL = frozenset({"-"})  # doctor/fixcheck: a finding of one severity, to rank it with decide.verdict


_DASHED = ("advice-{package}", "{package}-kernels-ran")  # the code writes the package key's `_` as `-`


def members(entry: Entry, m: matrix.Matrix, sig: matrix.TraceSignatures) -> tuple[str, ...]:
    """A family's values (the data's, for a `source`); () for a single id."""
    if entry.source == "packages":
        return tuple(m.packages)
    if entry.source == "fast-packages":
        return tuple(sig.fast_references)
    if entry.source == "signatures":
        return tuple(s.id for s in sig.signatures)
    return entry.members


def expand(entry: Entry, m: matrix.Matrix, sig: matrix.TraceSignatures) -> tuple[str, ...]:
    """Every id an entry stands for (the code writes a package key with '-' in `advice-` and `-kernels-ran`)."""
    if entry.pattern == entry.id:
        return (entry.id,)
    return tuple(entry.pattern.format(v.replace("_", "-") if entry.id in _DASHED else v)
                 for v in members(entry, m, sig))


def data_entries(m: matrix.Matrix, sig: matrix.TraceSignatures) -> tuple[Entry, ...]:
    """The findings whose ids are data: breakages.toml's rules and signatures.toml's torch-reference signatures."""
    rules = tuple(Entry(b.id, tuple(dict.fromkeys((b.severity, W))), "doctor, install",
                        f"[[breakage]]: {b.title} (warning when a condition could not be decided)")
                  for b in m.breakages)
    imports = tuple(Entry(r.id, (W,), _D, f"[[import_error]]: {r.title}") for r in m.import_errors)
    sigs = tuple(Entry(s.id, (F, I_), _T, f"signatures.toml: {s.title} {s.what} (info on a CPU-only trace)")
                 for s in sig.signatures)
    return rules + imports + sigs


def all_ids(m: matrix.Matrix, sig: matrix.TraceSignatures) -> dict[str, tuple[Severity, ...]]:
    """Every id a report can carry, with its severities."""
    out: dict[str, tuple[Severity, ...]] = {}
    for e in (*ENTRIES, *data_entries(m, sig)):
        for i in expand(e, m, sig):
            out[i] = tuple(dict.fromkeys((*out.get(i, ()), *e.severities)))
    return out


def markdown(entries: Iterable[Entry] = ENTRIES) -> str:
    """docs/findings.md: the table of the code's ids, and where the data's ids are."""
    rows = [f"| `{e.id}` | {', '.join(e.severities)} | {e.by} | {e.meaning}"
            + (f" ({', '.join(f'`{v}`' for v in e.members)})" if e.members else "")
            + (f" (one per {e.source.replace('-', ' ')[:-1]} in matrix/"
               f"{'packages' if e.source == 'packages' else 'signatures'}.toml"
               f"{', its `_` as `-`' if e.id in _DASHED else ''})" if e.source else "") + " |"
            for e in entries]
    return "\n".join([
        "# Finding ids",
        "",
        "Every finding a report carries has an `id` (JSON `findings[].id`) and a `severity`. Scripts and tests",
        "read those, never the message's wording. This table is kernelcheck/core/findings_catalogue.py",
        "(`python -m kernelcheck.core.findings_catalogue > docs/findings.md`; tests/unit/test_findings_catalogue.py",
        "checks that it lists every id the code emits, and nothing else).",
        "",
        "Ids from data are not copied here: each rule of matrix/breakages.toml (`[[breakage]]`: its severity, or",
        "`warning` when a condition could not be decided; `[[import_error]]`: `warning`) and each `[[signature]]`",
        "of matrix/signatures.toml (`trace`: `fallback`, or `info` on a CPU-only trace) is a finding of its id.",
        "",
        "| id | severity | reported by | meaning |",
        "|---|---|---|---|",
        *rows,
        "",
    ])


if __name__ == "__main__":
    print(markdown(), end="")
