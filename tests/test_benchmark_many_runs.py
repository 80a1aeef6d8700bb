"""benchmarks/many_runs.py still runs (tiny sizes), so it cannot rot."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "many_runs.py"


def test_the_many_runs_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("many_runs", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # attrs needs the module to resolve annotations
    try:
        spec.loader.exec_module(module)
        rows = module.main(["--quick"])
    finally:
        del sys.modules[spec.name]
    assert [r.setup for r in rows] == [
        "floor (task per stream)",
        "agent fused",
        "agent actors",
    ]
    assert all(r.chunks_per_second > 0 for r in rows)
    assert all(r.kib_per_run > 0 for r in rows)
    assert "summary: 20 concurrent runs" in capsys.readouterr().out
