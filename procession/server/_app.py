"""``ProcessionApp``: the ASGI 3 application serving agents over the Mastra
and AI SDK protocols (``create_app``, in ``_create``, builds it)."""

from __future__ import annotations

import functools
import importlib.resources
import logging
import os
import re
import secrets
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    MutableMapping,
    Sequence,
)
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
)
from typing import Any, Final

import attrs
import trio

from .._errors import (
    ApprovalAlreadyDecided,
    ConfigurationError,
    ToolCallNotPendingError,
    WaitingRunError,
    WaitingRunNotFound,
)
from .._secrets import get_logger, redact
from ..chunks import Chunk
from ..memory import MissingThreadError, RunRecord, ThreadOwnershipError
from ..runtime import Agent, AgentResult, AgentStream, Durable, adopt_lapsed_runs
from ..runtime.tools import open_tool_sources
from ._bus import RunBus, RunBusError, RunPublisher
from ._hold import StepText, check_step_text
from ._http import (
    ClientGone,
    HttpError,
    Receive,
    Scope,
    Send,
    dumps,
    parse_json_object,
    read_body,
    request_header,
    send_empty,
    send_json,
)
from ._mastra import MastraFrames, agent_info, error_frame, generate_body
from ._mcp import McpCaller, mcp_endpoint
from ._memory_routes import (
    acting_resource,
    owned_thread,
    query_params,
    storage_for,
    thread_messages_body,
    thread_wire,
    threads_body,
)
from ._requests import (
    ChatApproval,
    RunRequest,
    approval_answers,
    parse_chat_body,
    parse_run_body,
)
from ._resume import (
    follow_log,
    last_event_id,
    lost_frames,
    publish_run,
    stream_resumable,
)
from ._security import (
    ANYONE,
    Authenticator,
    Cors,
    Principal,
    chat_key,
    check_id,
    run_key,
)
from ._streaming import (
    RunReader,
    RunRegistry,
    Shutdown,
    StreamSettings,
    stream_response,
    watch_disconnect,
)
from ._tracing import RequestSpan, enter_run, request_span, under
from ._ui_stream import UI_STREAM_HEADERS, UiStreamEncoder, ui_frame

__all__ = ["ProcessionApp"]

logger: Final = get_logger("procession.server")
access_log: Final = get_logger("procession.access")
"""One INFO line per request: method, route template, status, duration and
run id (``procession serve`` shows it unless ``--no-access-log``)."""

MEMORY_IGNORED_HEADER: Final = b"x-procession-memory"
"""Set on the response when the body named a memory the agent does not keep."""

# A run id a client may give (``check_id``): a path naming anything else
# names no run.
_ID_SHAPE: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")

MASTRA_STREAM_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


_PAUSED_LOG_WAIT_S: Final = 10.0
"""How long a continuation waits for the log of the part of its run that
paused to close (``ProcessionApp._continued``): a moment, unless the replica
holding it died (then until its lease expires: ``RedisRunBus.lease_s``, 10 s
by default)."""
_PAUSED_LOG_POLL_S: Final = 0.01


@attrs.frozen
class _Keys:
    """A served run's keys: ``run`` in the registry (``run_key``), ``resume``
    on the bus (the same, or the chat's ``chat_key``)."""

    run: str
    resume: str


@attrs.define(eq=False)
class _ChatRun:
    """The run this process executes for a chat (identity marks whose it is:
    a continuation may map the chat while the paused part still leaves)."""

    run_key: str


@attrs.frozen
class _Request:
    """One routed request: the ASGI triple, the path's parameters, whom it
    acts for and its span."""

    scope: Scope
    receive: Receive
    send: Send
    params: dict[str, str]
    principal: Principal
    span: RequestSpan


Handler = Callable[[_Request], Awaitable[None]]


