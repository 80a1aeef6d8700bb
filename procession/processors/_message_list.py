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
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, NoReturn, TypeAlias, cast, get_args

import attrs

from .._errors import (
    ConfigurationError,
    MessageFormatError,
    ProcessorContractError,
    WireFormatError,
)
from ..data import (
    DataPart,
    FilePart,
    Message,
    MessageContent,
    PromptMessage,
    PromptSystemMessage,
    StepStartPart,
    SystemMessage,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    ToolInvocationState,
    joined_text,
    message_text,
    new_message_id,
    to_prompt_messages,
    utc_now,
)
from ..wire import message_from_wire

__all__ = [
    "MessageInput",
    "MessageList",
    "MessageView",
    "MessageViews",
    "Source",
    "SystemInput",
    "SystemSnapshot",
]

_log = logging.getLogger("procession")

Source: TypeAlias = Literal["input", "memory", "response"]
"""Where a message came from: ``memory`` (loaded history), ``input`` (the new user
turn) or ``response`` (generated in this run)."""

MessageInput: TypeAlias = str | Message | SystemMessage | Mapping[str, Any]
"""What ``MessageList.add`` accepts for one message: a str (a user message), a
``Message``, a ``SystemMessage``, a Mastra DB-shaped dict (camelCase, ``content``
an object) or a simple ``{"role", "content"}`` dict whose content is a str or a
list of ``{"type": "text", "text": ...}`` parts."""

SystemInput: TypeAlias = str | SystemMessage | Message | Mapping[str, Any]
"""What the system-message methods accept for one system message."""

