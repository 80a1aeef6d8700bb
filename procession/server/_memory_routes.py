"""The memory routes ``@mastra/client-js`` reads: a resource's threads and a
thread's messages, never across resources.

Which resource a request acts for: with a token tied to a resource
(``tokens={"token": "resource-id"}``) or a resource from ``authenticate``,
that resource, and a ``resourceId`` that names another is refused (403);
otherwise the ``resourceId`` query parameter, which is then required. A
thread of another resource is a 404, the same answer as a thread that does
not exist.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs

from ..memory import MemoryStorage, Thread, ThreadOwnershipError
from ..runtime import Agent
from ..wire import message_to_wire
from ._http import HttpError, Scope
from ._security import Principal

__all__ = [
    "acting_resource",
    "owned_thread",
    "query_params",
    "storage_for",
    "thread_messages_body",
    "thread_wire",
    "threads_body",
]


def query_params(scope: Scope) -> dict[str, str]:
    """The query string's parameters (the first value of each)."""
    raw = scope.get("query_string", b"").decode("latin-1")
    return {key: values[0] for key, values in parse_qs(raw).items()}


def acting_resource(
    principal: Principal, named: str | None, *, field: str = "resourceId"
) -> str | None:
    """The resource a request acts for: the principal's, when it has one (a
    different ``named`` resource is a 403), else ``named``."""
    if principal.resource is None:
        return named
    if named is not None and named != principal.resource:
        raise HttpError(
            403,
            f"'{field}' names another resource than the one this request acts for",
            field=field,
        )
    return principal.resource


def storage_for(agents: Mapping[str, Agent], agent_id: str | None) -> MemoryStorage:
    """The memory storage of agent ``agent_id``, or of the only agent with
    memory (or the one storage all such agents share); 404 when none."""
    if agent_id is not None:
        agent = agents.get(agent_id)
        if agent is None:
            raise HttpError(404, f"no agent {agent_id!r}", field="agentId")
        if agent.memory is None:
            raise HttpError(404, f"agent {agent_id!r} has no memory", field="agentId")
        return agent.memory.storage
    stores = {
        id(a.memory.storage): a.memory.storage
        for a in agents.values()
        if a.memory is not None
    }
    if not stores:
        raise HttpError(404, "no agent here has memory")
    if len(stores) > 1:
        raise HttpError(
            400,
            "several agents keep memory in different stores; pass agentId",
            field="agentId",
        )
    return next(iter(stores.values()))


def _int_param(params: Mapping[str, str], key: str, default: int | None) -> int | None:
    value = params.get(key)
    if value is None or (key == "perPage" and value == "false"):
        return default if value is None else None
    if not value.isdigit() or (key == "perPage" and int(value) < 1):
        raise HttpError(
            400,
            f"'{key}' must be a non-negative integer, got {value[:40]!r}",
            field=key,
        )
    return int(value)


def _page(
    items: Sequence[Any], params: Mapping[str, str], default_per_page: int | None
) -> tuple[list[Any], dict[str, Any]]:
    page = _int_param(params, "page", 0) or 0
    per_page = _int_param(params, "perPage", default_per_page)
    if per_page is None:
        chosen = list(items)
    else:
        chosen = list(items[page * per_page : (page + 1) * per_page])
    more = per_page is not None and (page + 1) * per_page < len(items)
    return chosen, {
        "total": len(items),
        "page": page,
        "perPage": per_page if per_page is not None else False,
        "hasMore": more,
    }


def _iso(moment: dt.datetime) -> str:
    # JavaScript's Date.toISOString form, which client-js revives as a Date.
    moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def thread_wire(thread: Thread) -> dict[str, Any]:
    """A thread as Mastra's ``StorageThreadType`` JSON."""
    out: dict[str, Any] = {
        "id": thread.id,
        "resourceId": thread.resource_id,
        "createdAt": _iso(thread.created_at),
        "updatedAt": _iso(thread.updated_at),
        "metadata": dict(thread.metadata),
    }
    if thread.title is not None:
        out["title"] = thread.title
    return out


def _resource(resource: str | None) -> str:
    if resource is None:
        raise HttpError(400, "'resourceId' is required", field="resourceId")
    return resource


async def threads_body(
    storage: MemoryStorage, resource: str | None, params: Mapping[str, str]
) -> dict[str, Any]:
    """``GET /api/memory/threads``: the resource's threads, newest first, as
    ``{threads, total, page, perPage, hasMore}``. Checkpoints."""
    threads = await storage.list_threads(_resource(resource))
    chosen, paging = _page(threads, params, 100)
    return {"threads": [thread_wire(t) for t in chosen], **paging}


async def owned_thread(
    storage: MemoryStorage, thread_id: str, resource: str | None
) -> Thread:
    """The thread if ``resource`` owns it; 404 for a thread that does not
    exist or is another resource's (the same answer: nothing is revealed).
    Checkpoints."""
    owner = _resource(resource)
    try:
        thread = await storage.get_thread(thread_id, resource_id=owner)
    except ThreadOwnershipError:
        thread = None
    if thread is None or thread.resource_id != owner:
        raise HttpError(404, f"no thread {thread_id!r}")
    return thread


async def thread_messages_body(
    storage: MemoryStorage,
    thread_id: str,
    resource: str | None,
    params: Mapping[str, str],
) -> dict[str, Any]:
    """``GET /api/memory/threads/{threadId}/messages``: the thread's messages
    (``MastraDBMessage`` JSON, oldest first) as ``{messages, uiMessages,
    total, page, perPage, hasMore}``; 404 for a thread that does not exist
    or is another resource's. Checkpoints."""
    owner = (await owned_thread(storage, thread_id, resource)).resource_id
    messages = await storage.list_messages(thread_id, owner)
    chosen, paging = _page(messages, params, None)
    return {
        "messages": [message_to_wire(m) for m in chosen],
        "uiMessages": None,
        **paging,
    }
