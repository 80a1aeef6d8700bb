"""``MessageList``: the live conversation object processors receive.

It holds the run's conversation messages in order, remembers where each came
from (``memory``: loaded history; ``input``: the new user turn; ``response``:
generated in this run), keeps system messages apart (one untagged bucket plus
tagged buckets such as ``memory`` or ``processor-retry-feedback``), and builds
the provider prompt. Messages are the live, mutable objects: an in-place edit of
a message's ``content.parts`` is seen by every later reader of the list.

Behaviour follows Mastra's ``MessageList`` (reference §5.3); where this module
decides something Mastra leaves open, the docstring says so.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, TypeAlias, cast, get_args

import attrs

from .._errors import ConfigurationError, MessageFormatError
from .._secrets import get_logger
from ..data import (
    Message,
    PromptMessage,
    PromptSystemMessage,
    StepStartPart,
    SystemMessage,
    ToolInvocationPart,
    joined_text,
    message_text,
    new_message_id,
    to_prompt_messages,
)
from ..wire import (
    message_from_wire,
    message_to_wire,
    parse_message,
    parse_system_message,
)
from ._reconcile import (
    Reconciliation,
    Source,
    SystemInput,
    fold,
    merge,
    reconcile,
    short_repr,
    should_merge,
    tool_part_fields,
    updated_tool_part,
)

__all__ = [
    "MessageInput",
    "MessageList",
    "MessageView",
    "MessageViews",
    "Source",
    "SystemInput",
    "SystemSnapshot",
]

_log = get_logger("procession")

MessageInput: TypeAlias = str | Message | SystemMessage | Mapping[str, Any]
"""What ``MessageList.add`` accepts for one message: a str (a user message), a
``Message``, a ``SystemMessage``, a Mastra DB-shaped dict (camelCase, ``content``
an object) or a simple ``{"role", "content"}`` dict whose content is a str or a
list of ``{"type": "text", "text": ...}`` parts."""

_SOURCES: frozenset[str] = frozenset(get_args(Source))
_TICK = _dt.timedelta(microseconds=1)


@attrs.frozen
class SystemSnapshot:
    """The system messages at one moment, tags included (see
    ``MessageList.snapshot_system_messages``)."""

    untagged: tuple[SystemMessage, ...]
    tagged: tuple[tuple[str, tuple[SystemMessage, ...]], ...]


class MessageView:
    """One filtered view of a ``MessageList`` (``all``, ``input``, ``response`` or
    ``remembered``). It reads the list at call time, so it never goes stale."""

    __slots__ = ("_list", "_source")

    def __init__(self, message_list: MessageList, source: Source | None) -> None:
        self._list = message_list
        self._source = source

    def db(self) -> list[Message]:
        """The view's messages in conversation order: the live objects (edit
        their parts in place and the list sees it) in a new list (reordering
        the returned list does not reorder the conversation)."""
        message_list, source = self._list, self._source
        if source is None:
            return list(message_list)
        return [m for m in message_list if message_list.get_source(m.id) == source]

    def core(self) -> list[PromptMessage]:
        """The view's messages in prompt form (``to_prompt_messages``), without
        system messages."""
        return to_prompt_messages(self.db())

    def prompt(self) -> list[PromptMessage]:
        """A model prompt: the untagged system messages, then the tagged ones,
        then the view's messages in prompt form. ``get.all.prompt()`` is what
        the model is sent."""
        system: list[PromptMessage] = [
            PromptSystemMessage(s.content, provider_options=s.provider_options)
            for s in self._list.get_all_system_messages()
            if s.content
        ]
        return system + self.core()

    def __repr__(self) -> str:
        return f"<MessageView {self._source or 'all'}: {len(self.db())} messages>"


class MessageViews:
    """The views of a ``MessageList``: ``all`` (every non-system message),
    ``input``, ``response`` and ``remembered`` (memory).

    Made on each ``message_list.get``, each view on each access (a few
    attribute writes): the list keeps no reference to its views, so a run's
    conversation is freed by reference counting when the run ends, with no
    cycle for the garbage collector to find."""

    __slots__ = ("_list",)

    def __init__(self, message_list: MessageList) -> None:
        self._list = message_list

    @property
    def all(self) -> MessageView:
        return MessageView(self._list, None)

    @property
    def input(self) -> MessageView:
        return MessageView(self._list, "input")

    @property
    def response(self) -> MessageView:
        return MessageView(self._list, "response")

    @property
    def remembered(self) -> MessageView:
        return MessageView(self._list, "memory")


class MessageList:
    """The conversation of one run, as processors see and edit it.

    Args:
        thread_id, resource_id: stamped onto every added message that has none.
        generate_message_id: makes ids for messages built here (from a str or a
            dict without ``id``); defaults to ``new_message_id``.

    Not thread-safe; it lives inside one trio run, and no method checkpoints.
    """

    def __init__(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        generate_message_id: Callable[[], str] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.resource_id = resource_id
        self._generate_id = generate_message_id or new_message_id
        self._messages: list[Message] = []
        # Per message id; an id is present here iff its message is in the list.
        self._sources: dict[str, Source] = {}
        self._system: list[SystemMessage] = []
        self._tagged: dict[str, list[SystemMessage]] = {}
        self._unsaved: set[str] = set()
        self._last_created_at: _dt.datetime | None = None

    @property
    def get(self) -> MessageViews:
        """The views: ``get.all``, ``get.input``, ``get.response``,
        ``get.remembered``; each has ``.db()``, ``.core()`` and ``.prompt()``."""
        return MessageViews(self)

    # ------------------------------------------------------------------ adding

    def add(
        self, messages: MessageInput | Iterable[MessageInput], source: Source
    ) -> MessageList:
        """Add messages from ``source`` and return ``self``.

        ``messages`` is one ``MessageInput`` or an iterable of them. Per message:

        - it must have ``content.parts`` or a ``content.content`` string (even
          ``""``), and a role among user, assistant, system, signal, else
          ``MessageFormatError`` naming it;
        - a system message goes to the untagged system bucket (ignored when
          ``source`` is ``"memory"``: history does not bring instructions);
        - ``thread_id``/``resource_id`` are stamped onto it when unset;
        - a memory message whose id is already present is skipped; otherwise an
          existing id is replaced in place, taking the new source;
        - memory messages are placed among the history, by ``created_at``,
          before the run's input and response messages; others are appended;
        - a response message's ``created_at`` is moved, if needed, to just after
          the newest message added so far (so the order survives storage);
        - a new assistant message right after an assistant message is merged
          into it (see ``mark_response_message_boundary``): its parts are
          appended (a tool result updates the matching call), the first id stays.

        The message objects themselves are stored (and may be stamped), not
        copies. A bad message leaves the messages before it added.
        """
        source = _check_source(source)
        for item in _iter_inputs(messages, what="add()"):
            self._add_one(parse_message(item, generate_id=self._generate_id), source)
        return self

    def _add_one(self, message: Message | SystemMessage, source: Source) -> None:
        if isinstance(message, SystemMessage):
            if source != "memory":
                self._add_system_one(message, None)
            return
        if message.role == "system":
            if source != "memory":
                self._add_system_one(SystemMessage(content=joined_text(message)), None)
            return
        self._stamp(message)
        index = self._index(message.id)
        if index is not None:
            if source == "memory":
                return
            self._messages[index] = message
            self._set_source(message, source)
            return
        if source == "response":
            self._make_monotonic(message)
        if source == "memory":
            self._messages.insert(self._memory_slot(message), message)
            self._sources[message.id] = source
            return
        self._note_created(message)
        latest = self._messages[-1] if self._messages else None
        if latest is not None and should_merge(latest, message, source):
            merge(latest, message)
            self._unsaved.add(latest.id)
            if source == "response":
                # It now holds generated content, which must be saved with the run.
                self._sources[latest.id] = "response"
            return
        self._messages.append(message)
        self._set_source(message, source)

    def _stamp(self, message: Message) -> None:
        if message.thread_id is None:
            message.thread_id = self.thread_id
        if message.resource_id is None:
            message.resource_id = self.resource_id

    def _make_monotonic(self, message: Message) -> None:
        last = self._last_created_at
        if last is not None and _aware(message.created_at) <= last:
            message.created_at = last + _TICK

    def _note_created(self, message: Message) -> None:
        created = _aware(message.created_at)
        if self._last_created_at is None or created > self._last_created_at:
            self._last_created_at = created

    def _memory_slot(self, message: Message) -> int:
        # History goes before the run's own messages, in created_at order.
        created = _aware(message.created_at)
        for index, other in enumerate(self._messages):
            if (
                self._sources[other.id] != "memory"
                or _aware(other.created_at) > created
            ):
                return index
        return len(self._messages)

    def _set_source(self, message: Message, source: Source) -> None:
        self._sources[message.id] = source
        if source == "memory":
            self._unsaved.discard(message.id)
        else:
            self._unsaved.add(message.id)

    def _index(self, message_id: str) -> int | None:
        if message_id not in self._sources:
            return None
        for index, message in enumerate(self._messages):
            if message.id == message_id:
                return index
        return None  # pragma: no cover - _sources and _messages agree

    # ---------------------------------------------------------------- removing

    def remove_by_ids(self, ids: Iterable[str] | str) -> list[Message]:
        """Remove the messages with these ids (a single str is one id) and return
        the removed ones, in conversation order. Unknown ids are ignored."""
        wanted = {ids} if isinstance(ids, str) else set(ids)
        removed = [m for m in self._messages if m.id in wanted]
        if removed:
            self._messages = [m for m in self._messages if m.id not in wanted]
            for message in removed:
                del self._sources[message.id]
                self._unsaved.discard(message.id)
        return removed

    # ------------------------------------------------------------ tool results

    def update_tool_invocation(
        self,
        part: ToolInvocationPart | Mapping[str, Any],
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Replace a tool invocation (typically with its result); returns True
        (it raises rather than miss one).

        ``part`` is a ``ToolInvocationPart`` or a Mastra-shaped dict
        ``{"type": "tool-invocation", "toolInvocation": {"state", "toolCallId",
        "toolName", "args", "result", ...}}`` (snake_case keys work too).
        Searching newest message first, the first assistant ``tool-invocation``
        part with the same tool call id is replaced by ``part``, except that the
        original ``args`` are kept, ``provider_executed`` is kept unless ``part``
        sets it, and ``provider_metadata`` is merged (original, then new).
        ``metadata`` is merged into the message's ``content.metadata``. The
        message moves to the ``response`` source (it is saved with the run).

        Raises:
            MessageFormatError: a malformed dict, a part without a tool call
                id, or an id that no assistant tool call in the list has (the
                message names it and the ids there are): a redaction that
                silently missed would let the raw value through.
        """
        fields = tool_part_fields(part)
        call_id = fields["tool_call_id"]
        if not isinstance(call_id, str) or not call_id:
            raise MessageFormatError(
                f"update_tool_invocation() got a part without a tool call id "
                f"(toolCallId): {short_repr(part)}; {self._tool_call_ids_said()}"
            )
        for message in reversed(self._messages):
            if message.role != "assistant":
                continue
            parts = message.content.parts
            for index, old in enumerate(parts):
                if (
                    isinstance(old, ToolInvocationPart)
                    and old.tool_invocation.tool_call_id == call_id
                ):
                    parts[index] = updated_tool_part(old, part, fields)
                    if metadata:
                        message.content.metadata = {
                            **(message.content.metadata or {}),
                            **metadata,
                        }
                    self._set_source(message, "response")
                    return True
        raise MessageFormatError(
            f"update_tool_invocation(): no assistant tool call has the id "
            f"{call_id!r}; {self._tool_call_ids_said()}"
        )

    def _tool_call_ids_said(self) -> str:
        """The tool-call ids ``update_tool_invocation`` can find, in words."""
        ids = [
            part.tool_invocation.tool_call_id
            for message in self._messages
            if message.role == "assistant"
            for part in message.content.parts
            if isinstance(part, ToolInvocationPart)
        ]
        if not ids:
            return "the message list has no assistant tool calls"
        return f"the tool call ids in the message list are {', '.join(map(repr, ids))}"

    # --------------------------------------------------------- system messages

    def add_system(
        self, messages: SystemInput | Iterable[SystemInput], tag: str | None = None
    ) -> MessageList:
        """Add system messages to the untagged bucket, or to the ``tag`` bucket.

        Each is a str, a ``SystemMessage``, a ``Message`` with role system, or a
        ``{"role": "system", "content": ...}`` dict. A message whose content is
        already in that bucket is skipped. Another role raises
        ``MessageFormatError``. All are checked before any is added.
        """
        parsed = [
            parse_system_message(item)
            for item in _iter_inputs(messages, what="add_system()")
        ]
        for message in parsed:
            self._add_system_one(message, tag)
        return self

    def _add_system_one(self, message: SystemMessage, tag: str | None) -> None:
        bucket = self._system if tag is None else self._tagged.setdefault(tag, [])
        if all(existing.content != message.content for existing in bucket):
            bucket.append(message)

    def get_system_messages(self, tag: str | None = None) -> list[SystemMessage]:
        """The system messages with ``tag`` (``None``: the untagged ones)."""
        if tag is None:
            return list(self._system)
        return list(self._tagged.get(tag, ()))

    def get_all_system_messages(self) -> list[SystemMessage]:
        """Every system message: the untagged ones, then each tagged bucket in
        the order the tags were first used."""
        out = list(self._system)
        for bucket in self._tagged.values():
            out.extend(bucket)
        return out

    def get_tagged_system_messages(self) -> dict[str, list[SystemMessage]]:
        """The tagged buckets (a copy)."""
        return {tag: list(bucket) for tag, bucket in self._tagged.items() if bucket}

    def clear_system_messages(self, tag: str | None = None) -> None:
        """Empty the untagged bucket, or the ``tag`` bucket."""
        if tag is None:
            self._system.clear()
        else:
            self._tagged.pop(tag, None)

    def replace_all_system_messages(
        self, messages: SystemInput | Iterable[SystemInput]
    ) -> None:
        """Clear the untagged *and* tagged buckets and add ``messages`` as
        untagged (Mastra's per-step reset). To keep tags, use
        ``snapshot_system_messages`` / ``restore_system_messages``. A non-system
        entry raises ``MessageFormatError`` and changes nothing."""
        parsed = [
            parse_system_message(item)
            for item in _iter_inputs(messages, what="replace_all_system_messages()")
        ]
        self._system = []
        self._tagged = {}
        for message in parsed:
            self._add_system_one(message, None)

    def snapshot_system_messages(self) -> SystemSnapshot:
        """The system messages now, with their tags, for
        ``restore_system_messages``."""
        return SystemSnapshot(
            untagged=tuple(self._system),
            tagged=tuple((tag, tuple(b)) for tag, b in self._tagged.items() if b),
        )

    def restore_system_messages(self, snapshot: SystemSnapshot) -> None:
        """Put the system messages back as they were in ``snapshot``."""
        self._system = list(snapshot.untagged)
        self._tagged = {tag: list(bucket) for tag, bucket in snapshot.tagged}

    # ------------------------------------------------------------ conveniences

    def get_by_id(self, message_id: str) -> Message | None:
        """The message with this id, or ``None``."""
        index = self._index(message_id)
        return None if index is None else self._messages[index]

    def get_source(self, message: Message | str) -> Source | None:
        """Where the message (or message id) came from; ``None`` if it is not in
        the list."""
        return self._sources.get(message if isinstance(message, str) else message.id)

    def step_start(self, model: str | None = None) -> bool:
        """Append a ``step-start`` part to the newest assistant message, unless
        its last part already is one. Returns whether a part was added."""
        for message in reversed(self._messages):
            if message.role == "assistant":
                parts = message.content.parts
                if parts and isinstance(parts[-1], StepStartPart):
                    return False
                parts.append(StepStartPart(model=model))
                if self._sources[message.id] != "memory":
                    self._unsaved.add(message.id)
                return True
        return False

    def mark_response_message_boundary(self, id: str | None = None) -> bool:
        """Stop the next assistant message from merging into this one.

        Marks the message ``id`` (default: the newest assistant message) with
        ``content.metadata["mastra"]["responseBoundary"] = True``. Returns
        whether a message was marked.
        """
        target: Message | None
        if id is not None:
            target = self.get_by_id(id)
        else:
            target = next(
                (m for m in reversed(self._messages) if m.role == "assistant"), None
            )
        if target is None:
            return False
        metadata = target.content.metadata = dict(target.content.metadata or {})
        metadata["mastra"] = {
            **(metadata.get("mastra") or {}),
            "responseBoundary": True,
        }
        return True

    def get_latest_user_content(self) -> str | None:
        """The text of the newest user message (``message_text``), or ``None``."""
        for message in reversed(self._messages):
            if message.role == "user":
                return message_text(message)
        return None

    def to_snapshot(self) -> dict[str, Any]:
        """The list as JSON (a paused run keeps it): every message in Mastra DB
        form with its source, the system messages (tags kept), and which
        messages are not saved yet. ``from_snapshot`` reads it back."""
        return {
            "threadId": self.thread_id,
            "resourceId": self.resource_id,
            "messages": [
                {"source": self._sources[m.id], "message": message_to_wire(m)}
                for m in self._messages
            ],
            "system": [_system_wire(m) for m in self._system],
            "tagged": {
                tag: [_system_wire(m) for m in bucket]
                for tag, bucket in self._tagged.items()
            },
            "unsaved": sorted(self._unsaved),
        }

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Any]) -> MessageList:
        """A list as ``to_snapshot`` wrote it (``MessageFormatError`` for a
        message that does not read back)."""
        made = cls(thread_id=data.get("threadId"), resource_id=data.get("resourceId"))
        for item in data.get("messages", ()):
            message = message_from_wire(item["message"])
            made._messages.append(message)
            made._sources[message.id] = _check_source(item["source"])
            made._note_created(message)
        made._system = [_system_from_wire(m) for m in data.get("system", ())]
        made._tagged = {
            tag: [_system_from_wire(m) for m in bucket]
            for tag, bucket in dict(data.get("tagged", {})).items()
        }
        made._unsaved = {i for i in data.get("unsaved", ()) if i in made._sources}
        return made

    def drain_unsaved_messages(self) -> list[Message]:
        """The input and response messages added or changed since the last
        drain, in conversation order; then forgets them. (For persistence.)"""
        unsaved, self._unsaved = self._unsaved, set()
        return [
            m
            for m in self._messages
            if m.id in unsaved and self._sources[m.id] != "memory"
        ]

    def __len__(self) -> int:
        """The number of (non-system) messages."""
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        """The (non-system) messages in conversation order, as ``get.all.db()``."""
        return iter(list(self._messages))

    def __repr__(self) -> str:
        counts = dict.fromkeys(("memory", "input", "response"), 0)
        for source in self._sources.values():
            counts[source] += 1
        tagged = sum(len(b) for b in self._tagged.values())
        return (
            f"<MessageList thread_id={self.thread_id!r}: {len(self._messages)} "
            f"messages (memory={counts['memory']}, input={counts['input']}, "
            f"response={counts['response']}), system={len(self._system)}"
            f"+{tagged} tagged>"
        )

    # ---------------------------------------------------------- reconciliation

    def reconcile(
        self,
        returned: Iterable[Message | SystemMessage | Mapping[str, Any]],
        *,
        scope: Literal["input", "all", "response"],
        default_source: Source,
        system_messages: Iterable[SystemInput] | None = None,
        processor_id: str = "<unknown>",
        hook: str = "<hook>",
    ) -> None:
        """Make the list agree with the messages a hook returned (SPEC §2.11).

        ``scope`` is what the hook was shown: ``"input"`` (``process_input``),
        ``"all"`` (step and tool hooks) or ``"response"``
        (``process_output_result``).

        - Messages in ``scope`` whose id is absent from ``returned`` are removed.
        - Returned messages keep their original source (a new id gets
          ``default_source``) and take the returned order, as one block where the
          scope's first message was (unrelated messages keep their places). Inside
          the block a new assistant message right after another merges into it,
          as ``add`` does. A returned object with a known id replaces the stored
          one.
        - Entries with role system (a ``SystemMessage``, a system ``Message`` or
          dict) become untagged system messages (text: ``content.content``, else
          the text parts joined by newlines).
        - ``system_messages``, if given, replaces the untagged system bucket
          first (tagged buckets stay).

        Returning the stored objects unchanged is a no-op; returning the same ids
        in the same order replaces objects in place without moving anything.

        Everything is checked before anything changes: an entry that is not a
        message, a malformed one, or an id returned twice raises
        ``ProcessorContractError`` naming ``processor_id`` and ``hook``.
        """
        self._apply(
            reconcile(
                returned,
                messages=self._messages,
                sources=self._sources,
                generate_id=self._generate_id,
                scope=scope,
                default_source=default_source,
                system_messages=system_messages,
                processor_id=processor_id,
                hook=hook,
            )
        )

    def _apply(self, plan: Reconciliation) -> None:
        """Make the changes ``reconcile`` worked out (and checked)."""
        if plan.system_replacement is not None:
            self._system = []
            for system in plan.system_replacement:
                self._add_system_one(system, None)
        for system in plan.systems:
            self._add_system_one(system, None)
        if plan.in_place is not None:
            for message in plan.in_place:
                index = self._index(message.id)
                assert index is not None
                if self._messages[index] is not message:
                    self._stamp(message)
                    self._messages[index] = message
                    self._set_source(message, self._sources[message.id])
            return
        block, block_sources, changed = fold(plan.block, self._take_new)
        self._messages = [*plan.before, *block, *plan.after]
        sources = self._sources
        for gone in plan.touched - block_sources.keys():
            sources.pop(gone, None)
            self._unsaved.discard(gone)
        for message_id, source in block_sources.items():
            sources[message_id] = source
            if source != "memory" and message_id in changed:
                self._unsaved.add(message_id)

    def _take_new(self, message: Message, source: Source) -> None:
        """A message new to the list, taken in as ``add`` does: stamped, and
        (a response) dated after the newest message so far."""
        self._stamp(message)
        if source == "response":
            self._make_monotonic(message)
        if source != "memory":
            self._note_created(message)


# --------------------------------------------------------------------- helpers


def _check_source(source: object) -> Source:
    if source == "user":  # Mastra's legacy alias
        return "input"
    if source not in _SOURCES:
        raise ConfigurationError(
            f"unknown message source {source!r}; expected 'input', 'memory' or "
            f"'response'"
        )
    return cast(Source, source)


def _iter_inputs(value: object, *, what: str) -> Iterator[Any]:
    if isinstance(value, str | Message | SystemMessage | Mapping):
        yield value
    elif isinstance(value, Iterable):
        yield from value
    else:
        raise MessageFormatError(
            f"{what} got {short_repr(value)}; expected a message or an iterable of "
            f"messages"
        )


def _aware(moment: _dt.datetime) -> _dt.datetime:
    # Naive datetimes from callers are taken as UTC, so comparisons never fail.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def _system_wire(message: SystemMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"content": message.content}
    if message.provider_options is not None:
        out["providerOptions"] = message.provider_options
    return out


def _system_from_wire(data: Mapping[str, Any]) -> SystemMessage:
    return SystemMessage(
        content=str(data.get("content", "")),
        provider_options=data.get("providerOptions"),
    )
