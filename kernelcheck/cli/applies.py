"""Flags that do not apply are bad usage (exit 2), never ignored silently; paths a run will write are tried
before it starts.

`verify --layers 2` without `--step` used to run the per-function check and drop the flag: the user read a
verdict for something they did not ask. Each rule here names the flag and what it needs.
"""

from __future__ import annotations

from pathlib import Path

from kernelcheck.core.errors import BadInput


def _refuse(flag: str, needs: str, why: str) -> None:
    raise BadInput(f"{flag} only applies with {needs}: {why} Drop {flag}, or add {needs}; nothing was run.")


def check_verify_flags(*, step: bool, packing: bool, layers: int | None, checkpointing: bool | None,
                       trace_dir: str | None, benchmark: bool, shape: str | None, tokens: int | None) -> None:
    """BadInput for the first `verify` flag that the chosen kind of run (per function, --step, --packing)
    would ignore. With --packing, --benchmark times the padded vs packed step (the payoff)."""
    if packing:
        for flag, given in (("--step", step), ("--shape full", shape == "full"), ("--tokens", tokens is not None),
                            ("--benchmark", benchmark and step)):
            if given:
                raise BadInput(f"{flag} does not apply with --packing: --packing runs two short sequences packed "
                               "and alone on the tiny shape, at its own lengths. Run them as two commands; nothing "
                               "was run.")
    if not step:
        for flag, given in (("--layers", layers is not None),
                            ("--checkpointing" if checkpointing else "--no-checkpointing", checkpointing is not None),
                            ("--trace-dir", trace_dir is not None)):
            if given:
                _refuse(flag, "--step", "it shapes the whole-training-step measurement, which runs only then.")
    elif benchmark:
        raise BadInput("--benchmark does not apply with --step: --step times whole training steps of both paths "
                       "already; --benchmark times single layers without --step. Nothing was run.")


def check_trace_dir(path: str | None) -> None:
    """An unusable --trace-dir is bad input found before the step runs (the traces would be lost after it):
    the folder is created (with its parents) and a file is written and removed there, for real."""
    if not path:
        return
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise BadInput(f"--trace-dir {path} is a file; give a folder (it is created if missing). Nothing was run.")
    probe = target / ".kernelcheck-probe"
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise BadInput(f"cannot write the step traces to {str(target)!r}: {exc.strerror or exc}. Pass --trace-dir "
                       "a folder you can write (it is created if missing); nothing was run.") from None


def check_packing_batch_flags(*, packing: bool, batch: str | None, collator: str | None,
                              lengths: str | None, mode: str | None = None, benchmark: bool = False,
                              junit: str | None = None, output: str | None = None) -> None:
    """--batch, --collator and --lengths belong to --packing; --collator needs --lengths; one batch source; a
    packing MODE (what transformers' collator passes) is not judged on the job's own batch or the payoff. An
    empty value is refused (not read as "not given"), and so is a JUnit file the packing report cannot fill."""
    for flag, given in (("--batch", batch), ("--collator", collator), ("--lengths", lengths)):
        if given is not None and not given.strip():
            raise BadInput(f"{flag} is empty: give {'MODULE:CALLABLE' if flag == '--collator' else 'a file path'} "
                           "(an unset shell variable?). Nothing was run.")
    xml = junit or (output if output and output.endswith(".xml") else None)
    if packing and xml:
        flag = "--junit" if junit else "-o"
        raise BadInput(f"{flag} {xml}: --packing writes no JUnit report (it has no per-function test cases); use "
                       "-o FILE.json (or --json) for its report. Nothing was run.")
    if mode not in (None, "all") and (batch or collator or benchmark):
        raise BadInput(f"--packing {mode} judges transformers' own collator in that mode; the job's batch (--batch, "
                       "--collator) says itself what it passes, and --benchmark times the recommended one. Drop "
                       f"{mode} (--packing alone); nothing was run.")
    for flag, given in (("--batch", batch), ("--collator", collator), ("--lengths", lengths)):
        if given and not packing:
            _refuse(flag, "--packing", "it gives the packed batch (or the lengths) that --packing checks.")
    if batch and collator:
        raise BadInput("--batch and --collator are two sources of the same batch: give one. Nothing was run.")
    if collator and not lengths:
        raise BadInput("--collator needs --lengths FILE: the lengths of the examples the collator packs into one "
                       "batch. Nothing was run.")
