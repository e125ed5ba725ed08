"""The fields of a report file that `compare` reads, checked for their types and values before anything uses them.

`summary.check_report` checks the schema and that the keys exist; here each one is held to what doctor and
verify write (verdict one of ready/fallback/broken and the exit code that goes with it, environment an object,
functions a list of objects with a known status, findings a list of objects). A file that is not one is bad input
(exit 2) naming the file and the field, never an internal error or a verdict taken from a hand-made file.
"""

from __future__ import annotations

from typing import Any

from kernelcheck.core.errors import BadInput
from kernelcheck.core.status import EXIT_CODE, Status, Verdict

_STATUSES = {s.value for s in Status}
_VERDICT_EXIT = {v.value: code for v, code in EXIT_CODE.items()}
_ERROR_EXITS = (1, 2, 3, 4, 130, 143)  # a run that stopped before its report: error, bad input, signals


def _bad(source: str, field: str, value: Any, wanted: str) -> BadInput:
    shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return BadInput(f"{source}: field \"{field}\" is {shown[:60]}, not {wanted}. The file was not "
                    "written by `kernelcheck doctor/verify --json` or was edited: rerun the check on that node.")


def _exit_code(data: dict[str, Any], source: str, allowed: tuple[int, ...]) -> int:
    code = data.get("exit_code")
    if isinstance(code, bool) or not isinstance(code, int) or code not in allowed:
        raise _bad(source, "exit_code", code, f"one of {', '.join(map(str, allowed))}")
    return code


def _records(data: dict[str, Any], key: str, source: str) -> list[Any]:
    items = data.get(key)
    if items is None and key == "findings":
        return []
    if not isinstance(items, list):
        raise _bad(source, key, items, "a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(source, f"{key}[{i}]", item, "an object")
    return items


def _functions(data: dict[str, Any], source: str) -> None:
    for i, f in enumerate(_records(data, "functions", source)):
        if not isinstance(f.get("name"), str):
            raise _bad(source, f"functions[{i}].name", f.get("name"), "a string")
        if not isinstance(f.get("status"), str) or f["status"] not in _STATUSES:
            raise _bad(source, f"functions[{i}].status", f.get("status"), f"one of {', '.join(sorted(_STATUSES))}")


def _environment(env: Any, source: str) -> None:
    if not isinstance(env, dict):
        raise _bad(source, "environment", env, "an object")
    for key, kind, words in (("torch", dict, "an object"), ("packages", dict, "an object"), ("gpus", list, "a list")):
        if env.get(key) is not None and not isinstance(env[key], kind):
            raise _bad(source, f"environment.{key}", env[key], words)
    for i, g in enumerate(env.get("gpus") or []):
        if not isinstance(g, dict):
            raise _bad(source, f"environment.gpus[{i}]", g, "an object")


def check_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    """`data` (already through summary.check_report) when every field compare reads has its type."""
    if data.get("error") is not None and data.get("verdict") is None:
        if not isinstance(data["error"], str):
            raise _bad(source, "error", data["error"], "a string")
        _exit_code(data, source, _ERROR_EXITS)
        if data.get("environment"):  # a stopped run that recorded where it ran: the record reads its fields too
            _environment(data["environment"], source)
            _body(data, source)
        return data
    verdict = data.get("verdict")
    if not isinstance(verdict, str) or verdict not in _VERDICT_EXIT:
        raise _bad(source, "verdict", verdict, f"one of {', '.join(v.value for v in Verdict)}")
    code = _exit_code(data, source, tuple(sorted(set(_VERDICT_EXIT.values()))))
    if code != _VERDICT_EXIT[verdict]:
        raise _bad(source, "exit_code", code, f"{_VERDICT_EXIT[verdict]} (the exit code of verdict {verdict!r})")
    _environment(data.get("environment"), source)
    _body(data, source)
    return data


def _body(data: dict[str, Any], source: str) -> None:
    """The model, mode, functions and findings a record reads (summary.summarise)."""
    for key in ("model", "mode", "device"):
        if data.get(key) is not None and not isinstance(data[key], str if key == "mode" else dict):
            raise _bad(source, key, data[key], "a string" if key == "mode" else "an object")
    device = data.get("device")
    if isinstance(device, dict) and not isinstance(device.get("type"), str):
        raise _bad(source, "device.type", device.get("type"), "a string (cuda, cpu, ...)")
    _functions(data, source)
    _records(data, "findings", source)
