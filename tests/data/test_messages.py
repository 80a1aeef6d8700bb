"""The message model: shape, the seed's text-reading rule, in-place mutability."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest

from procession.data import (
    DataPart,
    FilePart,
    Message,
    MessageContent,
    ReasoningDetail,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
    message_text,
    new_message_id,
    utc_now,
)
from procession.processors import (
    MessageList,
    PromptAssistantMessage,
    PromptReasoningPart,
    PromptTextPart,
    to_prompt_messages,
)


def _call(call_id: str = "c1") -> ToolInvocationPart:
    return ToolInvocationPart(
        tool_invocation=ToolInvocation(
            state="call", tool_call_id=call_id, tool_name="lookup", args={"q": 1}
        )
    )


# ------------------------------------------------------------------- the model


def test_user_and_assistant_constructors_fill_parts_and_legacy_content() -> None:
    user = Message.user("hi", id="u1", thread_id="t")
    assistant = Message.assistant("hello")
    assert (user.id, user.role, user.thread_id) == ("u1", "user", "t")
    assert user.content.parts == [TextPart(text="hi")]
    assert user.content.content == "hi"
    assert user.content.format == 2
    assert assistant.role == "assistant"
    assert assistant.content.parts == [TextPart(text="hello")]


def test_ids_are_unique_and_times_are_aware() -> None:
    assert new_message_id() != new_message_id()
    assert Message.user("a").id != Message.user("a").id
    assert utc_now().tzinfo is not None
    assert Message.user("a").created_at.tzinfo is not None
    assert isinstance(Message.user("a").created_at, dt.datetime)


def test_system_message_has_role_system() -> None:
    system = SystemMessage(content="be brief")
    assert system.role == "system"
    assert system.provider_options is None


def test_data_part_type_must_start_with_data() -> None:
    assert DataPart(type="data-progress", data={"pct": 5}).type == "data-progress"
    with pytest.raises(ValueError, match="must start with 'data-'"):
        DataPart(type="progress")


# ------------------------------------------------------------ the seed's getText


def test_message_text_concatenates_text_parts_only() -> None:
    message = Message(
        role="assistant",
        content=MessageContent(
            parts=[
                TextPart(text="Hello, "),
                _call(),
                FilePart(data="aGk=", mime_type="text/plain"),
                TextPart(text="world"),
            ],
            content="ignored because parts have text",
        ),
    )
    assert message_text(message) == "Hello, world"
    assert message.text == "Hello, world"


def test_message_text_falls_back_to_legacy_content_when_parts_are_empty() -> None:
    legacy = Message(role="user", content=MessageContent(parts=[], content="legacy"))
    assert message_text(legacy) == "legacy"


def test_message_text_falls_back_when_parts_hold_no_text() -> None:
    message = Message(
        role="assistant", content=MessageContent(parts=[_call()], content="flat")
    )
    assert message_text(message) == "flat"


def test_message_text_is_empty_without_text_or_legacy_content() -> None:
    message = Message(role="assistant", content=MessageContent(parts=[_call()]))
    assert message_text(message) == ""


def test_message_text_filters_by_type_string_as_the_seed_does() -> None:
    part = TextPart(text="hidden")
    part.type = "annotation"  # renamed in place: no longer a "text" part
    message = Message(
        role="user", content=MessageContent(parts=[part, TextPart(text="shown")])
    )
    assert message_text(message) == "shown"


# ------------------------------------------------------------------ mutability


def test_in_place_part_edits_are_seen_through_the_message_list() -> None:
    ml = MessageList().add("Hello WORLD", "input")
    for message in ml.get.input.db():
        for part in message.content.parts:
            if isinstance(part, TextPart):
                part.text = part.text.lower()
    assert ml.get.all.db()[0].text == "hello world"
    assert ml.get_latest_user_content() == "hello world"


def test_messages_are_mutable_but_compare_by_value() -> None:
    a = Message.user("x", id="same", created_at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    b = attrs.evolve(a, content=attrs.evolve(a.content, parts=[TextPart(text="x")]))
    assert a == b
    assert a is not b
    b.content.parts.append(TextPart(text="y"))
    assert a != b
    a.role = "assistant"
    assert a.role == "assistant"


def test_reasoning_transformer_renames_type_in_place_and_reasoning_still_sent() -> None:
    # The seed's ReasoningTransformer: part.type = 'thinking' on reasoning parts.
    reasoning = ReasoningPart(
        reasoning="think",
        details=[ReasoningDetail(type="text", text="think", signature="sig-1")],
    )
    ml = MessageList()
    ml.add(
        Message(
            role="assistant",
            content=MessageContent(parts=[reasoning, TextPart(text="answer")]),
        ),
        "response",
    )
    for message in ml.get.all.db():
        if message.role == "assistant":
            for part in message.content.parts:
                if part.type == "reasoning":
                    part.type = "thinking"
    stored = ml.get.all.db()[0].content.parts[0]
    assert stored is reasoning
    assert stored.type == "thinking"
    assert isinstance(stored, ReasoningPart)
    assert to_prompt_messages(ml.get.all.db()) == [
        PromptAssistantMessage(
            [
                PromptReasoningPart("think", signature="sig-1", type="thinking"),
                PromptTextPart("answer"),
            ]
        )
    ]
