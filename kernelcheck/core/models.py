"""Resolve what the user typed (alias, Hub id, local folder, model_type) to a config and its needs.

Offline first: alias table and shipped configs, then a local folder, then the Hugging Face
cache, then the Hub (config.json only, never weights) when the network may be used.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kernelcheck.core import matrix, paths, settings
from kernelcheck.core.errors import BadInput, UnresolvedHost

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class Needs:
    """What a model's layers call: fast functions, the packages behind them, attention impl."""

    functions: tuple[str, ...]
    packages: tuple[str, ...]
    attn_implementation: str
    attention_package: str  # import name, "" for torch built-ins (sdpa, eager)


@dataclass(frozen=True)
class ResolvedModel:
    query: str
    id: str | None
    model_type: str
    source: str  # alias | shipped-config | local | hf-cache | hub | model_type
    spec: matrix.ModelType
    config: dict[str, Any] = field(default_factory=dict)
    alias: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def text_config(self) -> dict[str, Any]:
        text = self.config.get("text_config")
        return text if isinstance(text, dict) and text else self.config


# transformers' configs are kilobytes (the largest shipped ones, with label maps, well under 1 MB); reading and
# parsing a 300 MB JSON takes 1.5 GB of memory before it could be refused for its content.
CONFIG_MAX_BYTES = 16 << 20


def _read_config(path: Path, query: str) -> dict[str, Any]:
    paths.regular_file(path, "the config", "A model folder needs the config.json that came with the model.")
    size = path.stat().st_size
    if size > CONFIG_MAX_BYTES:
        raise BadInput(f"{path} is {size / 1e6:,.0f} MB, too large for a transformers config.json (they are "
                       f"kilobytes; kernelcheck reads up to {CONFIG_MAX_BYTES >> 20} MiB): it is not a model's "
                       "config (weights or a data file under that name?).")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"Cannot read {path} for model '{query}': {exc.strerror or exc}. "
                       "Check the path and its permissions.") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason}): it is not a transformers "
                       "config.json (a binary file, or a weights file under the wrong name?).") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
                       "A model folder needs the config.json that came with the model.") from None
    except RecursionError:
        raise BadInput(f"{path} nests JSON too deeply to read: it is not a transformers config.json.") from None
    if not isinstance(cfg, dict):
        raise BadInput(f"{path} holds a JSON {type(cfg).__name__}, not an object: it is not a transformers "
                       "config.json.")
    if not isinstance(cfg.get("model_type"), str) or not cfg["model_type"].strip():
        raise BadInput(f"{path} has no \"model_type\" field: it is not a transformers config.json "
                       "(every transformers config names its model_type).")
    _check_fields(cfg, path)
    return cfg


def _check_fields(cfg: dict[str, Any], path: Path) -> None:
    """The fields kernelcheck reads must have the types transformers gives them, or the config is bad input."""
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise BadInput(f"{path}: \"text_config\" is a JSON {type(text).__name__}, not an object. transformers "
                       "reads the text model's settings from it; fix or remove the field.")
    for where, d in (("", cfg), ("text_config.", text if isinstance(text, dict) else {})):
        for key in ("model_type", "_attn_implementation", "attn_implementation"):
            val = d.get(key)
            if val is not None and (not isinstance(val, str) or (key == "model_type" and not val.strip())):
                raise BadInput(f"{path}: \"{where}{key}\" is {json.dumps(val)[:60]}, not a name. transformers "
                               f"expects a string there (for example \"{'sdpa' if 'attn' in key else 'qwen3_5'}\").")


InstalledSpec = Callable[[str], "matrix.ModelType | None"]  # a model_type the matrix lacks -> its spec, or None


def _matrix_only(model_type: str) -> matrix.ModelType | None:
    """No lookup beyond the matrix (the installed transformers is asked in integrations/transformers_models.py)."""
    return None


