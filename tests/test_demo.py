"""The demo (the README's first command) runs offline and shows each processor
at work."""

from __future__ import annotations

import io
import subprocess
import sys

import trio

from procession._demo import run_demo


async def test_demo_streams_both_conversations(autojump_clock: trio.abc.Clock) -> None:
    out = io.StringIO()
    first, second = await run_demo(out, colour="never")
    text = out.getvalue()
    # Conversation 1: the scanner masks the key, the quality check retries once,
    # the redactor hides an address that arrived split across two deltas.
    assert "[tool-result-scanner] clean; masked the api_key field" in text
    assert "'api_key': '[masked]'" in text
    assert "↺ step 1 retried (retry 1): the answer has 2 words" in text
    assert "write to [email hidden] and quote the order number." in text
    assert "dispatch@exam" not in text.split("agent › Good news")[1]
    assert first.finish_reason == "stop"
    assert first.retry_count == 1
    assert first.text.endswith("write to [email hidden] and quote the order number.")
    # Conversation 2: the guardrail trips mid-stream; the password never shows.
    assert "✖ blocked by leak-guardrail" in text
    assert "hunter2" not in text
    assert second.finish_reason == "other"
    assert second.tripwire is not None
    assert second.tripwire.processor_id == "leak-guardrail"
    assert "processor actions: email-redactor ×1, leak-guardrail ×1" in text
    assert "\x1b[" not in text  # colour off


async def test_demo_in_actors_mode_prints_the_same(
    autojump_clock: trio.abc.Clock,
) -> None:
    fused, actors = io.StringIO(), io.StringIO()
    await run_demo(fused, colour="never", mode="fused")
    await run_demo(actors, colour="never", mode="actors")
    assert actors.getvalue() == fused.getvalue().replace(
        "execution mode: fused", "execution mode: actors"
    )


async def test_demo_colours_when_asked(autojump_clock: trio.abc.Clock) -> None:
    out = io.StringIO()
    await run_demo(out, colour="always")
    assert "\x1b[31;1m  ✖ blocked by leak-guardrail" in out.getvalue()


def test_the_console_command_runs() -> None:
    """``python -m procession demo`` (what the ``procession`` script runs)."""
    done = subprocess.run(
        [sys.executable, "-m", "procession", "demo", "--color", "never"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "", "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "blocked by leak-guardrail" in done.stdout
    assert "conversation 1: finish=stop" in done.stdout
