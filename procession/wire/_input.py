"""Input shapes: what callers may hand a ``MessageList``, read into ``Message``.

A message arrives as a str (a user message), a ``Message`` or ``SystemMessage``,
a simple ``{"role", "content"}`` dict, an AI SDK UI message (``parts`` at the
top level) or a ``MastraDBMessage`` dict (``content`` an object), which goes
through the Mastra codec. A system message arrives as a str, a
``SystemMessage``, a system ``Message`` or a ``{"role": "system", ...}`` dict.
Every problem is a ``MessageFormatError`` that quotes the offending value; text
that is not valid Unicode (a lone surrogate) is its ``InvalidTextError``, so bad
input fails here, before any processor or request sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, get_args

import attrs

from .._errors import MessageFormatError, WireFormatError
from ..data import (
    FilePart,
    Message,
    MessageContent,
    Role,
    SystemMessage,
    TextPart,
    joined_text,
    utc_now,
)
from ._mastra import message_from_wire
from ._text import check_text, find_lone_surrogate, holds_lone_surrogate

__all__ = ["parse_message", "parse_system_message"]

_ROLES: tuple[str, ...] = get_args(Role)
# What _check_message_text reads besides the parts.
_CONTENT_FIELDS = tuple(
    f.name for f in attrs.fields(MessageContent) if f.name != "parts"
)
_MESSAGE_FIELDS = tuple(f.name for f in attrs.fields(Message) if f.name != "content")


def parse_message(
    value: object, *, generate_id: Callable[[], str]
) -> Message | SystemMessage:
    """The message ``value`` stands for, checked.

    A ``Message`` or ``SystemMessage`` is returned as it is (the same object);
    a str becomes a user message; a dict with role system becomes a
    ``SystemMessage``; other dicts become a new ``Message``, with an id from
    ``generate_id`` when they carry none (a DB-shaped dict without
    ``createdAt`` is dated now, as Mastra's ``add()`` does).

    A returned ``Message`` has a role among user, assistant, system, signal, a
    ``MessageContent``, and ``content.parts`` or a ``content.content`` str
    (even ``""``). Anything else raises ``MessageFormatError`` naming it (a
    Mastra codec error is wrapped, with the ``WireFormatError`` as its cause).
    A string anywhere in the message that holds a lone surrogate raises
    ``InvalidTextError`` naming the message (id and role) and the part (index
    and type).
    """
    message: Message | SystemMessage
    if type(value) is str:
        built = message = _user_message(value, generate_id)
        # Valid as built; ASCII text and id hold no surrogate to search for
        # (the common case: a request's prompt).
        if value.isascii() and type(built.id) is str and built.id.isascii():
            return built
    else:
        message = _parse(value, generate_id)
    if isinstance(message, Message):
        _validate(message)
        _check_message_text(message)
    else:
        _check_system_text(message)
    return message


def parse_system_message(value: object) -> SystemMessage:
    """The system message ``value`` stands for: a ``SystemMessage`` as it is, a
    str, a ``Message`` with role system (its text, see ``joined_text``) or a
    ``{"role": "system", "content": str | [text parts]}`` dict (``providerOptions``
    kept). Another role or shape raises ``MessageFormatError``; a lone surrogate
    in it, ``InvalidTextError``."""
    message = _parse_system(value)
    _check_system_text(message)
    return message


def _parse_system(value: object) -> SystemMessage:
    if isinstance(value, SystemMessage):
        return value
    if isinstance(value, str):
        return SystemMessage(content=value)
    if isinstance(value, Message):
        if value.role != "system":
            raise MessageFormatError(
                f'Expected role "system" but saw {value.role!r} for message '
                f"{value.id!r}; add conversation messages with add()"
            )
        return SystemMessage(content=joined_text(value))
    if isinstance(value, Mapping):
        role = value.get("role")
        if role != "system":
            raise MessageFormatError(
                f'Expected role "system" but saw {role!r} in {_short(value)}; add '
                f"conversation messages with add()"
            )
        return _system_from_mapping(value)
    raise MessageFormatError(
        f"{_short(value)} is not a system message; expected a str, a SystemMessage "
        f'or a {{"role": "system", "content": ...}} dict'
    )


def _parse(item: object, generate_id: Callable[[], str]) -> Message | SystemMessage:
    if isinstance(item, Message | SystemMessage):
        return item
    if isinstance(item, str):
        return _user_message(item, generate_id)
    if isinstance(item, Mapping):
        return _parse_mapping(item, generate_id)
    raise MessageFormatError(
        f"cannot add {_short(item)}: expected a str, a Message, a SystemMessage "
        f"or a message dict"
    )


def _user_message(text: str, generate_id: Callable[[], str]) -> Message:
    return Message(
        id=generate_id(),
        role="user",
        content=MessageContent(parts=[TextPart(text=text)], content=text),
    )


def _parse_mapping(
    data: Mapping[str, Any], generate_id: Callable[[], str]
) -> Message | SystemMessage:
    role = data.get("role")
    if role not in _ROLES:
        raise MessageFormatError(
            f"message {_short(data)} has role {role!r}; expected one of "
            f"{', '.join(map(repr, _ROLES))}"
        )
    if role == "system":
        return _system_from_mapping(data)
    content = data.get("content")
    if isinstance(content, Mapping) or "parts" in data:
        return _from_db_shape(data, generate_id)
    if isinstance(content, str):
        parts: list[Any] = [TextPart(text=content)] if content else []
        text: str | None = content
    elif isinstance(content, list):
        parts = [_core_part(part, data) for part in content]
        text = None
    else:
        raise MessageFormatError(
            f"message {_short(data)} has no content or parts; expected "
            f"'content' (a str, a list of text parts, or a Mastra content object "
            f"with 'parts')"
        )
    return Message(
        id=data.get("id") or generate_id(),
        role=role,
        content=MessageContent(parts=parts, content=text),
    )


def _from_db_shape(data: Mapping[str, Any], generate_id: Callable[[], str]) -> Message:
    wire = dict(data)
    if "parts" in wire and not isinstance(wire.get("content"), Mapping):
        # AI SDK UI-message shape: parts at the top level, tools as typed parts.
        parts = wire.pop("parts")
        if isinstance(parts, list):
            parts = [_from_ui_part(part) for part in parts]
        text = wire.pop("content", None)
        wire["content"] = {"format": 2, "parts": parts}
        if isinstance(text, str):
            wire["content"]["content"] = text
    content = wire["content"]
    if not isinstance(content.get("parts"), list) and not isinstance(
        content.get("content"), str
    ):
        raise MessageFormatError(
            f"message {_short(data)} has no content or parts; expected "
            f"content.parts (a list) or content.content (a str)"
        )
    if not wire.get("id"):
        wire["id"] = generate_id()
    if wire.get("createdAt") is None:
        # Mastra's add() dates undated messages "now", so do we.
        wire["createdAt"] = utc_now().isoformat()
    try:
        return message_from_wire(wire)
    except WireFormatError as error:
        raise MessageFormatError(
            f"message {_short(data)} is not a valid Mastra message: {error}"
        ) from error


_UI_TOOL_STATES: Final = {
    "input-streaming": "partial-call",
    "input-available": "call",
    "output-available": "result",
    "output-error": "output-error",
    "output-denied": "output-denied",
    "approval-requested": "approval-requested",
    "approval-responded": "approval-responded",
}
"""AI SDK v5 tool-part states, as Mastra's tool-invocation states."""


def _from_ui_part(part: Any) -> Any:
    """An AI SDK UI part as the Mastra part it stands for: ``tool-<name>`` and
    ``dynamic-tool`` parts (what ``useChat`` sends back in the history) become
    ``tool-invocation`` parts, so earlier tool calls and results reach the
    model; a reasoning part's ``text`` is its ``reasoning``. Others pass as
    they are."""
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if not isinstance(kind, str):
        return part
    if kind == "reasoning" and "reasoning" not in part and "text" in part:
        return {**part, "reasoning": part["text"]}
    if kind == "dynamic-tool":
        name = part.get("toolName")
    elif kind.startswith("tool-") and kind != "tool-invocation":
        name = kind[len("tool-") :]
    else:
        return part
    raw_state = part.get("state")
    state = _UI_TOOL_STATES.get(raw_state) if isinstance(raw_state, str) else None
    if not isinstance(name, str) or state is None or "toolCallId" not in part:
        return part  # not a tool part we know: kept as an unknown part
    invocation: dict[str, Any] = {
        "state": state,
        "toolCallId": part["toolCallId"],
        "toolName": name,
        "args": part.get("input"),
    }
    if state == "result":
        invocation["result"] = part.get("output")
    elif state == "output-error":
        invocation["result"] = invocation["errorText"] = part.get("errorText")
    out: dict[str, Any] = {"type": "tool-invocation", "toolInvocation": invocation}
    if part.get("providerExecuted") is not None:
        out["providerExecuted"] = part["providerExecuted"]
    return out


def _validate(message: Message) -> None:
    if message.role not in _ROLES:
        raise MessageFormatError(
            f"message {message.id!r} has role {message.role!r}; expected one of "
            f"{', '.join(map(repr, _ROLES))}"
        )
    content = message.content
    if not isinstance(content, MessageContent):
        raise MessageFormatError(
            f"message {message.id!r} has content {_short(content)}; expected a "
            f"MessageContent (content.parts is the source of truth)"
        )
    if not content.parts and not isinstance(content.content, str):
        raise MessageFormatError(
            f"message {message.id!r} ({message.role}) has no content: expected "
            f"content.parts (a non-empty list) or content.content (a str)"
        )


def _check_message_text(message: Message) -> None:
    """``InvalidTextError`` for a lone surrogate in any string of ``message``:
    each part first (named by index and type), then the rest of it."""
    # One search of the whole message first: valid text (the common case)
    # costs no per-field calls. A part lies three levels inside the message
    # (message, content, parts list), and each check below searches its value
    # with the depth limit counted from there.
    if type(message.content.parts) is list and not holds_lone_surrogate(
        message, nested=3
    ):
        return

    def named() -> str:
        return f"message {message.id!r} ({message.role})"

    for index, part in enumerate(message.content.parts):
        if find_lone_surrogate(part) is not None:
            kind = getattr(part, "type", type(part).__name__)
            check_text(part, f"{named()}, part #{index} ({kind})")
    for name in _CONTENT_FIELDS:
        check_text(getattr(message.content, name), named, path=f"content.{name}")
    for name in _MESSAGE_FIELDS:
        check_text(getattr(message, name), named, path=name)


def _check_system_text(message: SystemMessage) -> None:
    check_text(message, "system message")


def _system_from_mapping(data: Mapping[str, Any]) -> SystemMessage:
    content = data.get("content")
    if isinstance(content, list) and all(
        isinstance(p, Mapping) and p.get("type") == "text" for p in content
    ):
        content = "\n".join(str(p.get("text", "")) for p in content)
    if not isinstance(content, str):
        raise MessageFormatError(
            f"system message {_short(data)} has content {_short(content)}; expected "
            f"a str (or a list of text parts)"
        )
    options = data.get("providerOptions", data.get("provider_options"))
    return SystemMessage(content=content, provider_options=options)


def _core_part(part: object, message: Mapping[str, Any]) -> TextPart | FilePart:
    if isinstance(part, Mapping):
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            return TextPart(text=part["text"])
        mime = part.get("mediaType", part.get("mimeType", part.get("mime_type")))
        if (
            kind == "file"
            and isinstance(part.get("data"), str)
            and isinstance(mime, str)
        ):
            return FilePart(
                data=part["data"], mime_type=mime, filename=part.get("filename")
            )
    raise MessageFormatError(
        f"message {_short(message)} has the content part {_short(part)}; a simple "
        f'message dict takes {{"type": "text", "text": str}} or {{"type": "file", '
        f'"data": str, "mediaType": str}} parts (use the Mastra DB shape for others)'
    )


def _short(value: object, limit: int = 160) -> str:
    # Error messages quote the input, but a huge one must not flood the log.
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
