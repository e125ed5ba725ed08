"""What verify --packing can run here, decided before it runs: a packed row's tokens against the memory this
machine has (the tiny model's forward and backward, measured at about 128 KiB a token on the CPU: a 65,536-token
row took more than 8 GiB), the number of segments (each is run again alone, forward and backward), and the size
of a --batch file. Past a bound the run is refused up front, in words (exit 2), never killed by the kernel's OOM
killer or left running for many minutes with no output."""

from __future__ import annotations

import os

from kernelcheck.core.errors import BadInput

BYTES_PER_TOKEN = 128 << 10  # tiny model, forward + backward + the segment re-runs, CPU (measured, see above)
MAX_SEGMENTS = 256  # each segment runs alone, forward and backward: 2,000 of them ran over 300 s
MAX_BATCH_FILE = 512 << 20  # a packed batch of a million tokens in five int64 keys is 40 MB
SHARE = 0.5  # of the available memory a check may plan to use


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (None where there is none to read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def max_tokens(available: int | None = None) -> int:
    avail = available if available is not None else available_bytes()
    if avail is None:
        avail = 8 << 30
    return max(1024, int(avail * SHARE) // BYTES_PER_TOKEN)


def _gib(n: float) -> str:
    return f"{n / (1 << 30):,.1f} GiB"


def check_row(tokens: int, segments: int, what: str, available: int | None = None) -> None:
    """BadInput when a packed row of `tokens` in `segments` segments cannot be checked here."""
    if segments > MAX_SEGMENTS:
        raise BadInput(f"{what} packs {segments:,} segments; verify --packing runs each one again alone, forward "
                       f"and backward, and checks at most {MAX_SEGMENTS}: pass a batch (or --lengths) of at most "
                       f"{MAX_SEGMENTS} sequences. Nothing was run.")
    limit = max_tokens(available)
    if tokens > limit:
        avail = available if available is not None else available_bytes()
        have = f"{_gib(avail)} is available here" if avail is not None else "this machine's memory is unknown"
        raise BadInput(f"{what} is one packed row of {tokens:,} tokens: checking it needs about "
                       f"{_gib(tokens * BYTES_PER_TOKEN)} (forward and backward on the tiny model) and {have}; "
                       f"at most about {limit:,} tokens fit. Pass fewer or shorter sequences. Nothing was run.")


def check_tokens(tokens: int, what: str, available: int | None = None) -> None:
    """verify's --tokens on the CPU: the same memory bound as a packed row (verify --compile --tokens 100000 was
    killed after 262 s)."""
    limit = max_tokens(available)
    if tokens > limit:
        avail = available if available is not None else available_bytes()
        have = f"{_gib(avail)} is available here" if avail is not None else "this machine's memory is unknown"
        raise BadInput(f"{what} {tokens:,}: running the layers forward and backward on {tokens:,} tokens on the CPU "
                       f"needs about {_gib(tokens * BYTES_PER_TOKEN)} and {have}; at most about {limit:,} tokens "
                       "fit. Pass a smaller --tokens (the default is the matrix's). Nothing was run.")


def check_lengths(lengths: list[int], what: str) -> None:
    check_row(sum(lengths), len(lengths), what)


def check_file(path: str) -> None:
    try:
        size = os.path.getsize(path)
    except OSError:
        return  # the reader says what is wrong with it
    if size > MAX_BATCH_FILE:
        raise BadInput(f"--batch {path} is {_gib(size)}: one packed batch is a few MB (a million tokens in five "
                       f"int64 keys is 40 MB); kernelcheck reads at most {MAX_BATCH_FILE >> 20} MiB. Save one batch "
                       "(the dict the collator returns), not a dataset. Nothing was run.")