_SOURCES: frozenset[str] = frozenset(get_args(Source))
_ROLES = ("user", "assistant", "system", "signal")
_TOOL_STATES: frozenset[str] = frozenset(get_args(ToolInvocationState))
_MERGE_STATES = frozenset(
    {"approval-requested", "approval-responded", "output-denied", "output-error"}
)
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
        messages = self._list._messages
        if self._source is None:
            return list(messages)
        sources, source = self._list._sources, self._source
        return [m for m in messages if sources[m.id] == source]

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
    ``input``, ``response`` and ``remembered`` (memory)."""

    __slots__ = ("all", "input", "remembered", "response")

    def __init__(self, message_list: MessageList) -> None:
        self.all = MessageView(message_list, None)
        self.input = MessageView(message_list, "input")
        self.response = MessageView(message_list, "response")
        self.remembered = MessageView(message_list, "memory")


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
        self.get = MessageViews(self)
        """The views: ``get.all``, ``get.input``, ``get.response``,
        ``get.remembered``; each has ``.db()``, ``.core()`` and ``.prompt()``."""

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
            self._add_one(self._parse(item), source)
        return self

    def _add_one(self, message: Message | SystemMessage, source: Source) -> None:
        if isinstance(message, SystemMessage):
            if source != "memory":
                self._add_system_one(message, None)
            return
        _validate(message)
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
        if latest is not None and _should_merge(latest, message, source):
            _merge(latest, message)
            self._unsaved.add(latest.id)
            if source == "response":
                # It now holds generated content, which must be saved with the run.
                self._sources[latest.id] = "response"
            return
        self._messages.append(message)
        self._set_source(message, source)

    def _parse(self, item: object) -> Message | SystemMessage:
        if isinstance(item, Message | SystemMessage):
            return item
        if isinstance(item, str):
            return Message(
                id=self._generate_id(),
                role="user",
                content=MessageContent(parts=[TextPart(text=item)], content=item),
            )
        if isinstance(item, Mapping):
            return self._parse_mapping(item)
        raise MessageFormatError(
            f"cannot add {_short(item)}: expected a str, a Message, a SystemMessage "
            f"or a message dict"
        )

    def _parse_mapping(self, data: Mapping[str, Any]) -> Message | SystemMessage:
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
            return self._from_db_shape(data)
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
            id=data.get("id") or self._generate_id(),
            role=role,
            content=MessageContent(parts=parts, content=text),
        )

    def _from_db_shape(self, data: Mapping[str, Any]) -> Message:
        wire = dict(data)
        if "parts" in wire and not isinstance(wire.get("content"), Mapping):
            # AI SDK UI-message shape: parts at the top level.
            parts = wire.pop("parts")
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
            wire["id"] = self._generate_id()
        if wire.get("createdAt") is None:
            # Mastra's add() dates undated messages "now", so do we.
            wire["createdAt"] = utc_now().isoformat()
        try:
            return message_from_wire(wire)
        except WireFormatError as error:
            raise MessageFormatError(
                f"message {_short(data)} is not a valid Mastra message: {error}"
            ) from error

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
        """Replace a tool invocation (typically with its result) and return
        whether one was found.

        ``part`` is a ``ToolInvocationPart`` or a Mastra-shaped dict
        ``{"type": "tool-invocation", "toolInvocation": {"state", "toolCallId",
        "toolName", "args", "result", ...}}`` (snake_case keys work too).
        Searching newest message first, the first assistant ``tool-invocation``
        part with the same tool call id is replaced by ``part``, except that the
        original ``args`` are kept, ``provider_executed`` is kept unless ``part``
        sets it, and ``provider_metadata`` is merged (original, then new).
        ``metadata`` is merged into the message's ``content.metadata``. The
        message moves to the ``response`` source (it is saved with the run).

        Not found, or no tool call id: logs a warning on the ``procession``
        logger and returns ``False``. A malformed dict raises
        ``MessageFormatError``.
        """
        fields = _tool_part_fields(part)
        call_id = fields["tool_call_id"]
        if not isinstance(call_id, str) or not call_id:
            _log.warning("updateToolInvocation: the part has no toolCallId: %r", part)
            return False
        for message in reversed(self._messages):
            if message.role != "assistant":
                continue
            parts = message.content.parts
            for index, old in enumerate(parts):
                if (
                    isinstance(old, ToolInvocationPart)
                    and old.tool_invocation.tool_call_id == call_id
                ):
                    parts[index] = _updated_tool_part(old, part, fields)
                    if metadata:
                        message.content.metadata = {
                            **(message.content.metadata or {}),
                            **metadata,
                        }
                    self._set_source(message, "response")
                    return True
        _log.warning(
            "updateToolInvocation: no matching tool call found for toolCallId=%s",
            call_id,
        )
        return False

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
            _parse_system(item) for item in _iter_inputs(messages, what="add_system()")
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
            _parse_system(item)
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

        def fail(problem: str, cause: BaseException | None = None) -> NoReturn:
            raise ProcessorContractError(processor_id, hook, problem) from cause

        if isinstance(returned, str | Mapping | Message | SystemMessage) or not (
            isinstance(returned, Iterable)
        ):
            fail(f"returned {_short(returned)}; expected a list of messages")
        live = {m.id: m for m in self._messages}
        conversation: list[Message] = []
        systems: list[SystemMessage] = []
        for index, entry in enumerate(returned):
            if isinstance(entry, Message) and live.get(entry.id) is entry:
                # A stored object: in-place edits are allowed, even odd ones.
                conversation.append(entry)
                continue
            if isinstance(entry, SystemMessage):
                systems.append(entry)
                continue
            if not isinstance(entry, Message | Mapping):
                fail(
                    f"returned {_short(entry)} at index {index}; expected a Message "
                    f"(or a Mastra message dict)"
                )
            try:
                message = self._parse(entry)
                if isinstance(message, Message):
                    _validate(message)
            except MessageFormatError as error:
                fail(f"returned a malformed message at index {index}: {error}", error)
            if isinstance(message, SystemMessage):
                systems.append(message)
            elif message.role == "system":
                systems.append(SystemMessage(content=joined_text(message)))
            else:
                conversation.append(message)
        seen: set[str] = set()
        for message in conversation:
            if message.id in seen:
                fail(
                    f"returned two messages with the id {message.id!r}; each message "
                    f"may appear once"
                )
            seen.add(message.id)
        replacement: list[SystemMessage] | None = None
        if system_messages is not None:
            if isinstance(system_messages, str | Mapping):
                fail(
                    f"returned system_messages={_short(system_messages)}; expected a "
                    f"list of system messages"
                )
            try:
                replacement = [_parse_system(item) for item in system_messages]
            except MessageFormatError as error:
                fail(f"returned an invalid system message: {error}", error)

        if replacement is not None:
            self._system = []
            for system in replacement:
                self._add_system_one(system, None)
        for system in systems:
            self._add_system_one(system, None)
        self._reconcile_conversation(conversation, scope, default_source)

    def _reconcile_conversation(
        self, returned: list[Message], scope: str, default_source: Source
    ) -> None:
        sources = self._sources
        in_scope = [
            m for m in self._messages if scope == "all" or sources[m.id] == scope
        ]
        if len(in_scope) == len(returned):
            if all(a is b for a, b in zip(in_scope, returned, strict=True)):
                return
            if all(a.id == b.id for a, b in zip(in_scope, returned, strict=True)):
                for message in returned:
                    index = self._index(message.id)
                    assert index is not None
                    if self._messages[index] is not message:
                        self._stamp(message)
                        self._messages[index] = message
                        self._set_source(message, sources[message.id])
                return

        scope_ids = {m.id for m in in_scope}
        returned_ids = {m.id for m in returned}
        kept: list[Message] = []
        anchor: int | None = None
        for message in self._messages:
            if anchor is None and message.id in scope_ids:
                anchor = len(kept)
            if message.id not in scope_ids and message.id not in returned_ids:
                kept.append(message)
        if anchor is None:
            anchor = len(kept)
            if scope == "input":
                # New input goes before this run's response, if there is one.
                anchor = next(
                    (i for i, m in enumerate(kept) if sources[m.id] == "response"),
                    anchor,
                )

        live = {m.id: m for m in self._messages}
        block: list[Message] = []
        block_sources: dict[str, Source] = {}
        changed: set[str] = set()
        for message in returned:
            stored = live.get(message.id)
            source = sources.get(message.id, default_source)
            if stored is None:
                self._stamp(message)
                if source == "response":
                    self._make_monotonic(message)
                if source != "memory":
                    self._note_created(message)
            if stored is not message:
                changed.add(message.id)
            previous = block[-1] if block else None
            if previous is not None and _should_merge(previous, message, source):
                _merge(previous, message)
                changed.add(previous.id)
                if source == "response":
                    block_sources[previous.id] = "response"
                continue
            block.append(message)
            block_sources[message.id] = source

        self._messages = kept[:anchor] + block + kept[anchor:]
        for gone in (scope_ids | returned_ids) - block_sources.keys():
            sources.pop(gone, None)
            self._unsaved.discard(gone)
        for message_id, source in block_sources.items():
            sources[message_id] = source
            if source != "memory" and message_id in changed:
                self._unsaved.add(message_id)


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
            f"{what} got {_short(value)}; expected a message or an iterable of messages"
        )


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


def _parse_system(item: object) -> SystemMessage:
    if isinstance(item, SystemMessage):
        return item
    if isinstance(item, str):
        return SystemMessage(content=item)
    if isinstance(item, Message):
        if item.role != "system":
            raise MessageFormatError(
                f'Expected role "system" but saw {item.role!r} for message '
                f"{item.id!r}; add conversation messages with add()"
            )
        return SystemMessage(content=joined_text(item))
    if isinstance(item, Mapping):
        role = item.get("role")
        if role != "system":
            raise MessageFormatError(
                f'Expected role "system" but saw {role!r} in {_short(item)}; add '
                f"conversation messages with add()"
            )
        return _system_from_mapping(item)
    raise MessageFormatError(
        f"{_short(item)} is not a system message; expected a str, a SystemMessage "
        f'or a {{"role": "system", "content": ...}} dict'
    )


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


def _pick(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


_INVOCATION_KEYS = {
    "state": "state",
    "toolCallId": "tool_call_id",
    "toolName": "tool_name",
    "args": "args",
    "result": "result",
    "errorText": "error_text",
    "rawInput": "raw_input",
    "approval": "approval",
}


def _tool_part_fields(part: object) -> dict[str, Any]:
    """The fields of a tool-invocation part given as an object or a dict."""
    if isinstance(part, ToolInvocationPart):
        return {"tool_call_id": part.tool_invocation.tool_call_id}
    if not isinstance(part, Mapping):
        raise MessageFormatError(
            f"update_tool_invocation() got {_short(part)}; expected a "
            f"ToolInvocationPart or a dict like {{'type': 'tool-invocation', "
            f"'toolInvocation': {{'state': 'result', 'toolCallId': ..., ...}}}}"
        )
    if part.get("type", "tool-invocation") != "tool-invocation":
        raise MessageFormatError(
            f"update_tool_invocation() got a part of type {part.get('type')!r}; "
            f"expected 'tool-invocation'"
        )
    invocation = _pick(part, "toolInvocation", "tool_invocation")
    if not isinstance(invocation, Mapping):
        raise MessageFormatError(
            f"update_tool_invocation() got {_short(part)} without a 'toolInvocation' "
            f"object; expected {{'type': 'tool-invocation', 'toolInvocation': "
            f"{{'state', 'toolCallId', 'toolName', 'args', 'result'}}}}"
        )
    fields: dict[str, Any] = {"extra": {}}
    snake_keys = set(_INVOCATION_KEYS.values())
    for key, value in invocation.items():
        if key in _INVOCATION_KEYS:
            fields[_INVOCATION_KEYS[key]] = value
        elif key in snake_keys:
            fields.setdefault(key, value)
        else:
            fields["extra"][key] = value
    state = fields.get("state")
    if state not in _TOOL_STATES:
        raise MessageFormatError(
            f"update_tool_invocation() got the state {state!r}; expected one of "
            f"{', '.join(sorted(map(repr, _TOOL_STATES)))}"
        )
    fields.setdefault("tool_call_id", None)
    fields["part"] = {
        "provider_metadata": _pick(part, "providerMetadata", "provider_metadata"),
        "provider_executed": _pick(part, "providerExecuted", "provider_executed"),
        "title": part.get("title"),
        "preliminary": part.get("preliminary"),
    }
    return fields


def _updated_tool_part(
    old: ToolInvocationPart,
    new: ToolInvocationPart | Mapping[str, Any],
    fields: dict[str, Any],
) -> ToolInvocationPart:
    original = old.tool_invocation
    if isinstance(new, ToolInvocationPart):
        invocation = attrs.evolve(new.tool_invocation, args=original.args)
        provider_metadata = new.provider_metadata
        replacement = attrs.evolve(new, tool_invocation=invocation)
    else:
        invocation = ToolInvocation(
            state=fields["state"],
            tool_call_id=original.tool_call_id,
            tool_name=fields.get("tool_name") or original.tool_name,
            args=original.args,
            result=fields.get("result"),
            error_text=fields.get("error_text"),
            raw_input=fields.get("raw_input"),
            approval=fields.get("approval"),
            extra=fields["extra"],
        )
        extra = fields["part"]
        provider_metadata = extra["provider_metadata"]
        replacement = ToolInvocationPart(
            tool_invocation=invocation,
            provider_executed=extra["provider_executed"],
            title=extra["title"] if extra["title"] is not None else old.title,
            preliminary=extra["preliminary"],
            created_at=old.created_at,
            visibility=old.visibility,
        )
    if replacement.provider_executed is None:
        replacement.provider_executed = old.provider_executed
    if old.provider_metadata or provider_metadata:
        replacement.provider_metadata = {
            **(old.provider_metadata or {}),
            **(provider_metadata or {}),
        }
    if replacement.created_at is None:
        replacement.created_at = old.created_at
    return replacement


def _should_merge(latest: Message, incoming: Message, source: str) -> bool:
    """Mastra's rule for folding ``incoming`` into the message before it."""
    if source == "memory" or latest.role != "assistant" or incoming.role != "assistant":
        return False
    if latest.thread_id != incoming.thread_id:
        return False
    mastra = (latest.content.metadata or {}).get("mastra")
    if isinstance(mastra, Mapping) and (
        mastra.get("sealed") or mastra.get("responseBoundary")
    ):
        return False
    parts = latest.content.parts
    # A message of data parts only is a separate event, not a turn to continue.
    return not (parts and all(isinstance(p, DataPart) for p in parts))


