"""``procession serve``: refuses what it must, and serves the demo's agent."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import httpx2
import pytest
import trio

from procession import ConfigurationError
from procession._cli import main
from procession.server import GC_THRESHOLD, tune_gc


def test_serve_refuses_a_public_address_without_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROCESSION_SERVER_TOKENS", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "refusing to serve '0.0.0.0'" in capsys.readouterr().err


def test_serve_refuses_a_bad_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "no_such_module_xyz:agent"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err


def test_serve_with_no_target_serves_the_demo_agent() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "procession", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("procession serve: support-agent on http://127.0.0.1:")
        base = line.split(" on ")[1].split()[0]
        with httpx2.Client(timeout=10) as client:
            agents = client.get(f"{base}/api/agents").json()
            assert [p["id"] for p in agents["support-agent"]["outputProcessors"]] == [
                "pii-detector",
                "regex-filter",
                "quality-check",
                "tool-result-scanner",
            ]
            # Twice: the served demo model answers any number of chats.
            # Its memory (in-process SQLite) needs the thread and resource.
            for chat in range(2):
                answer = client.post(
                    f"{base}/api/agents/support-agent/generate",
                    json={
                        "messages": "Where is my order A-1042?",
                        "memory": {"thread": f"t-{chat}", "resource": "ada"},
                    },
                ).json()
                assert answer["text"].startswith("Good news: order A-1042 has shipped")
                assert "[EMAIL]" in answer["text"]
            with client.stream(
                "POST",
                f"{base}/api/chat",
                json={
                    "messages": [{"role": "user", "content": "Reset the router?"}],
                    "memory": {"thread": "t-chat", "resource": "ada"},
                },
            ) as response:
                lines = [x for x in response.iter_lines() if x.startswith("data: ")]
            events = [x[6:] for x in lines]
            assert events[-1] == "[DONE]"
            assert json.loads(events[-2]) == {"type": "finish", "finishReason": "other"}
            assert json.loads(events[-3])["type"] == "data-tripwire"
    finally:
        server.send_signal(signal.SIGINT)
        _out, err = server.communicate(timeout=10)
    assert server.returncode == 0, err


def test_tune_gc_freezes_start_up_and_sets_the_first_threshold() -> None:
    # In a process of its own: the collector is the whole process's.
    probe = (
        "import gc; from procession.server import tune_gc\n"
        "before = gc.get_freeze_count(); second = gc.get_threshold()[1:]\n"
        "tune_gc(1234)\n"
        "print(before, gc.get_freeze_count() > before, gc.get_threshold()[0], "
        "gc.get_threshold()[1:] == second)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["0", "True", "1234", "True"]


@pytest.mark.parametrize("threshold", [0, -1, True, 2.5, "700"])
def test_tune_gc_refuses_what_is_not_a_count(threshold: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"threshold must be an int >= 1"):
        tune_gc(threshold)


def test_serve_tunes_the_collector_before_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import procession.server as server

    events: list[object] = []
    monkeypatch.setattr(server, "tune_gc", events.append)
    # Serving itself is trio.run: record that it came after the tuning.
    monkeypatch.setattr(trio, "run", lambda *_args: events.append("serving"))
    assert main(["serve", "--port", "0"]) == 0
    assert main(["serve", "--port", "0", "--gc-threshold", "5000"]) == 0
    assert main(["serve", "--port", "0", "--gc-threshold", "0"]) == 0
    # 0: the collector is left as it is.
    assert events == [GC_THRESHOLD, "serving", 5000, "serving", "serving"]


def test_serve_refuses_a_negative_gc_threshold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--gc-threshold", "-3"]) == 2
    assert "--gc-threshold must be 0" in capsys.readouterr().err
