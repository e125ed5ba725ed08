"""What a user reads when the Hub cannot be reached: a name that does not resolve is said as such, at once,
not as a wait that ran out (core/models.py `bounded`)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from kernelcheck.core import errors, models

STOP = threading.Event()  # ends a worker the test gave up on, so its log lines reach no other test


def _retrying_like_huggingface_hub(message: str, seconds: float) -> object:
    STOP.clear()

    def call() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not STOP.is_set():  # huggingface_hub retries, logging each failure
            logging.getLogger("huggingface_hub.utils._http").warning(message)
            time.sleep(0.1)

    return call


def test_a_dns_failure_says_the_host_could_not_be_resolved_without_waiting_out_the_limit() -> None:
    line = ("'[Errno -2] Name or service not known' thrown while requesting HEAD "
            "https://huggingface.co/someorg/some-model/resolve/main/config.json")
    started = time.monotonic()
    with pytest.raises(errors.UnresolvedHost) as exc:
        models.bounded(_retrying_like_huggingface_hub(line, 3.0), "config.json of someorg/some-model", 5.0)
    STOP.set()
    time.sleep(0.2)
    assert time.monotonic() - started < 2.5  # no 5 s wait for an answer that cannot come
    assert exc.value.host == "huggingface.co" and not isinstance(exc.value, TimeoutError)  # words: integration


def test_a_slow_hub_is_still_a_wait_that_ran_out() -> None:
    line = "'(ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out.\"))'"
    with pytest.raises(TimeoutError) as exc:
        models.bounded(_retrying_like_huggingface_hub(line, 2.0), "config.json of a/b", 0.5)
    # a wait that ran out, not a name that did not resolve (its words: tests/integration/test_doctor.py)
    assert not isinstance(exc.value, errors.UnresolvedHost)


def _kc(args: list[str], tmp_path) -> tuple[int, str, str]:
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "KERNELCHECK_OFFLINE")}
    env.update(PYTHONPATH=str(repo), HF_ENDPOINT="https://hub.invalid", HF_HOME=str(tmp_path / "hf"))
    res = subprocess.run([sys.executable, "-m", "kernelcheck", *args], capture_output=True, text=True, env=env,
                         timeout=300)
    return res.returncode, res.stdout, res.stderr
