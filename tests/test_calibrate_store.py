"""Saving, finding and loading calibration results; the recorded H200 result (no GPU)."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from launchprof.calibrate import (
    SCHEMA,
    CalibrationError,
    calibration_path,
    load_calibration,
    run_calibration,
    save_calibration,
)
from launchprof.calibrate.model import linear_fit
from launchprof.calibrate.store import read_calibration

RECORDED = Path(__file__).parent / "data" / "gpu" / "calibration_h200.json"


def _result(name: str = "NVIDIA H200", driver: str = "580.159.04") -> dict:
    return {"schema": SCHEMA, "device": {"name": name, "driver_version": driver}, "medians": {}}


def test_path_names_gpu_and_driver(tmp_path: Path) -> None:
    path = calibration_path("NVIDIA H200", "580.159.04", tmp_path)
    assert path == tmp_path / "calibration-nvidia-h200-580.159.04.json"


def test_save_goes_to_the_cache_folder_and_loads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr("launchprof.calibrate.current_device_path", lambda: None)
    saved = save_calibration(_result())
    assert saved == tmp_path / "launchprof" / "calibration-nvidia-h200-580.159.04.json"
    assert load_calibration() == _result()
    assert load_calibration(saved) == _result()


def test_load_without_any_file_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr("launchprof.calibrate.current_device_path", lambda: None)
    assert load_calibration() is None
    assert load_calibration(tmp_path / "missing.json") is None


def test_load_prefers_the_current_gpus_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    mine = save_calibration(_result("NVIDIA H200"))
    save_calibration(_result("NVIDIA A100"))  # written later: the newest file
    monkeypatch.setattr("launchprof.calibrate.current_device_path", lambda: mine)
    found = load_calibration()
    assert found is not None and found["device"]["name"] == "NVIDIA H200"


def test_wrong_schema_is_a_calibration_error(tmp_path: Path) -> None:
    bad = tmp_path / "calibration-x.json"
    bad.write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(CalibrationError):
        load_calibration(bad)
    bad.write_text("{not json")
    with pytest.raises(CalibrationError):
        load_calibration(bad)
    with pytest.raises(CalibrationError):
        save_calibration({"schema": "something/else"}, tmp_path / "out.json")


def test_run_without_cuda_python_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_cuda(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name.startswith("cuda"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cuda)
    with pytest.raises(CalibrationError) as err:
        run_calibration()
    assert "cuda-python" in str(err.value) and "\n" not in str(err.value)


def test_recorded_h200_calibration_is_consistent() -> None:
    data = read_calibration(RECORDED)
    assert data is not None and data["schema"] == SCHEMA
    assert data["device"]["name"] == "NVIDIA H200"
    medians = data["medians"]
    # a graph node is dispatched faster than a stream kernel, and a launch costs microseconds
    assert 0 < medians["graph_node_interval_ns"] < medians["stream_kernel_interval_ns"]
    assert 1_000 < medians["launch_cpu_ns"] < 20_000
    assert data["checks"]["back_to_back"] is True
    nodes = data["by_nodes"]["nodes"]
    for key, fit in data["fits"].items():
        again = linear_fit(nodes, data["by_nodes"][key])
        assert again.slope == pytest.approx(fit["slope"])
        assert again.intercept == pytest.approx(fit["intercept"])
    # updating an executable graph is cheaper than instantiating a new one at every size
    for update, reinstantiate in zip(data["by_nodes"]["update_ns"], data["by_nodes"]["reinstantiate_ns"], strict=True):
        assert update < reinstantiate
