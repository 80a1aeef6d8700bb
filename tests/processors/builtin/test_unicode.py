"""``UnicodeNormalizer``: Mastra's options on input, and the same output for
every split of a streamed text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procession.messages import Message, TextPart
from procession.processors import MessageList, ProcessInputArgs, UnicodeNormalizer
from procession.testing.strategies import text_splits
from tests.processors.builtin.builtin_helpers import (
    assert_text_blocks_valid,
    client_text,
    run_pieces,
)

ALPHABET = [
    "a",
    "e",
    "o",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\u0301",
    "\u0308",
    "\u200b",
    "\u00a0",
    "\ufb01",
    "\u1100",
    "\u1161",
    "\u11a8",
    "\u00a8",
    "\u2460",
    "\u200d",
    "\u212b",
    "\u0f73",
    "\U0001f469",
    "\ufe0f",
    "\u3000",
]
OPTIONS = st.fixed_dictionaries(
    {
        "strip_control_chars": st.booleans(),
        "preserve_emojis": st.booleans(),
        "collapse_whitespace": st.booleans(),
        "trim": st.booleans(),
    }
)


@given(st.data())
def test_every_split_normalises_like_the_whole_text(data: st.DataObject) -> None:
    text = "".join(data.draw(st.lists(st.sampled_from(ALPHABET), max_size=12)))
    options = data.draw(OPTIONS)
    pieces = data.draw(text_splits(text))
    run = run_pieces([UnicodeNormalizer(**options)], pieces)
    assert client_text(run.chunks) == UnicodeNormalizer(**options).normalize(text)
    assert_text_blocks_valid(run.chunks)


@pytest.mark.parametrize(
    ("options", "text", "expected"),
    [
        ({}, "  ﬁne\r\n\r\n\ncafe\u0301  \t done  ", "fine\ncafé done"),
        ({}, "a\u200bb", "a\u200bb"),
        ({"strip_control_chars": True}, "a\u200bb\x07c", "abc"),
        (
            {"strip_control_chars": True},
            "\U0001f469\u200d\U0001f4bb",
            "\U0001f469\u200d\U0001f4bb",
        ),
        (
            {"strip_control_chars": True, "preserve_emojis": False},
            "\U0001f469\u200d\U0001f4bb",
            "\U0001f469\U0001f4bb",
        ),
        ({"collapse_whitespace": False, "trim": False}, " a  b ", " a  b "),
    ],
)
def test_the_options(options: dict[str, Any], text: str, expected: str) -> None:
    assert UnicodeNormalizer(**options).normalize(text) == expected


def test_input_text_is_normalised_in_place() -> None:
    message = Message.user("  ﬁle   ① ")
    message_list = MessageList()
    message_list.add(message, "input")
    args = ProcessInputArgs(
        processor_id="unicode-normalizer",
        state={},
        messages=[message],
        system_messages=[],
        message_list=message_list,
    )
    assert UnicodeNormalizer().process_input(args) is None
    part = message.content.parts[0]
    assert isinstance(part, TextPart)
    assert part.text == "file 1"
    assert message.content.content == "file 1"


def test_the_stream_holds_only_the_last_character_or_the_blank_run() -> None:
    run = run_pieces([UnicodeNormalizer()], ["cafe", "\u0301 and  ", "  more"])
    deltas = [x.payload.text for x in run.chunks if x.type == "text-delta"]
    assert deltas == ["caf", "é and", " mor", "e"]
