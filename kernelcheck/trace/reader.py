"""Stream the events of a Chrome trace JSON file (torch profiler export), plain or gzip, in bounded memory.

`json.load` of a 400 MB trace builds every event as a dict at once (several GB). Here the file is read
in chunks, the top-level object is walked key by key, and the "traceEvents" array is decoded one event
at a time with the C JSON scanner; only the current chunk and the current event are alive. Top-level
keys other than traceEvents (deviceProperties, distributedInfo, an "ERROR" key on CPU-only traces ...)
are small and kept in `metadata`, whatever their order. A bare JSON array of events is accepted too.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import gzip
import json
import json.decoder
import json.scanner
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from kernelcheck.core import paths
from kernelcheck.core.errors import BadInput

CHUNK = 1 << 20
# One event (or one metadata value) larger than this is not a profiler trace; stop before eating memory.
MAX_VALUE = 64 << 20
MARGIN = 64 << 10  # events are < 1 KiB; a longer one just takes the slow path
_WS = re.compile(r"[ \t\n\r]*")
_WS_COMMA = re.compile(r"[ \t\n\r,]*")
_DECODER = json.JSONDecoder()
# The C scanner behind json.loads: scan_once(text, idx) -> (value, end). StopIteration: no value at idx.
_SCAN = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
# typeshed does not declare json.decoder.scanstring: (text, end) -> (the string, the index after its quote).
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

# The fast path: a run of events in the layout torch's profiler writes (",\n  {\n    " before the first key,
# "\n  }" after the last), matched by one regex in C. An X event's keys are torch's, in torch's order, each once:
# its strings are their own text (a run holds no backslash), ts and dur are decimals (torch writes "%.3f":
# float(text), as json gives), its args object ends at its first "}" (`[^}]*`, sre's quickest loop; an args
# object of another shape leaves text no match covers, and the run is not taken). A flow event ("ph" "s" or "f",
# a quarter of a GPU trace's events) in torch's keys and order: matched, nothing captured. Any other event is an
# object with at most one flat object inside: only counted. Loops are possessive (`*+`, `++`: no backtracking
# state) wherever the character that follows cannot continue them; that and the fixed leading comma (the
# array's first event gets one lent, see `_fast_run`) make sre's work per event a fifth less.
_ID = r'(?:-?[0-9]++|"[^"]*+")'
_SEP = r',[ \n]++'
_HEAD = rf'{_SEP}"name": "([^"]*+)"{_SEP}"pid": {_ID}{_SEP}"tid": {_ID}{_SEP}"ts": (-?[0-9]++\.[0-9]++){_SEP}'
_ARGS_SKIPPED = rf'(?:[ \n]*+{_SEP}"args": \{{[^}}]*+\}})?'
_CPU_OP = rf'"ph": "X"{_SEP}"cat": "cpu_op"{_HEAD}"dur": ([0-9]++\.[0-9]++){_ARGS_SKIPPED}'
_PYTHON = rf'"ph": "X"{_SEP}"cat": "python_function"{_HEAD}"dur": [0-9]++\.[0-9]++{_ARGS_SKIPPED}'
_X = (rf'"ph": "X"{_SEP}"cat": "([^"]*+)"{_SEP}"name": "([^"]*+)"{_SEP}"pid": {_ID}{_SEP}'
      rf'"tid": (-?[0-9]++|"[^"]*+"){_SEP}"ts": (-?[0-9]++\.[0-9]++){_SEP}"dur": ([0-9]++\.[0-9]++)'
      rf'(?:[ \n]*+{_SEP}"args": (\{{[^}}]*+\}}))?')
_FLOW = (rf'"ph": "[sf]"{_SEP}"id": {_ID}{_SEP}"pid": {_ID}{_SEP}"tid": {_ID}{_SEP}"ts": -?[0-9]++(?:\.[0-9]++)?'
         rf'{_SEP}"cat": "[^"]*+"{_SEP}"name": "[^"]*+"(?:{_SEP}"bp": "e")?')
# any other event: "ph" first (or after "name", as torch writes metadata and instants) and not "X"; the rest is
# kept to check that no second "ph" follows
_OTHER = r'(?:"name": "[^"]*+",[ \n]++)?"ph": "[^X"][^"]*+"([^{}]*(?:\{[^{}]*\}[^{}]*)?)'
# _FAST.split(run) -> [text before the first match, then per event: its groups and the text before the next
# match]. The groups: a CPU op's name, ts, dur; a Python function's name, ts; another X event's cat, name, tid,
# ts, dur, args text; another event's text after its "ph"; None where the event is not of that kind (a flow
# event: None in every group). Column j of a run: parts[1 + j::FAST_STRIDE].
_BODY = rf"(?:{_CPU_OP}|{_PYTHON}|{_X}|{_FLOW}|{_OTHER})"
_FAST = re.compile(rf"(?:,\n  \{{\n    {_BODY}[ \n]*\n  \}})")
_FAST_BYTES = re.compile(_FAST.pattern.encode())  # the same, over the file's bytes (see `_raw_runs`)
# The same events re-dumped on one line by another tool (json.dump's default separators): ", {" before the first
# key, "}" after the last. The groups are the same, so the same columns go to the same `fast`.
_COMPACT = re.compile(rf"(?:, \{{{_BODY}\}})")
_COMPACT_BYTES = re.compile(_COMPACT.pattern.encode())
FAST_STRIDE = 13
CPU_NAME, CPU_TS, CPU_DUR, PY_NAME, PY_TS, X_CAT, X_NAME, X_TID, X_TS, X_DUR, X_ARGS, OTHER_REST = range(12)
_EVENT_END = "\n  },"  # how torch ends every event but the last
_EVENT_END_BYTES = _EVENT_END.encode()
_COMPACT_END = "}, {"  # between two events of a one-line re-dump


class _Layout:
    """Where runs of events end and what `_FAST` reads them in: torch's layout, or one line (`compact`). Read from
    the module when used, so that a test can turn a layout's fast path off."""

    def __init__(self, compact: bool) -> None:
        self.compact = compact

    @property
    def end(self) -> str:
        return _COMPACT_END if self.compact else _EVENT_END

    @property
    def end_bytes(self) -> bytes:
        return _COMPACT_END.encode() if self.compact else _EVENT_END_BYTES

    @property
    def fast(self) -> re.Pattern[str]:
        return _COMPACT if self.compact else _FAST

    @property
    def fast_bytes(self) -> re.Pattern[bytes]:
        return _COMPACT_BYTES if self.compact else _FAST_BYTES

    def lent(self, run: str) -> str | None:
        """The array's first event (no comma before it) with the comma the pattern starts with; None when `run`
        does not start with an event."""
        i = run.find("{" if self.compact else "\n  {")
        if i < 0 or run[:i].strip(" \t\n\r"):
            return None
        return (", " if self.compact else ",") + run[i:]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: the reading and the aggregation make lists and tuples by the million
    and no cycle; on a large trace the collector walked them hundreds of times (7% of the time) to free nothing."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def decode_args(text: str) -> dict[str, Any]:
    """The args object of an event `_FAST` matched (flat, strings without escapes), decoded as json would.
    ValueError when it is not JSON (the fast match does not check every byte of an args object)."""
    try:
        obj, end = _SCAN(text, 0)
    except (StopIteration, json.JSONDecodeError):
        obj, end = None, -1
    if type(obj) is not dict or end != len(text):
        raise ValueError(f"an args object is not JSON: {text[:80]!r}")
    return obj


