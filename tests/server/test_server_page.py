"""The chat page: ``GET /`` serves one HTML file (inline JS, no CDN), and in
Debian's headless Chromium it streams an answer and shows what processors
did (a tool call and its result, a retry replacing the rejected attempt, a
redaction, the tripwire banner). The browser test is skipped, with the
reason, only when chromium or node is absent and not under CI (``$CI``, or
``$PROCESSION_REQUIRE_BROWSER``, which ``.ci/run`` sets)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import trio

from procession.server import create_app, load_target, serve
from procession.testing import ScriptedModel
from tests.server.server_helpers import make_agent, request

ROOT = Path(__file__).parents[2]
NODE = shutil.which("node")
CHROMIUM = os.environ.get("PROCESSION_CHROMIUM", "/usr/bin/chromium")


async def test_the_page_is_one_html_file_with_no_outside_requests() -> None:
    app = create_app([make_agent(ScriptedModel([]))], tokens=["t"])
    page = await request(app, "GET", "/")  # no token needed for the page
    assert page.status == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    html = page.body.decode()
    assert "<script>" in html
    assert "api/agents/" in html
    # Nothing loaded from elsewhere: no src/href to another origin.
    assert re.findall(r"""(?:src|href)=["']?(?:https?:)?//""", html) == []
    assert (await request(app, "GET", "/api/agents")).status == 401


def _browser_missing() -> str | None:
    if NODE is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM} (Debian's chromium package)"
    return None


@pytest.mark.procession_real_clock
async def test_the_page_in_headless_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    missing = _browser_missing()
    if missing is not None:
        if os.environ.get("CI") or os.environ.get("PROCESSION_REQUIRE_BROWSER"):
            pytest.fail(f"the browser test must run under CI: {missing}")
        print(f"skipping the browser test: {missing}")
        pytest.skip(missing)
    where = request.getfixturevalue("node_clients")
    monkeypatch.setenv("PROCESSION_SUPPORT_DB", str(tmp_path / "memory.db"))
    monkeypatch.delenv("PROCESSION_SERVER_TOKENS", raising=False)
    app = load_target(str(ROOT / "examples" / "support.py") + ":agent")
    screenshot = tmp_path / "page.png"
    stop = trio.Event()
    assert NODE is not None
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            with trio.fail_after(90):
                done = await trio.run_process(
                    [
                        NODE,
                        str(where / "page_browser.mjs"),
                        urls[0],
                        str(screenshot),
                        str(tmp_path / "chromium-profile"),
                    ],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        finally:
            stop.set()
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    first = seen["first"]
    assert seen["consoleErrors"] == []
    assert first["text"].startswith("Good news: order A-1042 has shipped")
    assert "[EMAIL]" in first["text"]  # the redaction, in the answer
    assert any("quality-check" in note for note in first["notes"])
    assert first["rejected"] == ["It shipped. "]  # the retried attempt, struck
    assert len(first["retries"]) == 1
    assert len(first["tools"]) == 1
    assert "lookup_order" in first["tools"][0]
    assert "←" in first["tools"][0]  # and its result
    assert seen["banner"].startswith("Tripwire: blocked by regex-filter")
    # The refund waited for the Approve button, then went on in the same answer.
    assert "waits for your approval" in seen["waiting"]
    assert seen["refund"]["text"].startswith("Done: order A-1042 is refunded")
    [card] = seen["refund"]["tools"]
    assert "issue_refund" in card
    assert "approved" in card
    assert '"refunded":true' in card
    assert screenshot.stat().st_size > 10_000
    print(f"screenshot: {screenshot}")
