"""The input shapes MessageList accepts (str, Message, simple and Mastra
dicts, system-message forms), read by ``wire.parse_message`` /
``parse_system_message``, and how malformed ones are rejected."""

from __future__ import annotations

from typing import Any

import pytest

from procession import MessageFormatError
from procession.messages import (
    FilePart,
    Message,
    MessageContent,
    SystemMessage,
    TextPart,
    ToolInvocationPart,
)
from procession.processors import MessageList
from procession.wire import parse_message, parse_system_message
from tests.processors.message_list_helpers import user

# ======================================================================== add


def test_add_simple_core_dicts() -> None:
    ml = MessageList()
    ml.add({"role": "user", "content": "plain", "id": "a"}, "input")
    ml.add(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "file", "data": "aGk=", "mediaType": "image/png"},
            ],
        },
        "input",
    )
    first, second = ml.get.all.db()
    assert first.id == "a"
    assert first.text == "plain"
    assert first.content.content == "plain"
    assert second.content.parts == [
        TextPart(text="look"),
        FilePart(data="aGk=", mime_type="image/png"),
    ]


def test_add_core_dict_with_empty_string_content_is_allowed() -> None:
    ml = MessageList().add({"role": "assistant", "content": ""}, "response")
    assert ml.get.all.db()[0].content.content == ""
    assert ml.get.all.db()[0].content.parts == []


def test_add_mastra_db_shape_dict() -> None:
    ml = MessageList(thread_id="t")
    ml.add(
        {
            "id": "db1",
            "role": "assistant",
            "createdAt": "2024-01-01T00:00:00.000Z",
            "content": {
                "format": 2,
                "parts": [
                    {"type": "text", "text": "hi"},
                    {
                        "type": "tool-invocation",
                        "toolInvocation": {
                            "state": "result",
                            "toolCallId": "c1",
                            "toolName": "t",
                            "args": {},
                            "result": 1,
                        },
                    },
                ],
            },
        },
        "memory",
    )
    [message] = ml.get.all.db()
    assert message.id == "db1"
    assert message.thread_id == "t"
    assert isinstance(message.content.parts[1], ToolInvocationPart)
    assert message.content.parts[1].tool_invocation.result == 1
    assert ml.get_source("db1") == "memory"


def test_add_ui_shape_dict_with_top_level_parts() -> None:
    ml = MessageList()
    ml.add(
        {"id": "ui1", "role": "user", "parts": [{"type": "text", "text": "hey"}]},
        "input",
    )
    assert ml.get.all.db()[0].text == "hey"


def test_add_iterables_and_generators() -> None:
    ml = MessageList()
    ml.add(["a", user("b", "b")], "input")
    ml.add((text for text in ["c"]), "input")
    assert [m.text for m in ml] == ["a", "b", "c"]


def test_add_system_role_goes_to_the_untagged_bucket() -> None:
    ml = MessageList()
    ml.add({"role": "system", "content": "rules"}, "input")
    ml.add(SystemMessage(content="more"), "input")
    ml.add(
        Message(role="system", content=MessageContent(content="from message")), "input"
    )
    assert len(ml) == 0
    assert [s.content for s in ml.get_system_messages()] == [
        "rules",
        "more",
        "from message",
    ]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (Message(role="user", content=MessageContent()), r"'empty'.*has no content"),
        ({"role": "user"}, r"has no content or parts"),
        ({"role": "user", "content": 3}, r"has no content or parts"),
        ({"role": "robot", "content": "x"}, r"has role 'robot'; expected one of"),
        ({"content": "x"}, r"has role None"),
        (Message(role="robot", content=MessageContent(content="x")), "role 'robot'"),  # type: ignore[arg-type]  # the bad value under test
        ([42], r"cannot add 42: expected a str, a Message"),
        (
            {"role": "user", "content": [{"type": "image", "image": "u"}]},
            r"content part .*'image'.* takes",
        ),
        (
            {"role": "user", "content": {"format": 2, "parts": "nope"}},
            r"has no content or parts; expected content.parts",
        ),
    ],
)
def test_add_rejects_malformed_messages(bad: Any, match: str) -> None:
    if isinstance(bad, Message):
        bad.id = "empty" if bad.role == "user" else bad.id
    ml = MessageList()
    with pytest.raises(MessageFormatError, match=match):
        ml.add(bad, "input")
    assert len(ml) == 0


def test_add_rejects_a_non_iterable() -> None:
    with pytest.raises(MessageFormatError, match=r"add\(\) got 3.14"):
        MessageList().add(3.14, "input")  # type: ignore[arg-type]  # the bad value under test


def test_add_wraps_wire_errors_in_message_format_error() -> None:
    with pytest.raises(MessageFormatError, match="not a valid Mastra message"):
        MessageList().add(
            {
                "id": "x",
                "role": "user",
                "createdAt": "not a date",
                "content": {"format": 2, "parts": [{"type": "text", "text": "t"}]},
            },
            "input",
        )


# ============================================================= system messages


def test_add_system_accepts_each_shape_and_dedupes_per_tag() -> None:
    ml = MessageList()
    assert ml.add_system("a") is ml
    ml.add_system([SystemMessage(content="b"), {"role": "system", "content": "a"}])
    ml.add_system({"role": "system", "content": [{"type": "text", "text": "c"}]})
    ml.add_system(Message(role="system", content=MessageContent(content="d")))
    ml.add_system("a", tag="memory")
    ml.add_system("a", tag="memory")
    assert [s.content for s in ml.get_system_messages()] == ["a", "b", "c", "d"]
    assert [s.content for s in ml.get_system_messages("memory")] == ["a"]
    assert ml.get_system_messages("nope") == []


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": "x"},
        Message.user("x"),
        [SystemMessage(content="ok"), {"role": "assistant", "content": "x"}],
    ],
)
def test_add_system_rejects_other_roles_and_adds_nothing(bad: Any) -> None:
    ml = MessageList()
    with pytest.raises(MessageFormatError, match=r'Expected role "system" but saw'):
        ml.add_system(bad)
    assert ml.get_all_system_messages() == []


def test_add_system_rejects_bad_content_and_bad_types() -> None:
    with pytest.raises(MessageFormatError, match="has content 5; expected a str"):
        MessageList().add_system({"role": "system", "content": 5})
    with pytest.raises(MessageFormatError, match="5 is not a system message"):
        MessageList().add_system([5])  # type: ignore[list-item]  # the bad value under test


# ================================================================ the wire face


def test_wire_parse_message_reads_the_shapes_without_a_message_list() -> None:
    made = iter(["g1", "g2"])
    message = parse_message("hi", generate_id=lambda: next(made))
    assert isinstance(message, Message)
    assert (message.id, message.role, message.text) == ("g1", "user", "hi")
    stored = user("x", "u")
    assert parse_message(stored, generate_id=lambda: next(made)) is stored
    system = parse_message(
        {"role": "system", "content": "rules"}, generate_id=lambda: next(made)
    )
    assert system == SystemMessage(content="rules")
    assert next(made) == "g2"  # only the str needed an id
    with pytest.raises(MessageFormatError, match="has role 'robot'"):
        parse_message({"role": "robot", "content": "x"}, generate_id=lambda: "r")
    assert parse_system_message("s") == SystemMessage(content="s")
    with pytest.raises(MessageFormatError, match=r'Expected role "system"'):
        parse_system_message({"role": "user", "content": "x"})
