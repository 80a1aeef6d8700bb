"""The JSON decoder of the providers' event data (issue 10, item 4): msgspec's
when the ``fastjson`` extra is installed, ``json.loads`` otherwise, with the
same value (or the same ``JSONDecodeError``) for any text."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from procession import InvalidTextError
from procession.models import ModelRequest
from procession.processors import PromptTextPart, PromptUserMessage
from procession.providers import (
    AnthropicModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    _json,
)
from procession.testing.fake_provider import Stream, open_fake_provider

pytest.importorskip("msgspec", reason="the fastjson extra (part of dev) is missing")

FAST = _json.fast_loads()
HI = ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])
MODELS = [AnthropicModel, OpenAIChatModel, OpenAIResponsesModel]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _build(kind: type, base_url: str) -> Any:
    url = base_url if kind is AnthropicModel else base_url + "/v1"
    return kind("m", api_key="k", base_url=url)


def _described(chunk: Any) -> tuple[str, Any]:
    payload = getattr(chunk, "payload", None)
    return chunk.type, getattr(payload, "args", None) or getattr(payload, "text", None)


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1 == True == 1.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


def _outcome(loads: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", loads(text)
    except json.JSONDecodeError as exc:
        return "error", (exc.msg, exc.pos)


def _assert_same_outcome(text: str) -> None:
    assert FAST is not None
    kind, fast = _outcome(FAST, text)
    expected_kind, expected = _outcome(json.loads, text)
    assert kind == expected_kind, (text, fast, expected)
    assert _same(fast, expected), (text, fast, expected)


# Strings with lone surrogates too (json.dumps escapes them with ensure_ascii).
_strings = st.text(
    st.characters(codec=None)
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
)
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _strings,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(_strings, inner, max_size=4)
    ),
    max_leaves=12,
)
_numbers = st.from_regex(
    r"-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,25})?([eE][+-]?[0-9]{1,3})?", fullmatch=True
)


@given(_values, st.booleans())
@example({"n": 2**64, "m": -(2**63) - 1}, True)
@example({"t": "\ud800 lone, \ud83d\ude00 paired"}, True)
@example({"t": "é\u2028\x00"}, False)
def test_the_fast_decoder_gives_what_json_loads_gives(value: Any, ascii: bool) -> None:
    _assert_same_outcome(json.dumps(value, ensure_ascii=ascii))


@given(_numbers)
@example("1e400")
@example("-1e400")
@example("0.1e-400")
@example("-0")
@example("-0.0")
@example("18446744073709551616")
@example("1.00000000000000011102230246251565404236316680908203125")
def test_numbers_decode_alike(text: str) -> None:
    _assert_same_outcome(text)


@given(st.text(alphabet='{}[]",:0123456789.eE+- \t\n\rtruefalsnNIaiy\\u'))
@example("NaN")
@example("[Infinity, -Infinity]")
@example('{"a": 1, "a": 2}')
@example('"\\ud800"')
@example("\ufeff{}")
@example("[1,]")
@example("01")
@example('"\t"')
def test_any_text_gives_the_same_value_or_the_same_error(text: str) -> None:
    _assert_same_outcome(text)


def test_the_fast_decoder_is_the_default_when_msgspec_is_installed() -> None:
    assert _json.loads is not json.loads
    assert _json.loads('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


def test_without_msgspec_the_stdlib_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _json.best_loads() is not json.loads
    monkeypatch.setitem(sys.modules, "msgspec", None)  # import msgspec fails
    assert _json.fast_loads() is None
    assert _json.best_loads() is json.loads


@pytest.mark.parametrize("kind", MODELS)
async def test_the_providers_read_alike_with_either_decoder(
    kind: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The arguments as JSON text (sent as is, in pieces): an escaped lone
    # surrogate, which only the stdlib reads, and an integer beyond 64 bits.
    args = '{"n": 1180591620717411303424, "x": 0.1, "s": "\\ud800"}'
    stream = Stream(
        Stream.text("big ", "\u00e9 ", "\U0001f600"),
        Stream.tool_call("f", args, id="call_1"),
    )

    async def read() -> list[Any]:
        with trio.fail_after(10):
            async with (
                open_fake_provider([stream]) as server,
                _build(kind, server.base_url) as model,
                model.stream(HI) as response,
            ):
                return [_described(chunk) async for chunk in response]

    fast = await read()
    monkeypatch.setattr(_json, "loads", json.loads)  # the stdlib's path
    stdlib = await read()
    assert fast == stdlib
    [decoded] = [c[1] for c in fast if c[0] == "tool-call"]
    assert _same(decoded, {"n": 2**70, "x": 0.1, "s": "\ud800"})


def test_a_lone_surrogate_in_event_data_is_kept_for_the_wire_edge_to_refuse() -> None:
    # The fast decoder refuses it; the stdlib reads it, as before, so the text
    # reaches the wire edge, which refuses lone surrogates (InvalidTextError).
    from procession.wire import check_text

    text = _json.loads('{"text": "a\\ud800b"}')["text"]
    assert text == "a\ud800b"
    with pytest.raises(InvalidTextError, match="surrogate"):
        check_text(text, "a streamed text delta")
