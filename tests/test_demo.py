"""The demo (the README's first command) runs offline and shows each processor
at work."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import trio

from procession._demo import run_demo


async def test_demo_streams_three_conversations(autojump_clock: trio.abc.Clock) -> None:
    out = io.StringIO()
    first, second, third = await run_demo(out, colour="never")
    text = out.getvalue()
    # Conversation 1: the scanner masks the key, the quality check retries once,
    # the built-in PIIDetector hides an address that arrived split across two
    # deltas.
    assert "[tool-result-scanner] clean; masked the api_key field" in text
    assert "'api_key': '[masked]'" in text
    # One numbering for people: the second step (steps=2 in the summary).
    assert "↺ step 2 retried (retry 1): the answer has 2 words" in text
    assert "write to [EMAIL] and quote the order number." in text
    assert "[pii-detector] redacted 1 e-mail address(es)" in text
    assert "dispatch@exam" not in text.split("agent › Good news")[1]
    assert first.finish_reason == "stop"
    assert first.retry_count == 1
    assert first.text.endswith("write to [EMAIL] and quote the order number.")
    # Conversation 2: the built-in RegexFilter trips mid-stream; the password
    # never shows, and the step's hooks never judged the blocked answer.
    assert "agent › Sure. To reset the router you need the \n" in text
    assert "✖ blocked by regex-filter" in text
    assert "hunter2" not in text
    assert "answer accepted (8 words)" not in text
    assert second.finish_reason == "other"
    assert second.tripwire is not None
    assert second.tripwire.processor_id == "regex-filter"
    # Conversation 3: a returning user; memory kept conversation 1, not 2.
    conversation_3 = text.split("Do you remember my order?")[1]
    assert "◷ memory: 3 earlier message(s) of this thread loaded" in conversation_3
    assert third.finish_reason == "stop"
    remembered = [m.text for m in third.message_list.get.remembered.db()]
    assert remembered[0] == "Where is my order A-1042?"
    assert not any("router" in t for t in remembered)
    assert (
        "processor actions: pii-detector ×1, quality-check ×3, regex-filter ×1, "
        "tool-result-scanner ×1" in text
    )
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
    assert "\x1b[31;1m  ✖ blocked by regex-filter" in out.getvalue()


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
    assert "blocked by regex-filter" in done.stdout
    assert "conversation 1: finish=stop" in done.stdout


def _procession(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "procession", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "", "NO_COLOR": "1", **env},
    )


def test_an_api_key_alone_never_makes_the_demo_call_a_paid_api() -> None:
    """The first line names the model, before anything is called; an exported
    key does not switch the demo away from the embedded model."""
    done = _procession("demo", "--color", "never", ANTHROPIC_API_KEY="sk-not-used")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "model: scripted (offline)"


def test_a_real_model_that_cannot_be_built_is_one_line_and_exit_2() -> None:
    done = _procession("demo", "--model", "nosuch/model")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("procession demo: unknown model provider 'nosuch'")


def test_bare_procession_prints_the_help_and_version_works() -> None:
    bare = _procession()
    assert bare.returncode == 0
    assert "streams three short conversations" in bare.stdout
    helped = _procession("demo", "--help")
    assert "--color" in helped.stdout
    assert "colour the output" in helped.stdout
    assert "how the output processors run" in helped.stdout
    import procession

    versioned = _procession("--version")
    assert versioned.stdout.strip() == f"procession {procession.__version__}"
    assert procession.__version__ != "0+unknown"  # installed: read from metadata


def test_a_closed_pipe_ends_the_demo_quietly() -> None:
    """``procession demo | head -1``: no BrokenPipeError traceback."""
    reader = subprocess.Popen(
        [sys.executable, "-m", "procession", "demo", "--color", "never"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": "", "NO_COLOR": "1"},
    )
    assert reader.stdout is not None
    assert reader.stderr is not None
    first = reader.stdout.readline()
    reader.stdout.close()  # the reader leaves
    stderr = reader.stderr.read().decode()
    reader.stderr.close()
    assert reader.wait(timeout=120) == 1
    assert first == b"model: scripted (offline)\n"
    assert "Traceback" not in stderr


def test_a_run_that_ends_in_an_error_shows_it_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from procession import ProviderError
    from procession._cli import main
    from procession.models import register_provider, unregister_provider
    from procession.testing import ScriptedModel

    register_provider(
        "failing",
        lambda _id: ScriptedModel([ProviderError("boom", status_code=400)] * 20),
    )
    try:
        code = main(["demo", "--model", "failing/x", "--color", "never"])
    finally:
        unregister_provider("failing")
    out, err = capsys.readouterr()
    assert code == 1
    assert "finish=error" in out
    assert "error: boom" in out
    assert "procession demo: a run ended in an error: boom" in err


def test_text_wraps_at_word_boundaries() -> None:
    from procession._demo import _Wrap

    wrap = _Wrap(20)
    wrap.start(4)
    text = wrap.fit("one two thr") + wrap.fit("ee four five six")
    lines = text.split("\n")
    assert all(len(line) <= 20 for line in lines)
    assert "three" in text  # never cut mid-word
    assert len(lines) > 1
    assert _Wrap(None).fit("a" * 500) == "a" * 500
