"""The in-process cases of scripts/fault_battery.py: every file kernelcheck reads from the environment (the matrix
folder, the install manifest, measured steps) and every value or path a user names, broken each way a user or an
operator breaks it. Each case is a command run through the CLI's main in this process (click's CliRunner), with
the variables and files the case sets up; none needs a process of its own.

A case: name, make(folder) -> (arguments, variables, sys.path entries), the exit codes it may end with (never 1),
and words the output must hold.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "matrix"
MODEL = "qwen3.8-27b"
DEEP = "[" * 50_000 + "]" * 50_000
LONG = "a" * 300

Made = tuple[list[str], dict[str, str], list[str]]


@dataclass
class InCase:
    name: str
    make: Callable[[Path], Made]
    codes: tuple[int, ...]
    words: str = ""


# -- the matrix folder (KERNELCHECK_MATRIX_DIR) ---------------------------------------------------------------------

FILES = ("models.toml", "packages.toml", "functions.toml", "breakages.toml", "transformers.toml", "verify.toml",
         "verified.toml", "packing.toml", "gpus.toml", "signatures.toml", "torch.toml", "data.toml",
         "fla_dispatch.toml")
OPTIONAL = ("verified.toml", "data.toml")
# a top-level key of each file set to a number: the wrong type where a table or string is read
WRONG = {"models.toml": "families = 3", "packages.toml": "fla = 3", "functions.toml": "chunk_kda = 3",
         "breakages.toml": "breakage = 3", "transformers.toml": "kernels_window = 3", "verify.toml": "tokens = 3",
         "verified.toml": "measured = 3", "packing.toml": "modes = 3", "gpus.toml": "capabilities = 3",
         "signatures.toml": "package = 3", "torch.toml": "triton = 3", "data.toml": "updated = 3",
         "fla_dispatch.toml": "layout = 3"}
COMMANDS = {"models": ["models"], "doctor": ["doctor", "--model", MODEL, "--no-hub"],
            "install-arch": ["install", "--dry-run", "--arch", "9.0", "--model", MODEL]}


def _copy(d: Path) -> Path:
    root = d / "m"
    shutil.copytree(MATRIX, root, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return root


def _in_matrix(change: Callable[[Path], None], args: list[str]) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        root = _copy(d)
        change(root)
        return args, {"KERNELCHECK_MATRIX_DIR": str(root)}, []
    return make


def _append(name: str, text: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        with open(root / name, "a", encoding="utf-8") as fh:
            fh.write(text)
    return change


def _write(name: str, data: str | bytes) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return change


def _remove(name: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        p = root / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return change


def _truncate(name: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        text = (root / name).read_text(encoding="utf-8")
        (root / name).write_text(text[: len(text) // 2], encoding="utf-8")
    return change


def _replace(name: str, old: str, new: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        text = (root / name).read_text(encoding="utf-8")
        assert old in text, (name, old)
        (root / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    return change


def _folder_for(name: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / name).unlink()
        (root / name).mkdir()
    return change


def _matrix_cases() -> list[InCase]:
    out = []
    for name in FILES:
        bad = {"malformed": _append(name, "\n[[[oops\n"), "binary": _write(name, b"\x89PNG\xff\xfe\x00"),
               "wrong-typed": _write(name, WRONG[name] + "\n"), "a folder": _folder_for(name)}
        if name not in OPTIONAL:
            bad["missing"] = _remove(name)
        for what, change in bad.items():
            for cmd, args in COMMANDS.items():
                out.append(InCase(f"matrix {name} {what} / {cmd}", _in_matrix(change, args), (2,), name))
        for what, change in {"empty": _write(name, ""), "truncated": _truncate(name)}.items():
            out.append(InCase(f"matrix {name} {what} / models", _in_matrix(change, ["models"]), (0, 2)))
    config = "configs/qwen3.8-27b.json"
    configs = {"broken": _write(config, "{oops"), "binary": _write(config, b"\xff\xfe\x00"),
               "empty": _write(config, ""),
               "a list": _write(config, "[]"), "no model_type": _write(config, '{"hidden_size": 4}'),
               "model_type 7": _write(config, '{"model_type": 7}'), "deep": _write(config, DEEP),
               "configs/ missing": _remove("configs")}
    for what, change in configs.items():
        for cmd, args in COMMANDS.items():
            out.append(InCase(f"matrix config {what} / {cmd}", _in_matrix(change, args), (2,), "qwen3.8-27b.json"))
    specific = {
        "verify.toml without [tokens]": _replace("verify.toml", "[tokens]\ntiny = 128\nfull = 8192\n", ""),
        "verify.toml step tokens -64": _replace("verify.toml", "tokens = { tiny = 64", "tokens = { tiny = -64"),
        "verify.toml tolerance nan": _replace("verify.toml", "float32 = 1e-4", "float32 = nan"),
        "verify.toml benchmark warmup text": _replace("verify.toml", "warmup = 2", 'warmup = "two"'),
        "models.toml alias unknown key": _append("models.toml", '\n[aliases."x"]\nid = "a/b"\nconfg = "c"\n'),
        "models.toml family not a table": _append("models.toml", "\n[families]\nbad = 3\n"),
        "models.toml model_type without module": _append("models.toml", '\n[model_types.zz]\nfamily = "kda"\n'),
        "verified.toml measured zero": _append("verified.toml", '\n[[measured]]\nmodel_type = "x"\n'
                                               'bound_tokens_per_s = 1.0\nreference_tokens_per_s = 0\n'),
        "verified.toml measured inf": _append("verified.toml", '\n[[measured]]\nmodel_type = "x"\n'
                                              'bound_tokens_per_s = inf\nreference_tokens_per_s = 5.0\n'),
        "gpus.toml capability nine": _write("gpus.toml", '[capabilities]\nknown = ["nine"]\n'),
        "packing.toml modes passes text": _append("packing.toml", '\n[modes.zz]\npasses = "x"\nsummary = "s"\n'),
        "signatures.toml launch_bound missing": _replace("signatures.toml", "[launch_bound]", "[launch_bound_x]"),
        "torch.toml triton version number": _append("torch.toml", '\n"2.99" = { version = 3 }\n'),
    }
    for what, change in specific.items():
        for cmd in ("models", "doctor"):
            out.append(InCase(f"matrix {what} / {cmd}", _in_matrix(change, COMMANDS[cmd]), (2,)))
    out.append(InCase("matrix intact copy / doctor", _in_matrix(lambda r: None, COMMANDS["doctor"]), (3,)))
    out.append(InCase("matrix dir missing / models", lambda d: (["models"], {"KERNELCHECK_MATRIX_DIR": str(d / "x")},
                                                                 []), (2,), "models.toml"))
    return out


# -- the install manifest (KERNELCHECK_MANIFEST, a --target folder's .kernelcheck-manifest.json) --------------------

MANIFESTS: dict[str, bytes] = {
    "random bytes": b"\x89PNG\xff\xfe\x00\x13garbage",
    "empty": b"",
    "not JSON": b"{nope",
    "deep nesting": DEEP.encode(),
    "a list": b"[1, 2]",
    "a string": b'"manifest"',
    "packages a list": b'{"packages": ["fla-core"]}',
    "packages a string": b'{"packages": "fla-core"}',
    "entry a string": b'{"packages": {"fla-core": "oops"}}',
    "entry a number": b'{"packages": {"fla-core": 3}}',
    "entry null": b'{"packages": {"fla-core": null}}',
    "version a number": b'{"packages": {"fla-core": {"version": 6}}}',
    "nvcc a list": b'{"packages": {"causal_conv1d": {"nvcc": ["13.0"]}}}',
    "so_arches a string": b'{"packages": {"causal_conv1d": {"so_arches": "sm_90"}}}',
    "so_arches numbers": b'{"packages": {"causal_conv1d": {"so_arches": [90]}}}',
    "torch_mm an object": b'{"packages": {"causal_conv1d": {"torch_mm": {"a": 1}}}}',
    "distribution true": b'{"packages": {"fla": {"distribution": true}}}',
    "NaN version": b'{"packages": {"fla": {"version": NaN}}}',
    "UTF-16": '{"packages": {}}'.encode("utf-16"),
    "nested packages deep": ('{"packages": {"x": ' + DEEP + "}}").encode(),
}


def _manifest_env(data: bytes, args: list[str]) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        (d / "manifest.json").write_bytes(data)
        return args, {"KERNELCHECK_MANIFEST": str(d / "manifest.json")}, []
    return make


def _manifest_target(data: bytes, args: list[str]) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        (d / "t").mkdir()
        (d / "t" / ".kernelcheck-manifest.json").write_bytes(data)
        return args, {"KERNELCHECK_MANIFEST": str(d / "none.json")}, [str(d / "t")]
    return make


def _manifest_cases() -> list[InCase]:
    out = []
    for what, data in MANIFESTS.items():
        out.append(InCase(f"manifest {what} / doctor --model", _manifest_env(data, COMMANDS["doctor"]), (2,),
                          "manifest.json"))
        out.append(InCase(f"manifest {what} / doctor", _manifest_env(data, ["doctor", "--no-hub"]), (2,)))
        out.append(InCase(f"manifest {what} / --target on sys.path", _manifest_target(data, COMMANDS["doctor"]),
                          (2,), ".kernelcheck-manifest.json"))
    out.append(InCase("manifest a folder / doctor", lambda d: (COMMANDS["doctor"], {"KERNELCHECK_MANIFEST": str(d)},
                                                                []), (2,)))
    out.append(InCase("manifest missing / doctor", lambda d: (COMMANDS["doctor"],
                                                               {"KERNELCHECK_MANIFEST": str(d / "none.json")}, []),
                      (3,)))
    good = json.dumps({"packages": {"causal_conv1d": {"distribution": "causal-conv1d", "version": "1.7.0",
                                                      "nvcc": "13.0", "so_arches": ["sm_90"], "torch": None}}})
    out.append(InCase("manifest good / doctor", _manifest_env(good.encode(), COMMANDS["doctor"]), (3,)))
    return out


# -- measured steps (KERNELCHECK_MEASUREMENTS) ------------------------------------------------------------------------

_GOOD = {"model_type": "qwen3_5", "bound_tokens_per_s": 3000.0, "reference_tokens_per_s": 600.0}
MEASURED: dict[str, str] = {
    "reference 0 tokens/s": json.dumps(_GOOD | {"reference_tokens_per_s": 0}),
    "bound 0 tokens/s": json.dumps(_GOOD | {"bound_tokens_per_s": 0}),
    "negative": json.dumps(_GOOD | {"reference_tokens_per_s": -400}),
    "NaN": json.dumps(_GOOD | {"bound_tokens_per_s": float("nan")}),
    "Infinity": json.dumps(_GOOD | {"bound_tokens_per_s": float("inf")}),
    "-Infinity": json.dumps(_GOOD | {"reference_tokens_per_s": float("-inf")}),
    "1e400": '{"model_type": "qwen3_5", "bound_tokens_per_s": 1e400, "reference_tokens_per_s": 5}',
    "a string": json.dumps(_GOOD | {"bound_tokens_per_s": "fast"}),
    "true": json.dumps(_GOOD | {"reference_tokens_per_s": True}),
    "no model_type": json.dumps({k: v for k, v in _GOOD.items() if k != "model_type"}),
    "model_type a number": json.dumps(_GOOD | {"model_type": 5}),
    "a list": "[1, 2]",
    "not JSON": "not json",
    "deep nesting": DEEP,
    "binary": "\x00\x01\x02",
}


def _measured(line: str) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        (d / "m.jsonl").write_text(json.dumps(_GOOD) + "\n" + line + "\n")
        return COMMANDS["doctor"], {"KERNELCHECK_MEASUREMENTS": str(d / "m.jsonl")}, []
    return make


def _measured_cases() -> list[InCase]:
    out = [InCase(f"measurements {what} / doctor", _measured(line), (2,), "line 2") for what, line in MEASURED.items()]
    out.append(InCase("measurements file missing / doctor", lambda d: (
        COMMANDS["doctor"], {"KERNELCHECK_MEASUREMENTS": str(d / "none.jsonl")}, []), (3,), "measurements-unread"))
    out.append(InCase("measurements a folder / doctor", lambda d: (
        COMMANDS["doctor"], {"KERNELCHECK_MEASUREMENTS": str(d)}, []), (3,), "measurements-unread"))
    out.append(InCase("measurements good / doctor", _measured(""), (3,)))
    return out


# -- paths a user names ----------------------------------------------------------------------------------------------

def _under_file(d: Path) -> str:
    (d / "f").write_text("")
    return str(d / "f" / "x")


BAD_PATHS: dict[str, Callable[[Path], str]] = {
    "component over 255 bytes": lambda d: str(d / LONG / "x"),
    "under a file": _under_file,
    "under /sys": lambda d: f"/sys/kernelcheck-{LONG[:8]}/x",
    "under /proc": lambda d: "/proc/kernelcheck/x",
}
PATH_FLAGS: dict[str, Callable[[str], list[str]]] = {
    "doctor --model": lambda p: ["doctor", "--model", p],
    "verify --model": lambda p: ["verify", "--model", p],
    "install --model": lambda p: ["install", "--dry-run", "--model", p],
    "hub --model": lambda p: ["hub", "--model", p],
    "doctor --junit": lambda p: ["doctor", "--model", MODEL, "--no-hub", "--junit", p + ".xml"],
    "verify --junit": lambda p: ["verify", "--model", MODEL, "--junit", p + ".xml"],
    "doctor -o": lambda p: ["doctor", "--model", MODEL, "--no-hub", "-o", p + ".json"],
    "install -o": lambda p: ["install", "--dry-run", "--model", MODEL, "-o", p + ".json"],
    "trace -o": lambda p: ["trace", str(REPO / "tests" / "data" / "none.json"), "-o", p + ".json"],
    "compare": lambda p: ["compare", p + ".json"],
    "install --target": lambda p: ["install", "--model", MODEL, "--target", p],
    "install --target dry": lambda p: ["install", "--dry-run", "--model", MODEL, "--target", p],
    "install --wheelhouse": lambda p: ["install", "--dry-run", "--model", MODEL, "--wheelhouse", p],
    "install --sdist": lambda p: ["install", "--dry-run", "--model", MODEL, "--sdist", p + ".tar.gz"],
    "padding": lambda p: ["padding", p],
    "padding --tokenizer": lambda p: ["padding", str(REPO / "pyproject.toml"), "--tokenizer", p],
    "trace": lambda p: ["trace", p],
    "verify --record": lambda p: ["verify", "--model", MODEL, "--step", "--record", p + ".jsonl"],
    "hub --lock": lambda p: ["hub", "--model", MODEL, "--prefetch", "--lock", p],
}


def _path_case(flag: Callable[[str], list[str]], path: Callable[[Path], str]) -> Callable[[Path], Made]:
    def make(d: Path) -> Made:
        return flag(path(d)), {}, []
    return make


# a dry run writes nothing to --target, and hub writes its --lock only when it fetched a build: the long name is
# refused, a place that cannot be written may plan
MAY_PLAN = {"install --target dry": (2, 3), "hub --lock": (0, 2)}


def _path_cases() -> list[InCase]:
    return [InCase(f"path {what} / {flag}", _path_case(build, path),
                   (2,) if what == "component over 255 bytes" else MAY_PLAN.get(flag, (2,)))
            for flag, build in PATH_FLAGS.items() for what, path in BAD_PATHS.items()]


# -- values a user types ---------------------------------------------------------------------------------------------

TARGETS = {"--torch": ["٢.١١", "２.11", "0.1", "1.13", "3.0", "2", "2.11.0", "abc", "", " 2.11", "-2.11"],
           "--cuda": ["١٣.٠", "99.0", "9.2", "13", "cu130", "CPU"],
           "--python": ["٣.١٢", "2.7", "3.8", "4.0", "312"]}
ARCHES = ["٩.٠", "sm_٩٠", "９.0", "99.9", "0.0", "9.0;٨.٠", "nine", "9.0,abc"]
BATCHING = ["budget:99999999999999999999", "batch:99999999999999999999", "packing:" + "9" * 40,
            "budget:1000000000001", "budget:٢", "budget:0", "budget:-1", "budget:", "budget:8192x", "budget:1e9",
            "tokens:8", "budget:8192:1", ":8", "batch:+3", "batch: 3", "budget:８"]


def _value_cases() -> list[InCase]:
    out = []
    for flag, values in TARGETS.items():
        for v in values:
            out.append(InCase(f"target {flag} {v!r} / install", lambda d, f=flag, v=v: (
                ["install", "--dry-run", "--model", MODEL, f, v], {}, []), (2,)))
            if flag != "--python":
                out.append(InCase(f"target {flag} {v!r} / hub", lambda d, f=flag, v=v: (
                    ["hub", "--model", MODEL, f, v], {}, []), (2,)))
    for a in ARCHES:
        for cmd in (["doctor", "--model", MODEL, "--no-hub"], ["install", "--dry-run", "--model", MODEL],
                    ["hub", "--model", MODEL]):
            out.append(InCase(f"--arch {a!r} / {cmd[0]}", lambda d, c=cmd, a=a: ([*c, "--arch", a], {}, []), (2,)))

    def lengths(d: Path) -> str:
        (d / "l.txt").write_text("12\n40\n" * 10)
        return str(d / "l.txt")

    for b in BATCHING:
        out.append(InCase(f"padding --batching {b!r}", lambda d, b=b: (["padding", lengths(d), "--batching", b],
                                                                       {}, []), (2,)))
    return out


# -- doctor --upgrade ------------------------------------------------------------------------------------------------

def _upgrade_cases() -> list[InCase]:
    up = ["doctor", "--model", MODEL, "--upgrade"]

    def fifo(d: Path) -> str:
        import os

        os.mkfifo(d / "fifo")
        return str(d / "fifo")

    return [
        InCase("upgrade -r DIR", lambda d: ([*up, "-r", str(d)], {}, []), (2,), "folder"),
        InCase("upgrade -rDIR", lambda d: ([*up, f"-r{d}"], {}, []), (2,), "folder"),
        InCase("upgrade -r missing", lambda d: ([*up, "-r", str(d / "r.txt")], {}, []), (2,)),
        InCase("upgrade -r FIFO", lambda d: ([*up, "-r", fifo(d)], {}, []), (2,)),
        InCase("upgrade -r /dev/null", lambda d: ([*up, "-r", "/dev/null"], {}, []), (2,)),
        InCase("upgrade -r long name", lambda d: ([*up, "-r", str(d / LONG)], {}, []), (2,)),
        InCase("upgrade KERNELCHECK_OFFLINE without a wheelhouse", lambda d: (
            [*up, "transformers==5.25.0"], {"KERNELCHECK_OFFLINE": "1"}, []), (2,), "KERNELCHECK_OFFLINE"),
        InCase("upgrade --offline without a wheelhouse", lambda d: (
            [*up, "transformers==5.25.0", "--offline"], {}, []), (2,)),
        InCase("upgrade no spec", lambda d: (up, {}, []), (2,)),
        InCase("upgrade unknown option", lambda d: ([*up, "--pre"], {}, []), (2,)),
    ]


def cases() -> list[InCase]:
    return [*_matrix_cases(), *_manifest_cases(), *_measured_cases(), *_path_cases(), *_value_cases(),
            *_upgrade_cases()]
