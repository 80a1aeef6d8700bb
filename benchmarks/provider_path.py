"""CPU per event of procession's real-provider path (issue 10, item 4), against
the loopback fake provider server (real sockets), beside the floor each
provider's path is measured against in the same run:

* Anthropic: iterating the ``anthropic`` SDK's own ``messages.stream`` events
  (and, for reference, its raw ``messages.create(stream=True)`` events) vs
  ``agent.stream`` over ``AnthropicModel``, no processors;
* OpenAI Chat Completions: a bare ``httpx2`` SSE read (every ``data:`` line
  parsed with ``json.loads``) vs ``agent.stream`` over ``OpenAIChatModel``;
* OpenAI Responses: the same bare read vs ``agent.stream`` over
  ``OpenAIResponsesModel``.

Between floor and agent: the provider's response iterated by itself
(``Model.stream, iterated``: the providers' own cost), and each agent run a
second time with ``next_nowait`` hidden (``, awaited``: every chunk awaited in
the run's coordinator and sent over, the path before responses offered it).

CPU is ``time.process_time`` of this process only: the server runs in a
subprocess (this script with ``--serve``), so rendering and sending the events
is not counted. Rounds are interleaved (every setup once per round), figures
are medians; "added" is the extra CPU per event over the floor (goal: at most
10%). The server writes each event as one HTTP chunk, as most servers do, and
httpx2 hands each chunk over by itself, so a read decodes one event; with
``--burst K`` it writes K events to a chunk. ``--json stdlib`` decodes the
event data with ``json.loads`` instead of msgspec (the ``fastjson`` extra). Not
part of the test suite; a smoke test runs ``--quick``.

    python benchmarks/provider_path.py                # 5,000 deltas, 7 rounds
    python benchmarks/provider_path.py --burst 8      # 8 events per HTTP chunk
    python benchmarks/provider_path.py --json stdlib  # the stdlib decoder
    python benchmarks/provider_path.py --quick        # tiny, to check it runs
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import attrs
import trio

SDK_STREAM = "anthropic SDK messages.stream"
SDK_RAW = "anthropic SDK create(stream=True)"
MODEL_ANTHROPIC = "AnthropicModel.stream, iterated"
AGENT_ANTHROPIC = "agent.stream, AnthropicModel"
BARE_CHAT = "httpx2 SSE read, chat"
MODEL_CHAT = "OpenAIChatModel.stream, iterated"
AGENT_CHAT = "agent.stream, OpenAIChatModel"
BARE_RESPONSES = "httpx2 SSE read, responses"
MODEL_RESPONSES = "OpenAIResponsesModel.stream, iterated"
AGENT_RESPONSES = "agent.stream, OpenAIResponsesModel"
AWAITED = ", awaited"
"""The suffix of a setup whose responses hide ``next_nowait``."""

BASELINE = {
    SDK_RAW: SDK_STREAM,
    MODEL_ANTHROPIC: SDK_STREAM,
    AGENT_ANTHROPIC: SDK_STREAM,
    AGENT_ANTHROPIC + AWAITED: SDK_STREAM,
    MODEL_CHAT: BARE_CHAT,
    AGENT_CHAT: BARE_CHAT,
    AGENT_CHAT + AWAITED: BARE_CHAT,
    MODEL_RESPONSES: BARE_RESPONSES,
    AGENT_RESPONSES: BARE_RESPONSES,
    AGENT_RESPONSES + AWAITED: BARE_RESPONSES,
}
"""Each measured setup and the floor its added cost is against."""


@attrs.frozen
class Row:
    setup: str
    baseline: str | None  # the floor it is compared with (None: it is a floor)
    events: int  # SSE events per response
    cpu_us_per_event: float  # median over the rounds
    wall_us_per_event: float
    added_percent: float | None  # CPU over the floor's, in %


# --- the server, in a subprocess ------------------------------------------------


def _pieces(deltas: int) -> list[str]:
    return [f"w{i} " for i in range(deltas)]


async def _serve(deltas: int, turns: int, burst: int) -> None:
    """Serve ``turns`` copies of one text stream until stdin closes; print the
    base URL first (the parent reads it). With ``burst`` > 1 the events are
    written ``burst`` to an HTTP chunk (one read then decodes several), else
    one to a chunk, as the fake server (and most servers) send them."""
    from procession.testing.fake_provider import (
        RecordedRequest,
        Stream,
        anthropic_events,
        chat_events,
        open_fake_provider,
        responses_events,
    )

    stream = Stream.text(*_pieces(deltas))
    rendered = {
        "/v1/messages": anthropic_events(stream, model="fake-model"),
        "/v1/chat/completions": chat_events(
            stream, model="fake-model", include_usage=True
        ),
        "/v1/responses": responses_events(stream, model="fake-model"),
    }
    grouped = {
        path: Stream.raw(
            ["".join(events[i : i + burst]) for i in range(0, len(events), burst)]
        )
        for path, events in rendered.items()
    }

    def bursts(request: RecordedRequest) -> Stream:
        return grouped[request.path]

    script = [stream if burst == 1 else bursts] * turns
    async with open_fake_provider(script, strict=False) as server:
        print(server.base_url, flush=True)
        stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
        while await stdin.receive_some():
            pass


@contextlib.contextmanager
def _server(deltas: int, turns: int, burst: int) -> Iterator[str]:
    """The fake provider in a subprocess; its base URL."""
    command = [sys.executable, __file__, "--serve", str(deltas)]
    command += ["--turns", str(turns), "--burst", str(burst)]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            url = process.stdout.readline().strip()
            if not url.startswith("http://"):
                raise RuntimeError(f"the fake provider did not start (said {url!r})")
            yield url
        finally:
            process.stdin.close()  # the server's cue to stop
            process.wait(timeout=30)


# --- the setups: each reads one whole response, returns the events it saw ----------


def _clients(url: str) -> dict[str, Any]:
    import anthropic
    import httpx2

    from procession.providers import (
        AnthropicModel,
        OpenAIChatModel,
        OpenAIResponsesModel,
    )

    http = httpx2.AsyncClient(timeout=60)
    sdk = anthropic.AsyncAnthropic(
        api_key="test", base_url=url, max_retries=0, http_client=http
    )
    return {
        "http": http,
        "sdk": sdk,
        "anthropic": AnthropicModel("fake-model", client=sdk),
        "chat": OpenAIChatModel(
            "fake-model", api_key="test", base_url=f"{url}/v1", client=http
        ),
        "responses": OpenAIResponsesModel(
            "fake-model", api_key="test", base_url=f"{url}/v1", client=http
        ),
        "url": url,
    }


_MESSAGES = [{"role": "user", "content": "hi"}]


async def _sdk_stream(c: dict[str, Any]) -> int:
    n = 0
    async with c["sdk"].messages.stream(
        model="fake-model", max_tokens=64, messages=_MESSAGES
    ) as stream:
        async for _ in stream:
            n += 1
    return n


async def _sdk_raw(c: dict[str, Any]) -> int:
    n = 0
    stream = await c["sdk"].messages.create(
        model="fake-model", max_tokens=64, messages=_MESSAGES, stream=True
    )
    async with stream:
        async for _ in stream:
            n += 1
    return n


async def _bare(c: dict[str, Any], path: str, body: dict[str, Any]) -> int:
    """A bare SSE read: every ``data:`` line parsed as JSON (but ``[DONE]``),
    to the end of the body (leaving the line iterator early would leave its
    generators to the garbage collector)."""
    n = 0
    http = c["http"]
    url = f"{c['url']}/v1{path}"
    headers = {"authorization": "Bearer test"}
    async with http.stream("POST", url, json=body, headers=headers) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data != "[DONE]":
                    json.loads(data)
                n += 1
    return n


async def _bare_chat(c: dict[str, Any]) -> int:
    body = {
        "model": "fake-model",
        "messages": _MESSAGES,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return await _bare(c, "/chat/completions", body)


async def _bare_responses(c: dict[str, Any]) -> int:
    body = {"model": "fake-model", "input": _MESSAGES, "stream": True}
    return await _bare(c, "/responses", body)


def _model_setup(key: str) -> Callable[[dict[str, Any]], Awaitable[int]]:
    """The provider's response iterated directly (no agent): its own cost."""

    async def run(c: dict[str, Any]) -> int:
        from procession.models import ModelRequest
        from procession.processors import PromptTextPart, PromptUserMessage

        request = ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])
        n = 0
        async with c[key].stream(request) as response:
            async for _ in response:
                n += 1
        return n

    return run


