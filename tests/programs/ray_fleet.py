"""A Ray job gated by kernelcheck.ray.gate on a real local Ray cluster (CPU only), as a user would write it.

argv: OUT_DIR QWEN_MODEL LLAMA_FOLDER ODD_PYTHON. Three trainer workers check QWEN_MODEL; worker 1 runs in a
second venv (its actor's runtime_env py_executable: ODD_PYTHON, a venv that sees fla-core + triton before the
driver's packages). A fourth actor checks a plain Llama
config (READY on any machine): the positive control, whose actor code must run. Each actor's __init__ writes
OUT_DIR/started-<name> (the "training"); the driver prints the fleet table, writes its JSON to OUT_DIR/fleet.json
and exits with the fleet's exit code.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import ray

import kernelcheck.ray

out, qwen, llama, odd_python = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
start = time.time()
for attempt in range(3):  # ray waits a fixed 30 s for its raylet: a loaded CI machine may need a second try
    try:
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, runtime_env={
            "worker_process_setup_hook": "kernelcheck.ray.gate",
            "env_vars": {"KERNELCHECK_GATE_MODEL": qwen, "KERNELCHECK_GATE_MODE": "train"}})
        break
    except Exception as exc:  # noqa: BLE001 - ray raises a bare Exception for it
        print(f"ray.init, attempt {attempt + 1}: {exc}", file=sys.stderr)
        ray.shutdown()
else:
    sys.exit(99)


@ray.remote(num_cpus=1)
class Trainer:
    def __init__(self, name: str) -> None:
        (out / f"started-{name}").write_text(str(os.getpid()))  # actor code: runs only past the gate

    def step(self) -> str:
        return "trained"


workers = [Trainer.remote("w0"),  # type: ignore[attr-defined]
           Trainer.options(runtime_env={"py_executable": odd_python}).remote("w1"),  # type: ignore[attr-defined]
           Trainer.remote("w2")]  # type: ignore[attr-defined]
control = Trainer.options(runtime_env={"env_vars": {"KERNELCHECK_GATE_MODEL": llama}}).remote("control")  # type: ignore[attr-defined]

control_said = ray.get(control.step.remote(), timeout=240)
for i, w in enumerate(workers):  # the job's first step: each worker's error is what its driver would see
    try:
        print(f"w{i}: {ray.get(w.step.remote(), timeout=240)}", file=sys.stderr)
    except ray.exceptions.RayError as exc:
        (out / f"error-w{i}.txt").write_text(f"{type(exc).__name__}: {exc}")

fleet = kernelcheck.ray.gather(workers, timeout=120)
control_fleet = kernelcheck.ray.gather([control], timeout=120)
print(fleet.text)
(out / "fleet.json").write_text(json.dumps(fleet.to_json(), indent=1))
(out / "control.json").write_text(json.dumps({"said": control_said, "exit_code": control_fleet.exit_code,
                                              "fleet": control_fleet.to_json()}))
print(f"driver: {time.time() - start:.1f} s", file=sys.stderr)
ray.shutdown()
sys.exit(fleet.exit_code)
