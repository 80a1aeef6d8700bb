"""The values a storage hands back: a thread and a resource (Mastra's
``StorageThreadType`` and ``StorageResourceType``)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Resource", "Thread"]


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
