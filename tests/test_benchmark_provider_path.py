"""``benchmarks/provider_path.py`` still runs (tiny sizes, the server in its
subprocess), so it cannot rot."""

from __future__ import annotations

import pytest

from tests.benchmark_helpers import run_quick


def test_the_provider_path_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    module, rows = run_quick("provider_path")
    assert [r.setup for r in rows] == list(module.SETUPS)
    for row in rows:
        assert row.events > 50  # the 50 deltas and the framing around them
        assert row.cpu_us_per_event > 0
        assert row.wall_us_per_event > 0
        assert (row.added_percent is None) == (row.baseline is None)
    floors = {r.setup for r in rows if r.baseline is None}
    assert floors == {
        module.SDK_STREAM,
        module.BARE_CHAT,
        module.BARE_RESPONSES,
    }
    printed = capsys.readouterr().out
    assert "CPU µs/event" in printed
    assert "summary: added CPU per event over" in printed
    assert "provider alone: " in printed
