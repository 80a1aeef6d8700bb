"""``ProcessionApp``: the ASGI 3 application serving agents over the Mastra
and AI SDK protocols (``create_app``, in ``_create``, builds it)."""

from __future__ import annotations

import importlib.resources
import logging
import os
import re
from collections.abc import (
    Awaitable,
    Callable,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import Any, Final

import attrs
import trio

from ..memory import ThreadOwnershipError
from ..processors import ConfigurationError
from ..runtime import Agent, AgentResult
from ._bus import RunBus, RunBusError
from ._http import (
    ClientGone,
    HttpError,
    Receive,
    Scope,
    Send,
    dumps,
    parse_json_object,
    read_body,
    send_empty,
    send_json,
)
from ._mastra import MastraFrames, agent_info, error_frame, generate_body
from ._memory_routes import (
    acting_resource,
    owned_thread,
    query_params,
    storage_for,
    thread_messages_body,
    thread_wire,
    threads_body,
)
from ._requests import RunRequest, parse_chat_body, parse_run_body
from ._resume import follow_log, last_event_id, lost_frames, stream_resumable
from ._security import Cors, Token, check_token
from ._streaming import RunRegistry, StreamSettings, stream_response, watch_disconnect
from ._tracing import RequestSpan, enter_run, request_span, under
from ._ui_stream import UI_STREAM_HEADERS, ui_frame, ui_frames

__all__ = ["ProcessionApp"]

logger: Final = logging.getLogger("procession.server")

MASTRA_STREAM_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


@attrs.frozen
class _Request:
    """One routed request: the ASGI triple, the path's parameters, the
    bearer token it carried (when tokens are configured) and its span."""

    scope: Scope
    receive: Receive
    send: Send
    params: dict[str, str]
    token: Token | None
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
        tokens: tuple[Token, ...],
        max_body_bytes: int,
        max_concurrent_runs: int,
        keepalive_s: float,
        cors: Cors | None,
        bus: RunBus | None = None,
        resume_grace_s: float = 30.0,
        tracer_provider: Any = None,
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
        self.bus = bus
        """The run bus when resume is on, else None."""
        self.resume_grace_s = resume_grace_s
        self.tracer_provider = tracer_provider
        self.runs = RunRegistry(limit=max_concurrent_runs)
        self.workers = 1
        """How many worker processes serve this app (``serve_worker`` sets
        it): each runs its own runs, under its own ``max_concurrent_runs``."""
        # Resume key (run:<runId>, chat:<chatId>) -> the id of the run this
        # process executes under it: a chat is stopped by its key.
        self._run_ids: dict[str, str] = {}
        self._shutdown: trio.Event | None = None
        self._routes = self._route_table()

    def _route_table(self) -> list[tuple[str, re.Pattern[str], str, Handler]]:
        """Each route: its method, its path pattern, the route template (the
        span's name) and its handler."""
        aid, run = r"(?P<agent>[^/]+)", r"(?P<run>[^/]+)"
        routes: list[tuple[str, str, str, Handler]] = [
            ("GET", "/", "/", self._page),
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
        ]
        return [
            (method, re.compile(pattern), template, handler)
            for method, pattern, template, handler in routes
        ]

    @property
    def auth_required(self) -> bool:
        """Whether requests need a bearer token (the tokens themselves are not
        readable from the app)."""
        return bool(self._tokens)

    @property
    def resume(self) -> bool:
        """Whether runs outlive their client and can be resumed."""
        return self.bus is not None

    def __repr__(self) -> str:
        return (
            f"<ProcessionApp agents={list(self.agents)} "
            f"auth={'on' if self._tokens else 'off'} "
            f"resume={'on' if self.bus is not None else 'off'}>"
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
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # websockets: not served
        cors = self.cors.origin_headers(scope) if self.cors is not None else []
        started = False
        async with request_span(scope, self.tracer_provider) as span:

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
            # The page holds no data and asks for the token itself.
            token = check_token(scope, self._tokens) if path != "/" else None
            await handler(
                _Request(scope, receive, send, match.groupdict(), token, span)
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

    async def _list_agents(self, req: _Request) -> None:
        body = {agent_id: agent_info(a) for agent_id, a in self.agents.items()}
        await send_json(req.send, 200, body)

    async def _get_agent(self, req: _Request) -> None:
        await send_json(req.send, 200, agent_info(self._agent(req.params["agent"])))

    async def _scoped(
        self, agent: Agent, request: RunRequest, token: Token | None
    ) -> RunRequest:
        """``request`` acting for the token's resource (a body naming another
        is a 403); a thread of another resource is a 404, as if it did not
        exist."""
        resource = acting_resource(token, request.resource_id, field="memory.resource")
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

    def _start_run(self, agent: Agent, request: RunRequest, span: RequestSpan) -> Any:
        """``agent.stream(...)`` for ``request`` (which has its run id), its
        entry under the request's span; a bad option is a 400, a full server
        a 503."""
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
        parent = span.run_context()
        try:
            run = under(
                parent,
                lambda: agent.stream(list(request.messages), **request.options()),
            )
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
    ) -> None:
        request = await self._scoped(agent, request, req.token)
        run = self._start_run(agent, request, req.span)
        if self.bus is not None:
            try:
                publisher = await self.bus.open_run(
                    resume_key,
                    run_id=request.run_id,
                    lost_frames=lost_frames(settings, request.run_id),
                )
            except KeyError:
                raise HttpError(409, f"{resume_key} is already running") from None
        self.runs.reserved += 1
        self._run_ids[resume_key] = request.run_id
        try:
            if self.bus is None:
                await stream_response(
                    req.send,
                    req.receive,
                    run,
                    settings,
                    registry=self.runs,
                    shutdown=self.shutdown_event,
                )
                return
            try:
                await stream_resumable(
                    req.send,
                    req.receive,
                    run,
                    settings,
                    publisher=publisher,
                    registry=self.runs,
                    shutdown=self.shutdown_event,
                    grace_s=self.resume_grace_s,
                    gap_frame=gap_frame,
                )
            finally:
                await _close_quietly(publisher)
                self.bus.remove(resume_key)
        finally:
            self.runs.reserved -= 1
            if self._run_ids.get(resume_key) == request.run_id:
                del self._run_ids[resume_key]

    async def _stream(self, req: _Request) -> None:
        agent = self._agent(req.params["agent"])
        request = parse_run_body(await self._body(req))
        run_id = request.run_id
        await self._streamed(
            req,
            agent,
            request,
            self._mastra_settings(run_id),
            f"run:{run_id}",
            lambda name, message: _mastra_gap_frame(name, message, run_id),
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
            encode=ui_frames,
            failure_frame=_ui_error_frame,
            keepalive_s=self.keepalive_s,
        )

    async def _chat(self, req: _Request) -> None:
        agent = self._agent(req.params.get("agent"))
        chat_id, request = parse_chat_body(await self._body(req))
        if agent.memory is not None and request.thread_id is not None:
            # The thread holds the history: only the new turn goes in.
            request = attrs.evolve(request, messages=_new_turn(request.messages))
        await self._streamed(
            req,
            agent,
            request,
            self._ui_settings(),
            f"chat:{chat_id or request.run_id}",
            lambda name, message: _ui_error_frame(f"{name}: {message}"),
        )

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
        found = await self._follow(
            req,
            f"run:{run_id}",
            self._mastra_settings(run_id),
            lambda name, message: _mastra_gap_frame(name, message, run_id),
        )
        if not found:
            raise HttpError(404, f"no run {run_id!r} is running that can be resumed")

    async def _resume_chat(self, req: _Request) -> None:
        found = await self._follow(
            req,
            f"chat:{req.params['chat']}",
            self._ui_settings(),
            lambda name, message: _ui_error_frame(f"{name}: {message}"),
        )
        if not found:
            # Nothing to resume, which the AI SDK reads from a 204.
            await send_empty(req.send, 204)

    async def _generate(self, req: _Request) -> None:
        agent = self._agent(req.params["agent"])
        request = await self._scoped(
            agent, parse_run_body(await self._body(req)), req.token
        )
        run = self._start_run(agent, request, req.span)
        self.runs.reserved += 1
        result: AgentResult | None = None
        try:
            async with run as stream, trio.open_nursery() as nursery:
                self.runs.streams[stream.run_id] = stream
                try:
                    nursery.start_soon(
                        watch_disconnect, req.receive, nursery.cancel_scope
                    )
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
            await send_json(req.send, 500, {"error": _message(result.error)})
            return
        await send_json(req.send, 200, generate_body(result))

    async def _cancel(self, req: _Request) -> None:
        self._agent(req.params["agent"])
        run_id = req.params["run"]
        here = await self.cancel_here(run_id)
        if not here and not await self._cancel_elsewhere(f"run:{run_id}"):
            raise HttpError(404, f"no run {run_id!r} is running{self._where()}")
        await send_json(req.send, 200, {"message": "Run cancelled", "runId": run_id})

    async def _stop_chat(self, req: _Request) -> None:
        """The AI SDK's way to stop a resumable chat (its guide "Stop an
        Active Resumable Stream"): ``chat.stop()`` only drops the connection,
        which a resumable run outlives, so the client first POSTs to
        ``/api/chat/{id}/stop``. Cancels the chat's run on whichever replica
        executes it; 200 ``{"success": true, "stopped": <bool>}`` either way
        (a stop that arrives after the run ended is no error)."""
        key = f"chat:{req.params['chat']}"
        run_id = self._run_ids.get(key)
        stopped = run_id is not None and await self.cancel_here(run_id)
        if not stopped:
            stopped = await self._cancel_elsewhere(key)
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

    async def cancel_here(self, run_id: str) -> bool:
        """Cancel run ``run_id`` if this process executes it; True if so (the
        bus calls this for a cancel sent to another replica)."""
        stream = self.runs.streams.get(run_id)
        if stream is None:
            await trio.lowlevel.checkpoint()
            return False
        await stream.cancel()
        return True

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """ASGI lifespan: the bus runs (its connections, leases, remote
        cancels) from startup to shutdown; a bus that cannot start fails the
        startup with its reason."""
        message = await receive()
        if message["type"] != "lifespan.startup":  # pragma: no cover - ASGI order
            return
        if self.bus is None:
            await send({"type": "lifespan.startup.complete"})
            await _until_shutdown(receive)
            await send({"type": "lifespan.shutdown.complete"})
            return
        try:
            async with self.bus.running(self.cancel_here):
                await send({"type": "lifespan.startup.complete"})
                await _until_shutdown(receive)
        except Exception as exc:
            logger.exception("the run bus failed")
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    # --- memory ----------------------------------------------------------------

    def _memory_scope(self, req: _Request) -> tuple[Any, str | None, dict[str, str]]:
        params = query_params(req.scope)
        resource = acting_resource(req.token, params.get("resourceId"))
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
        "payload": {"error": {"name": name, "message": message}},
    }
    return b"data: " + dumps(wire) + b"\n\n"


def _ui_error_frame(message: str) -> bytes:
    return ui_frame({"type": "error", "errorText": message})


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


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