def _spec_for(model_type: str, cfg: dict[str, Any], query: str,
              installed: InstalledSpec, m: matrix.Matrix) -> tuple[str, matrix.ModelType]:
    if model_type in m.model_types:
        return model_type, m.model_types[model_type]
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else None
    if text and text.get("model_type") in m.model_types:
        return text["model_type"], m.model_types[text["model_type"]]
    spec = installed(model_type)
    if spec is not None:
        return model_type, spec
    close = difflib.get_close_matches(model_type, list(m.model_types), n=3, cutoff=0.6)
    hint = f" Closest known: {', '.join(close)}." if close else ""
    raise BadInput(f"model_type '{model_type}' (from '{query}') is unknown to kernelcheck and to the installed "
                   f"transformers.{hint} Run `kernelcheck models` for the list, or upgrade transformers if the "
                   "model is newer than it.")


def _from_cache(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except Exception:  # noqa: BLE001 - a broken huggingface_hub: no cache to read, the Hub is asked instead
        return None
    try:
        got = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - an unreadable cache entry is a miss
        return None
    return Path(got) if isinstance(got, str) and os.path.exists(got) else None


class _HubChatter:
    """huggingface_hub's retry lines ("'[Errno -2] Name or service not known' thrown while requesting HEAD
    ...", "Retrying in 4s [Retry 3/5]") are kept out of the user's face (shown with --verbose); the last one is
    kept, so a wait that runs out can say what went wrong."""

    def __init__(self) -> None:
        self.last = ""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if not msg.startswith("Retrying"):
            self.last = msg.splitlines()[0] if msg else msg
        # --verbose logs kernelcheck at INFO (cli/common.py); KERNELCHECK_VERBOSE=1 says the same without the flag
        return logging.getLogger("kernelcheck").isEnabledFor(logging.INFO) or settings.current().verbose


_CHATTER = _HubChatter()
_SAY_AFTER = 1.0  # seconds a network wait runs before it is announced
# a failed name lookup as glibc, musl, macOS and Windows word it (socket.gaierror), seen in huggingface_hub's retries
_DNS = re.compile(r"Name or service not known|Temporary failure in name resolution|nodename nor servname|"
                  r"getaddrinfo failed|No address associated with hostname|Name does not resolve")


def _unresolved(last: str, what: str) -> UnresolvedHost | None:
    dns = _DNS.search(last)
    if not dns:
        return None
    m = re.search(r"https?://([^/\s'\"]+)", last)
    host = m.group(1) if m else ""
    named = host or "the Hub's host"
    return UnresolvedHost(f"could not resolve the host {named} while asking for {what} (DNS lookup failed: "
                          f"{dns.group(0)}): this machine cannot reach the Hub", host)


def _wait(t: threading.Thread, seconds: float, what: str) -> None:
    """Join `t` for up to `seconds`, stopping early with UnresolvedHost once a retry shows a failed name lookup."""
    import time

    end = time.monotonic() + seconds
    while t.is_alive() and time.monotonic() < end:
        t.join(min(0.2, max(end - time.monotonic(), 0)))
        dns = _unresolved(_CHATTER.last, what)
        if dns is not None and t.is_alive():
            raise dns


def _hold_hub_chatter() -> None:
    log = logging.getLogger("huggingface_hub.utils._http")
    if _CHATTER not in log.filters:
        log.addFilter(_CHATTER)


_T = TypeVar("_T")


def bounded(call: Callable[[], _T], what: str, timeout: float | None = None) -> _T:
    """Run `call()` in a daemon thread and give up after `timeout` seconds: a Hub that accepts the connection
    and never answers, or a name that does not resolve (retried with backoff), must not hang a CI gate.
    Raises TimeoutError naming what it waited for and the last error seen while retrying."""
    limit = settings.network_timeout() if timeout is None else timeout
    box: dict[str, Any] = {}
    _hold_hub_chatter()
    _CHATTER.last = ""

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name=f"kernelcheck-network: {what}", daemon=True)
    t.start()
    _wait(t, min(limit, _SAY_AFTER), what)
    if t.is_alive():  # say what it waits for, and for how long at most
        print(f"kernelcheck: waiting up to {limit:g} s for {what} (HF_HUB_OFFLINE=1 skips the Hub)",
              file=sys.stderr, flush=True)
        _wait(t, max(limit - _SAY_AFTER, 0), what)
    if t.is_alive():
        seen = f" (last error: {_CHATTER.last})" if _CHATTER.last else ""
        raise TimeoutError(f"no answer within {limit:g} s while waiting for {what}{seen}")
    if "error" in box:
        raise box["error"]
    value: _T = box["value"]  # target() finished without raising: it set the value
    return value


