"""Text that is not valid Unicode stops at the edge (issue 9, §2.4): a lone
surrogate in the caller's messages fails where they are parsed, and
``check_prompt_text`` finds one in a prompt, each with an ``InvalidTextError``
naming the message, the part and the offset, before any processor or request."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import pytest

from procession import (
    Agent,
    InvalidTextError,
    Message,
    MessageFormatError,
    Processor,
    SystemMessage,
)
from procession.messages import (
    MessageContent,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
)
from procession.models import check_prompt_text
from procession.processors import (
    PromptAssistantMessage,
    PromptFilePart,
    PromptMessage,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
    PromptToolResultPart,
    PromptUserMessage,
)
from procession.testing import ScriptedModel
from procession.wire import find_lone_surrogate, parse_message, parse_system_message
from procession.wire._text import holds_lone_surrogate
from tests.call_counts import python_calls_in

LONE = "\ud800"


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"m{next(counter)}"


# --- find_lone_surrogate ----------------------------------------------------------


@attrs.frozen
class Box:
    label: str
    items: list[Any]


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("ok", None),
        ("naïve ☃ 😀 𝄞", None),  # surrogate *pairs* are fine
        (f"ab{LONE}c", ("", 2, 0xD800)),
        ("x\udfff", ("", 1, 0xDFFF)),
        ({"city": ["Paris", f"Lyon{LONE}"]}, ("['city'][1]", 4, 0xD800)),
        ({f"k{LONE}": 1}, ("[" + repr(f"k{LONE}") + "] (the key)", 1, 0xD800)),
        (("a", ("b", LONE)), ("[1][1]", 0, 0xD800)),
        (Box("fine", [1, None, {"t": LONE}]), ("items[2]['t']", 0, 0xD800)),
        ([1, 2.5, None, b"\xed\xa0\x80", object()], None),  # only str is text
    ],
)
def test_find_lone_surrogate(value: object, found: Any) -> None:
    assert find_lone_surrogate(value) == found


def test_a_cycle_ends_the_search() -> None:
    loop: list[Any] = ["ok"]
    loop.append(loop)
    assert find_lone_surrogate(loop) is None


def _nested(depth: int, leaf: object) -> object:
    """``leaf`` inside ``depth`` one-key dicts."""
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


def _inside(value: object, levels: int) -> list[object]:
    """``value`` and every value up to ``levels`` levels inside it (dict
    values, list and tuple items, attrs fields)."""
    found = [value]
    if levels == 0:
        return found
    if isinstance(value, dict):
        items: list[object] = list(value.values())
    elif isinstance(value, list | tuple):
        items = list(value)
    elif attrs.has(kind := type(value)):
        items = [getattr(value, f.name) for f in attrs.fields(kind)]
    else:
        items = []
    for item in items:
        found.extend(_inside(item, levels - 1))
    return found


@pytest.mark.parametrize("depth", [0, 1, 10, 61, 62, 63, 64, 65, 66, 67])
@pytest.mark.parametrize("nested", [0, 1, 3])
@pytest.mark.parametrize(
    "wrap",
    [lambda v: v, lambda v: [v], lambda v: Box("x", [v]), lambda v: ("a", {"b": v})],
)
@pytest.mark.parametrize("leaf", [LONE, "ascii", "naïve"])
def test_holds_lone_surrogate_is_at_least_what_find_lone_surrogate_finds(
    depth: int, nested: int, wrap: Any, leaf: str
) -> None:
    """``holds_lone_surrogate(value, nested=n)`` is False only when neither
    ``value`` nor anything up to ``n`` levels inside it holds one that
    ``find_lone_surrogate`` finds (the fast path of the message check skips
    the per-field search on that promise); True when ``value`` holds one."""
    value = wrap(_nested(depth, leaf))
    if find_lone_surrogate(value) is not None:
        assert holds_lone_surrogate(value, nested=nested)
    if not holds_lone_surrogate(value, nested=nested):
        assert all(find_lone_surrogate(v) is None for v in _inside(value, nested))
    if leaf != LONE:
        assert not holds_lone_surrogate(value, nested=nested)


def test_holds_lone_surrogate_counts_the_depth_limit_from_inside() -> None:
    # A string is searched up to depth 64: at 65 the value itself is past the
    # limit, one level inside it is not.
    deep = _nested(65, LONE)
    assert find_lone_surrogate(deep) is None
    assert find_lone_surrogate(_nested(64, LONE)) is not None  # one level inside
    assert holds_lone_surrogate(deep) is False
    assert holds_lone_surrogate(deep, nested=1) is True


def test_a_part_searched_to_the_depth_limit_still_fails_in_a_message() -> None:
    """The whole-message search counts its depth from the parts, so a
    surrogate as deep inside a part as a search of the part reaches is
    still refused, with the part named."""
    invocation = ToolInvocationPart(
        tool_invocation=ToolInvocation(
            state="call", tool_call_id="c1", tool_name="t", args=_nested(62, LONE)
        )
    )
    assert find_lone_surrogate(invocation) is not None
    message = Message(
        id="deep", role="assistant", content=MessageContent(parts=[invocation])
    )
    with pytest.raises(InvalidTextError, match=r"'deep' \(assistant\), part #0"):
        parse_message(message, generate_id=ids())
    # One level deeper is past what a search of the part reaches: accepted, as
    # before the whole-message search.
    invocation.tool_invocation.args = _nested(63, LONE)
    assert find_lone_surrogate(invocation) is None
    assert parse_message(message, generate_id=ids()) is message


# --- the caller's messages, where they are parsed ---------------------------------


NAMED_INPUTS = [
    (f"hi {LONE}", r"message 'm1' \(user\), part #0 \(text\): text holds a lone"),
    (
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": LONE}],
        },
        r"message 'm1' \(user\), part #1 \(text\): text holds",
    ),
    (
        {"id": "ui-1", "role": "user", "parts": [{"type": "text", "text": LONE}]},
        r"message 'ui-1' \(user\), part #0 \(text\)",
    ),
    (
        {
            "id": "db-1",
            "role": "assistant",
            "content": {
                "format": 2,
                "parts": [
                    {"type": "step-start"},
                    {
                        "type": "tool-invocation",
                        "toolInvocation": {
                            "state": "call",
                            "toolCallId": "c1",
                            "toolName": "weather",
                            "args": {"city": ["Paris", f"x{LONE}"]},
                        },
                    },
                ],
            },
        },
        r"message 'db-1' \(assistant\), part #1 \(tool-invocation\): "
        r"tool_invocation\.args\['city'\]\[1\] holds a lone surrogate U\+D800 at "
        r"offset 1",
    ),
    (
        Message(
            id="obj-1",
            role="user",
            content=MessageContent(parts=[TextPart(text="fine")], content=LONE),
        ),
        r"message 'obj-1' \(user\): content\.content holds",
    ),
    (
        Message.user("fine", thread_id=f"t{LONE}"),
        r"\(user\): thread_id holds a lone surrogate U\+D800 at offset 1",
    ),
    ({"role": "system", "content": LONE}, r"system message: content holds"),
    (
        SystemMessage(content="ok", provider_options={"x": LONE}),
        r"system message: provider_options\['x'\] holds",
    ),
]


@pytest.mark.parametrize(("value", "match"), NAMED_INPUTS)
def test_parse_message_names_the_message_and_part(value: Any, match: str) -> None:
    with pytest.raises(InvalidTextError, match=match) as info:
        parse_message(value, generate_id=ids())
    assert isinstance(info.value, MessageFormatError)
    assert "expected valid Unicode text" in str(info.value)


def test_the_error_carries_where_field_offset_and_code_point() -> None:
    with pytest.raises(InvalidTextError, match="at offset 3") as info:
        parse_message("abc\udc80", generate_id=ids())
    error = info.value
    assert (error.where, error.field, error.offset, error.code_point) == (
        "message 'm1' (user), part #0 (text)",
        "text",
        3,
        0xDC80,
    )


def test_parse_system_message_checks_the_text() -> None:
    with pytest.raises(InvalidTextError, match="system message: content holds"):
        parse_system_message(f"be brief{LONE}")
    with pytest.raises(InvalidTextError, match="at offset 0"):
        parse_system_message(
            {"role": "system", "content": [{"type": "text", "text": LONE}]}
        )


def test_an_ascii_str_is_built_unchecked_and_its_id_still_checked() -> None:
    # The fast path for a str (a request's prompt): the same message the
    # general path builds, one id asked for; an id that is not valid text is
    # still named.
    asked = []

    def one_id() -> str:
        asked.append(1)
        return "m1"

    message = parse_message("hello", generate_id=one_id)
    assert isinstance(message, Message)
    assert (message.id, message.role) == ("m1", "user")
    assert message.content.content == "hello"
    assert message.content.parts == [TextPart(text="hello")]
    assert asked == [1]
    with pytest.raises(InvalidTextError, match=r"message '\\ud800' \(user\)"):
        parse_message("hello", generate_id=lambda: LONE)


def test_valid_text_parses_as_before() -> None:
    message = parse_message("naïve 😀", generate_id=ids())
    assert isinstance(message, Message)
    assert message.content.content == "naïve 😀"
    invocation = ToolInvocationPart(
        tool_invocation=ToolInvocation(
            state="call", tool_call_id="c1", tool_name="t", args={"é": ["ü"]}
        )
    )
    held = Message(
        id="a1", role="assistant", content=MessageContent(parts=[invocation])
    )
    assert parse_message(held, generate_id=ids()) is held


# --- check_prompt_text ------------------------------------------------------------


def prompt_with(part: Any, *, role: str = "user") -> list[Any]:
    before = [PromptSystemMessage("sys"), PromptUserMessage([PromptTextPart("hi")])]
    if role == "user":
        return [*before, PromptUserMessage([PromptTextPart("ok"), part])]
    if role == "assistant":
        return [*before, PromptAssistantMessage([PromptTextPart("ok"), part])]
    return [*before, PromptToolMessage([PromptToolResultPart("c0", "t", 1), part])]


@pytest.mark.parametrize(
    ("prompt", "match"),
    [
        (
            prompt_with(PromptTextPart(f"abcde{LONE}")),
            r"^prompt message #2 \(user\), part #1 \(text\): text holds a lone "
            r"surrogate U\+D800 at offset 5; expected valid Unicode text",
        ),
        (
            prompt_with(PromptFilePart("aGk=", "text/plain", LONE)),
            r"prompt message #2 \(user\), part #1 \(file\): filename holds",
        ),
        (
            prompt_with(PromptToolCallPart("c1", "t", {"q": LONE}), role="assistant"),
            r"#2 \(assistant\), part #1 \(tool-call\): args\['q'\] holds",
        ),
        (
            prompt_with(PromptToolResultPart("c1", "t", [LONE]), role="tool"),
            r"#2 \(tool\), part #1 \(tool-result\): result\[0\] holds",
        ),
        (
            [PromptSystemMessage(f"be {LONE}")],
            r"prompt message #0 \(system\): content holds .* at offset 3",
        ),
        (
            [PromptUserMessage([PromptTextPart("ok")], provider_options={"a": LONE})],
            r"prompt message #0 \(user\): provider_options\['a'\] holds",
        ),
    ],
)
def test_check_prompt_text_names_the_prompt_message_and_part(
    prompt: list[Any], match: str
) -> None:
    with pytest.raises(InvalidTextError, match=match):
        check_prompt_text(prompt)


def test_check_prompt_text_passes_valid_prompts_of_any_size() -> None:
    big = "x" * 5_000_000
    prompt: list[PromptMessage] = [
        PromptSystemMessage("sys ☃"),
        PromptUserMessage([PromptTextPart(big), PromptTextPart("😀 naïve")]),
        PromptAssistantMessage([PromptToolCallPart("c1", "t", {"é": [big]})]),
        PromptToolMessage([PromptToolResultPart("c1", "t", {"r": "ü"})]),
    ]
    check_prompt_text(prompt)  # no error
    check_prompt_text([])


# --- through Agent.generate -------------------------------------------------------


class Recorder(Processor):
    id = "recorder"

    def __init__(self) -> None:
        self.calls = 0

    async def process_input(self, args: Any) -> Any:
        self.calls += 1
        return args.messages


@pytest.mark.parametrize(
    "messages",
    [
        f"hello {LONE}",
        [{"role": "user", "content": "fine"}, {"role": "user", "content": LONE}],
    ],
)
def test_generate_refuses_a_surrogate_before_any_processor_or_model_call(
    messages: Any,
) -> None:
    model = ScriptedModel(["never sent"])
    recorder = Recorder()
    agent = Agent(id="a", model=model, input_processors=[recorder])
    with pytest.raises(InvalidTextError, match=r"\(user\), part #0 \(text\)"):
        _ = agent.generate(messages)  # raised at the call, nothing to await
    assert model.calls == []
    assert recorder.calls == 0


async def test_generate_with_valid_text_still_runs() -> None:
    model = ScriptedModel(["done"])
    result = await Agent(id="a", model=model).generate("naïve 😀")
    assert result.text == "done"
    assert len(model.calls) == 1


# --- what valid text costs ----------------------------------------------------------


def _wire_calls(fn: Any) -> int:
    """Python function calls made in ``procession.wire`` while ``fn()`` runs."""
    from pathlib import Path

    import procession.wire

    return python_calls_in(str(Path(procession.wire.__file__).parent), fn)


@pytest.mark.parametrize("parts", [1, 20])
def test_parsing_valid_text_costs_a_call_per_part_not_per_field(parts: int) -> None:
    """A message of valid text is searched once, whole: parse_message, its
    parse, validation and text check, the search's entry (5), then a search
    call for the message, its content, its parts list (and the list's loop)
    and each part (an ASCII str, None, a number or an empty container costs
    none): 9 + one per part. Checking each field on its own, as the error
    path does, cost 60 for one part."""
    message = Message(
        id="m",
        role="user",
        content=MessageContent(parts=[TextPart(text=f"t{i}") for i in range(parts)]),
    )
    parse_message(message, generate_id=ids())  # the field names, looked up once
    assert _wire_calls(lambda: parse_message(message, generate_id=ids())) <= 9 + parts