class ProcessionApp:
    """The ASGI app ``create_app`` returns. Call ``begin_shutdown()`` to end
    the open streams (each with an ``abort`` chunk, then ``[DONE]``) before
    the server stops; ``serve`` does this on its shutdown trigger."""

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        auth: Authenticator,
        max_body_bytes: int,
        max_concurrent_runs: int,
        keepalive_s: float,
        cors: Cors | None,
        bus: RunBus | None = None,
        resume_grace_s: float = 30.0,
        tracer_provider: Any = None,
        step_text: StepText | Mapping[str, StepText] = "stream",
        mcp: bool = False,
        durable: Durable | None = None,
    ) -> None:
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if not isinstance(agent, Agent):
                raise ConfigurationError(f"agents must be Agent objects, got {agent!r}")
            if agent.id in self.agents:
                raise ConfigurationError(f"two agents have the id {agent.id!r}")
            self.agents[agent.id] = agent
        self._auth = auth
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.cors = cors
        self.bus = bus
        """The run bus when resume is on, else None."""
        self.resume_grace_s = resume_grace_s
        self.tracer_provider = tracer_provider
        self.step_text = check_step_text(step_text, frozenset(self.agents))
        """``"stream"`` or ``"hold"``, for every agent or by agent id
        (``create_app(step_text=...)``)."""
        self.runs = RunRegistry(limit=max_concurrent_runs)
        """The runs this process executes, by ``run_key(owner, run id)``."""
        # Chat key -> the run key of the run this process executes for the
        # chat: a chat is stopped by its key.
        self._chat_runs: dict[str, _ChatRun] = {}
        self.workers = 1
        """How many worker processes serve this app (``serve_worker`` sets
        it): each runs its own runs, under its own ``max_concurrent_runs``."""
        self._shutdown: Shutdown | None = None
        self._mcp = (
            mcp_endpoint(agents, self._mcp_run, max_body_bytes=max_body_bytes)
            if mcp
            else None
        )
        self._routes = self._route_table()
        self.durable = durable
        """``create_app(durable=...)``: every run it starts is durable."""
        for agent in self.agents.values():
            if self._durable_for(agent) is not None:
                # A durable run never falls back to a plain one.
                Durable.require_storage(agent.id, agent.run_storage)

    def _route_table(self) -> list[tuple[str, re.Pattern[str], str, Handler]]:
        """Each route: its method, its path pattern, the route template (the
        span's name) and its handler."""
        aid, run = r"(?P<agent>[^/]+)", r"(?P<run>[^/]+)"
        routes: list[tuple[str, str, str, Handler]] = [
            ("GET", "/", "/", self._page),
            ("GET", "/favicon.ico", "/favicon.ico", self._favicon),
            ("GET", "/api/agents", "/api/agents", self._list_agents),
            (
                "GET",
                f"/api/agents/{aid}",
                "/api/agents/{agentId}",
                self._get_agent,
            ),
            (
                "POST",
                f"/api/agents/{aid}/stream",
                "/api/agents/{agentId}/stream",
                self._stream,
            ),
            (
                "POST",
                f"/api/agents/{aid}/generate",
                "/api/agents/{agentId}/generate",
                self._generate,
            ),
            *(
                (
                    "POST",
                    f"/api/agents/{aid}/{action}",
                    f"/api/agents/{{agentId}}/{action}",
                    self._answer_call,
                )
                for action in (
                    "approve-tool-call",
                    "decline-tool-call",
                    "resume-stream",
                    "approve-tool-call-generate",
                    "decline-tool-call-generate",
                )
            ),
            (
                "GET",
                f"/api/agents/{aid}/suspended-runs",
                "/api/agents/{agentId}/suspended-runs",
                self._suspended_runs,
            ),
            (
                "POST",
                f"/api/agents/{aid}/runs/{run}/cancel",
                "/api/agents/{agentId}/runs/{runId}/cancel",
                self._cancel,
            ),
            (
                "GET",
                f"/api/agents/{aid}/runs/{run}/stream",
                "/api/agents/{agentId}/runs/{runId}/stream",
                self._resume_run,
            ),
            (
                "POST",
                f"/api/agents/{aid}/chat",
                "/api/agents/{agentId}/chat",
                self._chat,
            ),
            ("POST", "/api/chat", "/api/chat", self._chat),
            (
                "GET",
                r"/api/chat/(?P<chat>[^/]+)/stream",
                "/api/chat/{id}/stream",
                self._resume_chat,
            ),
            (
                "POST",
                r"/api/chat/(?P<chat>[^/]+)/stop",
                "/api/chat/{id}/stop",
                self._stop_chat,
            ),
            ("GET", "/api/memory/threads", "/api/memory/threads", self._threads),
            (
                "GET",
                r"/api/memory/threads/(?P<thread>[^/]+)",
                "/api/memory/threads/{threadId}",
                self._thread,
            ),
            (
                "GET",
                r"/api/memory/threads/(?P<thread>[^/]+)/messages",
                "/api/memory/threads/{threadId}/messages",
                self._thread_messages,
            ),
            # MCP's streamable HTTP: POST (a message), GET (a stream; not in
            # stateless mode) and DELETE (a session; none here) at one path.
            ("POST", "/api/mcp", "/api/mcp", self._mcp_request),
            ("GET", "/api/mcp", "/api/mcp", self._mcp_request),
            ("DELETE", "/api/mcp", "/api/mcp", self._mcp_request),
        ]
        return [
            (method, re.compile(pattern), template, handler)
            for method, pattern, template, handler in routes
        ]

    def _durable_for(self, agent: Agent) -> Durable | None:
        """How ``agent``'s runs are durable here (the app's ``durable``, else
        the agent's own), or None."""
        return self.durable or Durable.option(agent.durable)

    @property
    def auth_required(self) -> bool:
        """Whether requests need credentials (a bearer token or what the
        ``authenticate`` hook accepts; the tokens are not readable from the
        app)."""
        return self._auth.required

    @property
    def resume(self) -> bool:
        """Whether runs outlive their client and can be resumed."""
        return self.bus is not None

    def __repr__(self) -> str:
        return (
            f"<ProcessionApp agents={list(self.agents)} "
            f"auth={'on' if self._auth.required else 'off'} "
            f"resume={'on' if self.bus is not None else 'off'} "
            f"mcp={'on' if self._mcp is not None else 'off'}>"
        )

    @property
    def shutdown(self) -> Shutdown:
        """The graceful shutdown: its ``event`` is set once it began."""
        # Created lazily: a trio.Event belongs to the trio run that uses it.
        if self._shutdown is None:
            self._shutdown = Shutdown()
        return self._shutdown

    @property
    def shutdown_event(self) -> trio.Event:
        """Set once the graceful shutdown began (``begin_shutdown``)."""
        return self.shutdown.event

    def begin_shutdown(self) -> None:
        """End every open stream now (each run is cancelled: an ``abort``
        chunk, then ``[DONE]``); new requests still get answers until the
        server stops listening."""
        self.shutdown.begin()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: not served
        cors = self.cors.origin_headers(scope) if self.cors is not None else []
        began = time.perf_counter()
        with request_span(scope, self.tracer_provider) as span:
            try:
                await self._answer(scope, receive, send, span, cors)
            finally:
                if access_log.isEnabledFor(logging.INFO):
                    access_log.info(
                        "%s %s %s %.1fms run=%s",
                        scope.get("method"),
                        span.route or "(no route)",
                        span.status or "-",
                        (time.perf_counter() - began) * 1000,
                        span.run_id or "-",
                    )

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        span: RequestSpan,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        """Dispatch the request; every error is an answer (``HttpError`` its
        status, anything else a 500 with an incident id, logged)."""
        started = False

        async def tracked_send(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                span.status = message["status"]
                message = {**message, "headers": [*message["headers"], *cors]}
            await send(message)

        try:
            await self._dispatch(scope, receive, tracked_send, span)
        except ClientGone:
            return
        except HttpError as exc:
            if started:
                raise
            await send_json(tracked_send, exc.status, exc.body(), exc.headers)
        except WaitingRunError as exc:
            # Answering a waiting run: before any chunk (Mastra's server answers
            # these as HTTP errors too; a repeat answer is a 409, which
            # client-js does not retry).
            if started:
                raise
            status, field = _WAITING_ERRORS.get(type(exc), (400, None))
            await send_json(tracked_send, status, _error_body(str(exc), field))
        except RunBusError as exc:
            # Redis unreachable past the bus's outage budget (its URL is
            # redacted in the message): the client may retry elsewhere.
            logger.error("%s %s: %s", scope.get("method"), span.route, exc)
            if started:
                return
            await send_json(
                tracked_send,
                503,
                {"error": f"the run bus is unavailable: {exc}; retry"},
                [(b"retry-after", b"5")],
            )
        except Exception:
            incident = secrets.token_hex(8)
            logger.exception(
                "internal error (incident %s) on %s %s",
                incident,
                scope.get("method"),
                span.route or scope.get("path"),
            )
            if started:
                return  # the response is cut; the log says why
            await send_json(
                tracked_send, 500, {"error": "internal error", "incident": incident}
            )

    async def _dispatch(
        self, scope: Scope, receive: Receive, send: Send, span: RequestSpan
    ) -> None:
        method, path = scope["method"], scope["path"]
        if method == "OPTIONS" and self.cors is not None:
            await send_empty(send, 204, self.cors.preflight_headers(scope))
            return
        allowed = []
        for route_method, pattern, template, handler in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if route_method != method:
                allowed.append(route_method)
                continue
            span.set_route(template)
            # The page (and its icon) hold no data; it asks for the token itself.
            public = path in ("/", "/favicon.ico")
            principal = ANYONE if public else await self._auth.principal(scope)
            await handler(
                _Request(scope, receive, send, match.groupdict(), principal, span)
            )
            return
        if allowed:
            raise HttpError(
                405,
                f"{method} is not allowed on {path}",
                headers=[(b"allow", ", ".join(allowed).encode())],
            )
        raise HttpError(404, f"no route for {method} {path}")

    # --- routes ---------------------------------------------------------------

    def _holds(self, agent: Agent) -> bool:
        """Whether ``agent``'s steps are held until they are accepted."""
        mode = self.step_text
        if isinstance(mode, str):
            return mode == "hold"
        return mode.get(agent.id, "stream") == "hold"

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

    async def _body(self, req: _Request) -> Mapping[str, Any]:
        """The request's JSON object body: 415 unless it says it is JSON
        (``content-type: application/json``, or a ``+json`` type), 413 over
        the size limit, 400 for anything but a JSON object."""
        kind = request_header(req.scope, b"content-type") or b""
        media = kind.split(b";", 1)[0].strip().lower()
        if media != b"application/json" and not media.endswith(b"+json"):
            raise HttpError(
                415,
                f"the request body must be JSON (content-type: application/json), "
                f"got {media.decode('latin-1')[:60] or 'no content-type'}",
                field="content-type",
            )
        return parse_json_object(
            await read_body(req.scope, req.receive, self.max_body_bytes)
        )

    async def _page(self, req: _Request) -> None:
        page = importlib.resources.files(__package__).joinpath("page.html")
        body = page.read_bytes()
        await req.send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/html; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        await req.send({"type": "http.response.body", "body": body})

    async def _favicon(self, req: _Request) -> None:
        """No icon (the page names none): 204, so a browser's request for one
        is not an error in the log or the console."""
        await send_empty(req.send, 204, [(b"cache-control", b"max-age=86400")])

    async def _list_agents(self, req: _Request) -> None:
        body = {agent_id: agent_info(a) for agent_id, a in self.agents.items()}
        await send_json(req.send, 200, body)

    async def _get_agent(self, req: _Request) -> None:
        await send_json(req.send, 200, agent_info(self._agent(req.params["agent"])))

    async def _scoped(
        self, agent: Agent, request: RunRequest, principal: Principal
    ) -> RunRequest:
        """``request`` acting for the principal's resource (a body naming
        another is a 403); a thread of another resource is a 404, as if it did
        not exist."""
        resource = acting_resource(
            principal, request.resource_id, field="memory.resource"
        )
        if resource != request.resource_id:
            request = attrs.evolve(request, resource_id=resource)
        memory = agent.memory
        if memory is not None and request.thread_id and resource:
            try:
                await memory.storage.get_thread(request.thread_id, resource_id=resource)
            except ThreadOwnershipError:
                raise HttpError(
                    404, f"no thread {request.thread_id!r}", field="memory.thread"
                ) from None
        return request

    def _check_room(self) -> None:
        """A 503 when the server runs its limit of runs."""
        if self.runs.full:
            raise HttpError(
                503,
                f"the server is running its limit of {self.runs.limit} runs; retry",
                headers=[(b"retry-after", b"1")],
            )

    def _start_run(
        self,
        agent: Agent,
        request: RunRequest,
        span: RequestSpan,
        key: str,
        durable: Durable | None = None,
    ) -> Any:
        """``agent.stream(...)`` for ``request`` (which has its run id), its
        entry under the request's span; a bad option is a 400, a full server
        a 503, a run of the same owner running under ``key`` a 409."""
        self._check_room()
        if key in self.runs.streams:
            raise HttpError(
                409, f"run {request.run_id!r} is already running", field="runId"
            )
        parent = span.run_context()
        try:
            run = under(parent, lambda: request.stream(agent, durable=durable))
        except MissingThreadError:
            # procession's documented rule (Mastra would run without memory).
            raise HttpError(
                400,
                f"agent {agent.id!r} keeps memory: the body must name "
                f"memory: {{thread, resource}} (the resource comes from the "
                f"token when it is tied to one)",
                field="memory",
            ) from None
        except ConfigurationError as exc:
            raise HttpError(400, str(exc)) from exc
        return enter_run(parent, run)

    async def _streamed(
        self,
        req: _Request,
        agent: Agent,
        request: RunRequest,
        settings: StreamSettings,
        resume_key: str,
        gap_frame: Callable[[str, str], bytes],
        route: str,
    ) -> None:
        """Run ``request`` and stream it; ``resume_key`` is its key on the
        bus (``run_key`` or ``chat_key`` of the principal's resource);
        ``route`` (``"mastra"``, ``"chat"``) frames it, and is kept with a
        durable run for whoever takes it over."""
        request = await self._scoped(agent, request, req.principal)
        req.span.run_id = request.run_id
        key = run_key(req.principal.resource, request.run_id)
        durable = self._durable_for(agent)
        if durable is not None:
            durable = attrs.evolve(
                durable,
                host={
                    "route": route,
                    "key": resume_key,
                    "owner": req.principal.resource,
                },
            )
        run = self._start_run(agent, request, req.span, key, durable)
        if agent.memory is None and request.thread_id is not None:
            settings = _with_memory_ignored(settings, agent)
        publisher = None
        if self.bus is not None:
            try:
                publisher = await self.bus.open_run(
                    resume_key,
                    run_id=request.run_id,
                    lost_frames=lost_frames(
                        settings, request.run_id, durable=durable is not None
                    ),
                )
            except KeyError:
                raise HttpError(
                    409, f"run {request.run_id!r} is already running", field="runId"
                ) from None
        self.runs.reserved += 1
        try:
            await self._relay(
                req,
                run,
                settings,
                _Keys(key, resume_key),
                publisher,
                gap_frame,
                hold=self._holds(agent),
            )
        finally:
            self.runs.reserved -= 1

    async def _relay(
        self,
        req: _Request,
        run: AbstractAsyncContextManager[AgentStream],
        settings: StreamSettings,
        keys: _Keys,
        publisher: RunPublisher | None,
        gap_frame: Callable[[str, str], bytes],
        *,
        hold: bool,
    ) -> None:
        """Stream ``run`` to the request, registered under ``keys.run`` (and,
        for a chat, stoppable by ``keys.resume``): through its log
        ``publisher`` when the app has a bus (the run outlives its client;
        any replica's followers read it), else straight to the client."""
        chat = _ChatRun(keys.run)
        if keys.resume != keys.run:
            self._chat_runs[keys.resume] = chat
        try:
            if publisher is None:
                await stream_response(
                    req.send,
                    req.receive,
                    run,
                    settings,
                    registry=self.runs,
                    key=keys.run,
                    shutdown=self.shutdown,
                    hold=hold,
                )
                return
            assert self.bus is not None
            try:
                await stream_resumable(
                    req.send,
                    req.receive,
                    run,
                    settings,
                    publisher=publisher,
                    registry=self.runs,
                    key=keys.run,
                    shutdown=self.shutdown_event,
                    grace_s=self.resume_grace_s,
                    gap_frame=gap_frame,
                    hold=hold,
                )
            finally:
                await _close_quietly(publisher)
                self.bus.remove(keys.resume)
        finally:
            if self._chat_runs.get(keys.resume) is chat:
                del self._chat_runs[keys.resume]

    async def _continued(
        self,
        req: _Request,
        agent: Agent,
        run: AbstractAsyncContextManager[AgentStream],
        settings: StreamSettings,
        keys: _Keys,
        gap_frame: Callable[[str, str], bytes],
    ) -> None:
        """Stream an answered run's continuation (``run``: ``approve_tool_call``
        and its kin, not entered) as a run that starts is streamed.

        Entering ``run`` decides the answer, exactly once across replicas: a
        repeat raises ``ApprovalAlreadyDecided`` there, before anything is
        sent or published. Then, with a bus, the continuation's frames go to
        a new log under ``keys.resume`` (the run's key, or its chat's), after
        the log of the part of the run that paused (``_bus``: a key's logs),
        so a follower on any replica reads it, a ``Last-Event-ID`` resumes
        it, and a cancel through any replica reaches it. That log closes a
        moment after the pause was kept (its last frames are being written
        when a quick answer arrives): the continuation waits for it, up to
        ``_PAUSED_LOG_WAIT_S``; past that (a replica that died holding it
        and whose lease has not expired yet) it streams to its client alone
        rather than lose the answer, and says so in the log."""
        self._check_room()
        self.runs.reserved += 1
        try:
            async with run as stream:
                publisher = await self._log_after_pause(keys.resume, stream, settings)
                await self._relay(
                    req,
                    nullcontext(stream),
                    settings,
                    keys,
                    publisher,
                    gap_frame,
                    hold=self._holds(agent),
                )
        finally:
            self.runs.reserved -= 1

    async def _continued_quietly(
        self, agent: Agent, run: AbstractAsyncContextManager[AgentStream], key: str
    ) -> AgentResult:
        """An answered run's continuation for a ``-generate`` answer: run to
        its end with no stream of its own, yet, as ``_continued``'s, into a
        new log under the run's key (its followers on any replica read it)
        and registered (a cancel reaches it). Its result. Raises what
        entering ``run`` raises (``ApprovalAlreadyDecided``...), before
        anything is published."""
        self._check_room()
        self.runs.reserved += 1
        try:
            async with run as stream:
                settings = self._mastra_settings(stream.run_id)
                publisher = await self._log_after_pause(key, stream, settings)
                await self._run_alone(agent, stream, settings, publisher, key, key)
                return await stream.result()
        finally:
            self.runs.reserved -= 1

    async def _run_alone(
        self,
        agent: Agent,
        stream: AgentStream,
        settings: StreamSettings,
        publisher: RunPublisher | None,
        key: str,
        resume_key: str,
    ) -> None:
        """Run ``stream`` to its end with no client of its own (a
        ``-generate`` answer's continuation, a run taken over): into its log
        ``publisher`` under ``resume_key`` (None: no bus), registered under
        ``key``; then its log is closed and forgotten here."""
        try:
            await publish_run(
                stream,
                settings,
                publisher=publisher,
                registry=self.runs,
                key=key,
                shutdown=self.shutdown_event,
                hold=self._holds(agent),
            )
        finally:
            if publisher is not None:
                await _close_quietly(publisher)
                assert self.bus is not None
                self.bus.remove(resume_key)

    async def _log_after_pause(
        self, resume_key: str, stream: AgentStream, settings: StreamSettings
    ) -> RunPublisher | None:
        """The continuation's log under ``resume_key`` once the paused log
        there is closed (``_continued``); None without a bus, or when it
        stays open past ``_PAUSED_LOG_WAIT_S``. Checkpoints."""
        if self.bus is None:
            await trio.lowlevel.checkpoint()
            return None
        run_id = stream.run_id
        lost = lost_frames(settings, run_id)
        with trio.move_on_after(_PAUSED_LOG_WAIT_S):
            while True:
                try:
                    return await self.bus.open_run(
                        resume_key, run_id=run_id, lost_frames=lost
                    )
                except KeyError:
                    await trio.sleep(_PAUSED_LOG_POLL_S)
        logger.warning(
            "run %s: the log under its key stayed open for %s s after its pause; "
            "its continuation streams to the answering client only",
            run_id,
            _PAUSED_LOG_WAIT_S,
        )
        return None

    async def _stream(self, req: _Request) -> None:
        agent = self._agent(req.params["agent"])
        request = parse_run_body(await self._body(req))
        run_id = request.run_id
        await self._streamed(
            req,
            agent,
            request,
            self._mastra_settings(run_id),
            run_key(req.principal.resource, run_id),
            lambda name, message: _mastra_gap_frame(name, message, run_id),
            "mastra",
        )

    def _mastra_settings(self, run_id: str) -> StreamSettings:
        return StreamSettings(
            headers=MASTRA_STREAM_HEADERS,
            encode=MastraFrames(run_id),
            failure_frame=lambda message: error_frame(message, run_id),
            keepalive_s=self.keepalive_s,
        )

    def _ui_settings(self) -> StreamSettings:
        return StreamSettings(
            headers=UI_STREAM_HEADERS,
            # per run: the encoder follows the open parts
            encode=UiStreamEncoder().frames,
            failure_frame=_ui_error_frame,
            keepalive_s=self.keepalive_s,
        )

    async def _chat(self, req: _Request) -> None:
        agent = self._agent(req.params.get("agent"))
        body = await self._body(req)
        answers = approval_answers(body)
        if answers:
            chat_id = body.get("id")
            if isinstance(chat_id, str) and chat_id:
                check_id(chat_id, "id")
            else:
                chat_id = None
            await self._answer_in_chat(req, agent, answers, chat_id)
            return
        chat_id, request = parse_chat_body(body)
        if agent.memory is not None and request.thread_id is not None:
            # The thread holds the history: only the new turn goes in.
            request = attrs.evolve(request, messages=_new_turn(request.messages))
        await self._streamed(
            req,
            agent,
            request,
            self._ui_settings(),
            chat_key(req.principal.resource, chat_id or request.run_id),
            lambda name, message: _ui_error_frame(f"{name}: {message}"),
            "chat",
        )

    async def _answer_in_chat(
        self,
        req: _Request,
        agent: Agent,
        answers: list[ChatApproval],
        chat_id: str | None,
    ) -> None:
        """The AI SDK's approval round trip: the chat's next request carries
        the answer (``addToolApprovalResponse``: a tool part in state
        ``approval-responded``); the run it names goes on, streamed as a UI
        message stream that continues the same assistant message (with a
        bus, published under the chat's key: ``GET /api/chat/{id}/stream``
        follows it). An answer already applied (still in the history of a
        later request) is skipped when another applies; alone, it is the 409
        it is."""
        owner = req.principal.resource
        last: Exception | None = None
        for answer in answers:
            if answer.approved:
                run = agent.approve_tool_call(
                    answer.run_id,
                    answer.tool_call_id,
                    resource_id=owner,
                    decided_by=owner,
                )
            else:
                run = agent.decline_tool_call(
                    answer.run_id,
                    answer.tool_call_id,
                    answer.reason,
                    resource_id=owner,
                    decided_by=owner,
                )
            settings = attrs.evolve(
                self._ui_settings(), encode=_ui_encoder(answer.message_id)
            )
            keys = _Keys(
                run_key(owner, answer.run_id),
                chat_key(owner, chat_id or answer.run_id),
            )
            req.span.run_id = answer.run_id
            try:
                await self._continued(
                    req,
                    agent,
                    run,
                    settings,
                    keys,
                    lambda name, message: _ui_error_frame(f"{name}: {message}"),
                )
            except (ApprovalAlreadyDecided, WaitingRunNotFound) as exc:
                last = exc  # raised on entering: nothing was sent
                continue
            return
        assert last is not None
        raise last

    async def _follow(
        self,
        req: _Request,
        key: str,
        settings: StreamSettings,
        gap_frame: Callable[[str, str], bytes],
    ) -> bool:
        """Replay and follow the run under ``key``; False (nothing sent)
        when there is none."""
        if self.bus is None:
            return False
        try:
            after = self.bus.parse_event_id(last_event_id(req.scope))
        except ValueError as exc:
            raise HttpError(400, str(exc)) from None
        log = await self.bus.find(key)
        if log is None:
            return False
        async with log.attach(after) as subscription:
            await req.send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": settings.headers,
                }
            )
            await follow_log(req.send, req.receive, subscription, settings, gap_frame)
        return True

    async def _resume_run(self, req: _Request) -> None:
        self._agent(req.params["agent"])
        run_id = req.params["run"]
        req.span.run_id = run_id if _ID_SHAPE.fullmatch(run_id) else "(invalid)"
        found = _ID_SHAPE.fullmatch(run_id) is not None and await self._follow(
            req,
            run_key(req.principal.resource, run_id),
            self._mastra_settings(run_id),
            lambda name, message: _mastra_gap_frame(name, message, run_id),
        )
        if not found:
            raise HttpError(404, f"no run {run_id!r} is running that can be resumed")

    async def _resume_chat(self, req: _Request) -> None:
        found = await self._follow(
            req,
            chat_key(req.principal.resource, check_id(req.params["chat"], "id")),
            self._ui_settings(),
            lambda name, message: _ui_error_frame(f"{name}: {message}"),
        )
        if not found:
            # Nothing to resume, which the AI SDK reads from a 204.
            await send_empty(req.send, 204)

    async def _generate(self, req: _Request) -> None:
        agent = self._agent(req.params["agent"])
        request = await self._scoped(
            agent, parse_run_body(await self._body(req)), req.principal
        )
        req.span.run_id = request.run_id
        key = run_key(req.principal.resource, request.run_id)
        run = self._start_run(agent, request, req.span, key)
        self.runs.reserved += 1
        # Empty when the client left: its watcher cancelled the nursery.
        results: list[AgentResult] = []
        try:
            async with run as stream, trio.open_nursery() as nursery:
                reader = self.runs.streams[key] = RunReader(stream)
                try:
                    nursery.start_soon(
                        watch_disconnect, req.receive, nursery.cancel_scope
                    )
                    results.append(await reader.result())
                    nursery.cancel_scope.cancel()
                finally:
                    self.runs.release(key, reader)
        finally:
            self.runs.reserved -= 1
        if not results:
            return  # the client left: the run was cancelled, nobody to answer
        [result] = results
        if result.error is not None and result.outcome.kind == "error":
            # As Mastra's server: a failed generate is a 500 with the message.
            await send_json(req.send, 500, {"error": _message(result.error)})
            return
        headers = []
        if agent.memory is None and request.thread_id is not None:
            settings = _with_memory_ignored(self._mastra_settings(""), agent)
            headers = [settings.headers[-1]]
        await send_json(req.send, 200, generate_body(result), headers)

    async def _answer_call(self, req: _Request) -> None:
        """Mastra's approve / decline / resume routes (``@mastra/client-js``'s
        ``approveToolCall`` ...): ``{runId, toolCallId, reason?, resumeData?}``;
        the continuation streams as ``/stream`` does (no ``start``), or, for
        the ``-generate`` ones, answers as ``/generate``. Only the resource
        that owns the run may answer it (another gets 404, before any 409)."""
        agent = self._agent(req.params["agent"])
        action = req.scope["path"].rsplit("/", 1)[1]
        body = await self._body(req)
        run_id = _required_str(body, "runId")
        check_id(run_id, "runId")
        req.span.run_id = run_id
        tool_call_id = body.get("toolCallId")
        if action != "resume-stream" or tool_call_id is not None:
            tool_call_id = _required_str(body, "toolCallId")
        owner = req.principal.resource
        reason = body.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise HttpError(400, "'reason' must be a string", field="reason")
        if action.startswith("approve"):
            run = agent.approve_tool_call(
                run_id, tool_call_id, resource_id=owner, decided_by=owner
            )
        elif action.startswith("decline"):
            run = agent.decline_tool_call(
                run_id, tool_call_id, reason, resource_id=owner, decided_by=owner
            )
        else:
            if "resumeData" not in body:
                raise HttpError(400, "'resumeData' is required", field="resumeData")
            run = agent.resume_stream(
                run_id,
                body["resumeData"],
                tool_call_id,
                resource_id=owner,
                decided_by=owner,
            )
        key = run_key(owner, run_id)
        if action.endswith("-generate"):
            await send_json(
                req.send,
                200,
                generate_body(await self._continued_quietly(agent, run, key)),
            )
            return
        await self._continued(
            req,
            agent,
            run,
            self._mastra_settings(run_id),
            _Keys(key, key),
            lambda name, message: _mastra_gap_frame(name, message, run_id),
        )

    async def _suspended_runs(self, req: _Request) -> None:
        """``GET /api/agents/{agentId}/suspended-runs`` (client-js's
        ``listSuspendedRuns``): the agent's waiting runs of the acting
        resource (``resourceId`` may narrow it for a token of any resource),
        ``threadId`` optional."""
        agent = self._agent(req.params["agent"])
        params = query_params(req.scope)
        resource = acting_resource(req.principal, params.get("resourceId"))
        runs = await agent.list_suspended_runs(
            resource_id=resource, thread_id=params.get("threadId")
        )
        body = {
            "runs": [
                {
                    "runId": r.run_id,
                    "status": "suspended",
                    **({"threadId": r.thread_id} if r.thread_id else {}),
                    **({"resourceId": r.resource_id} if r.resource_id else {}),
                    "suspendedAt": r.suspended_at.isoformat(),
                    "toolCalls": [
                        {
                            "toolCallId": c.tool_call_id,
                            "toolName": c.tool_name,
                            "args": c.args,
                            "requiresApproval": c.kind == "approval",
                            **(
                                {"suspendPayload": c.suspend_payload}
                                if c.kind == "suspended"
                                else {}
                            ),
                        }
                        for c in r.tool_calls
                    ],
                }
                for r in runs
            ],
            "total": len(runs),
        }
        await send_json(req.send, 200, body)

    async def _cancel(self, req: _Request) -> None:
        """Cancel the principal's run ``runId``, here or on another replica;
        404 for a run that is not running, or is another resource's (the same
        answer: nothing is revealed)."""
        self._agent(req.params["agent"])
        run_id = req.params["run"]
        req.span.run_id = run_id if _ID_SHAPE.fullmatch(run_id) else "(invalid)"
        key = run_key(req.principal.resource, run_id)
        found = _ID_SHAPE.fullmatch(run_id) is not None and (
            await self.cancel_here(key) or await self._cancel_elsewhere(key)
        )
        if not found:
            raise HttpError(404, f"no run {run_id[:40]!r} is running{self._where()}")
        await send_json(req.send, 200, {"message": "Run cancelled", "runId": run_id})

    async def _stop_chat(self, req: _Request) -> None:
        """The AI SDK's way to stop a resumable chat (its guide "Stop an
        Active Resumable Stream"): ``chat.stop()`` only drops the connection,
        which a resumable run outlives, so the client first POSTs to
        ``/api/chat/{id}/stop``. Cancels the chat's run on whichever replica
        executes it; 200 ``{"success": true, "stopped": <bool>}`` either way
        (a stop that arrives after the run ended, or for another resource's
        chat, is no error: ``stopped`` is false)."""
        key = chat_key(req.principal.resource, check_id(req.params["chat"], "id"))
        stopped = await self.cancel_here(key) or await self._cancel_elsewhere(key)
        await send_json(req.send, 200, {"success": True, "stopped": stopped})

    def _where(self) -> str:
        """Why a run may be running all the same (in another worker)."""
        if self.workers == 1 or self.bus is not None:
            return ""
        return (
            f" in this worker (one of {self.workers}, pid {os.getpid()}); without "
            f"a bus a run is cancelled only through the worker that runs it "
            f"(serve with --bus to cancel across workers)"
        )

    async def _cancel_elsewhere(self, key: str) -> bool:
        """Ask the bus to cancel the run under ``key`` on another replica;
        False without a bus or when no live run has the key."""
        if self.bus is None:
            await trio.lowlevel.checkpoint()
            return False
        return await self.bus.cancel(key)

    async def cancel_here(self, key: str) -> bool:
        """Cancel the run under ``key`` (a ``run_key``, or a ``chat_key`` for
        the chat's run) if this process executes it; True if so (the bus calls
        this with the run's bus key for a cancel sent to another replica)."""
        chat = self._chat_runs.get(key)
        return await self.runs.cancel(key if chat is None else chat.run_key)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """ASGI lifespan: from startup to shutdown the agents' tool sources
        (their ``MCPTools``) are open, the MCP endpoint runs, and the bus runs
        (its connections, leases, remote cancels); one that cannot start
        fails the startup with its reason."""
        message = await receive()
        if message["type"] != "lifespan.startup":  # pragma: no cover - ASGI order
            return
        try:
            async with self._running():
                await send({"type": "lifespan.startup.complete"})
                await _until_shutdown(receive)
        except Exception as exc:
            logger.exception("the app failed to start or stop")
            await send({"type": "lifespan.startup.failed", "message": redact(str(exc))})
            return
        await send({"type": "lifespan.shutdown.complete"})

    @asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(
                open_tool_sources([a.tools for a in self.agents.values()])
            )
            if self._mcp is not None:
                await stack.enter_async_context(self._mcp.running())
            if self.bus is not None:
                await stack.enter_async_context(self.bus.running(self.cancel_here))
            durable = [a for a in self.agents.values() if self._durable_for(a)]
            if durable:
                nursery = await stack.enter_async_context(trio.open_nursery())
                # (Leaving: the shutdown stops the adoption, which waits for
                # the runs it took over, handed over again.)
                stack.callback(self.begin_shutdown)
                await nursery.start(
                    functools.partial(
                        adopt_lapsed_runs,
                        durable,
                        self._serve_taken,
                        until=self.shutdown_event,
                    )
                )
            yield

    async def _serve_taken(self, agent: Agent, record: RunRecord) -> None:
        """Go on with the durable run ``record`` of ``agent``, whose process
        died or handed it over (``adopt_lapsed_runs`` calls this): under its
        key on the bus, framed for its route (as it was kept with the run),
        so its followers read on; registered, so a cancel reaches it.
        Raises ``RunLostError`` when another replica took it first."""
        host = dict(record.host or {})
        owner = host.get("owner")
        route = host.get("route")
        resume_key = host.get("key")
        settings = (
            self._ui_settings() if route == "chat" else self._mastra_settings(record.id)
        )
        key = run_key(owner if isinstance(owner, str) else None, record.id)
        if not isinstance(resume_key, str):
            resume_key = key
        holding = self._durable_for(agent) or True
        async with agent.take_over(record, durable=holding) as stream:
            publisher = None
            if self.bus is not None:
                publisher = await self.bus.open_run(
                    resume_key, run_id=record.id, lost_frames=(), take=True
                )
            chat = _ChatRun(key)
            if resume_key != key:
                self._chat_runs[resume_key] = chat
            try:
                await self._run_alone(
                    agent, stream, settings, publisher, key, resume_key
                )
            finally:
                if self._chat_runs.get(resume_key) is chat:
                    del self._chat_runs[resume_key]

    # --- MCP ---------------------------------------------------------------------

    async def _mcp_request(self, req: _Request) -> None:
        """``/api/mcp``: the agents as MCP tools ``ask_<agent id>``, behind
        the same bearer token as every route (checked before this runs)."""
        if self._mcp is None:
            raise HttpError(404, "MCP is off here: create_app(mcp=True) turns it on")
        if not self._mcp.is_running:
            raise HttpError(
                503,
                "the MCP endpoint runs in the app's lifespan, which has not started",
            )
        await self._mcp.handle(
            req.scope,
            req.receive,
            req.send,
            caller=McpCaller(req.principal, req.span),
        )

    @asynccontextmanager
    async def _mcp_run(
        self, agent: Agent, body: Mapping[str, Any], caller: McpCaller
    ) -> AsyncIterator[AgentStream]:
        """One ``ask_<agent id>`` call's run, as a ``stream`` request's: the
        token's resource, its thread ownership, the limit on runs, the cancel
        route and a graceful shutdown all apply."""
        request = await self._scoped(agent, parse_run_body(body), caller.principal)
        caller.span.run_id = request.run_id
        key = run_key(caller.principal.resource, request.run_id)
        run = self._start_run(agent, request, caller.span, key)
        self.runs.reserved += 1
        try:
            async with run as stream, trio.open_nursery() as nursery:
                reader = self.runs.streams[key] = RunReader(stream)
                try:
                    nursery.start_soon(_cancel_at, self.shutdown_event, stream)
                    yield stream
                    nursery.cancel_scope.cancel()
                finally:
                    self.runs.release(key, reader)
        finally:
            self.runs.reserved -= 1

    # --- memory ----------------------------------------------------------------

    def _memory_scope(self, req: _Request) -> tuple[Any, str | None, dict[str, str]]:
        params = query_params(req.scope)
        resource = acting_resource(req.principal, params.get("resourceId"))
        return storage_for(self.agents, params.get("agentId")), resource, params

    async def _threads(self, req: _Request) -> None:
        storage, resource, params = self._memory_scope(req)
        await send_json(req.send, 200, await threads_body(storage, resource, params))

    async def _thread(self, req: _Request) -> None:
        storage, resource, _params = self._memory_scope(req)
        thread = await owned_thread(storage, req.params["thread"], resource)
        await send_json(req.send, 200, thread_wire(thread))

    async def _thread_messages(self, req: _Request) -> None:
        storage, resource, params = self._memory_scope(req)
        body = await thread_messages_body(
            storage, req.params["thread"], resource, params
        )
        await send_json(req.send, 200, body)


