"""How a ``MessageList`` takes in changes: merging and reconciling.

Three rules live here, each acting on the list it is given:

- *merging* (Mastra's ``MessageMerger``): a new assistant message right after an
  assistant message folds into it (``should_merge`` / ``merge``);
- *updating a tool call* with its result (``tool_part_fields`` /
  ``updated_tool_part``), for ``MessageList.update_tool_invocation``;
- *reconciling* the list with the messages a hook returned (``reconcile``), for
  ``MessageList.reconcile``, whose docstring is the contract (SPEC §2.11).

They are the list's own behaviour, kept apart so that ``_message_list`` stays a
store a reader can hold. None of them touches the list: they are given what
they read, and ``reconcile`` returns a plan (``Reconciliation``) that the list
applies itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NoReturn, Protocol, TypeAlias, get_args

import attrs

from .._errors import MessageFormatError, ProcessorContractError
from ..data import (
    DataPart,
    Message,
    StepStartPart,
    SystemMessage,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    ToolInvocationState,
    joined_text,
)
from ..wire import parse_message, parse_system_message

__all__ = [
    "Placed",
    "Reconciliation",
    "Source",
    "SystemInput",
    "fold",
    "merge",
    "reconcile",
    "short_repr",
    "should_merge",
    "tool_part_fields",
    "updated_tool_part",
]

Source: TypeAlias = Literal["input", "memory", "response"]
"""Where a message came from: ``memory`` (loaded history), ``input`` (the new user
turn) or ``response`` (generated in this run)."""

SystemInput: TypeAlias = str | SystemMessage | Message | Mapping[str, Any]
"""What the system-message methods accept for one system message."""

_TOOL_STATES: frozenset[str] = frozenset(get_args(ToolInvocationState))
_MERGE_STATES = frozenset(
    {"approval-requested", "approval-responded", "output-denied", "output-error"}
)


def short_repr(value: object, limit: int = 160) -> str:
    """``repr(value)``, cut to ``limit`` characters, to quote in an error."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --------------------------------------------------------------------- merging


def should_merge(latest: Message, incoming: Message, source: str) -> bool:
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


def merge(latest: Message, incoming: Message) -> None:
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


# ------------------------------------------------------------ tool results

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


