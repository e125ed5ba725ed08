"""Stream the events of a Chrome trace JSON file (torch profiler export), plain or gzip, in bounded memory.

`json.load` of a 400 MB trace builds every event as a dict at once (several GB). Here the file is read
in chunks, the top-level object is walked key by key, and the "traceEvents" array is decoded one event
at a time with the C JSON scanner; only the current chunk and the current event are alive. Top-level
keys other than traceEvents (deviceProperties, distributedInfo, an "ERROR" key on CPU-only traces ...)
are small and kept in `metadata`, whatever their order. A bare JSON array of events is accepted too.
"""

from __future__ import annotations

import codecs
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
        try:
            chunk = self._fh.read(CHUNK)  # type: ignore[union-attr]
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError; flipped bytes: zlib.error
            raise BadInput(f"{self.path}: the file is damaged or truncated ({exc}).") from None
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
            if self._first() == "[":  # a bare array of events is a valid Chrome trace too
                self._pos += 1
                self.saw_trace_events = True
                yield from self._array()
                return
            self._pos += 1
            while True:
                k = self._top_key()
                if k is None:
                    return
                c = self._skip(_WS)
                if k == "traceEvents" and c == "[":
                    self._pos += 1
                    self.saw_trace_events = True
                    yield from self._array()
                else:
                    self.metadata[k] = self._value()
        finally:
            if self._fh is not None:
                self._fh.close()
            if self._raw is not None:
                self._raw.close()

    def _array(self) -> Iterator[dict[str, Any]]:
        # The hot loop: locals only, one C scanner call per event, a refill only at chunk ends.
        scan, ws_comma = _SCAN, _WS_COMMA.match
        decode_error = json.JSONDecodeError
        count = 0
        try:
            while True:
                buf, pos, eof = self._buf, self._pos, self._eof
                n = len(buf)
                # Refill before the last MARGIN chars rather than letting the scanner fail on a cut event:
                # a JSONDecodeError costs a line count over the whole buffer.
                stop = n if eof else n - min(MARGIN, CHUNK // 2)
                while True:
                    pos = ws_comma(buf, pos).end()  # type: ignore[union-attr]
                    if pos >= stop:
                        break
                    if buf[pos] == "]":
                        self._pos = pos + 1
                        return
                    try:
                        ev, end = scan(buf, pos)
                    except (StopIteration, decode_error):
                        break  # incomplete; a malformed one is caught by the size guard or end of file
                    except RecursionError:
                        raise BadInput(self._malformed("an event is nested too deeply")) from None
                    if end >= n and not eof:
                        break
                    pos = end
                    count += 1
                    if type(ev) is dict:  # tolerate stray values: a trace viewer ignores them too
                        yield ev
                self._pos = pos
                self._refill("the traceEvents array is cut short or malformed (truncated file?)")
        finally:
            self.events_read += count

    def _malformed(self, why: str) -> str:
        return (f"{self.path} is not a readable Chrome trace: {why}. kernelcheck trace reads the JSON that "
                "torch.profiler writes (prof.export_chrome_trace('trace.json'), plain or .gz).")
