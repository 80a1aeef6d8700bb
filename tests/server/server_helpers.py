"""Drive an ASGI app in-process, on trio: requests, streamed bodies, a client
that stops reading or disconnects. Plus the agents the server tests share."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from procession.processors import Processor, ProcessOutputStreamArgs
from procession.runtime import Agent
from procession.runtime.tools import ToolContext, tool
from procession.testing import ScriptedModel


@attrs.define
class Exchange:
    """One request in flight: the response start, then body parts as the app
    sends them (one at a time: the app's ``send`` waits for the test to take
    each part, as a socket with no room would)."""

    _to_app: trio.MemorySendChannel[dict[str, Any]]
    _from_app: trio.MemoryReceiveChannel[dict[str, Any]]
    status: int = 0
    headers: dict[str, str] = attrs.field(factory=dict)
    raw_headers: list[tuple[bytes, bytes]] = attrs.field(factory=list)
    parts: list[bytes] = attrs.field(factory=list)
    done: bool = False

    async def start(self) -> None:
        message = await self._from_app.receive()
        assert message["type"] == "http.response.start", message
        self.status = message["status"]
        self.raw_headers = list(message["headers"])
        self.headers = {k.decode(): v.decode() for k, v in message["headers"]}

    async def next_part(self) -> bytes | None:
        """The next body part, or None once the body is complete."""
        if self.done:
            return None
        try:
            message = await self._from_app.receive()
        except trio.EndOfChannel:
            self.done = True
            return None
        assert message["type"] == "http.response.body", message
        body: bytes = message.get("body", b"")
        self.parts.append(body)
        if not message.get("more_body", False):
            self.done = True
        return body

    async def read_all(self) -> bytes:
        while await self.next_part() is not None:
            pass
        return self.body

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)

    def json(self) -> Any:
        return json.loads(self.body)

    async def disconnect(self) -> None:
        await self._to_app.send({"type": "http.disconnect"})


@asynccontextmanager
async def open_exchange(
    app: Any,
    method: str,
    path: str,
    *,
    json_body: Any = None,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    body_parts: int = 1,
) -> AsyncIterator[Exchange]:
    """Start ``method path`` on ``app``; yields once the response has started.
    Leaving the block disconnects the client and waits for the app to return."""
    if json_body is not None:
        body = json.dumps(json_body).encode()
    body = body or b""
    request_headers = [(b"host", b"test")]
    if json_body is not None:
        request_headers.append((b"content-type", b"application/json"))
    for key, value in (headers or {}).items():
        request_headers.append((key.lower().encode(), value.encode()))
    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": request_headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 4111),
    }
    to_app, app_inbox = trio.open_memory_channel[dict[str, Any]](1000)
    app_outbox, from_app = trio.open_memory_channel[dict[str, Any]](0)
    size = max(1, -(-len(body) // body_parts)) if body else 1
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    for i, piece in enumerate(pieces):
        to_app.send_nowait(
            {
                "type": "http.request",
                "body": piece,
                "more_body": i < len(pieces) - 1,
            }
        )

    async def receive() -> dict[str, Any]:
        return await app_inbox.receive()

    async def send(message: dict[str, Any]) -> None:
        await app_outbox.send(message)

    exchange = Exchange(to_app, from_app)

    async def run_app() -> None:
        with app_outbox:
            await app(scope, receive, send)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_app)
        await exchange.start()
        yield exchange
        if not exchange.done:
            to_app.send_nowait({"type": "http.disconnect"})
            # Drain what the app still sends, so it is never stuck on a send.
            async for _message in from_app:
                pass


async def request(app: Any, method: str, path: str, **options: Any) -> Exchange:
    """A whole request and response."""
    async with open_exchange(app, method, path, **options) as exchange:
        await exchange.read_all()
    return exchange


def sse_events(body: bytes) -> list[Any]:
    """The ``data:`` payloads of an SSE body, JSON-decoded (``[DONE]`` kept as
    the string)."""
    events = []
    for frame in body.decode().split("\n\n"):
        if frame.startswith("data: "):
            data = frame[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


_GENERATED_ID = re.compile(r"(msg|run)-[0-9a-f]{32}")


def stable(body: bytes) -> bytes:
    """``body`` with the generated message and run ids numbered by first
    appearance (``msg-1``, ``msg-2``..., ``run-1``...), so golden bytes do not
    depend on random ids."""
    seen: dict[str, str] = {}
    counts: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        found = match.group(0)
        if found not in seen:
            kind = match.group(1)
            counts[kind] = counts.get(kind, 0) + 1
            seen[found] = f"{kind}-{counts[kind]}"
        return seen[found]

    return _GENERATED_ID.sub(number, body.decode()).encode()


# --- agents ------------------------------------------------------------------


@attrs.frozen
class CityQuery:
    city: str
    """The city."""


@tool
async def weather(args: CityQuery, ctx: ToolContext) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": args.city, "sky": "sunny", "celsius": 21}


class BlockSecrets(Processor):
    """Trips when the streamed text says 'secret'."""

    id = "block-secrets"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        text = getattr(getattr(args.part, "payload", None), "text", "")
        if isinstance(text, str) and "secret" in text:
            args.abort("the answer reveals a secret", metadata={"word": "secret"})
        return args.part


class RetryOnce(Processor):
    """Asks one retry of a step whose text says 'draft'."""

    id = "retry-drafts"

    def process_output_step(self, args: Any) -> Any:
        if "draft" in args.text:
            args.abort("only a draft; answer properly", retry=True)
        return None


def make_agent(model: Any, **options: Any) -> Agent:
    return Agent(
        id=options.pop("id", "helper"),
        instructions="Be brief.",
        model=model if not isinstance(model, list) else ScriptedModel(model),
        tools=[weather],
        **options,
    )