def _with_memory_ignored(settings: StreamSettings, agent: Agent) -> StreamSettings:
    """``settings`` whose response says that the body's ``memory`` was not
    kept (the agent has none): never a silent no-op."""
    logger.warning("agent %r keeps no memory; a request's memory was ignored", agent.id)
    note = f"agent '{agent.id}' keeps no memory; the body's memory was ignored"
    return attrs.evolve(
        settings, headers=[*settings.headers, (MEMORY_IGNORED_HEADER, note.encode())]
    )


def _new_turn(
    messages: tuple[Any, ...],
) -> tuple[Any, ...]:
    """The messages after the chat's last assistant message (the new turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if getattr(messages[index], "role", None) == "assistant":
            return messages[index + 1 :] or messages
    return messages


def _mastra_gap_frame(name: str, message: str, run_id: str) -> bytes:
    wire = {
        "type": "error",
        "runId": run_id,
        "from": "AGENT",
        "payload": {"error": {"name": name, "message": redact(message)}},
    }
    return b"data: " + dumps(wire) + b"\n\n"


def _ui_encoder(message_id: str | None) -> Callable[[Chunk], bytes]:
    return UiStreamEncoder(continues=message_id).frames


def _ui_error_frame(message: str) -> bytes:
    return ui_frame({"type": "error", "errorText": redact(message)})


_WAITING_ERRORS: Final[dict[type, tuple[int, str | None]]] = {
    WaitingRunNotFound: (404, "runId"),
    ApprovalAlreadyDecided: (409, "toolCallId"),
    ToolCallNotPendingError: (400, "toolCallId"),
}


def _error_body(message: str, field: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    return body


def _required_str(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise HttpError(400, f"'{key}' is required (a non-empty string)", field=key)
    return value


def _message(error: BaseException) -> str:
    return redact(str(error)) or type(error).__name__


async def _cancel_at(event: trio.Event, stream: AgentStream) -> None:
    await event.wait()
    await stream.cancel()


async def _until_shutdown(receive: Receive) -> None:
    while (await receive())["type"] != "lifespan.shutdown":
        pass


async def _close_quietly(publisher: Any) -> None:
    """Close a run's log that the run may not have closed (it never
    started); a bus failure is logged, not raised over the response."""
    try:
        with trio.CancelScope(shield=True):
            await publisher.aclose()
    except RunBusError as exc:
        logger.error("a run's log was not closed: %s", exc)
