"""The provider-neutral prompt: what a model provider receives.

This is Mastra's ``LanguageModelV2Prompt`` (the AI SDK's "model messages"): a list
of system, user, assistant and tool messages whose contents are tuples of parts.
Unlike conversation messages, prompt messages are immutable values: a
``process_llm_request`` hook that wants a different prompt builds a new one, and
the change never flows back into the ``MessageList`` (seed: the returned prompt
only reaches the current call).

``to_prompt_messages`` turns conversation messages (``Message``, Mastra's DB shape)
into this form, following the AI SDK's ``convertToModelMessages``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal, TypeAlias

import attrs

from ._messages import (
    FilePart,
    Message,
    ReasoningPart,
    StepStartPart,
    TextPart,
    ToolInvocationPart,
)

__all__ = [
    "DECLINED_TEXT",
    "Prompt",
    "PromptAssistantMessage",
    "PromptAssistantPart",
    "PromptFilePart",
    "PromptMessage",
    "PromptReasoningPart",
    "PromptSystemMessage",
    "PromptTextPart",
    "PromptToolCallPart",
    "PromptToolMessage",
    "PromptToolResultPart",
    "PromptUserMessage",
    "PromptUserPart",
    "ProviderOptions",
    "joined_text",
    "to_prompt_messages",
]

ProviderOptions: TypeAlias = dict[str, Any]
"""Provider-specific options, keyed by provider name (e.g. ``{"anthropic":
{"cacheControl": {"type": "ephemeral"}}}``)."""

# --------------------------------------------------------------------------- parts


@attrs.frozen
class PromptTextPart:
    """Text."""

    text: str
    provider_options: ProviderOptions | None = attrs.field(default=None, kw_only=True)
    type: Literal["text"] = attrs.field(default="text", init=False)


@attrs.frozen
class PromptReasoningPart:
    """A block of model reasoning sent back to the provider.

    ``signature`` is the provider's signature over ``text`` (Anthropic rejects a
    follow-up request whose thinking blocks lost it); ``redacted_data`` holds a
    redacted block's opaque data (then ``text`` is empty).
    """

    text: str
    signature: str | None = None
    redacted_data: str | None = None
    provider_options: ProviderOptions | None = attrs.field(default=None, kw_only=True)
    type: str = attrs.field(default="reasoning", kw_only=True)
    """``"reasoning"``, or the type a processor gave the message part (the
    seed's ReasoningTransformer renames it ``"thinking"``): the edit reaches
    the request. Providers recognise the part by its class either way."""


@attrs.frozen
class PromptToolCallPart:
    """A tool call the assistant made. ``provider_executed`` marks tools the
    provider ran itself (e.g. a hosted web search)."""

    tool_call_id: str
    tool_name: str
    args: Any
    provider_executed: bool | None = attrs.field(default=None, kw_only=True)
    provider_options: ProviderOptions | None = attrs.field(default=None, kw_only=True)
    type: Literal["tool-call"] = attrs.field(default="tool-call", init=False)


@attrs.frozen
class PromptToolResultPart:
    """The result of a tool call; ``is_error`` when the tool failed (then
    ``result`` is the error text)."""

    tool_call_id: str
    tool_name: str
    result: Any
    is_error: bool = False
    provider_executed: bool | None = attrs.field(default=None, kw_only=True)
    provider_options: ProviderOptions | None = attrs.field(default=None, kw_only=True)
    type: Literal["tool-result"] = attrs.field(default="tool-result", init=False)


@attrs.frozen
class PromptFilePart:
    """A file: ``data`` is base64 text or a URL."""

    data: str
    mime_type: str
    filename: str | None = None
    provider_options: ProviderOptions | None = attrs.field(default=None, kw_only=True)
    type: Literal["file"] = attrs.field(default="file", init=False)


PromptUserPart: TypeAlias = PromptTextPart | PromptFilePart
PromptAssistantPart: TypeAlias = (
    PromptTextPart
    | PromptReasoningPart
    | PromptToolCallPart
    | PromptFilePart
    # Only for provider-executed tools, whose results live in the assistant turn.
    | PromptToolResultPart
)


# ------------------------------------------------------------------------ messages

# One converter per content type: mypy's attrs plugin cannot bind a generic one.


def _user_parts(parts: Iterable[PromptUserPart]) -> tuple[PromptUserPart, ...]:
    return tuple(parts)


def _assistant_parts(
    parts: Iterable[PromptAssistantPart],
) -> tuple[PromptAssistantPart, ...]:
    return tuple(parts)


def _tool_parts(
    parts: Iterable[PromptToolResultPart],
) -> tuple[PromptToolResultPart, ...]:
    return tuple(parts)


@attrs.frozen
class PromptSystemMessage:
    """System instructions."""

    content: str
    provider_options: ProviderOptions | None = None
    role: Literal["system"] = attrs.field(default="system", init=False)


@attrs.frozen
class PromptUserMessage:
    """A user turn (text and files)."""

    content: tuple[PromptUserPart, ...] = attrs.field(converter=_user_parts)
    provider_options: ProviderOptions | None = None
    role: Literal["user"] = attrs.field(default="user", init=False)


@attrs.frozen
class PromptAssistantMessage:
    """One assistant step: text, reasoning, files and tool calls, in order."""

    content: tuple[PromptAssistantPart, ...] = attrs.field(converter=_assistant_parts)
    provider_options: ProviderOptions | None = None
    role: Literal["assistant"] = attrs.field(default="assistant", init=False)


@attrs.frozen
class PromptToolMessage:
    """The results of the tool calls of the assistant message before it."""

    content: tuple[PromptToolResultPart, ...] = attrs.field(converter=_tool_parts)
    provider_options: ProviderOptions | None = None
    role: Literal["tool"] = attrs.field(default="tool", init=False)


PromptMessage: TypeAlias = (
    PromptSystemMessage | PromptUserMessage | PromptAssistantMessage | PromptToolMessage
)
Prompt: TypeAlias = list[PromptMessage]


# ---------------------------------------------------------------------- conversion

_RESULT_STATES = frozenset({"result", "output-error", "output-denied"})

DECLINED_TEXT = "Tool call was not approved by the user"
"""What the model reads as the result of a declined call with no reason of
its own (Mastra's words)."""
"""Tool-invocation states that carry something to send back as a tool result."""


def to_prompt_messages(messages: Iterable[Message]) -> list[PromptMessage]:
    """Convert conversation messages to the prompt a model provider receives.

    Follows the AI SDK's ``convertToModelMessages``:

    - user (and ``signal``) messages keep their text and file parts;
    - assistant messages keep text, reasoning, file and tool-invocation parts in
      order. Each tool invocation becomes a tool-call part (except one still
      waiting for its result, state ``call``: a pending approval); one that finished
      (state ``result``, ``output-error`` or ``output-denied``) also yields a
      tool-result part in a tool message that follows the assistant message. A
      message holding several steps (``step-start`` parts) becomes one
      assistant/tool pair per step. A text, reasoning or file part that comes
      after a finished tool call without a ``step-start`` in between also starts a
      new step: the model can only have written it after seeing the result.
      Provider-executed tool results stay inside the assistant message;
    - reasoning parts are recognised by class, so one whose ``type`` was renamed
      (e.g. to ``"thinking"``) is still sent, with that ``type``; each text
      detail becomes one reasoning part with its signature, each redacted detail
      one with its data;
    - ``data-*``, source, ``step-start`` and unknown parts are not sent; every
      other part is sent whatever its ``visibility`` (``"llm"`` means "for the
      model only", so it is sent too);
    - a message whose parts are empty falls back to its legacy ``content.content``
      text; messages that end up with no content are dropped;
    - a ``system`` message becomes a system prompt message;
    - ``part.provider_metadata`` becomes the prompt part's ``provider_options``
      and ``content.provider_metadata`` the message's (on the last assistant
      message when a message splits into steps).

    Does not modify its input.
    """
    out: list[PromptMessage] = []
    for message in messages:
        out.extend(_convert(message))
    return out


def _convert(message: Message) -> Iterator[PromptMessage]:
    content = message.content
    options = content.provider_metadata
    if message.role == "system":
        text = joined_text(message, sep="\n")
        if text:
            yield PromptSystemMessage(text, provider_options=options)
        return
    if message.role == "assistant":
        yield from _convert_assistant(message)
        return
    # "user", and "signal" rows, which Mastra shows the model as user messages.
    parts: list[PromptUserPart] = []
    for part in content.parts:
        if isinstance(part, TextPart):
            parts.append(PromptTextPart(part.text, provider_options=_opts(part)))
        elif isinstance(part, FilePart):
            parts.append(_file(part))
    if not content.parts and content.content:
        parts.append(PromptTextPart(content.content))
    if parts:
        yield PromptUserMessage(parts, provider_options=options)


def _convert_assistant(message: Message) -> Iterator[PromptMessage]:
    content = message.content
    steps: list[tuple[list[PromptAssistantPart], list[PromptToolResultPart]]] = []
    calls: list[PromptAssistantPart] = []
    results: list[PromptToolResultPart] = []
    awaiting_next_step = False

    def close_step() -> None:
        nonlocal calls, results, awaiting_next_step
        if calls or results:
            steps.append((calls, results))
        calls, results, awaiting_next_step = [], [], False

    for part in content.parts:
        if isinstance(part, StepStartPart):
            close_step()
            continue
        if isinstance(part, TextPart | ReasoningPart | FilePart) and awaiting_next_step:
            close_step()
        if isinstance(part, TextPart):
            calls.append(PromptTextPart(part.text, provider_options=_opts(part)))
        elif isinstance(part, ReasoningPart):
            calls.extend(_reasoning(part))
        elif isinstance(part, FilePart):
            calls.append(_file(part))
        elif isinstance(part, ToolInvocationPart):
            invocation = part.tool_invocation
            # A call still streaming its arguments is not a call yet; one with
            # no result (it waits for a person's approval) is left out, as
            # Mastra's filterIncompleteToolCalls does: a provider refuses a call
            # without its result.
            if invocation.state in ("partial-call", "call"):
                continue
            calls.append(
                PromptToolCallPart(
                    invocation.tool_call_id,
                    invocation.tool_name,
                    invocation.args,
                    provider_executed=part.provider_executed,
                    provider_options=_opts(part),
                )
            )
            if invocation.state not in _RESULT_STATES:
                continue
            result = _tool_result(part)
            if part.provider_executed:
                calls.append(result)
            else:
                results.append(result)
                awaiting_next_step = True
    close_step()

    if not steps and not content.parts and content.content:
        steps.append(([PromptTextPart(content.content)], []))
    for index, (step_calls, step_results) in enumerate(steps):
        last = index == len(steps) - 1
        if step_calls:
            yield PromptAssistantMessage(
                step_calls,
                provider_options=content.provider_metadata if last else None,
            )
        if step_results:
            yield PromptToolMessage(step_results)


def _reasoning(part: ReasoningPart) -> Iterator[PromptReasoningPart]:
    options = _opts(part)
    kind = part.type
    if not part.details:
        # Some providers (OpenAI) attach an encrypted reasoning item in the
        # metadata of an empty reasoning part; it must still be sent back.
        if part.reasoning or options:
            yield PromptReasoningPart(
                part.reasoning, provider_options=options, type=kind
            )
        return
    for detail in part.details:
        if detail.type == "redacted":
            yield PromptReasoningPart(
                "", redacted_data=detail.data, provider_options=options, type=kind
            )
        else:
            yield PromptReasoningPart(
                detail.text or "",
                signature=detail.signature,
                provider_options=options,
                type=kind,
            )


def _tool_result(part: ToolInvocationPart) -> PromptToolResultPart:
    invocation = part.tool_invocation
    if invocation.state == "result":
        result, is_error = invocation.result, False
    elif invocation.state == "output-error":
        result = invocation.error_text
        if result is None:
            result = invocation.result
        is_error = True
    else:  # output-denied: the model reads the reason as the result (Mastra)
        approval = invocation.approval
        reason = approval.get("reason") if isinstance(approval, dict) else None
        result = reason or DECLINED_TEXT
        is_error = False
    return PromptToolResultPart(
        invocation.tool_call_id,
        invocation.tool_name,
        result,
        is_error,
        provider_executed=part.provider_executed,
        provider_options=_opts(part),
    )


def _file(part: FilePart) -> PromptFilePart:
    return PromptFilePart(
        part.data, part.mime_type, part.filename, provider_options=_opts(part)
    )


def _opts(
    part: TextPart | ReasoningPart | FilePart | ToolInvocationPart,
) -> ProviderOptions | None:
    return part.provider_metadata or None


def joined_text(message: Message, *, sep: str = "\n") -> str:
    """``content.content`` if set, else the text parts joined by ``sep`` (the rule
    Mastra uses to turn a returned ``role: "system"`` message into a system
    message)."""
    if message.content.content is not None:
        return message.content.content
    return sep.join(p.text for p in message.content.parts if isinstance(p, TextPart))
