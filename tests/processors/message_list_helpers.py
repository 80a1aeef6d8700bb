"""Message builders and list readers shared by the MessageList tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from procession.messages import (
    Message,
    MessageContent,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
)
from procession.processors import MessageList

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def user(text: str, id: str, **kw: Any) -> Message:
    return Message.user(text, id=id, **kw)


def assistant(*parts: Any, id: str, **kw: Any) -> Message:
    built = [TextPart(text=p) if isinstance(p, str) else p for p in parts]
    return Message(role="assistant", id=id, content=MessageContent(parts=built), **kw)


def tool(
    call_id: str,
    state: str = "call",
    result: Any = None,
    *,
    args: Any = None,
    name: str = "lookup-customer",
    **kw: Any,
) -> ToolInvocationPart:
    return ToolInvocationPart(
        tool_invocation=ToolInvocation(
            state=state,  # type: ignore[arg-type]  # a helper typed str for brevity; callers pass valid states
            tool_call_id=call_id,
            tool_name=name,
            args={"id": 7} if args is None else args,
            result=result,
        ),
        **kw,
    )


def by_id(ml: MessageList, message_id: str) -> Message:
    message = ml.get_by_id(message_id)
    assert message is not None, message_id
    return message


def ids(ml: MessageList) -> list[str]:
    return [m.id for m in ml.get.all.db()]


def sources(ml: MessageList) -> list[str | None]:
    return [ml.get_source(m) for m in ml.get.all.db()]


def conversation() -> MessageList:
    """memory: m1 (user), m2 (assistant); input: u1; response: r1."""
    ml = MessageList(thread_id="t")
    ml.add([user("old q", "m1", created_at=at(1))], "memory")
    ml.add(assistant("old a", id="m2", created_at=at(2)), "memory")
    ml.add(user("new q", "u1", created_at=at(10)), "input")
    ml.add(assistant("new a", id="r1", created_at=at(11)), "response")
    return ml
