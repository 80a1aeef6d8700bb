"""``create_app``: an app's options checked, its run bus chosen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._errors import ConfigurationError
from ..runtime import Agent, Durable
from ._app import ProcessionApp
from ._bus import InProcessRunBus, RunBus
from ._bus_redis import RedisRunBus
from ._hold import StepText
from ._mcp import mcp_wanted
from ._security import Authenticate, Authenticator, Cors, resolve_tokens

__all__ = ["create_app"]


def create_app(
    agents: Iterable[Agent],
    *,
    tokens: Iterable[str] | Mapping[str, str | None] | None = None,
    authenticate: Authenticate | None = None,
    max_body_bytes: int = 1 << 20,
    max_concurrent_runs: int = 256,
    keepalive_s: float = 15.0,
    cors: Cors | None = None,
    resume: bool | RunBus = False,
    resume_grace_s: float = 30.0,
    resume_buffer_frames: int = 1024,
    bus: RunBus | str | None = None,
    tracer_provider: Any = None,
    step_text: StepText | Mapping[str, StepText] = "stream",
    mcp: bool | None = None,
    durable: bool | Durable = False,
) -> ProcessionApp:
    """An ASGI 3 app serving ``agents``.

    Args:
        agents: the agents, each served under ``/api/agents/{agent.id}``.
        tokens: the bearer tokens accepted: a list, or a mapping of token to
            the resource it acts for (``{"token": "resource-id"}``; ``None``:
            any resource). Default ``$PROCESSION_SERVER_TOKENS``
            (comma-separated ``token`` or ``token@resource``). With none,
            requests need no token (serve such an app on loopback only:
            ``serve`` refuses another address). A token tied to a resource
            reads only that resource's threads and runs, and a body whose
            ``memory.resource`` names another is refused (403). Every run
            belongs to the resource that started it: for any other its run
            id and chat id answer as if nothing ran under them.
        authenticate: instead of ``tokens``, a callable (sync or async)
            given the request's headers (a dict, lower-case names) that
            returns the resource id the request acts for, or None to refuse
            it (401): check your own JWTs or sessions here. An exception it
            raises is a 500 (logged with an incident id), never a pass.
            ``$PROCESSION_SERVER_TOKENS`` is not read when it is given.
        max_body_bytes: larger request bodies are refused (413).
        max_concurrent_runs: runs beyond this are refused (503, ``Retry-After``).
        keepalive_s: an SSE comment is sent when a stream has been idle this
            long (0: never).
        cors: ``Cors(allow_origins=[...])`` to answer browsers from other
            origins; off by default.
        resume: ``True`` (an ``InProcessRunBus``) or a ``RunBus``: a run whose
            client left keeps going until it ends, is cancelled, or
            ``resume_grace_s`` passes with no client attached; ``GET
            /api/agents/{agentId}/runs/{runId}/stream`` and ``GET
            /api/chat/{id}/stream`` replay what a client missed
            (``Last-Event-ID``) and follow the run. Off by default: a client
            that leaves cancels its run.
        resume_grace_s: how long a run waits, with no client, for one to come
            back.
        resume_buffer_frames: the frames of each run kept for replay (with
            ``resume=True`` or a bus URL); a resumer asking for older ones
            gets an error frame named ``ReplayGapError``.
        bus: where resumable runs live, which turns resume on: a ``RunBus``
            (e.g. ``RedisRunBus(url, lease_s=...)``) or a ``redis://`` URL
            (a ``RedisRunBus``): clients resume and cancel a run on any
            server process sharing the Redis, and a run whose process died
            ends with an ``error`` named ``RunLostError``, then
            ``step-finish`` and ``finish``.
        tracer_provider: where the request spans go (default the global
            OpenTelemetry provider; nothing is recorded without an SDK).
        step_text: ``"stream"`` (the default: each step's chunks go out as
            they are made, and a retried attempt is withdrawn in band by a
            ``step-retry`` chunk) or ``"hold"`` (each step goes out whole once
            every ``process_output_step`` has passed it: nothing a processor
            rejects is ever sent, at the cost of the step's time to first
            byte, which becomes its whole length, and of memory for one step
            per stream); or a mapping of agent id to one of them.
        mcp: serve the agents as MCP tools ``ask_<agent id>`` at ``/api/mcp``
            (streamable HTTP, behind the same tokens; a call acts for its
            token's resource). ``None`` (the default): on when the ``mcp``
            extra is installed; ``True`` needs it.
        durable: ``True`` (or a ``procession.runtime.Durable``): every run
            the app starts is durable (``Agent(durable=...)`` makes one
            agent's runs durable): kept in its agent's storage and
            checkpointed at every step; the app takes over, in its lifespan,
            the durable runs of its agents whose process died, publishes
            them under their run's key (its followers, on any replica with
            the Redis bus, read on), and at a graceful shutdown hands its
            durable runs over rather than cancelling them (their responses
            end with an SSE ``retry:``, no ``[DONE]``). Every agent needs
            storage other processes read (a SQLite file, PostgreSQL), else a
            ``ConfigurationError`` here.

    The app's lifespan (``serve`` and hypercorn run it) opens the agents'
    tool sources that are not open yet (their ``MCPTools``); one that will
    not start fails the startup with its reason.

    Raises ``ConfigurationError`` for a bad argument.
    """
    agent_list = list(agents)
    if not agent_list:
        raise ConfigurationError("create_app needs at least one agent")
    _check_options(
        max_body_bytes=max_body_bytes,
        max_concurrent_runs=max_concurrent_runs,
        keepalive_s=keepalive_s,
        cors=cors,
        resume_grace_s=resume_grace_s,
        resume_buffer_frames=resume_buffer_frames,
    )
    run_bus = _run_bus(resume, resume_buffer_frames, bus)
    if authenticate is not None and tokens is not None:
        raise ConfigurationError(
            "give tokens= or authenticate=, not both (authenticate can check "
            "your tokens itself)"
        )
    auth = Authenticator(
        tokens=resolve_tokens(tokens) if authenticate is None else (),
        hook=authenticate,
    )
    return ProcessionApp(
        agent_list,
        auth=auth,
        max_body_bytes=max_body_bytes,
        max_concurrent_runs=max_concurrent_runs,
        keepalive_s=float(keepalive_s),
        cors=cors,
        bus=run_bus,
        resume_grace_s=float(resume_grace_s),
        tracer_provider=tracer_provider,
        step_text=step_text,
        mcp=mcp_wanted(mcp),
        durable=Durable.option(durable),
    )


def _check_options(
    *,
    max_body_bytes: int,
    max_concurrent_runs: int,
    keepalive_s: float,
    cors: Cors | None,
    resume_grace_s: float,
    resume_buffer_frames: int,
) -> None:
    """``ConfigurationError`` for a bad ``create_app`` option."""
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
    if not isinstance(resume_grace_s, int | float) or resume_grace_s < 0:
        raise ConfigurationError(f"resume_grace_s must be >= 0, got {resume_grace_s!r}")
    if (
        isinstance(resume_buffer_frames, bool)
        or not isinstance(resume_buffer_frames, int)
        or resume_buffer_frames < 1
    ):
        raise ConfigurationError(
            f"resume_buffer_frames must be an int >= 1, got {resume_buffer_frames!r}"
        )


def _run_bus(
    resume: bool | RunBus, buffer_frames: int, bus: RunBus | str | None = None
) -> RunBus | None:
    """The run bus ``resume=`` and ``bus=`` ask for (None: resume off)."""
    if isinstance(bus, str):
        return RedisRunBus(bus, buffer_frames=buffer_frames)
    if bus is not None:
        if not isinstance(bus, RunBus):
            raise ConfigurationError(f"bus must be a RunBus or a URL, got {bus!r}")
        return bus
    if resume is True:
        return InProcessRunBus(buffer_frames=buffer_frames)
    if resume is False or resume is None:
        return None
    if isinstance(resume, RunBus):
        return resume
    raise ConfigurationError(f"resume must be a bool or a RunBus, got {resume!r}")
