"""``SSEDecoder`` (issue 9, §2.6): the same messages however the body is split,
the WHATWG line endings (``\\r\\n``, ``\\n``, a lone ``\\r``), a size cap on one
event, and linear work on one large event (counted, never timed)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from procession import EventTooLargeError, ProviderStreamError
from procession.providers._sse import (
    DEFAULT_MAX_EVENT_BYTES,
    ServerSentEvent,
    SSEDecoder,
)


def decode(pieces: list[bytes], **options: object) -> list[ServerSentEvent]:
    decoder = SSEDecoder(**options)  # type: ignore[arg-type]  # test options
    return [event for piece in pieces for event in decoder.feed(piece)]


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


# --- every split gives the same messages ---------------------------------------------

# Field values: any text without line breaks or lone surrogates (not UTF-8).
values = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"),
    max_size=12,
)
endings = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    """An SSE body with comments, ``id:`` / ``retry:`` lines, messages with and
    without an ``event:`` line or data, mixed line endings, maybe a truncated
    last message; and the messages it stands for."""
    lines: list[str] = []
    expected: list[ServerSentEvent] = []
    for _ in range(draw(st.integers(0, 5))):
        name = draw(st.none() | values)
        data = draw(st.lists(values, max_size=3))
        if draw(st.booleans()):
            lines.append(":" + draw(values))
        if name is not None:
            lines.append("event: " + name)
        if draw(st.booleans()):
            lines.append("id: 7")
        lines.extend("data: " + value for value in data)
        if draw(st.booleans()):
            lines.append("retry: 100")
        lines.append("")
        if data:
            expected.append(ServerSentEvent(name or None, "\n".join(data)))
    body = ""
    previous = ""
    for line in lines:
        ending = draw(endings)
        if previous == "\r" and not line and ending == "\n":
            # "\r" then an empty line ended by "\n" would read as one "\r\n".
            ending = "\r\n"
        body += line + ending
        previous = ending
    if draw(st.booleans()):
        body += "data: " + draw(values)  # truncated: never dispatched
    return body.encode(), expected


@given(st.data())
def test_every_split_of_a_stream_gives_its_messages(data: st.DataObject) -> None:
    body, expected = data.draw(streams())
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    assert decode(split(body, cuts)) == expected


MIXED = (
    ": hello\r\n"
    "event: première\r\n"
    'data: {"t": "naïve ☃ 𝄞"}\r'
    "data: second line\n"
    "\r\n"
    "data: x\r"
    "\r"
    "event: ping\n"
    "data:\n"
    "\n"
    "data: lost"
).encode()
MIXED_EVENTS = [
    ServerSentEvent("première", '{"t": "naïve ☃ 𝄞"}\nsecond line'),
    ServerSentEvent(None, "x"),
    ServerSentEvent("ping", ""),
]


@pytest.mark.parametrize("cut", range(len(MIXED) + 1))
def test_each_single_cut_of_a_mixed_stream(cut: int) -> None:
    """Every cut: inside a multi-byte character, between "\\r" and "\\n", ..."""
    assert decode([MIXED[:cut], MIXED[cut:]]) == MIXED_EVENTS


def test_byte_by_byte() -> None:
    assert decode([bytes([b]) for b in MIXED]) == MIXED_EVENTS


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        # A lone "\r" ends a line; "\r\r" ends a message.
        ([b"data: a\r\rdata: b\r\r"], [(None, "a"), (None, "b")]),
        # A "\r\n" split after its "\r" is one line end, not a blank line.
        ([b"data: a\r", b"\ndata: b\r\n\r\n"], [(None, "a\nb")]),
        # ... also when the "\n" comes alone, and empty pieces in between.
        ([b"data: a\r", b"", b"\n", b"\r", b"\n"], [(None, "a")]),
        # A "\r" inside a line is a line end (it was not before).
        ([b"data: a\rb\n\n"], [(None, "a")]),
    ],
)
def test_line_endings(pieces: list[bytes], expected: list[tuple[str, str]]) -> None:
    assert decode(pieces) == [ServerSentEvent(*e) for e in expected]


# --- the size cap -------------------------------------------------------------------


def test_the_default_limit_is_16_mib() -> None:
    assert DEFAULT_MAX_EVENT_BYTES == 16 * 1024 * 1024


def test_an_event_at_the_limit_passes_and_one_byte_more_fails() -> None:
    line = b"data: " + b"x" * 94  # 100 bytes without its line end
    assert decode([line + b"\n\n"], max_event_bytes=100) == [
        ServerSentEvent(None, "x" * 94)
    ]
    with pytest.raises(EventTooLargeError, match="limit of 99 bytes") as info:
        decode([line + b"\n\n"], max_event_bytes=99)
    error = info.value
    assert (error.limit, error.size) == (99, 100)
    assert isinstance(error, ProviderStreamError)
    assert (error.is_retryable, error.code) == (False, "event_too_large")


def test_the_limit_counts_every_line_of_one_event() -> None:
    body = b"event: e\n" + b"data: 12345\n" * 10 + b"\n"  # 8 + 10 * 11 bytes
    assert len(decode([body], max_event_bytes=118)) == 1
    with pytest.raises(EventTooLargeError, match=r"\(118 bytes so far"):
        decode([body], max_event_bytes=117)


def test_the_limit_is_per_event_and_comments_do_not_count() -> None:
    events = b"".join(b": " + b"c" * 500 + b"\ndata: 12345\n\n" for _ in range(50))
    assert len(decode([events], max_event_bytes=20)) == 50


def test_a_line_without_end_fails_as_it_crosses_the_limit() -> None:
    """The decoder does not wait for a line end that may never come."""
    decoder = SSEDecoder(max_event_bytes=1000, provider="openai", setting="S=...")
    assert decoder.feed(b"data: " + b"x" * 900) == []
    with pytest.raises(EventTooLargeError, match=r"larger than the limit of") as info:
        decoder.feed(b"x" * 200)
    assert str(info.value) == (
        "openai sent a server-sent event larger than the limit of 1000 bytes "
        "(1106 bytes so far, and it has not ended); if such events are "
        "expected, raise the limit: S=..."
    )


def test_a_long_comment_line_counts_while_it_arrives() -> None:
    with pytest.raises(EventTooLargeError, match="limit of 10 bytes"):
        decode([b": a long comment"], max_event_bytes=10)


# --- linear work --------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1024, 65_536])
def test_one_20_mb_event_is_decoded_with_linear_work(piece: int) -> None:
    """Each piece is scanned once and the line joined once: at most 2n bytes
    examined (the old decoder re-copied and re-scanned its whole buffer on each
    piece, about n² / 2·piece: 2·10¹¹ bytes here for 1 KiB pieces)."""
    n = 20_000_000
    body = b"data: " + b"x" * n + b"\n\n"
    decoder = SSEDecoder(max_event_bytes=2 * n)
    events = [
        event
        for start in range(0, len(body), piece)
        for event in decoder.feed(body[start : start + piece])
    ]
    assert [len(event.data) for event in events] == [n]
    assert decoder.bytes_examined <= 2 * len(body)


def test_byte_by_byte_work_is_linear_too() -> None:
    body = b"data: " + b"y" * 200_000 + b"\r\n\r\n"
    decoder = SSEDecoder()
    events = [e for i in range(len(body)) for e in decoder.feed(body[i : i + 1])]
    assert events == [ServerSentEvent(None, "y" * 200_000)]
    assert decoder.bytes_examined <= 2 * len(body)