class _AwaitedOnly:
    """``model`` with responses that offer no ``next_nowait``: the run then
    awaits every chunk in its coordinator and sends it over (the path before
    responses offered it). One ``await`` more per chunk than the model alone,
    which the awaited rows include."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.provider = model.provider
        self.model_id = model.model_id

    @contextlib.asynccontextmanager
    async def stream(self, request: Any) -> AsyncIterator[_AwaitedResponse]:
        async with self._model.stream(request) as response:
            yield _AwaitedResponse(response)


class _AwaitedResponse:
    def __init__(self, response: Any) -> None:
        self._response = response

    @property
    def finish(self) -> Any:
        return self._response.finish

    def __aiter__(self) -> _AwaitedResponse:
        return self

    async def __anext__(self) -> Any:
        return await self._response.__anext__()


def _agent_setup(
    key: str, *, awaited: bool = False
) -> Callable[[dict[str, Any]], Awaitable[int]]:
    async def run(c: dict[str, Any]) -> int:
        from procession import Agent

        model = _AwaitedOnly(c[key]) if awaited else c[key]
        agent = Agent(id="bench", model=model)
        n = 0
        async with agent.stream("hi") as stream:
            async for _ in stream:
                n += 1
        return n

    return run


SETUPS: dict[str, Callable[[dict[str, Any]], Awaitable[int]]] = {
    SDK_STREAM: _sdk_stream,
    SDK_RAW: _sdk_raw,
    MODEL_ANTHROPIC: _model_setup("anthropic"),
    AGENT_ANTHROPIC: _agent_setup("anthropic"),
    AGENT_ANTHROPIC + AWAITED: _agent_setup("anthropic", awaited=True),
    BARE_CHAT: _bare_chat,
    MODEL_CHAT: _model_setup("chat"),
    AGENT_CHAT: _agent_setup("chat"),
    AGENT_CHAT + AWAITED: _agent_setup("chat", awaited=True),
    BARE_RESPONSES: _bare_responses,
    MODEL_RESPONSES: _model_setup("responses"),
    AGENT_RESPONSES: _agent_setup("responses"),
    AGENT_RESPONSES + AWAITED: _agent_setup("responses", awaited=True),
}


def _events_per_response(deltas: int) -> dict[str, int]:
    """The SSE events the server sends for each setup's endpoint (the
    denominator of every per-event figure: the same for a setup and its floor)."""
    from procession.testing.fake_provider import (
        Stream,
        anthropic_events,
        chat_events,
        responses_events,
    )

    stream = Stream.text(*_pieces(deltas))
    anthropic = len(anthropic_events(stream, model="fake-model"))
    chat = len(chat_events(stream, model="fake-model", include_usage=True))
    responses = len(responses_events(stream, model="fake-model"))
    floors = {SDK_STREAM: anthropic, BARE_CHAT: chat, BARE_RESPONSES: responses}
    return {name: floors[BASELINE.get(name, name)] for name in SETUPS}


async def _measure(url: str, deltas: int, rounds: int) -> list[Row]:
    clients = _clients(url)
    events = _events_per_response(deltas)
    cpu: dict[str, list[float]] = {name: [] for name in SETUPS}
    wall: dict[str, list[float]] = {name: [] for name in SETUPS}
    async with clients["http"]:
        for setup in SETUPS.values():  # warm up: connections, imports
            await setup(clients)
        for _ in range(rounds):
            for name, setup in SETUPS.items():
                start_cpu, start_wall = time.process_time(), time.perf_counter()
                await setup(clients)
                cpu[name].append((time.process_time() - start_cpu) / events[name])
                wall[name].append((time.perf_counter() - start_wall) / events[name])
    medians = {name: statistics.median(values) * 1e6 for name, values in cpu.items()}
    rows = []
    for name in SETUPS:
        floor = BASELINE.get(name)
        added = None if floor is None else (medians[name] / medians[floor] - 1) * 100
        rows.append(
            Row(
                setup=name,
                baseline=floor,
                events=events[name],
                cpu_us_per_event=medians[name],
                wall_us_per_event=statistics.median(wall[name]) * 1e6,
                added_percent=added,
            )
        )
    return rows


def _use_decoder(choice: str) -> str:
    """Select the ``data:`` decoder; the one in use, in words."""
    from procession.providers import _json

    if choice == "stdlib":
        _json.loads = json.loads  # the benchmark's switch
    return "json.loads" if _json.loads is json.loads else "msgspec"


def _print(
    rows: Sequence[Row], deltas: int, rounds: int, decoder: str, burst: int
) -> None:
    print(
        f"{deltas:,} text deltas per response, {burst} event(s) per HTTP chunk, "
        f"{rounds} interleaved rounds (medians), N=0 processors, "
        f"event data decoded with {decoder}"
    )
    print(
        f"{'setup':<44}{'events':>8}{'CPU µs/event':>14}{'wall µs/event':>15}"
        f"{'added CPU':>11}"
    )
    for r in rows:
        added = "" if r.added_percent is None else f"{r.added_percent:+.1f}%"
        print(
            f"{r.setup:<44}{r.events:>8,}{r.cpu_us_per_event:>14.2f}"
            f"{r.wall_us_per_event:>15.2f}{added:>11}"
        )
    by = {r.setup: r for r in rows}

    def over(anthropic: str, chat: str, responses: str) -> str:
        named = {"anthropic": anthropic, "chat": chat, "responses": responses}
        return ", ".join(
            f"{label} {by[name].added_percent or 0.0:+.1f}%"
            for label, name in named.items()
        )

    floors = "the SDK's messages.stream (anthropic), a bare httpx2 read (openai)"
    print(f"summary: added CPU per event over {floors}, N=0:")
    print("  provider alone: " + over(MODEL_ANTHROPIC, MODEL_CHAT, MODEL_RESPONSES))
    print("  agent.stream:   " + over(AGENT_ANTHROPIC, AGENT_CHAT, AGENT_RESPONSES))
    print("  (goal: at most +10%)")


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--deltas", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", choices=("auto", "stdlib"), default="auto")
    parser.add_argument(
        "--burst", type=int, default=1, help="events per HTTP chunk (default 1)"
    )
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        trio.run(_serve, args.serve, args.turns, args.burst)
        return []
    deltas, rounds = (50, 2) if args.quick else (args.deltas, args.rounds)
    decoder = _use_decoder(args.json)
    requests = (rounds + 1) * len(SETUPS)
    with _server(deltas, requests, args.burst) as url:
        rows = trio.run(_measure, url, deltas, rounds)
    _print(rows, deltas, rounds, decoder, args.burst)
    return rows


if __name__ == "__main__":
    main()
