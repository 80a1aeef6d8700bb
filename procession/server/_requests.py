"""Request bodies: what ``@mastra/client-js`` and the AI SDK's ``useChat``
send, read into one ``RunRequest``; every problem an ``HttpError(400)`` that
names the field."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs

from .._errors import MessageFormatError
from ..data import Message, SystemMessage, new_message_id
from ..runtime import USE_AGENT_DEFAULT, Agent, AgentStream, Durable, new_run_id
from ..wire import parse_message
from ._http import HttpError
from ._security import check_id

__all__ = [
    "ChatApproval",
    "RunRequest",
    "approval_answers",
    "parse_chat_body",
    "parse_run_body",
]


@attrs.frozen(kw_only=True)
class RunRequest:
    """One run asked for over HTTP: the input messages and the per-call options
    a client may set."""

    messages: tuple[Message | SystemMessage, ...]
    run_id: str = attrs.field(factory=new_run_id)
    """The client's ``runId``, or a new one."""
    thread_id: str | None = None
    resource_id: str | None = None
    request_context: Mapping[str, Any] = attrs.field(factory=dict)
    max_steps: int | None = None
    model_settings: Mapping[str, Any] | None = None
    provider_options: Mapping[str, Any] | None = None
    active_tools: tuple[str, ...] | None = None

    def stream(
        self, agent: Agent, *, durable: Durable | None = None
    ) -> AbstractAsyncContextManager[AgentStream]:
        """``agent.stream(...)`` for this request: its messages and the options
        it sets (an unset one keeps the agent's value); ``durable``: the
        server's (None: the agent's). Raises what ``Agent.stream`` raises."""
        return agent.stream(
            list(self.messages),
            request_context=dict(self.request_context),
            run_id=self.run_id,
            thread_id=self.thread_id,
            resource_id=self.resource_id,
            max_steps=USE_AGENT_DEFAULT if self.max_steps is None else self.max_steps,
            model_settings=self.model_settings,
            provider_options=self.provider_options,
            active_tools=None if self.active_tools is None else list(self.active_tools),
            durable=USE_AGENT_DEFAULT if durable is None else durable,
        )


def _messages(value: object, field: str) -> tuple[Message | SystemMessage, ...]:
    if value is None:
        raise HttpError(400, f"'{field}' is required", field=field)
    items = [value] if isinstance(value, str | Mapping) else value
    if not isinstance(items, list) or not items:
        raise HttpError(
            400,
            f"'{field}' must be a string, a message or a non-empty list of them, "
            f"got {_kind(value)}",
            field=field,
        )
    parsed = []
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        try:
            parsed.append(parse_message(item, generate_id=new_message_id))
        except MessageFormatError as exc:
            raise HttpError(400, f"{where}: {exc}", field=where) from exc
    return tuple(parsed)