def _pick(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data[camel] if camel in data else data.get(snake)


def tool_part_fields(part: object) -> dict[str, Any]:
    """The fields of a tool-invocation part given as an object or a dict."""
    if isinstance(part, ToolInvocationPart):
        return {"tool_call_id": part.tool_invocation.tool_call_id}
    if not isinstance(part, Mapping):
        raise MessageFormatError(
            f"update_tool_invocation() got {short_repr(part)}; expected a "
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
            f"update_tool_invocation() got {short_repr(part)} without a "
            f"'toolInvocation' object; expected {{'type': 'tool-invocation', "
            f"'toolInvocation': {{'state', 'toolCallId', 'toolName', 'args', "
            f"'result'}}}}"
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


def updated_tool_part(
    old: ToolInvocationPart,
    new: ToolInvocationPart | Mapping[str, Any],
    fields: dict[str, Any],
) -> ToolInvocationPart:
    """``new`` (with ``fields`` from ``tool_part_fields``) as the replacement of
    ``old``: ``old``'s args kept, ``provider_executed`` kept unless ``new`` sets
    it, ``provider_metadata`` merged (old, then new)."""
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


# ---------------------------------------------------------- reconciliation


class _Fail(Protocol):
    def __call__(
        self, problem: str, cause: BaseException | None = None
    ) -> NoReturn: ...


@attrs.frozen
class Placed:
    """A returned message as it goes into the new block."""

    message: Message
    source: Source
    """The source it keeps (``default_source`` for a new id)."""
    stored: Message | None
    """What the list held under its id (``None``: a new id)."""


@attrs.frozen
class Reconciliation:
    """What ``MessageList.reconcile`` changes, worked out and checked before
    anything changes (``reconcile``); the list applies it itself. System
    messages first, then the conversation: either ``in_place`` or the
    ``block`` between ``before`` and ``after``."""

    system_replacement: tuple[SystemMessage, ...] | None
    """The new untagged system messages, if the hook replaced them."""
    systems: tuple[SystemMessage, ...]
    """Untagged system messages to add (the returned entries with role system)."""
    in_place: tuple[Message, ...] | None
    """The same ids as the scope, in the same order: each object takes the
    place and the source of the stored one with its id (``None``: the block
    below instead)."""
    before: tuple[Message, ...] = ()
    """The messages the block does not touch, before it."""
    block: tuple[Placed, ...] = ()
    """The returned messages, in the returned order (``fold`` merges them)."""
    after: tuple[Message, ...] = ()
    """The messages the block does not touch, after it."""
    touched: frozenset[str] = frozenset()
    """The ids of the scope and of the returned messages: those that are not
    in the block once folded are gone from the list."""


def reconcile(
    returned: Iterable[Message | SystemMessage | Mapping[str, Any]],
    *,
    messages: Sequence[Message],
    sources: Mapping[str, Source],
    generate_id: Callable[[], str],
    scope: str,
    default_source: Source,
    system_messages: Iterable[SystemInput] | None,
    processor_id: str,
    hook: str,
) -> Reconciliation:
    """What makes a list of ``messages`` (from ``sources``, by id) agree with
    ``returned``, as ``MessageList.reconcile`` promises. Everything is checked
    here, and nothing is changed (``generate_id`` makes the ids of new
    messages): a violation raises ``ProcessorContractError`` naming
    ``processor_id`` and ``hook``."""

    def fail(problem: str, cause: BaseException | None = None) -> NoReturn:
        raise ProcessorContractError(processor_id, hook, problem) from cause

    if isinstance(returned, str | Mapping | Message | SystemMessage) or not (
        isinstance(returned, Iterable)
    ):
        fail(f"returned {short_repr(returned)}; expected a list of messages")
    live = {m.id: m for m in messages}
    conversation, systems = _read_returned(live, returned, generate_id, fail)
    replacement = (
        None
        if system_messages is None
        else tuple(_read_system_replacement(system_messages, fail))
    )
    in_scope = [m for m in messages if scope == "all" or sources[m.id] == scope]
    if _same_ids(in_scope, conversation):
        return Reconciliation(replacement, tuple(systems), tuple(conversation))
    scope_ids = {m.id for m in in_scope}
    returned_ids = {m.id for m in conversation}
    kept, anchor = _kept_and_anchor(messages, sources, scope_ids, returned_ids, scope)
    return Reconciliation(
        replacement,
        tuple(systems),
        None,
        before=tuple(kept[:anchor]),
        block=tuple(
            Placed(m, sources.get(m.id, default_source), live.get(m.id))
            for m in conversation
        ),
        after=tuple(kept[anchor:]),
        touched=frozenset(scope_ids | returned_ids),
    )


def _read_returned(
    live: Mapping[str, Message],
    returned: Iterable[object],
    generate_id: Callable[[], str],
    fail: _Fail,
) -> tuple[list[Message], list[SystemMessage]]:
    """The returned entries as conversation messages and system messages, each
    checked; the stored objects among them (``live``, by id) are taken as they
    are."""
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
                f"returned {short_repr(entry)} at index {index}; expected a Message "
                f"(or a Mastra message dict)"
            )
        try:
            message = parse_message(entry, generate_id=generate_id)
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
    return conversation, systems


def _read_system_replacement(
    system_messages: Iterable[SystemInput], fail: _Fail
) -> list[SystemMessage]:
    if isinstance(system_messages, str | Mapping):
        fail(
            f"returned system_messages={short_repr(system_messages)}; expected a "
            f"list of system messages"
        )
    try:
        return [parse_system_message(item) for item in system_messages]
    except MessageFormatError as error:
        fail(f"returned an invalid system message: {error}", error)


def _same_ids(in_scope: list[Message], returned: list[Message]) -> bool:
    """Whether ``returned`` has the ids of ``in_scope`` in the same order (then
    each new object takes its stored one's place and source)."""
    if len(in_scope) != len(returned):
        return False
    return all(a is b or a.id == b.id for a, b in zip(in_scope, returned, strict=True))


def _kept_and_anchor(
    messages: Sequence[Message],
    sources: Mapping[str, Source],
    scope_ids: set[str],
    returned_ids: set[str],
    scope: str,
) -> tuple[list[Message], int]:
    """The messages the block does not touch, in order, and the index among them
    where the block goes: where the scope's first message was."""
    kept: list[Message] = []
    anchor: int | None = None
    for message in messages:
        if anchor is None and message.id in scope_ids:
            anchor = len(kept)
        if message.id not in scope_ids and message.id not in returned_ids:
            kept.append(message)
    if anchor is not None:
        return kept, anchor
    if scope == "input":
        # New input goes before this run's response, if there is one.
        return kept, next(
            (i for i, m in enumerate(kept) if sources[m.id] == "response"), len(kept)
        )
    return kept, len(kept)


def fold(
    block: Iterable[Placed], take_new: Callable[[Message, Source], None]
) -> tuple[list[Message], dict[str, Source], set[str]]:
    """A ``Reconciliation``'s block as it goes in: each new message first
    taken in by the list (``take_new``: stamped and dated as ``add`` does),
    assistant runs merged. Returns the block, each id's source and the
    changed ids."""
    folded: list[Message] = []
    folded_sources: dict[str, Source] = {}
    changed: set[str] = set()
    for placed in block:
        message, source = placed.message, placed.source
        if placed.stored is None:
            take_new(message, source)
        if placed.stored is not message:
            changed.add(message.id)
        previous = folded[-1] if folded else None
        if previous is not None and should_merge(previous, message, source):
            merge(previous, message)
            changed.add(previous.id)
            if source == "response":
                folded_sources[previous.id] = "response"
            continue
        folded.append(message)
        folded_sources[message.id] = source
    return folded, folded_sources, changed
