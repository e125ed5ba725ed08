"""`kernelcheck warm`: compile the job's fast path into one cache folder, and print the env lines that find it."""

from __future__ import annotations

import json

import click

from kernelcheck.cli import outfile
from kernelcheck.cli.common import MODEL_HELP, context, emit, guarded, mode_option, output_options
from kernelcheck.cli.complete import complete_model
from kernelcheck.cli.outfile import output_file_option


def _shapes(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    shapes = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in shapes if s not in ("tiny", "full")]
    if bad or not shapes:
        raise click.BadParameter(f"takes tiny, full or tiny,full, not {value!r}.")
    return shapes


@click.command("warm")
@click.option("--model", "-m", "model", shell_complete=complete_model, default=None, help=MODEL_HELP)
@click.option("--cache-dir", "cache_dir", required=True, type=click.Path(file_okay=False),
              help="The folder every JIT writes into (Triton, TileLang, FlashQLA; Inductor with --compile), and "
                   "where the manifest of their keys goes. Ship it in the image at the same path.")
@mode_option
@click.option("--shape", "shapes", default="tiny", show_default=True, callback=_shapes, metavar="tiny|full|tiny,full",
              help="The shapes to compile for: tiny (what verify, the live gate, runs), full (one real-size layer "
                   "of each type: the job's head dims and chunk sizes), or both.")
@click.option("--tokens", type=int, default=None,
              help="Sequence length (batch 1). Default: verify's (matrix/verify.toml: 128 tiny, 8192 full).")
@click.option("--compile", "compile_", is_flag=True,
              help="Also run the training step under torch.compile, with TORCHINDUCTOR_CACHE_DIR in the folder.")
@click.option("--packing", is_flag=True, help="Also run verify --packing's measurement (its varlen kernels).")
@click.option("--print-env", "print_env", is_flag=True,
              help="Only print the VAR=folder lines that point a job's JITs at --cache-dir (an env file); "
                   "nothing runs.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (schema kernelcheck.warm/1) on stdout.")
@output_options
@output_file_option
@guarded("warm")
def warm(model: str | None, cache_dir: str, mode: str, shapes: tuple[str, ...], tokens: int | None, compile_: bool,
         packing: bool, print_env: bool, as_json: bool) -> int:
    """Compile the fast path MODEL's job runs into one folder an image can ship, and prove what it holds.

    Runs the model's real layers (forward, backward, prefill, cached decode: what verify runs) at the shapes
    given, in child processes whose environment points every JIT cache into --cache-dir (yours is not
    changed); then runs them once more in a fresh process to measure the hit a job will get. Prints what
    each JIT compiled, the key it depends on (GPU arch, ptxas, package versions, source hash) and the
    time; writes the keys to DIR/kernelcheck-cache.json, which `doctor --cache-dir DIR` and `verify
    --cache-dir DIR` compare with the node before anything compiles. Needs a GPU of the job's kind.

    \b
    Examples:
      kernelcheck warm --model qwen3.8-27b --cache-dir /opt/jit-cache          # tiny: the gate
      kernelcheck warm --model qwen3.8-27b --shape tiny,full --cache-dir /opt/jit-cache
      kernelcheck warm --cache-dir /opt/jit-cache --print-env > jit-cache.env
      kernelcheck doctor --model qwen3.8-27b --cache-dir /opt/jit-cache        # the cache proof
    """
    from kernelcheck.commands import warm as command

    req = command.Request(model, cache_dir, mode, shapes, tokens, compile_, packing, print_env)
    outcome = command.run(req, context(sink=lambda line: click.echo(line, err=True), as_json=as_json))
    outfile.write(json.dumps(outcome.report.to_json(), indent=2))  # -o FILE
    emit(outcome.report.render(as_json), is_json=as_json)
    return outcome.exit_code