class TraceReader:
    """Iterate `events()` once; `metadata` (all top-level keys but traceEvents) is complete afterwards.

    `bytes_read` counts bytes of the file as stored (compressed for gzip), for progress against its size.
    Memory: one chunk (1 MiB) plus the largest single value, whatever the file size.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.metadata: dict[str, Any] = {}
        self.gzip = False
        self.saw_trace_events = False
        self.events_read = 0
        self._raw: IO[bytes] | None = None
        self._fh: IO[bytes] | None = None
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._state = 0  # 0: before the first value, 1: inside the top-level object, 2: done
        self._raw_fallbacks = 0
        self._layout: _Layout | None = None  # decided at the first event of traceEvents

    # -- input -------------------------------------------------------------------------------------
    def _open(self) -> None:
        paths.regular_file(self.path, "the trace", "Give the path of a trace file written by torch.profiler "
                           "(prof.export_chrome_trace('trace.json') or tensorboard_trace_handler); write a piped "
                           "trace to a file first.")
        try:
            raw = open(self.path, "rb")  # noqa: SIM115 - the handle outlives this function (streaming reader closes it)
        except FileNotFoundError:
            raise BadInput(f"{self.path}: no such file. Give the path of a trace written by torch.profiler "
                           "(prof.export_chrome_trace('trace.json') or tensorboard_trace_handler).") from None
        except IsADirectoryError:
            raise BadInput(f"{self.path} is a folder; give one trace file (*.json or *.json.gz) from it.") from None
        except OSError as exc:
            raise BadInput(f"{self.path}: cannot read it ({exc.strerror}).") from None
        self._raw = raw
        magic = raw.read(2)
        raw.seek(0)
        if magic == b"\x1f\x8b":  # gzip whatever the file is called
            self.gzip = True
            self._fh = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        else:
            self._fh = raw

    @property
    def bytes_read(self) -> int:
        try:
            return self._raw.tell() if self._raw else 0
        except (OSError, ValueError):
            return 0

    def _refill(self, why: str) -> None:
        """Keep the unread tail, append the next chunk. At end of file: the trace is cut short -> BadInput."""
        if self._eof:
            raise BadInput(self._malformed(why))
        chunk = self._read()
        buf = self._buf[self._pos:]
        if len(buf) > MAX_VALUE:
            raise BadInput(self._malformed(f"one JSON value is larger than {MAX_VALUE >> 20} MiB, or the JSON is "
                                           f"malformed near byte {self.bytes_read}"))
        if chunk:
            buf += self._dec.decode(chunk)
        else:
            self._eof = True
            buf += self._dec.decode(b"", final=True)
        self._buf, self._pos = buf, 0

    def _read(self) -> bytes:
        try:
            return self._fh.read(CHUNK)  # type: ignore[union-attr]
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError; flipped bytes: zlib.error
            raise BadInput(f"{self.path}: the file is damaged or truncated ({exc}).") from None

    def _skip(self, rx: re.Pattern[str]) -> str:
        """Skip whitespace (and commas with _WS_COMMA); return the next char, '' at end of file."""
        while True:
            pos = rx.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            self._pos = pos
            if pos < len(self._buf):
                return self._buf[pos]
            if self._eof:
                return ""
            self._refill("")

    def _value(self) -> Any:
        """Decode one JSON value at the current position, reading more input while it is incomplete."""
        while True:
            try:
                obj, end = _SCAN(self._buf, self._pos)
                # A number or literal ending exactly at the buffer end may continue in the next chunk.
                if end < len(self._buf) or self._eof:
                    self._pos = end
                    return obj
            except (StopIteration, json.JSONDecodeError):
                pass
            except RecursionError:
                raise BadInput(self._malformed("a JSON value is nested too deeply")) from None
            self._refill("the file ends in the middle of a JSON value (truncated download or interrupted export?)")

    def _key(self) -> str:
        while True:
            try:
                s, end = _scanstring(self._buf, self._pos + 1)
                self._pos = end
                return s
            except json.JSONDecodeError:
                self._refill("the file ends inside a key")

    # -- structure ---------------------------------------------------------------------------------
    def _first(self) -> str:
        """The first non-blank character, '[' or '{'; BadInput for an empty file or any other start."""
        first = self._skip(_WS)
        if first == "":
            raise BadInput(f"{self.path} is empty: not a torch profiler trace.")
        if first not in ("[", "{"):
            raise BadInput(self._malformed("it does not start with a JSON object"))
        return first

    def _top_key(self) -> str | None:
        """Read the next top-level key and its ':'; None at the object's closing '}'."""
        c = self._skip(_WS_COMMA)
        if c == "}":
            return None
        if c != '"':
            raise BadInput(self._malformed("the top-level object is malformed" if c else
                                           "the file ends before the top-level object closes"))
        k = self._key()
        if self._skip(_WS) != ":":
            raise BadInput(self._malformed(f"':' expected after key {k!r}"))
        self._pos += 1
        return k

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield each event dict of traceEvents in file order."""
        self._open()
        try:
            while self._next_array():
                yield from self._array()
        finally:
            self._close()

    def scan(self, fast: Callable[[list[str | None], int], None], slow: Callable[[list[dict[str, Any]]], None],
             progress: Callable[[int], None] | None = None) -> None:
        """Hand every event of traceEvents over in file order, in batches, without a dict per event where the
        file is in the layout torch writes: `fast` gets the "X" events of such a run as tuples (see `_FAST`),
        `slow` the events of anything else as dicts, decoded exactly as `events()` decodes them. `progress`
        gets the bytes read after each chunk."""
        self._open()
        try:
            with gc_paused():
                while self._next_array():
                    self._scan_array(fast, slow, progress)
        finally:
            self._close()

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        if self._raw is not None:
            self._raw.close()

    def _next_array(self) -> bool:
        """Walk the top level to the next traceEvents array (other keys go to `metadata`); False at its end."""
        if self._state == 0:
            self._state = 1
            if self._first() == "[":  # a bare array of events is a valid Chrome trace too
                self._pos += 1
                self.saw_trace_events = True
                self._state = 2
                return True
            self._pos += 1
        if self._state == 2:
            return False
        while True:
            k = self._top_key()
            if k is None:
                self._state = 2
                return False
            c = self._skip(_WS)
            if k == "traceEvents" and c == "[":
                self._pos += 1
                self.saw_trace_events = True
                return True
            self.metadata[k] = self._value()

    def _array(self) -> Iterator[dict[str, Any]]:
        while True:
            evs, done = self._complete()
            yield from evs
            if done:
                return
            self._refill("the traceEvents array is cut short or malformed (truncated file?)")

    def _complete(self) -> tuple[list[dict[str, Any]], bool]:
        """Decode the complete events in the buffer from the current position, one C scanner call each:
        (the event dicts, True when the array's "]" was reached)."""
        scan, ws_comma = _SCAN, _WS_COMMA.match
        decode_error = json.JSONDecodeError
        buf, pos, eof = self._buf, self._pos, self._eof
        n = len(buf)
        # Stop before the last MARGIN chars rather than letting the scanner fail on a cut event:
        # a JSONDecodeError costs a line count over the whole buffer.
        stop = n if eof else n - min(MARGIN, CHUNK // 2)
        out: list[dict[str, Any]] = []
        count = 0
        try:
            while True:
                at = ws_comma(buf, pos).end()  # type: ignore[union-attr]
                if at >= stop:
                    break
                if buf[at] == "]":
                    self._pos = at + 1
                    return out, True
                try:
                    ev, end = scan(buf, at)
                except (StopIteration, decode_error):
                    break  # incomplete; a malformed one is caught by the size guard or end of file
                except RecursionError:
                    raise BadInput(self._malformed("an event is nested too deeply")) from None
                if end >= n and not eof:
                    break
                pos = end
                count += 1
                if type(ev) is dict:  # tolerate stray values: a trace viewer ignores them too
                    out.append(ev)
            self._pos = pos  # before the comma that follows the last event: where a fast run starts
            return out, False
        finally:
            self.events_read += count

    def _scan_array(self, fast: Callable[[list[str | None], int], None],
                    slow: Callable[[list[dict[str, Any]]], None], progress: Callable[[int], None] | None) -> None:
        """`_array` with a fast path. The buffer's complete events up to its last event end in torch's layout
        are matched by one C-level `split` (_FAST); that run is taken when the matches tile it exactly, it
        holds no backslash (so every string is its own text) and no event of another shape holds a second "ph"
        (which json would read as the event's). Anything else, and the events after the run, go through the
        JSON scanner as before."""
        if self._layout is None:  # torch writes "\n  {\n    " before the first key; a one-line re-dump '{"'
            at = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            self._layout = _Layout(self._buf.startswith('{"', at))
        sep = self._layout.end
        while True:
            buf, pos = self._buf, self._pos
            cut = buf.rfind(sep, pos)
            if cut > pos:
                self._fast_run(buf[pos:cut + sep.index("}") + 1], fast)  # through the event's "}"
            evs2, done = self._complete()
            if evs2:
                slow(evs2)
            if done:
                return
            if progress is not None:
                progress(self.bytes_read)
            if not self._raw_runs(fast, progress):
                self._refill("the traceEvents array is cut short or malformed (truncated file?)")

    def _raw_runs(self, fast: Callable[[list[Any], int], None], progress: Callable[[int], None] | None) -> bool:
        """Read on as bytes, without decoding them, while _FAST reads each chunk's complete events whole (what
        torch writes): `fast` gets their columns as bytes. At the first chunk it does not, or at the end of the
        file, what is unread is decoded into the buffer and the text path goes on from there. False when nothing
        was read (a multi-byte character cut at the chunk's end is pending, or runs fell back too often)."""
        if self._eof or self._raw_fallbacks >= 8 or self._dec.getstate()[0]:
            return False
        raw = self._buf[self._pos:].encode()
        self._buf, self._pos = "", 0
        layout = self._layout or _Layout(False)
        while True:
            chunk = self._read()
            if not chunk:
                self._eof = True
                self._buf = self._dec.decode(raw, final=True)
                return True
            pending = len(raw)
            raw += chunk
            parts = layout.fast_bytes.split(raw)
            if len(parts) == 1 and pending < max(CHUNK, 4096) and layout.end_bytes not in raw:
                pass  # an event cut by the chunk's end, none complete yet: read on (once: else not torch's layout)
            elif (parts[0] or any(parts[FAST_STRIDE:-1:FAST_STRIDE])
                  or raw.find(b"\\", 0, len(raw) - len(parts[-1])) >= 0
                  or b'"ph"' in b"".join(filter(None, parts[1 + OTHER_REST::FAST_STRIDE]))):
                self._raw_fallbacks += 1
                self._buf = self._dec.decode(raw)
                return True
            else:
                n = len(parts) // FAST_STRIDE
                fast(parts, n)
                self.events_read += n
                raw = parts[-1]
            if len(raw) > MAX_VALUE:
                self._buf = self._dec.decode(raw)
                return True
            if progress is not None:
                progress(self.bytes_read)

    def _fast_run(self, run: str, fast: Callable[[list[str | None], int], None]) -> None:
        """Hand `run` (complete events from the current position) to `fast` if _FAST reads it whole, else its
        part before the first event _FAST cannot read (torch writes a few events in another shape, such as the
        "Trace" span near the end); what is left goes through the JSON scanner. Each event starts with a comma
        but the array's first: that one (after blank space) is lent one to match."""
        layout = self._layout or _Layout(False)
        for _ in range(2):
            text = run if run[:1] == "," else layout.lent(run)
            if text is None:
                return
            parts = layout.fast.split(text)
            if parts[0]:  # the first event is not one _FAST reads
                return
            gap = next(filter(None, parts[FAST_STRIDE::FAST_STRIDE]), None)
            if gap is not None:
                k = run.find(gap)  # the first text no match covers (an earlier copy: a shorter run, still exact)
                if k <= 0:
                    return
                run = run[:k]
                continue
            n = len(parts) // FAST_STRIDE
            if "\\" not in run and '"ph"' not in "".join(filter(None, parts[1 + OTHER_REST::FAST_STRIDE])):
                fast(parts, n)
                self.events_read += n
                self._pos += len(run)
            return

    def _malformed(self, why: str) -> str:
        return (f"{self.path} is not a readable Chrome trace: {why}. kernelcheck trace reads the JSON that "
                "torch.profiler writes (prof.export_chrome_trace('trace.json'), plain or .gz).")