def _merge(latest: Message, incoming: Message) -> None:
    """Fold ``incoming`` into ``latest`` (Mastra's ``MessageMerger``): a tool
    result (or approval / error / denial) updates the matching call in place; other
    parts are appended, with a ``step-start`` inserted before text that follows a
    tool call (the text belongs to the next step)."""
    target, added = latest.content, incoming.content
    if added.metadata:
        target.metadata = {**(target.metadata or {}), **added.metadata}
    parts = target.parts
    previous: object = None
    for part in added.parts:
        if isinstance(part, ToolInvocationPart):
            call_id = part.tool_invocation.tool_call_id
            existing = next(
                (
                    p
                    for p in reversed(parts)
                    if isinstance(p, ToolInvocationPart)
                    and p.tool_invocation.tool_call_id == call_id
                ),
                None,
            )
            if existing is not None:
                _merge_tool_part(existing, part)
                previous = part
                continue
        if (
            isinstance(part, TextPart)
            and parts
            and isinstance(parts[-1], ToolInvocationPart)
            and not isinstance(previous, StepStartPart)
        ):
            model = next(
                (p.model for p in reversed(parts) if isinstance(p, StepStartPart)), None
            )
            parts.append(StepStartPart(model=model))
        parts.append(part)
        previous = part
    if added.content:
        target.content = added.content


def _merge_tool_part(existing: ToolInvocationPart, update: ToolInvocationPart) -> None:
    old, new = existing.tool_invocation, update.tool_invocation
    if new.state == "result":
        existing.tool_invocation = attrs.evolve(
            old, state="result", result=new.result, args=_merge_args(old.args, new.args)
        )
    elif new.state in _MERGE_STATES:
        existing.tool_invocation = attrs.evolve(
            old,
            state=new.state,
            approval=new.approval,
            error_text=new.error_text,
            raw_input=new.raw_input,
            args=_merge_args(old.args, new.args),
        )
        if update.provider_executed is not None:
            existing.provider_executed = update.provider_executed
        if update.title is not None:
            existing.title = update.title
        if update.preliminary is not None:
            existing.preliminary = update.preliminary
    else:
        return  # a repeated call adds nothing
    if update.provider_metadata:
        existing.provider_metadata = {
            **(existing.provider_metadata or {}),
            **update.provider_metadata,
        }


def _merge_args(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **new}
    return old if new is None else new


def _aware(moment: _dt.datetime) -> _dt.datetime:
    # Naive datetimes from callers are taken as UTC, so comparisons never fail.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def _short(value: object, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
