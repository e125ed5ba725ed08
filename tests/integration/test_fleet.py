"""The fleet gate with real processes: torchrun ranks, one of them on another package set, a rank
SIGKILLed as it enters the gather, a rank that never starts, and `compare` on real doctor reports.

Each multi-process run imports torch once per rank on a small machine, so every run happens once
(module-scoped fixtures) and several tests read its results.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelcheck.fleet import summary, table
from kernelcheck.fleet.gather import DIED, NEVER_JOINED, NO_REPORT
from kernelcheck.fleet.record import RankRecord
from tests import envs

REPO = envs.REPO
TORCHRUN = Path(sys.executable).parent / "torchrun"
MODEL = "qwen3.8-27b"

WRAPPER = """#!/bin/bash
# one rank: the odd one gets another package set first on PYTHONPATH; every rank records its exit code.
# torchrun SIGTERMs the other workers as soon as one exits non-zero; ignoring it (inherited by python)
# lets each rank finish, so each rank's own exit code can be read.
trap '' TERM
if [ "$LOCAL_RANK" = "$ODD_RANK" ]; then export PYTHONPATH="$ODD_SITE:$PYTHONPATH"; fi
"$KC_PYTHON" -m kernelcheck "$@" > "$KC_OUT/rank$LOCAL_RANK.out" 2> "$KC_OUT/rank$LOCAL_RANK.err"
rc=$?
echo $rc > "$KC_OUT/rank$LOCAL_RANK.rc"
exit $rc
"""

# A rank that is really killed (SIGKILL, no cleanup) the moment it enters the gather.
KILLED = ("import os, signal, sys; import torch.distributed as d; "
          "d.gather_object = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL); "
          "from kernelcheck.cli.main import main; sys.argv[0] = 'kernelcheck'; main()")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _base_env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELCHECK_", "RANK", "WORLD_SIZE", "MASTER_"))}
    e.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return e


@pytest.fixture(scope="module")
def torchrun_fleet(tmp_path_factory) -> dict:
    """torchrun --nproc-per-node 3, rank 1 with fla-core + triton on its PYTHONPATH (on CPU: broken)."""
    out = tmp_path_factory.mktemp("fleet")
    fla = envs.site("fla-core==0.6.0", "einops", "triton==3.6.0")
    wrapper = out / "rank.sh"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    env = _base_env() | {"ODD_RANK": "1", "ODD_SITE": str(fla), "KC_PYTHON": sys.executable, "KC_OUT": str(out)}
    t0 = time.monotonic()
    res = subprocess.run([str(TORCHRUN), "--nproc-per-node", "3", "--master-port", str(_port()),
                          "--no-python", str(wrapper),
                          "doctor", "--model", MODEL, "--all-ranks", "--json", "--timeout", "60"],
                         env=env, capture_output=True, text=True, timeout=300)
    codes = {r: int((out / f"rank{r}.rc").read_text()) for r in range(3)}
    return {"res": res, "codes": codes, "fleet": json.loads((out / "rank0.out").read_text()),
            "stdout": {r: (out / f"rank{r}.out").read_text() for r in range(3)}, "wall": time.monotonic() - t0}


def test_every_rank_exits_with_the_worst_ranks_code(torchrun_fleet):
    # ranks 0 and 2: fallback (3) on this CPU machine; rank 1 with fla-core: broken (4)
    assert torchrun_fleet["codes"] == {0: 4, 1: 4, 2: 4}
    assert torchrun_fleet["res"].returncode != 0  # torchrun fails the job before it trains


def test_the_fleet_table_names_the_odd_rank_and_what_differs(torchrun_fleet):
    fleet = torchrun_fleet["fleet"]
    assert fleet["schema"] == "kernelcheck.fleet/1" and fleet["size"] == 3 and fleet["exit_code"] == 4
    by_rank = {r["rank"]: r for r in fleet["ranks"]}
    assert by_rank[1]["verdict"] == "broken" and by_rank[0]["verdict"] == by_rank[2]["verdict"] == "fallback"
    assert [len(g) for g in fleet["groups"]] == [2, 1]
    (odd,) = fleet["differences"]
    assert odd["ranks"] == [f"rank 1 ({socket.gethostname()})"]
    fields = {f["field"]: f for f in odd["fields"]}
    assert "fla-core 0.6.0" in fields["kernel packages"]["value"] and fields["kernel packages"]["others"] == "none"
    assert fields["verdict"]["value"] == "broken"


def test_only_rank_0_prints_the_fleet(torchrun_fleet):
    assert torchrun_fleet["stdout"][1] == "" and torchrun_fleet["stdout"][2] == ""


def test_gathered_records_stay_small(torchrun_fleet):
    assert torchrun_fleet["fleet"]["timings"]["bytes_per_rank_max"] < 4096


def _launch(rank: int, world: int, port: int, args: list[str], code: str | None = None) -> subprocess.Popen:
    env = _base_env() | {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "kernelcheck", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def killed_fleet() -> dict:
    """Three srun-style processes (rank 0 hosts the store); rank 2 is SIGKILLed as it enters the gather."""
    port, args = _port(), ["doctor", "--model", MODEL, "--all-ranks", "--json", "--timeout", "10"]
    t0 = time.monotonic()
    procs = [_launch(0, 3, port, args), _launch(1, 3, port, args), _launch(2, 3, port, args, code=KILLED)]
    outs = [p.communicate(timeout=120) for p in procs]
    return {"codes": [p.returncode for p in procs], "outs": outs, "wall": time.monotonic() - t0}


def test_a_rank_killed_mid_gather_is_named_and_every_survivor_exits_4(killed_fleet):
    assert killed_fleet["codes"][:2] == [4, 4]
    assert killed_fleet["codes"][2] == -9  # really killed
    out0, err0 = killed_fleet["outs"][0]
    fleet = json.loads(out0)  # how a rank failed: its kind (missing[].kind); the words: unit/test_fleet_table.py
    assert fleet["exit_code"] == 4 and [(m["rank"], m["kind"]) for m in fleet["missing"]] == [(2, DIED)]
    # rank 0 says the fleet's message on stderr, and rank 1 hears the same from rank 0
    assert fleet["message"] and fleet["message"] in err0 and fleet["message"] in killed_fleet["outs"][1][1]
    assert killed_fleet["wall"] < 40  # --timeout 10: bounded, no hang


def test_a_rank_that_never_starts_is_named_after_the_timeout():
    port, args = _port(), ["doctor", "--all-ranks", "--json", "--timeout", "4"]
    t0 = time.monotonic()
    procs = [_launch(0, 3, port, args), _launch(1, 3, port, args)]  # rank 2 of 3 never starts
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [4, 4]
    fleet = json.loads(outs[0][0])
    assert fleet["exit_code"] == 4 and [(m["rank"], m["kind"]) for m in fleet["missing"]] == [(2, NEVER_JOINED)]
    assert fleet["message"] and fleet["message"] in outs[0][1]  # rank 0 says it on stderr too
    assert time.monotonic() - t0 < 40


# -- compare, on reports written by real doctor runs -------------------------------------------------

@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("reports")
    fla = envs.site("fla-core==0.6.0", "einops", "triton==3.6.0")
    for name, sites in (("node1", ()), ("node2", (fla,))):
        res = envs.run(["doctor", "--model", MODEL, "--json"], *sites)
        (d / f"{name}.json").write_text(res.stdout)
    (d / "node3.json").write_text((d / "node1.json").read_text())
    return d


def test_compare_names_the_odd_node_and_exits_with_the_worst_code(reports):
    res = envs.run(["compare", str(reports), "--json"])
    assert res.returncode == 4, res.stderr
    data = json.loads(res.stdout)
    assert data["exit_code"] == 4 and data["groups"] == [["node1", "node3"], ["node2"]]
    (odd,) = data["differences"]
    assert odd["ranks"] == ["node2"]
    assert "fla-core 0.6.0" in {d["field"]: d["value"] for d in odd["fields"]}["kernel packages"]
    # each rank's record reads back typed as it was printed (the table's words: tests/unit/test_fleet_table.py)
    records = [RankRecord.from_json(r) for r in data["ranks"]]
    assert [r.to_json() for r in records] == data["ranks"]
    assert [d.to_json() for d in table.differences(records)] == data["differences"]


def test_compare_of_identical_nodes_is_their_verdict(reports):
    res = envs.run(["compare", str(reports / "node1.json"), str(reports / "node3.json"), "--json"])
    data = json.loads(res.stdout)
    assert res.returncode == 3 and data["verdict"] == "fallback" and data["differences"] == []
    assert data["groups"] == [["node1", "node3"]]


def test_compare_counts_a_report_that_never_arrived(reports):
    res = envs.run(["compare", str(reports / "node1.json"), str(reports / "node3.json"), "--expect", "3", "--json"])
    assert res.returncode == 4 and [(m["rank"], m["kind"]) for m in json.loads(res.stdout)["missing"]] == [
        (2, NO_REPORT)]


def test_compare_refuses_a_report_of_another_kernelcheck_schema(reports, tmp_path):
    old = json.loads((reports / "node1.json").read_text())
    old["schema"] = "kernelcheck.report/0"
    (tmp_path / "old.json").write_text(json.dumps(old))
    res = envs.run(["compare", str(reports / "node1.json"), str(tmp_path / "old.json")])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "old.json: report schema 'kernelcheck.report/0'" in res.stderr  # wording: renderer test
    assert "different kernelcheck version" in res.stderr  # wording: renderer test


def test_compare_tolerates_extra_keys_but_not_missing_ones(reports, tmp_path):
    newer = json.loads((reports / "node1.json").read_text()) | {"a_future_section": {"x": 1}}
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    assert envs.run(["compare", str(reports / "node1.json"), str(tmp_path / "newer.json")]).returncode == 3
    del newer["functions"]
    (tmp_path / "cut.json").write_text(json.dumps(newer))
    res = envs.run(["compare", str(tmp_path / "cut.json")])
    assert res.returncode == 2 and "without functions" in res.stderr  # wording: renderer test


def test_summarised_record_of_a_real_report_packs_to_a_few_kb(reports):
    full = json.loads((reports / "node2.json").read_text())
    rec = summary.summarise(full, rank=0, host="h")
    blob = summary.pack(rec)
    assert len(blob) < 2048 < len(json.dumps(full))
    assert summary.unpack(blob) == rec and rec.verdict == full["verdict"]


def test_verify_all_ranks_runs_the_real_layers_on_each_rank_and_agrees():
    port, args = _port(), ["verify", "--model", MODEL, "--all-ranks", "--json", "--timeout", "120"]
    procs = [_launch(0, 2, port, args), _launch(1, 2, port, args)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [3, 3], outs[0][1][-2000:]
    fleet = json.loads(outs[0][0])
    assert fleet["command"] == "verify" and fleet["differences"] == [] and len(fleet["groups"][0]) == 2
    assert {f["status"] for f in fleet["ranks"][1]["functions"]} == {"fallback", "fast"}
    assert outs[1][0] == ""


# -- under torchrun as it is: no trap, the launcher SIGTERMs the others ---------------------------------------------

RANK_PROGRAM = REPO / "tests" / "programs" / "fleet_rank.py"


@pytest.fixture(scope="module")
def torchrun_plain(tmp_path_factory) -> dict:
    """torchrun --nproc-per-node 2 with kernelcheck as the workers themselves (no shell, no trap): torchrun
    SIGTERMs rank 1 once rank 0 exits non-zero, as in a real job. Rank 1 runs with USE_HUB_KERNELS=1.
    Each worker's exit code is read from torchrun's own failure report, its stderr from --log-dir."""
    logs = tmp_path_factory.mktemp("fleet-plain")
    env = _base_env() | {"KC_ODD_RANK": "1", "KC_ODD_ENV": "USE_HUB_KERNELS=1"}
    env.pop("USE_HUB_KERNELS", None)
    res = subprocess.run([str(TORCHRUN), "--nproc-per-node", "2", "--master-port", str(_port()), "--log-dir",
                          str(logs), "--redirects", "3", str(RANK_PROGRAM),
                          "doctor", "--model", MODEL, "--all-ranks", "--json", "--timeout", "90"],
                         env=env, capture_output=True, text=True, timeout=300)
    codes = {int(r): int(c) for r, c in re.findall(r"rank\s*:\s*(\d+) \(local_rank.*?\n\s*exitcode\s*:\s*(-?\d+)",
                                                   res.stderr)}
    err = {int(p.parent.name): p.read_text() for p in logs.rglob("stderr.log")}
    out = {int(p.parent.name): p.read_text() for p in logs.rglob("stdout.log")}
    return {"res": res, "codes": codes, "err": err, "fleet": json.loads(out[0]), "logs": logs}


@pytest.mark.integration
def test_the_documented_one_liner_keeps_the_fleet_code_that_torchrun_collapses_to_1(torchrun_plain, tmp_path):
    doc = (REPO / "docs" / "fleet.md").read_text()
    (line,) = [x for x in doc.splitlines() if x.startswith("torchrun --log-dir kc --redirects 3 ")]
    code = re.search(r"python3 -c '([^']+)'", line).group(1)
    (tmp_path / "kc").symlink_to(torchrun_plain["logs"])  # the line's --log-dir, as torchrun left it
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert (res.stdout.strip(), torchrun_plain["res"].returncode) == ("3", 1), res.stderr


@pytest.mark.integration
def test_a_rank_with_other_dispatch_variables_is_odd(torchrun_plain):
    (odd,) = torchrun_plain["fleet"]["differences"]
    assert odd["ranks"] == [f"rank 1 ({socket.gethostname()})"]
    fields = {f["field"]: f for f in odd["fields"]}
    assert fields["dispatch variables"]["value"] == "USE_HUB_KERNELS=1"
    assert fields["dispatch variables"]["others"] == "none"


@pytest.mark.integration
def test_every_rank_says_the_fleet_verdict_and_exits_with_it_under_torchrun(torchrun_plain):
    # CPU machine: fallback everywhere (3); torchrun SIGTERMs rank 1 once rank 0 exits 3
    assert torchrun_plain["codes"] == {0: 3, 1: 3}, torchrun_plain["err"]
    for r in (0, 1):
        err = torchrun_plain["err"][r]
        said = f"rank {r}: fleet verdict FALLBACK (exit 3) for 2 ranks"
        assert said in err, err[-2000:]  # wording: renderer test
        assert "stopped before a verdict" not in err and "Traceback" not in err
    # what torchrun itself does with a non-zero worker (docs/fleet.md): its own traceback and exit 1
    assert torchrun_plain["res"].returncode == 1
    assert "ChildFailedError" in torchrun_plain["res"].stderr  # wording: torchrun's own message


def test_compare_sees_a_dispatch_variable_only_in_an_old_reports_finding():
    base = {"schema": "kernelcheck.report/1", "command": "doctor", "verdict": "fallback", "exit_code": 3,
            "environment": {"python": "3.12", "env": {}}, "functions": [], "findings": []}
    hub = json.loads(json.dumps(base))
    hub["findings"] = [{"id": "dispatch-env", "severity": "info",
                        "message": "variables that change which kernel runs are set here: FLA_TILELANG=0."}]
    new = json.loads(json.dumps(base))
    new["environment"]["env"] = {"TRANSFORMERS_NO_KERNELS": "1", "HF_HUB_OFFLINE": "1"}
    recs = [summary.summarise(r, rank=i) for i, r in enumerate((base, base, hub, new))]
    diffs = {d.ranks[0]: {f.field: f.value for f in d.fields} for d in table.differences(recs)}
    assert "FLA_TILELANG=0" in diffs["rank 2"]["dispatch variables"]
    assert diffs["rank 3"]["dispatch variables"] == "TRANSFORMERS_NO_KERNELS=1"
    assert [len(g) for g in table.groups(recs)] == [2, 1, 1]  # never "all agree"