def _from_hub(repo_id: str) -> tuple[Path | None, str]:
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    limit = settings.network_timeout()  # a bad KERNELCHECK_NETWORK_TIMEOUT is BadInput, not a lookup that failed
    try:
        from huggingface_hub import hf_hub_download

        got = bounded(lambda: hf_hub_download(repo_id, "config.json", etag_timeout=limit),
                      f"config.json of {repo_id} from the Hugging Face Hub ({endpoint})", limit)
        return Path(got), ""
    except UnresolvedHost as exc:
        return None, str(exc)
    except TimeoutError as exc:
        return None, f"{exc}; raise the limit with `kernelcheck --network-timeout SECONDS`"
    except Exception as exc:  # noqa: BLE001 - any other Hub failure is reported as the lookup's reason
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _from_config(q: str, repo_id: str | None, source: str, cfg: dict[str, Any], installed: InstalledSpec,
                 m: matrix.Matrix, alias: str | None = None) -> ResolvedModel:
    """A ResolvedModel from a read config: its model_type picks the spec."""
    mt, spec = _spec_for(cfg["model_type"], cfg, q, installed, m)
    return ResolvedModel(q, repo_id, mt, source, spec, cfg, alias=alias)


def _resolve_alias(m: matrix.Matrix, q: str, installed: InstalledSpec) -> ResolvedModel | None:
    """An alias name, or a Hub id that an alias stands for; None when `q` is neither."""
    alias = m.aliases.get(q.lower())
    if alias is None:  # a Hub id that an alias stands for
        alias = next((a for a in m.aliases.values() if a.id.lower() == q.lower()), None)
    if alias is None:
        return None
    if alias.config:
        return _from_config(q, alias.id, "shipped-config", m.shipped_config(alias.config), installed, m,
                            alias=alias.name)
    spec = m.model_types[alias.model_type]
    return ResolvedModel(q, alias.id, alias.model_type, "alias", spec, {"model_type": alias.model_type},
                         alias=alias.name)


def _local_config_path(path: Path) -> Path:
    """The config.json a local folder or file stands for; BadInput when there is none."""
    if path.is_dir():
        cfg_path = path / "config.json"
        if not cfg_path.exists():
            raise BadInput(f"The folder {path} has no config.json. Point --model at the model folder "
                           "(the one holding config.json), or use an alias or Hub id.")
        return cfg_path
    if path.is_file():
        return path
    if path.exists():  # /dev/null, a FIFO, a socket: say what it is, never "does not exist"
        paths.regular_file(path, "--model", "Give a model folder (the one holding config.json), its config.json, "
                           "an alias (kernelcheck models) or a Hub id.")
    raise BadInput(f"The path {path} does not exist. Give an existing model folder, an alias "
                   "(kernelcheck models) or a Hub id.")