def _optional_str(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise HttpError(
            400, f"'{key}' must be a non-empty string, got {_kind(value)}", field=key
        )
    return value


def _optional_object(
    body: Mapping[str, Any], key: str, prefix: str = ""
) -> Mapping[str, Any] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise HttpError(
            400,
            f"'{prefix}{key}' must be a JSON object, got {_kind(value)}",
            field=prefix + key,
        )
    return value


def _memory(body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``memory: {thread, resource}`` (``thread`` a string or ``{id}``), or the
    older top-level ``threadId`` / ``resourceId``."""
    thread = _optional_str(body, "threadId")
    resource = _optional_str(body, "resourceId")
    memory = _optional_object(body, "memory")
    if memory is not None:
        raw_thread = memory.get("thread")
        if isinstance(raw_thread, Mapping):
            raw_thread = raw_thread.get("id")
            field = "memory.thread.id"
        else:
            field = "memory.thread"
        if raw_thread is not None:
            if not isinstance(raw_thread, str) or not raw_thread:
                raise HttpError(
                    400,
                    f"'{field}' must be a non-empty string, got {_kind(raw_thread)}",
                    field=field,
                )
            thread = raw_thread
        raw_resource = memory.get("resource")
        if raw_resource is not None:
            if not isinstance(raw_resource, str) or not raw_resource:
                raise HttpError(
                    400,
                    f"'memory.resource' must be a non-empty string, got "
                    f"{_kind(raw_resource)}",
                    field="memory.resource",
                )
            resource = raw_resource
    return thread, resource


def _max_steps(body: Mapping[str, Any]) -> int | None:
    value = body.get("maxSteps")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HttpError(
            400,
            f"'maxSteps' must be an integer >= 1, got {_kind(value)}",
            field="maxSteps",
        )
    return value


def _active_tools(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = body.get("activeTools")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HttpError(
            400,
            f"'activeTools' must be a list of tool names, got {_kind(value)}",
            field="activeTools",
        )
    return tuple(value)


def parse_run_body(body: Mapping[str, Any]) -> RunRequest:
    """A Mastra ``stream`` / ``generate`` body: ``messages`` (a string, a list
    of strings, ``{role, content}`` messages with string or parts content, or
    Mastra / UI messages), ``memory: {thread, resource}``, ``requestContext``,
    ``runId`` (1 to 128 of ``A-Z a-z 0-9 _ . -``), ``maxSteps``,
    ``modelSettings``, ``providerOptions``, ``activeTools``. Other keys the
    client sends are ignored."""
    thread, resource = _memory(body)
    run_id = _optional_str(body, "runId")
    if run_id is not None:
        check_id(run_id, "runId")
    return RunRequest(
        messages=_messages(body.get("messages"), "messages"),
        **({"run_id": run_id} if run_id is not None else {}),
        thread_id=thread,
        resource_id=resource,
        request_context=_optional_object(body, "requestContext") or {},
        max_steps=_max_steps(body),
        model_settings=_optional_object(body, "modelSettings"),
        provider_options=_optional_object(body, "providerOptions"),
        active_tools=_active_tools(body),
    )


def parse_chat_body(body: Mapping[str, Any]) -> tuple[str | None, RunRequest]:
    """An AI SDK ``useChat`` body, ``{id, messages, trigger, messageId}``
    (plus, as in a Mastra body, ``memory: {thread, resource}`` and
    ``requestContext``): the chat id and the run. ``messages`` are UI
    messages (``parts``)."""
    chat_id = _optional_str(body, "id")
    if chat_id is not None:
        check_id(chat_id, "id")
    trigger = body.get("trigger")
    if trigger is not None and trigger not in ("submit-message", "regenerate-message"):
        raise HttpError(
            400,
            f"'trigger' must be 'submit-message' or 'regenerate-message', got "
            f"{_kind(trigger)}",
            field="trigger",
        )
    _optional_str(body, "messageId")
    thread, resource = _memory(body)
    return chat_id, RunRequest(
        messages=_messages(body.get("messages"), "messages"),
        thread_id=thread,
        resource_id=resource,
        request_context=_optional_object(body, "requestContext") or {},
    )


def _kind(value: object) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{type(value).__name__} {text}"


@attrs.frozen(kw_only=True)
class ChatApproval:
    """An answer to a waiting call, as ``useChat`` sends it back: a tool part
    of the last assistant message in state ``approval-responded``."""

    run_id: str
    tool_call_id: str
    approved: bool
    reason: str | None
    message_id: str | None
    """The assistant message the continuation goes on writing."""


def approval_answers(body: Mapping[str, Any]) -> list[ChatApproval]:
    """The approval answers in a chat body (``addToolApprovalResponse``):
    the tool parts of its last message, when that is the assistant's, in
    state ``approval-responded``, whose ``approval.id`` is
    ``<runId>::<toolCallId>`` (what the stream's ``tool-approval-request``
    said). A part that says so wrongly is a 400 naming it."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return []
    last = messages[-1]
    if not isinstance(last, Mapping) or last.get("role") != "assistant":
        return []
    parts = last.get("parts")
    if not isinstance(parts, list):
        return []
    found = []
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping) or part.get("state") != "approval-responded":
            continue
        where = f"messages[{len(messages) - 1}].parts[{index}]"
        approval = part.get("approval")
        if not isinstance(approval, Mapping) or not isinstance(
            approval.get("approved"), bool
        ):
            raise HttpError(
                400,
                f"'{where}.approval' must be {{id, approved, reason?}}",
                field=f"{where}.approval",
            )
        run_id, sep, call_id = str(approval.get("id", "")).rpartition("::")
        if not sep or not run_id or call_id != part.get("toolCallId"):
            raise HttpError(
                400,
                f"'{where}.approval.id' must be '<runId>::<toolCallId>' of this "
                f"part's call, as the stream's tool-approval-request gave it",
                field=f"{where}.approval.id",
            )
        check_id(run_id, f"{where}.approval.id")
        reason = approval.get("reason")
        found.append(
            ChatApproval(
                run_id=run_id,
                tool_call_id=call_id,
                approved=approval["approved"],
                reason=reason if isinstance(reason, str) else None,
                message_id=last.get("id") if isinstance(last.get("id"), str) else None,
            )
        )
    return found
