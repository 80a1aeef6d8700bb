"""``create_app``: the ASGI 3 application serving agents over the Mastra and
AI SDK protocols."""

from __future__ import annotations

import logging
import re
from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import Any, Final

import trio

from ..chunks import Chunk
from ..processors import ConfigurationError
from ..runtime import Agent, AgentResult
from ._http import (
    ClientGone,
    HttpError,
    Receive,
    Scope,
    Send,
    parse_json_object,
    read_body,
    send_empty,
    send_json,
)
from ._mastra import agent_info, error_frame, generate_body, mastra_frame
from ._requests import RunRequest, parse_chat_body, parse_run_body
from ._security import Cors, check_token, resolve_tokens
from ._streaming import RunRegistry, StreamSettings, stream_response, watch_disconnect
from ._ui_stream import UI_STREAM_HEADERS, ui_chunks, ui_frame

__all__ = ["ProcessionApp", "create_app"]

logger: Final = logging.getLogger("procession.server")

MASTRA_STREAM_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]

Handler = Callable[[Scope, Receive, Send, dict[str, str]], Awaitable[None]]


class ProcessionApp:
    """The ASGI app ``create_app`` returns. Call ``begin_shutdown()`` to end
    the open streams (each with an ``abort`` chunk, then ``[DONE]``) before
    the server stops; ``serve`` does this on its shutdown trigger."""

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        tokens: tuple[bytes, ...],
        max_body_bytes: int,
        max_concurrent_runs: int,
        keepalive_s: float,
        cors: Cors | None,
    ) -> None:
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if not isinstance(agent, Agent):
                raise ConfigurationError(f"agents must be Agent objects, got {agent!r}")
            if agent.id in self.agents:
                raise ConfigurationError(f"two agents have the id {agent.id!r}")
            self.agents[agent.id] = agent
        self._tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.cors = cors
        self.runs = RunRegistry(limit=max_concurrent_runs)
        self._shutdown: trio.Event | None = None
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("GET", re.compile(r"/api/agents"), self._list_agents),
            ("GET", re.compile(r"/api/agents/(?P<agent>[^/]+)"), self._get_agent),
            ("POST", re.compile(r"/api/agents/(?P<agent>[^/]+)/stream"), self._stream),
            (
                "POST",
                re.compile(r"/api/agents/(?P<agent>[^/]+)/generate"),
                self._generate,
            ),
            (
                "POST",
                re.compile(r"/api/agents/(?P<agent>[^/]+)/runs/(?P<run>[^/]+)/cancel"),
                self._cancel,
            ),
            ("POST", re.compile(r"/api/agents/(?P<agent>[^/]+)/chat"), self._chat),
            ("POST", re.compile(r"/api/chat"), self._chat),
            ("GET", re.compile(r"/api/chat/(?P<chat>[^/]+)/stream"), self._resume),
        ]

    @property
    def auth_required(self) -> bool:
        """Whether requests need a bearer token (the tokens themselves are not
        readable from the app)."""
        return bool(self._tokens)

    def __repr__(self) -> str:
        return (
            f"<ProcessionApp agents={list(self.agents)} "
            f"auth={'on' if self._tokens else 'off'}>"
        )

    @property
    def shutdown_event(self) -> trio.Event:
        # Created lazily: a trio.Event belongs to the trio run that uses it.
        if self._shutdown is None:
            self._shutdown = trio.Event()
        return self._shutdown

    def begin_shutdown(self) -> None:
        """End every open stream now (each run is cancelled: an ``abort``
        chunk, then ``[DONE]``); new requests still get answers until the
        server stops listening."""
        self.shutdown_event.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: not served
        cors = self.cors.origin_headers(scope) if self.cors is not None else []
        started = False

        async def tracked_send(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message["headers"], *cors]}
            await send(message)

        try:
            await self._dispatch(scope, receive, tracked_send)
        except ClientGone:
            return
        except HttpError as exc:
            if started:
                raise
            await send_json(tracked_send, exc.status, exc.body(), exc.headers)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, path = scope["method"], scope["path"]
        if method == "OPTIONS" and self.cors is not None:
            await send_empty(send, 204, self.cors.preflight_headers(scope))
            return
        allowed = []
        for route_method, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if route_method != method:
                allowed.append(route_method)
                continue
            check_token(scope, self._tokens)
            await handler(scope, receive, send, match.groupdict())
            return
        if allowed:
            raise HttpError(
                405,
                f"{method} is not allowed on {path}",
                headers=[(b"allow", ", ".join(allowed).encode())],
            )
        raise HttpError(404, f"no route for {method} {path}")

    # --- routes ---------------------------------------------------------------

    def _agent(self, agent_id: str | None) -> Agent:
        if agent_id is None:
            if len(self.agents) == 1:
                return next(iter(self.agents.values()))
            raise HttpError(
                404,
                f"/api/chat serves the only agent, but there are {len(self.agents)}; "
                f"use /api/agents/{{agentId}}/chat",
            )
        agent = self.agents.get(agent_id)
        if agent is None:
            raise HttpError(404, f"no agent {agent_id!r}")
        return agent

    async def _body(self, scope: Scope, receive: Receive) -> Mapping[str, Any]:
        return parse_json_object(await read_body(scope, receive, self.max_body_bytes))

    async def _list_agents(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        body = {agent_id: agent_info(a) for agent_id, a in self.agents.items()}
        await send_json(send, 200, body)

    async def _get_agent(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        await send_json(send, 200, agent_info(self._agent(params["agent"])))

    def _start_run(self, agent: Agent, request: RunRequest) -> Any:
        """``agent.stream(...)`` for ``request`` (which has its run id); a
        bad option is a 400, a full server a 503."""
        if self.runs.full:
            raise HttpError(
                503,
                f"the server is running its limit of {self.runs.limit} runs; retry",
                headers=[(b"retry-after", b"1")],
            )
        if request.run_id in self.runs.streams:
            raise HttpError(
                409, f"run {request.run_id!r} is already running", field="runId"
            )
        try:
            return agent.stream(list(request.messages), **request.options())
        except ConfigurationError as exc:
            raise HttpError(400, str(exc)) from exc

    async def _streamed(
        self,
        send: Send,
        receive: Receive,
        agent: Agent,
        request: RunRequest,
        settings: Callable[[str], StreamSettings],
    ) -> None:
        run = self._start_run(agent, request)
        self.runs.reserved += 1
        try:
            await stream_response(
                send,
                receive,
                run,
                settings(request.run_id),
                registry=self.runs,
                shutdown=self.shutdown_event,
            )
        finally:
            self.runs.reserved -= 1

    async def _stream(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        agent = self._agent(params["agent"])
        request = parse_run_body(await self._body(scope, receive))
        await self._streamed(send, receive, agent, request, self._mastra_settings)

    def _mastra_settings(self, run_id: str) -> StreamSettings:
        return StreamSettings(
            headers=MASTRA_STREAM_HEADERS,
            encode=lambda chunk: (mastra_frame(chunk, run_id),),
            failure_frame=lambda message: error_frame(message, run_id),
            keepalive_s=self.keepalive_s,
        )

    def _ui_settings(self, run_id: str) -> StreamSettings:
        return StreamSettings(
            headers=UI_STREAM_HEADERS,
            encode=_encode_ui,
            failure_frame=lambda message: ui_frame(
                {"type": "error", "errorText": message}
            ),
            keepalive_s=self.keepalive_s,
        )

    async def _chat(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        agent = self._agent(params.get("agent"))
        _chat_id, request = parse_chat_body(await self._body(scope, receive))
        await self._streamed(send, receive, agent, request, self._ui_settings)

    async def _resume(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        # Resuming a chat's stream needs a run bus (a later step): nothing
        # can be resumed, which the AI SDK reads from a 204.
        await send_empty(send, 204)

    async def _generate(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        agent = self._agent(params["agent"])
        request = parse_run_body(await self._body(scope, receive))
        run = self._start_run(agent, request)
        self.runs.reserved += 1
        result: AgentResult | None = None
        try:
            async with run as stream, trio.open_nursery() as nursery:
                self.runs.streams[stream.run_id] = stream
                try:
                    nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
                    result = await stream.result()
                    nursery.cancel_scope.cancel()
                finally:
                    self.runs.streams.pop(stream.run_id, None)
        finally:
            self.runs.reserved -= 1
        if result is None:
            return  # the client left: the run was cancelled, nobody to answer
        if result.error is not None and result.outcome.kind == "error":
            # As Mastra's server: a failed generate is a 500 with the message.
            await send_json(send, 500, {"error": _message(result.error)})
            return
        await send_json(send, 200, generate_body(result))

    async def _cancel(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, str]
    ) -> None:
        self._agent(params["agent"])
        stream = self.runs.streams.get(params["run"])
        if stream is None:
            raise HttpError(404, f"no run {params['run']!r} is running")
        await stream.cancel()
        await send_json(send, 200, {"message": "Run cancelled", "runId": stream.run_id})


def _encode_ui(chunk: Chunk) -> Iterable[bytes]:
    return [ui_frame(c) for c in ui_chunks(chunk)]


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def create_app(
    agents: Iterable[Agent],
    *,
    tokens: Iterable[str] | None = None,
    max_body_bytes: int = 1 << 20,
    max_concurrent_runs: int = 256,
    keepalive_s: float = 15.0,
    cors: Cors | None = None,
) -> ProcessionApp:
    """An ASGI 3 app serving ``agents``.

    Args:
        agents: the agents, each served under ``/api/agents/{agent.id}``.
        tokens: the bearer tokens accepted; default ``$PROCESSION_SERVER_TOKENS``
            (comma-separated). With none, requests need no token (serve such an
            app on loopback only: ``serve`` refuses another address).
        max_body_bytes: larger request bodies are refused (413).
        max_concurrent_runs: runs beyond this are refused (503, ``Retry-After``).
        keepalive_s: an SSE comment is sent when a stream has been idle this
            long (0: never).
        cors: ``Cors(allow_origins=[...])`` to answer browsers from other
            origins; off by default.

    Raises ``ConfigurationError`` for a bad argument.
    """
    agent_list = list(agents)
    if not agent_list:
        raise ConfigurationError("create_app needs at least one agent")
    for name, value in (
        ("max_body_bytes", max_body_bytes),
        ("max_concurrent_runs", max_concurrent_runs),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
    if not isinstance(keepalive_s, int | float) or keepalive_s < 0:
        raise ConfigurationError(f"keepalive_s must be >= 0, got {keepalive_s!r}")
    if cors is not None and not isinstance(cors, Cors):
        raise ConfigurationError(f"cors must be a Cors(...) or None, got {cors!r}")
    return ProcessionApp(
        agent_list,
        tokens=resolve_tokens(tokens),
        max_body_bytes=max_body_bytes,
        max_concurrent_runs=max_concurrent_runs,
        keepalive_s=float(keepalive_s),
        cors=cors,
    )
