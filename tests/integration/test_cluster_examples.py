"""examples/kubeflow-trainer-runtime.yaml against Kubeflow Trainer v2's API models (PyPI kubeflow-trainer-api 2.3.0,
the models the kubeflow SDK builds its TrainJobs with, generated from the Trainer's OpenAPI): each document reads
into its model and writes back unchanged, so no key is unknown to the API (the models drop unknown keys) and no
value has the wrong type (they are strict); then the gate's place: the `node` job's initContainer, its
podFailurePolicy on 2/3/4, the JobSet failing (not restarting) on that reason, the TrainJob's patch of the gate's
model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests import envs

pytestmark = pytest.mark.integration

EXAMPLE = envs.REPO / "examples" / "kubeflow-trainer-runtime.yaml"
ROUND_TRIP = """
import json, sys, yaml
from kubeflow_trainer_api.models import TrainerV1alpha1ClusterTrainingRuntime, TrainerV1alpha1TrainJob
models = {"ClusterTrainingRuntime": TrainerV1alpha1ClusterTrainingRuntime, "TrainJob": TrainerV1alpha1TrainJob}
out = []
for doc in yaml.safe_load_all(sys.stdin.read()):
    out.append({"kind": doc["kind"], "back": models[doc["kind"]].from_dict(doc).to_dict()})
print(json.dumps(out))
"""


def _round_trip(text: str) -> subprocess.CompletedProcess[str]:
    site = envs.site("kubeflow-trainer-api==2.3.0")  # pydantic (its one dependency) is in the test venv
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run([sys.executable, "-c", ROUND_TRIP], input=text, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    import yaml

    return [dict(d) for d in yaml.safe_load_all(EXAMPLE.read_text())]


def test_each_document_is_what_the_trainer_api_reads(docs: list[dict[str, Any]]) -> None:
    res = _round_trip(EXAMPLE.read_text())
    assert res.returncode == 0, res.stderr[-3000:]
    back = json.loads(res.stdout)
    assert [b["kind"] for b in back] == ["ClusterTrainingRuntime", "TrainJob"]
    assert [b["back"] for b in back] == docs


def test_a_key_the_api_does_not_have_is_seen(docs: list[dict[str, Any]]) -> None:
    import yaml

    # a RuntimePatch cannot set an initContainer's image (Trainer v2's ContainerPatch): the model drops it
    bad = json.loads(json.dumps(docs[1]))
    patch = bad["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    patch["template"]["spec"]["template"]["spec"]["initContainers"][0]["image"] = "other:tag"
    res = _round_trip(yaml.safe_dump(bad))
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)[0]["back"] != bad


def test_the_gate_is_the_node_jobs_init_container_and_fails_the_job_on_2_3_4(docs: list[dict[str, Any]]) -> None:
    runtime, job = docs
    spec = runtime["spec"]["template"]["spec"]
    (node,) = [r for r in spec["replicatedJobs"] if r["name"] == "node"]
    pod = node["template"]["spec"]["template"]["spec"]
    (gate,) = pod["initContainers"]
    assert gate["name"] == "kernelcheck" and gate["command"][:2] == ["kernelcheck", "doctor"]
    assert pod["restartPolicy"] == "Never"
    (rule,) = node["template"]["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {"containerName": "kernelcheck", "operator": "In", "values": [2, 3, 4]}
    (js_rule,) = spec["failurePolicy"]["rules"]
    assert js_rule["action"] == "FailJobSet" and js_rule["onJobFailureReasons"] == ["PodFailurePolicy"]
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    (patched,) = patch["template"]["spec"]["template"]["spec"]["initContainers"]
    assert patch["name"] == "node" and patched["name"] == "kernelcheck"
    assert [e["name"] for e in patched["env"]] == ["KCGATE_MODEL"] and "$(KCGATE_MODEL)" in gate["command"]
