"""core/settings.py: one reading of every KERNELCHECK_*/HF_* variable, passed in explicitly."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcheck.core.settings import Settings


@pytest.mark.parametrize("value", ["1", "on", "ON", "yes", "true", "Y"])
def test_kernelchecks_own_offline_switch_means_no_network_anywhere(value: str) -> None:
    s = Settings.from_environ({"KERNELCHECK_OFFLINE": value})
    assert s.offline and s.hub_offline and s.hub_offline_reason == f"KERNELCHECK_OFFLINE={value}"


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_hugging_face_offline_switches_close_the_hub_but_not_pypi(var: str) -> None:
    s = Settings.from_environ({var: "on"})
    assert s.hub_offline and not s.offline


@pytest.mark.parametrize("value", ["", "0", "off", "no", "false"])
def test_other_values_are_online(value: str) -> None:
    s = Settings.from_environ({"KERNELCHECK_OFFLINE": value, "HF_HUB_OFFLINE": value})
    assert not s.offline and not s.hub_offline


def test_paths_and_timeout(tmp_path: Path) -> None:
    s = Settings.from_environ({"KERNELCHECK_HOME": str(tmp_path), "KERNELCHECK_NETWORK_TIMEOUT": "2.5"})
    assert s.wheelhouse == tmp_path / "wheelhouse" and s.network_timeout == 2.5
    assert Settings.from_environ({}).network_timeout == 5.0
    assert Settings.from_environ({"KERNELCHECK_NETWORK_TIMEOUT": ""}).network_timeout == 5.0
    m = tmp_path / "m.json"
    assert Settings.from_environ({"KERNELCHECK_MANIFEST": str(m)}).manifest_path == m


def test_transformers_offline_keeps_the_hub_check_offline_as_model_lookup_is(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """TRANSFORMERS_OFFLINE=1 made model lookup offline while the Hub check still asked the Hub."""
    from kernelcheck.core import settings
    from kernelcheck.integrations import kernels_hub

    for var in ("KERNELCHECK_OFFLINE", "HF_HUB_OFFLINE", "LOCAL_KERNELS", "KERNELS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    asked: list[str] = []

    def hub(repo_id: str, *args: object) -> kernels_hub.Resolution:
        asked.append(repo_id)
        raise RuntimeError("the Hub was asked")

    monkeypatch.setattr(kernels_hub, "_resolve_hub", hub)
    res = kernels_hub.resolve_repo("kernels-community/example", version=1, source="auto")
    assert settings.hub_offline()
    assert asked == [] and res.source == "none" and res.chosen is None


@pytest.mark.parametrize("bad", ["-1", "0", "0.05", "soon", "nan", "inf"])
def test_a_network_timeout_that_is_not_seconds_is_bad_input_everywhere_it_is_read(
        bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """-1 once read as 5.0 in Settings and as 0.1 in network_timeout(); now one reader, exit 2."""
    from kernelcheck.core import settings
    from kernelcheck.core.errors import BadInput

    with pytest.raises(BadInput) as got:
        _ = Settings.from_environ({"KERNELCHECK_NETWORK_TIMEOUT": bad}).network_timeout
    assert got.value.exit_code == 2 and "\n" not in got.value.message  # wording: renderer test (exit-2 message)
    monkeypatch.setenv("KERNELCHECK_NETWORK_TIMEOUT", bad)
    with pytest.raises(BadInput):
        settings.network_timeout()


def test_a_bad_network_timeout_stops_a_lookup_instead_of_becoming_a_failed_download(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Both network readers (config.json from the Hub, the Kernel Hub listing) raise it, not swallow it."""
    from kernelcheck.core import matrix, models
    from kernelcheck.core.errors import BadInput
    from kernelcheck.integrations import kernels_hub

    for var in ("KERNELCHECK_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LOCAL_KERNELS", "KERNELS_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("KERNELCHECK_NETWORK_TIMEOUT", "-1")
    asked: list[str] = []
    monkeypatch.setattr(kernels_hub, "_resolve_hub", lambda repo_id, *a: asked.append(repo_id))
    with pytest.raises(BadInput):
        models.resolve("example-org/not-cached-model", m=matrix.load())
    with pytest.raises(BadInput):
        kernels_hub.resolve_repo("kernels-community/example", version=1, source="auto")
    assert asked == []

