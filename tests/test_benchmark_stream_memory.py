"""``benchmarks/stream_memory.py`` runs (tiny) and measures what it says:
each app's streams hold memory, and a run holds more than the bare floor."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_stream_memory_benchmark_measures_both_apps() -> None:
    out = subprocess.run(
        [sys.executable, "benchmarks/stream_memory.py", "--quick", "--top", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    figures = {
        name: float(value)
        for name, value in re.findall(
            r"^  (procession app|bare ASGI floor).*?([\d.]+) KiB$", out, re.M
        )
    }
    assert set(figures) == {"procession app", "bare ASGI floor"}, out
    assert 0 < figures["bare ASGI floor"] < figures["procession app"], out
    assert "20 open streams" in out
    assert len(re.findall(r"^    +\d+  \S", out, re.M)) == 3, out  # --top 3
