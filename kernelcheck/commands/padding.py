"""`kernelcheck padding DATA`: the padding a batching rule costs on the job's data, and the packing bound."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcheck.commands.context import Context
from kernelcheck.core import jsonout
from kernelcheck.core.outcome import Outcome
from kernelcheck.core.status import Verdict

if TYPE_CHECKING:
    from kernelcheck.padding.waste import Rule, Waste


@dataclass(frozen=True)
class Request:
    """padding's options: the data file, the batching rule (budget:N, batch:N, packing:N), a tokenizer folder for
    a text column, and --plot's file."""

    data: str
    batching: str = "budget:8192"
    tokenizer: str | None = None
    plot: str | None = None


@dataclass(frozen=True)
class PaddingRun:
    """What was measured (`result`), on which data, and the plot drawn (None without --plot)."""

    data: str
    result: Waste
    drawn: dict[str, object] | None

    def to_json(self) -> dict[str, Any]:
        from kernelcheck import schemas
        from kernelcheck.padding import waste

        shown = {k: v for k, v in self.drawn.items() if k in ("file", "format", "bins", "scale")} if self.drawn \
            else None
        return {"schema": schemas.schema_id("padding"), "command": "padding", "verdict": Verdict.READY,
                "exit_code": 0, "data": self.data, "padding": waste.as_dict(self.result), "plot": shown}

    def render(self, as_json: bool) -> str:
        from kernelcheck.padding import waste

        return jsonout.dumps(self.to_json(), indent=2) if as_json else waste.render_text(self.result, self.data,
                                                                                       self.drawn)


def check(req: Request) -> Rule:
    """Every usage rule of padding, found before the data is read: the batching rule (returned, parsed) and a --plot
    file nothing can draw (a .png without a renderer, another suffix)."""
    from kernelcheck.padding import plot as plot_mod
    from kernelcheck.padding import waste

    rule = waste.Rule.parse(req.batching)
    if req.plot:
        plot_mod.check(req.plot)
    return rule


def run(req: Request, ctx: Context) -> Outcome[PaddingRun]:
    rule = check(req)
    from kernelcheck.padding import batching, lengths
    from kernelcheck.padding import plot as plot_mod

    result = batching.measure(lengths.chunks(req.data, req.tokenizer), rule)  # vectorized, bounded memory
    drawn: dict[str, object] | None = None
    if req.plot:
        from kernelcheck.padding import svg  # only for a plot: its XML escaping pulls in urllib

        axis = svg.axis_for(result)
        how = plot_mod.write(req.plot, svg.render(result, f"{Path(req.data).name}: lengths and padding under {rule}"))
        drawn = {"file": req.plot, "format": "png" if how.startswith("PNG") else "svg", "bins": len(axis.edges) - 1,
                 "scale": "log" if axis.log else "linear", "how": how, "bin_text": axis.describe()}
    return Outcome(PaddingRun(req.data, result, drawn), Verdict.READY)
