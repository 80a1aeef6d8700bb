"""``examples/trace_demo.py`` (the README's trace) keeps working: run in its own
process, since it sets the global tracer provider."""

from __future__ import annotations

import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "trace_demo.py"


def test_the_trace_demo_prints_each_conversations_tree() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    second = done.stdout.split("conversation 2:\n")[1].split("\n\n")[0].splitlines()
    assert second[0].startswith("invoke_agent support-agent  [outcome=tripwire")
    assert "├─ process_input message-history" in second
    assert any(
        line.startswith("├─ process_output_stream regex-filter")
        and "⚑ tripwire" in line
        for line in second
    )
    assert second[-1] == "└─ chat demo-support-model"