def _resolve_hub_id(q: str, installed: InstalledSpec, m: matrix.Matrix) -> ResolvedModel:
    """A Hub id: its config.json from the Hugging Face cache, else from the Hub unless offline."""
    cached = _from_cache(q)
    if cached:
        return _from_config(q, q, "hf-cache", _read_config(cached, q), installed, m)
    if settings.hub_offline():
        raise BadInput(f"'{q}' is not in the Hugging Face cache and the Hub may not be used (HF_HUB_OFFLINE "
                       "is set). Download its config.json first (`hf download {q} config.json`), point --model "
                       "at a folder with config.json, or use an alias (kernelcheck models).".replace("{q}", q))
    got, why = _from_hub(q)
    if got:
        return _from_config(q, q, "hub", _read_config(got, q), installed, m)
    raise BadInput(f"Could not get config.json for '{q}' from the Hugging Face cache or the Hub ({why}). "
                   "Check the id, log in for gated models, point --model at a folder with config.json, or set "
                   "HF_HUB_OFFLINE=1 where the Hub cannot be reached.")


def _unknown(m: matrix.Matrix, q: str) -> BadInput:
    """The error for a query that is no alias, path, model_type or Hub id, with close names as hints."""
    names = list(m.aliases) + list(m.model_types)
    close = difflib.get_close_matches(q.lower(), names, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return BadInput(f"Unknown model '{q}'.{hint} Give an alias or model_type (see `kernelcheck models`), a Hub id "
                    "like Qwen/Qwen3.8-27B, or a folder with config.json.")


def resolves_remotely(query: str, *, m: matrix.Matrix) -> bool:
    """Whether `resolve(query)` would look in the Hugging Face cache or on the Hub (a Hub id that is no alias, path
    or model_type); every other query resolves from the matrix, the installed transformers' source and local files,
    so a usage error in it is found before any probe (commands/usage.py `model`)."""
    q = query.strip()
    if not q or m.aliases.get(q.lower()) is not None or any(a.id.lower() == q.lower() for a in m.aliases.values()):
        return False
    if Path(q).expanduser().exists() or q.startswith((".", "/", "~")) or q.endswith(".json") or q in m.model_types:
        return False
    return "/" in q and bool(_HUB_ID.match(q))


def resolve(query: str, installed: InstalledSpec = _matrix_only, *, m: matrix.Matrix) -> ResolvedModel:
    """Resolve `query` to a model; raises BadInput with a helpful message when it cannot. `installed` gives the
    spec of a model_type the matrix does not list (integrations/transformers_models.py asks the installed
    transformers; its `resolve` passes it); the default knows the matrix `m` only."""
    q = query.strip()
    if not q:
        raise BadInput("--model is empty. Give an alias (kernelcheck models), a Hub id like Qwen/Qwen3.8-27B, "
                       "or a folder with config.json.")
    by_alias = _resolve_alias(m, q, installed)
    if by_alias is not None:
        return by_alias
    path = Path(q).expanduser()
    if path.exists() or q.startswith((".", "/", "~")) or q.endswith(".json"):
        return _from_config(q, None, "local", _read_config(_local_config_path(path), q), installed, m)
    if q in m.model_types:
        return ResolvedModel(q, None, q, "model_type", m.model_types[q], {"model_type": q})
    if "/" not in q and (spec := installed(q)) is not None:
        return ResolvedModel(q, None, q, "model_type", spec, {"model_type": q})
    if _HUB_ID.match(q):
        return _resolve_hub_id(q, installed, m)
    raise _unknown(m, q)


def needs(model: ResolvedModel, functions: tuple[str, ...] | None = None, *, m: matrix.Matrix) -> Needs:
    """The model's needs: functions from the installed transformers when known, else the matrix `m`'s."""
    funcs = functions if functions is not None else model.spec.functions
    pkgs = tuple(dict.fromkeys(m.functions[f].package for f in funcs if f in m.functions))
    attn = (model.text_config.get("_attn_implementation") or model.config.get("_attn_implementation")
            or model.config.get("attn_implementation") or "sdpa")
    return Needs(functions=tuple(funcs), packages=pkgs, attn_implementation=attn,
                 attention_package=m.attention.get(attn, ""))
