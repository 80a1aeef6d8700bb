"""``RegexFilter`` and ``PIIDetector``: the presets, the four strategies on
input, the stream and tool results, and the same verdict and output for every
split of a text."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from procession import Agent, ConfigurationError, TripWire
from procession.messages import Message, TextPart
from procession.processors import (
    PatternRule,
    PIIDetector,
    ProcessInputArgs,
    RegexFilter,
)
from procession.processors.builtin import (
    PRESET_RULES,
    PatternMatcher,
    iban_is_valid,
    luhn_is_valid,
)
from procession.testing import (
    ScriptedModel,
    assert_split_invariant,
    text_turn,
    tool_call_turn,
)
from procession.testing.strategies import text_splits
from tests.processors.builtin.builtin_helpers import (
    assert_text_blocks_valid,
    client_text,
    run_pieces,
)

SAMPLES = {
    "email": ["john.doe@example.com", "a+b@mail.co.uk"],
    "credit-card": [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "3782 822463 10005",
    ],
    "ssn": ["123-45-6789"],
    "phone": ["+1 (555) 123-4567", "555-123-4567", "+44 20 7946 0958"],
    "iban": ["GB82 WEST 1234 5698 7654 32", "DE89370400440532013000"],
    "ip-address": ["192.168.0.1", "2001:db8::1"],
    "api-key": [
        "sk-ant-api03-" + "a" * 30,
        "sk-proj-" + "B" * 30,
        "ghp_" + "c" * 36,
        "github_pat_" + "d" * 30,
        "AKIAABCDEFGHIJKLMNOP",
        "xoxb-123456789012-abc",
        "AIza" + "e" * 35,
        "sk_live_" + "f" * 24,
        "eyJhbGciOi.eyJzdWIiOi.abcdefghijkl",
    ],
}
NEAR_MISSES = [
    "4111 1111 1111 1112",  # fails Luhn
    "GB82 WEST 1234 5698 7654 33",  # fails mod-97
    "256.1.1.1",
    "000-12-3456",
    "version 1.2.3",
    "a@b",
    "12:30:45",
]


@pytest.mark.parametrize(
    ("kind", "sample"), [(k, s) for k, v in SAMPLES.items() for s in v]
)
def test_each_preset_finds_its_samples_in_a_sentence(kind: str, sample: str) -> None:
    found = PatternMatcher(PRESET_RULES).find_all(f"see {sample}. next")
    assert [(d.type, d.text) for d in found] == [(kind, sample)]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_not_detections(text: str) -> None:
    assert PatternMatcher(PRESET_RULES).find_all(f"see {text} next") == []


def test_a_bearer_token_is_found_after_its_released_prefix() -> None:
    token = "abcdefghijklmnopqrstuvwxyz0123"
    run = run_pieces(
        [RegexFilter(presets=["secrets"], strategy="redact")],
        ["Authorization: Bearer ", token[:5], token[5:], " ok"],
    )
    assert client_text(run.chunks) == "Authorization: Bearer [API_KEY] ok"


def test_the_checksums() -> None:
    assert luhn_is_valid("4111 1111 1111 1111")
    assert not luhn_is_valid("4111 1111 1111 1112")
    assert not luhn_is_valid("0")
    assert iban_is_valid("GB82 WEST 1234 5698 7654 32")
    assert not iban_is_valid("GB82WEST12345698765433")
    assert not iban_is_valid("GB82")


def test_redact_with_no_argument_masks_the_presets() -> None:
    run = run_pieces(
        [PIIDetector()],
        ["Mail jo", "hn@exam", "ple.com, card 4111 11", "11 1111 1111 now"],
    )
    assert client_text(run.chunks) == (
        "Mail j***@*******.com, card **** **** **** 1111 now"
    )


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("placeholder", "ssn [SSN] ok"),
        ("remove", "ssn  ok"),
        ("hash", "ssn [HASH:01a54629] ok"),
        ("mask", "ssn ***-**-6789 ok"),
    ],
)
def test_redaction_methods(method: Any, expected: str) -> None:
    run = run_pieces([PIIDetector(redaction_method=method)], ["ssn 123-", "45-6789 ok"])
    assert client_text(run.chunks) == expected


def test_block_trips_after_the_clean_text_and_never_shows_the_match() -> None:
    run = run_pieces(
        [PIIDetector(strategy="block")], ["ok then 4111 1111 ", "1111 1111 bye"]
    )
    assert run.outcome.kind == "tripwire"
    assert run.outcome.tripwire is not None
    assert run.outcome.tripwire.reason == (
        "PII detected in streaming content. Types: credit-card"
    )
    assert run.outcome.tripwire.metadata["types"] == ["credit-card"]
    assert client_text(run.chunks) == "ok then "
    assert "4111" not in repr(run.chunks)


def test_warn_reports_each_detection_and_lets_the_text_through() -> None:
    seen: list[Any] = []

    class Warn(PIIDetector):
        def on_violation(self, violation: Any) -> None:
            seen.append(violation)

    run = run_pieces([Warn(strategy="warn")], ["a@b.com and c", "@d.org"])
    assert client_text(run.chunks) == "a@b.com and c@d.org"
    assert run.outcome.kind == "completed"
    assert [v.message for v in seen] == [
        "PII detected in streaming content. Types: email"
    ] * 2
    assert not any(v.blocking for v in seen)


def test_filter_cuts_the_block_off_at_the_first_detection() -> None:
    run = run_pieces([PIIDetector(strategy="filter")], ["hi a@b.", "com and more"])
    assert client_text(run.chunks) == "hi "
    assert run.outcome.kind == "completed"
    assert_text_blocks_valid(run.chunks)


def test_regex_filter_custom_rules_and_presets() -> None:
    rules = [
        {
            "name": "codename",
            "pattern": r"\bBlue ?Falcon\b",
            "alphabet": r"[A-Za-z ]",
            "max_length": 11,
        }
    ]
    run = run_pieces(
        [RegexFilter(rules, presets=["secrets"], strategy="redact")],
        ["Project Blue F", "alcon uses AKIAABCDEFG", "HIJKLMNOP."],
    )
    assert client_text(run.chunks) == "Project [REDACTED] uses [API_KEY]."
    blocked = run_pieces([RegexFilter(rules)], ["Project Blue", "Falcon"])
    assert blocked.outcome.tripwire is not None
    assert blocked.outcome.tripwire.reason == (
        "Regex filter: blocked streaming content matching patterns: codename"
    )


def test_configuration_errors_are_clear() -> None:
    with pytest.raises(
        ConfigurationError, match="requires at least one rule or preset"
    ):
        RegexFilter()
    with pytest.raises(ConfigurationError, match=r"strategy must be one of 'block'"):
        PIIDetector(strategy="shout")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="planned but not implemented"):
        PIIDetector(model="openai/gpt-4o-mini")
    with pytest.raises(ConfigurationError, match="matches the empty string"):
        PatternRule(name="nothing", pattern=r"x*")
    with pytest.raises(ConfigurationError, match="a detection type must be one of"):
        PIIDetector(detection_types=["name"])
    with pytest.raises(
        ConfigurationError, match="a rule must be a PatternRule or a dict"
    ):
        RegexFilter([{"pattern": "x"}])


# --- split invariance ---------------------------------------------------------------

FRAGMENTS = [
    " ",
    ". ",
    "-",
    "@",
    "x",
    "7",
    "call ",
    *(s for v in SAMPLES.values() for s in v),
    "4111 1111 1111 1112",
    "sk-",
    "1.2.3",
    "user@",
    "gh",
    "AKIA",
    "Bearer ",
    "t" * 24,
]
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join)


@given(st.data())
def test_every_split_redacts_like_the_whole_text(data: st.DataObject) -> None:
    text = data.draw(texts)
    pieces = data.draw(text_splits(text))
    method: Any = data.draw(st.sampled_from(["mask", "hash", "placeholder", "remove"]))
    detector = PIIDetector(redaction_method=method)
    whole = detector._redacted(text, detector._matcher.find_all(text))
    run = run_pieces([detector], pieces)
    assert client_text(run.chunks) == whole
    assert_text_blocks_valid(run.chunks)


@given(st.data())
def test_every_split_gives_the_same_verdict_and_text(data: st.DataObject) -> None:
    text = data.draw(texts)
    strategy: Any = data.draw(st.sampled_from(["block", "filter", "warn"]))
    whole = run_pieces([PIIDetector(strategy=strategy)], [text] if text else [])
    split = run_pieces([PIIDetector(strategy=strategy)], data.draw(text_splits(text)))
    assert client_text(split.chunks) == client_text(whole.chunks)
    assert split.outcome.kind == whole.outcome.kind
    reasons = [
        r.outcome.tripwire.reason if r.outcome.tripwire else None
        for r in (split, whole)
    ]
    assert reasons[0] == reasons[1]


@pytest.mark.parametrize("strategy", ["block", "redact", "filter"])
def test_the_test_kits_split_check_agrees(strategy: Any) -> None:
    hidden = "Reach me at jane@corp.io or 4111-1111-1111-1111, key sk-ant-" + "z" * 24
    assert_split_invariant(
        lambda: [PIIDetector(strategy=strategy)], hidden, max_examples=30
    )


# --- input and tool results -----------------------------------------------------------


def _input_args(*texts: str) -> ProcessInputArgs:
    from procession.processors import MessageList

    messages = [Message.user(t) for t in texts]
    message_list = MessageList()
    for m in messages:
        message_list.add(m, "input")
    return ProcessInputArgs(
        processor_id="pii-detector",
        state={},
        messages=messages,
        system_messages=[],
        message_list=message_list,
    )


def test_input_redacts_text_parts_in_place() -> None:
    args = _input_args("my ssn is 123-45-6789", "fine")
    assert PIIDetector(redaction_method="placeholder").process_input(args) is None
    part = args.messages[0].content.parts[0]
    assert isinstance(part, TextPart)
    assert part.text == "my ssn is [SSN]"
    assert args.messages[0].content.content == "my ssn is [SSN]"


def test_input_block_filter_and_warn() -> None:
    with pytest.raises(TripWire, match=r"^PII detected\. Types: email$"):
        PIIDetector(strategy="block").process_input(_input_args("a@b.com"))
    args = _input_args("a@b.com", "fine")
    kept = PIIDetector(strategy="filter").process_input(args)
    assert kept is not None
    assert [m.content.content for m in kept] == ["fine"]
    from procession.processors import CollectingEmitter

    args = _input_args("a@b.com")
    args = attrs.evolve(args, emitter=(emitter := CollectingEmitter()))
    assert PIIDetector(strategy="warn").process_input(args) is None
    assert [v.message for v in emitter.violations] == ["PII detected. Types: email"]


def test_phase_input_leaves_the_stream_alone() -> None:
    run = run_pieces([RegexFilter(presets=["pii"], phase="input")], ["a@b.com"])
    assert client_text(run.chunks) == "a@b.com"


@attrs.frozen
class Lookup:
    order_id: str


def test_a_tool_result_is_redacted_before_the_model_sees_it() -> None:
    from procession.runtime.tools import tool

    @tool
    async def lookup(args: Lookup) -> dict[str, Any]:
        """Look an order up."""
        return {"contact": "dispatch@example.com", "items": ["card 4111111111111111"]}

    model = ScriptedModel(
        [[*tool_call_turn("lookup", {"order_id": "A-1"})], [*text_turn("done")]]
    )
    agent = Agent(
        id="a",
        model=model,
        tools=[lookup],
        output_processors=[PIIDetector(redaction_method="placeholder")],
    )

    async def main() -> Any:
        return await agent.generate("where?")

    result = trio.run(main)
    assert result.error is None
    sent = repr(model.calls[1].prompt)
    assert "dispatch@example.com" not in sent
    assert "[EMAIL]" in sent
    assert "card [CREDIT_CARD]" in sent
