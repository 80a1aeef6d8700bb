"""The values a storage hands back: a thread and a resource (Mastra's
``StorageThreadType`` and ``StorageResourceType``), and a run that waits for a
person with the decisions taken on its calls."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = ["Resource", "RunRecord", "RunStatus", "Thread", "ToolDecision"]

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
    needs approval, a tool that suspended itself), or kept after it ended so
    that its decisions can be told apart from runs that never existed.

    ``snapshot`` is the run's state as JSON (procession.runtime makes and reads
    it; the storage keeps it whole), ``None`` once the run ended. ``pending``
    lists the waiting calls as JSON objects (``toolCallId``, ``toolName``,
    ``args``, ``kind``, ...). ``epoch`` grows by one each time the run is
    claimed: a continuation writes only while the epoch is still its own."""

    id: str
    agent_id: str
    resource_id: str | None = None
    thread_id: str | None = None
    status: RunStatus
    snapshot: Mapping[str, Any] | None = None
    pending: tuple[Mapping[str, Any], ...] = ()
    epoch: int = 0
    created_at: _dt.datetime
    updated_at: _dt.datetime


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
