"""Conversation messages in Mastra's ``MastraDBMessage`` shape.

Messages and their parts are *mutable* attrs classes, because the seed requires
it: editing ``message.content.parts`` in place is seen by later processors and by
persistence. (Chunks, by contrast, are immutable values.)

Every part has a ``type`` string that is an ordinary, assignable field: the seed's
``ReasoningTransformer`` renames ``reasoning`` parts to ``thinking`` in place, and
that must work. Keys this library does not model are kept in ``extra`` so a
message read from Mastra JSON is written back unchanged.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Literal, TypeAlias

import attrs

__all__ = [
    "DataPart",
    "FilePart",
    "Message",
    "MessageContent",
    "Part",
    "ReasoningDetail",
    "ReasoningPart",
    "Role",
    "SourceDocumentPart",
    "SourceInfo",
    "SourcePart",
    "StepStartPart",
    "SystemMessage",
    "TextPart",
    "ToolInvocation",
    "ToolInvocationPart",
    "ToolInvocationState",
    "UnknownPart",
    "message_text",
    "new_message_id",
    "utc_now",
]

Role: TypeAlias = Literal["user", "assistant", "system", "signal"]

ToolInvocationState: TypeAlias = Literal[
    "partial-call",
    "call",
    "result",
    "approval-requested",
    "approval-responded",
    "output-error",
    "output-denied",
]


def new_message_id() -> str:
    """A fresh, unique message id: ``msg-`` and 128 random bits in hex (the
    shape a ``uuid4().hex`` id had, at a quarter of its cost: every run makes
    two or more)."""
    return f"msg-{os.urandom(16).hex()}"


def utc_now() -> _dt.datetime:
    """The current time, timezone-aware (UTC)."""
    return _dt.datetime.now(_dt.UTC)


@attrs.define(kw_only=True)
class _PartBase:
    """Fields every part may carry."""

    provider_metadata: dict[str, Any] | None = None
    """Provider-specific metadata (e.g. Anthropic cache control)."""
    created_at: int | None = None
    """Milliseconds since the epoch, when the part was made (Mastra ``createdAt``)."""
    visibility: Literal["all", "llm"] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)
    """JSON keys this library does not model, kept for a faithful round trip."""


@attrs.define(kw_only=True)
class TextPart(_PartBase):
    """Plain text."""

    type: str = "text"
    text: str


@attrs.define(kw_only=True)
class ReasoningDetail:
    """One piece of a reasoning part: visible text (with the provider's signature)
    or redacted data."""

    type: Literal["text", "redacted"] = "text"
    text: str | None = None
    signature: str | None = None
    data: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.define(kw_only=True)
class ReasoningPart(_PartBase):
    """Model reasoning ("thinking"). ``details`` carry the provider signatures that
    Anthropic requires to be sent back across tool-use steps."""

    type: str = "reasoning"
    reasoning: str = ""
    details: list[ReasoningDetail] = attrs.field(factory=list)


@attrs.define(kw_only=True)
class ToolInvocation:
    """A tool call and, once it ran, its result (``state == "result"``) or error."""

    state: ToolInvocationState
    tool_call_id: str
    tool_name: str
    args: Any = None
    result: Any = None
    error_text: str | None = None
    raw_input: Any = None
    approval: Any = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.define(kw_only=True)
class ToolInvocationPart(_PartBase):
    """A tool invocation inside an assistant message."""

    type: str = "tool-invocation"
    tool_invocation: ToolInvocation
    provider_executed: bool | None = None
    title: str | None = None
    preliminary: bool | None = None


@attrs.define(kw_only=True)
class FilePart(_PartBase):
    """A file: ``data`` is base64 text or a URL."""

    type: str = "file"
    data: str
    mime_type: str
    filename: str | None = None


@attrs.define(kw_only=True)
class SourceInfo:
    """Where a ``source`` part points."""

    source_type: str = "url"
    id: str
    url: str | None = None
    title: str | None = None
    provider_metadata: dict[str, Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.define(kw_only=True)
class SourcePart(_PartBase):
    """A URL source the model cited."""

    type: str = "source"
    source: SourceInfo


@attrs.define(kw_only=True)
class SourceDocumentPart(_PartBase):
    """A document source the model cited."""

    type: str = "source-document"
    source_id: str
    media_type: str
    title: str
    filename: str | None = None


@attrs.define(kw_only=True)
class StepStartPart(_PartBase):
    """Marks where a new model step begins inside an assistant message."""

    type: str = "step-start"
    model: str | None = None


@attrs.define(kw_only=True)
class DataPart(_PartBase):
    """A custom ``data-<name>`` part (persisted from a ``writer.custom`` chunk)."""

    type: str = attrs.field()
    data: Any = None
    id: str | None = None

    @type.validator
    def _check_type(self, _attribute: object, value: str) -> None:
        if not value.startswith("data-"):
            raise ValueError(
                f"a data part's type must start with 'data-', got {value!r}"
            )


@attrs.define(kw_only=True)
class UnknownPart:
    """A part whose ``type`` this library does not model; its keys are kept as-is."""

    type: str
    fields: dict[str, Any] = attrs.field(factory=dict)


Part: TypeAlias = (
    TextPart
    | ReasoningPart
    | ToolInvocationPart
    | FilePart
    | SourcePart
    | SourceDocumentPart
    | StepStartPart
    | DataPart
    | UnknownPart
)


@attrs.define(kw_only=True)
class MessageContent:
    """``MastraDBMessage.content`` (format 2). ``parts`` is the source of truth;
    ``content`` is the legacy flattened text, read only as a fallback."""

    format: int = 2
    parts: list[Part] = attrs.field(factory=list)
    content: str | None = None
    metadata: dict[str, Any] | None = None
    provider_metadata: dict[str, Any] | None = None
    reasoning: str | None = None
    tool_invocations: list[Any] | None = None
    annotations: list[Any] | None = None
    experimental_attachments: list[Any] | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.define(kw_only=True, eq=True)
class Message:
    """A conversation message (``MastraDBMessage``). Mutable: in-place edits of
    ``content.parts`` are seen downstream and persisted."""

    id: str = attrs.field(factory=new_message_id)
    role: Role
    content: MessageContent = attrs.field(factory=MessageContent)
    created_at: _dt.datetime = attrs.field(factory=utc_now)
    thread_id: str | None = None
    resource_id: str | None = None
    type: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        """A user message holding one text part."""
        return cls(
            role="user",
            content=MessageContent(parts=[TextPart(text=text)], content=text),
            **kwargs,
        )

    @classmethod
    def assistant(cls, text: str, **kwargs: Any) -> Message:
        """An assistant message holding one text part."""
        return cls(
            role="assistant",
            content=MessageContent(parts=[TextPart(text=text)], content=text),
            **kwargs,
        )

    @property
    def text(self) -> str:
        """The message's text, by the seed's rule (see ``message_text``)."""
        return message_text(self)


@attrs.define(kw_only=True)
class SystemMessage:
    """A system message (``CoreSystemMessage``): instructions, memory context, or
    retry feedback."""

    content: str
    provider_options: dict[str, Any] | None = None
    role: Literal["system"] = "system"


def message_text(message: Message) -> str:
    """Read a message's text the way the seed prescribes.

    ``content.parts`` is the primary source: the ``text`` of every part whose type
    is ``"text"`` is concatenated. Only if that gives nothing is the legacy
    flattened ``content.content`` string used.
    """
    text = "".join(
        part.text
        for part in message.content.parts
        if isinstance(part, TextPart) and part.type == "text"
    )
    if not text and isinstance(message.content.content, str):
        text = message.content.content
    return text
