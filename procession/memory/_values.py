"""The values a storage hands back: a thread and a resource (Mastra's
``StorageThreadType`` and ``StorageResourceType``), and a run that waits for a
person with the decisions taken on its calls."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = [
    "Resource",
    "RunRecord",
    "RunStatus",
    "Thread",
    "ToolDecision",
    "ToolRecord",
]

RunStatus = Literal["waiting", "running", "ended"]
"""A stored run: ``waiting`` for an answer, ``running`` (claimed by the
continuation that holds its ``epoch``), or ``ended``."""


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen(kw_only=True)
class Thread:
    """A conversation thread, owned by exactly one resource (a user, say).

    Messages of a thread are readable only with its ``resource_id``.
    """

    id: str
    resource_id: str
    title: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    created_at: _dt.datetime
    updated_at: _dt.datetime


@attrs.frozen(kw_only=True)
class Resource:
    """What a storage keeps per resource: its working-memory document (``None``
    until the model first writes it) and free metadata."""

    id: str
    working_memory: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    created_at: _dt.datetime
    updated_at: _dt.datetime


@attrs.frozen(kw_only=True)
class RunRecord:
    """A run kept in storage because it waits for a person (a tool call that
    needs approval, a tool that suspended itself), because it is durable (its
    checkpoints, so that another process can take it over), or kept after it
    ended so that its decisions can be told apart from runs that never
    existed.

    ``snapshot`` is the run's state as JSON (procession.runtime makes and reads
    it; the storage keeps it whole), ``None`` once the run ended. ``pending``
    lists the waiting calls as JSON objects (``toolCallId``, ``toolName``,
    ``args``, ``kind``, ...). ``epoch`` grows by one each time the run is
    claimed: a continuation writes only while the epoch is still its own.

    A durable run (``durable``) is ``running`` while it executes: ``owner``
    (the executing process) holds it until ``lease_until`` and renews that;
    once the lease lapses, another process may take it over (the epoch moves
    on, fencing out the old owner's writes). ``attempt`` is what the step in
    flight has done since the last checkpoint (the model's answer when it
    called tools), ``host`` what the host (a server) needs to go on serving
    the run (opaque to the storage)."""

    id: str
    agent_id: str
    resource_id: str | None = None
    thread_id: str | None = None
    status: RunStatus
    snapshot: Mapping[str, Any] | None = None
    pending: tuple[Mapping[str, Any], ...] = ()
    epoch: int = 0
    durable: bool = False
    owner: str | None = None
    lease_until: _dt.datetime | None = None
    attempt: Mapping[str, Any] | None = None
    host: Mapping[str, Any] | None = None
    created_at: _dt.datetime
    updated_at: _dt.datetime


@attrs.frozen(kw_only=True)
class ToolRecord:
    """A durable run's tool call as its storage recorded it: ``started``
    (it was running when last heard of) or ``done`` with its outcome
    (``ok``, and ``result``: the value, or ``{"name", "message"}`` of the
    error it raised)."""

    run_id: str
    tool_call_id: str
    state: Literal["started", "done"]
    ok: bool | None = None
    result: Any = None
    epoch: int


@attrs.frozen(kw_only=True)
class ToolDecision:
    """What was decided for one waiting call, kept for good (with the run):
    ``approved``, ``declined``, ``expired`` (declined for want of an answer
    in time) or ``resumed`` (a suspended tool was given its data)."""

    run_id: str
    tool_call_id: str
    decision: Literal["approved", "declined", "expired", "resumed"]
    reason: str | None = None
    data: Any = None
    decided_by: str | None = None
    """The resource that answered, when the answer came with one."""
    decided_at: _dt.datetime
