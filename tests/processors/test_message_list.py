"""MessageList as a store: adding, sources, merging, system buckets, views,
tool results, conveniences, and the provider prompt."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import attrs
import pytest

from procession import ConfigurationError, MessageFormatError
from procession.messages import (
    DataPart,
    FilePart,
    Message,
    MessageContent,
    ReasoningDetail,
    ReasoningPart,
    SourceInfo,
    SourcePart,
    StepStartPart,
    SystemMessage,
    TextPart,
    ToolInvocationPart,
    UnknownPart,
)
from procession.processors import (
    MessageList,
    PromptAssistantMessage,
    PromptFilePart,
    PromptReasoningPart,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
    PromptToolResultPart,
    PromptUserMessage,
    to_prompt_messages,
)
from tests.processors.message_list_helpers import (
    assistant,
    at,
    by_id,
    conversation,
    ids,
    sources,
    tool,
    user,
)

# ======================================================================== add


def test_add_str_is_a_user_input_message_with_stamped_ids() -> None:
    counter = itertools.count()
    ml = MessageList(
        thread_id="t", resource_id="r", generate_message_id=lambda: f"id{next(counter)}"
    )
    assert ml.add("hello", "input") is ml
    [message] = ml.get.all.db()
    assert (message.id, message.role, message.text) == ("id0", "user", "hello")
    assert (message.thread_id, message.resource_id) == ("t", "r")
    assert ml.get_source("id0") == "input"


def test_add_keeps_an_existing_thread_id() -> None:
    ml = MessageList(thread_id="t")
    ml.add(user("x", "u", thread_id="other"), "input")
    assert ml.get_by_id("u") is not None
    assert by_id(ml, "u").thread_id == "other"


def test_add_message_object_is_stored_not_copied() -> None:
    message = user("x", "u")
    ml = MessageList().add(message, "input")
    assert ml.get.all.db()[0] is message


def test_add_system_from_memory_is_ignored() -> None:
    ml = MessageList()
    ml.add([{"role": "system", "content": "old rules"}, "q"], "memory")
    assert ml.get_all_system_messages() == []
    assert len(ml) == 1


def test_add_legacy_source_alias_user_means_input() -> None:
    ml = MessageList().add("x", "user")  # type: ignore[arg-type]  # the legacy alias 'user' is accepted but not in the type
    assert sources(ml) == ["input"]


def test_add_rejects_an_unknown_source() -> None:
    with pytest.raises(ConfigurationError, match="unknown message source 'output'"):
        MessageList().add("x", "output")  # type: ignore[arg-type]  # the bad value under test


def test_memory_duplicates_are_deduplicated() -> None:
    ml = MessageList()
    first = user("one", "m", created_at=at(1))
    ml.add(first, "memory")
    ml.add(user("two", "m", created_at=at(1)), "memory")
    assert ml.get.all.db() == [first]
    assert ml.get.all.db()[0] is first


def test_adding_an_existing_id_replaces_in_place() -> None:
    ml = conversation()
    replacement = user("edited", "u1")
    ml.add(replacement, "input")
    assert ids(ml) == ["m1", "m2", "u1", "r1"]
    assert ml.get_by_id("u1") is replacement


def test_memory_goes_before_the_run_sorted_by_created_at() -> None:
    ml = MessageList()
    ml.add("new", "input")
    ml.add(user("b", "b", created_at=at(5)), "memory")
    ml.add(user("a", "a", created_at=at(1)), "memory")
    ml.add(assistant("c", id="c", created_at=at(9)), "memory")
    assert [m.text for m in ml] == ["a", "b", "c", "new"]
    assert sources(ml) == ["memory", "memory", "memory", "input"]


def test_response_messages_get_monotonic_created_at() -> None:
    ml = MessageList()
    ml.add(user("q", "u", created_at=at(100)), "input")
    r1 = Message.user("looks like a user row", id="r1", created_at=at(50))
    r1.role = "assistant"
    ml.add(r1, "response")
    ml.mark_response_message_boundary()
    r2 = assistant("b", id="r2", created_at=at(50))
    ml.add(r2, "response")
    assert r1.created_at > at(100)
    assert r2.created_at > r1.created_at


def test_naive_created_at_is_compared_as_utc() -> None:
    ml = MessageList()
    ml.add(user("q", "u", created_at=dt.datetime(2030, 1, 1)), "input")
    r = assistant("a", id="r", created_at=at(0))
    ml.add(r, "response")
    assert r.created_at > dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


# ===================================================================== merging


def test_assistant_after_assistant_merges_keeping_the_first_id() -> None:
    ml = MessageList(thread_id="t")
    ml.add("q", "input")
    ml.add(assistant("one", id="a1"), "response")
    ml.add(assistant("two", id="a2"), "response")
    ml.add(assistant("three", id="a3"), "response")
    assert len(ml) == 2
    merged = ml.get.response.db()[0]
    assert merged.id == "a1"
    assert [p.text for p in merged.content.parts if isinstance(p, TextPart)] == [
        "one",
        "two",
        "three",
    ]
    assert ml.get_by_id("a2") is None


def test_merge_updates_a_tool_call_with_its_result() -> None:
    ml = MessageList()
    ml.add(assistant("let me look", tool("c1", args={"a": 1}), id="a1"), "response")
    ml.add(
        assistant(tool("c1", "result", {"ok": True}, args={"b": 2}), id="a2"),
        "response",
    )
    [message] = ml.get.all.db()
    call = message.content.parts[1]
    assert isinstance(call, ToolInvocationPart)
    assert call.tool_invocation.state == "result"
    assert call.tool_invocation.result == {"ok": True}
    assert call.tool_invocation.args == {"a": 1, "b": 2}
    assert len(message.content.parts) == 2


def test_merge_updates_a_tool_call_with_an_error() -> None:
    ml = MessageList()
    ml.add(assistant(tool("c1"), id="a1"), "response")
    failed = tool("c1", "output-error", provider_metadata={"x": {"y": 1}})
    failed.tool_invocation.error_text = "boom"
    ml.add(assistant(failed, id="a2"), "response")
    call = ml.get.all.db()[0].content.parts[0]
    assert isinstance(call, ToolInvocationPart)
    assert (call.tool_invocation.state, call.tool_invocation.error_text) == (
        "output-error",
        "boom",
    )
    assert call.provider_metadata == {"x": {"y": 1}}


def test_merge_inserts_step_start_before_text_after_a_tool_call() -> None:
    ml = MessageList()
    ml.add(
        assistant(StepStartPart(model="m1"), tool("c1", "result", 1), id="a1"),
        "response",
    )
    ml.add(assistant("done", id="a2"), "response")
    parts = ml.get.all.db()[0].content.parts
    assert [p.type for p in parts] == [
        "step-start",
        "tool-invocation",
        "step-start",
        "text",
    ]
    assert parts[2] == StepStartPart(model="m1")


def test_merge_does_not_duplicate_an_explicit_step_start() -> None:
    ml = MessageList()
    ml.add(assistant(tool("c1", "result", 1), id="a1"), "response")
    ml.add(assistant(StepStartPart(), "done", id="a2"), "response")
    types = [p.type for p in ml.get.all.db()[0].content.parts]
    assert types == ["tool-invocation", "step-start", "text"]


def test_response_boundary_prevents_merging() -> None:
    ml = MessageList()
    ml.add(assistant("one", id="a1"), "response")
    assert ml.mark_response_message_boundary() is True
    ml.add(assistant("two", id="a2"), "response")
    assert ids(ml) == ["a1", "a2"]
    metadata = by_id(ml, "a1").content.metadata
    assert metadata == {"mastra": {"responseBoundary": True}}


def test_sealed_message_is_not_merged_into() -> None:
    ml = MessageList()
    first = assistant("one", id="a1")
    first.content.metadata = {"mastra": {"sealed": True}}
    ml.add(first, "response")
    ml.add(assistant("two", id="a2"), "response")
    assert ids(ml) == ["a1", "a2"]


def test_no_merge_from_memory_across_threads_or_after_data_only() -> None:
    ml = MessageList()
    ml.add(assistant("m", id="m1", created_at=at(1)), "memory")
    ml.add(assistant("m", id="m2", created_at=at(2)), "memory")
    assert ids(ml) == ["m1", "m2"]
    ml.add(assistant("x", id="a1", thread_id="other"), "response")
    assert ids(ml) == ["m1", "m2", "a1"]
    ml.add(assistant(DataPart(type="data-progress", data=1), id="d1"), "response")
    ml.add(assistant("after data", id="a2"), "response")
    assert ids(ml) == ["m1", "m2", "a1", "d1", "a2"]


def test_response_merged_into_a_memory_message_becomes_response() -> None:
    ml = MessageList()
    ml.add(assistant("prefill", id="m1", created_at=at(1)), "memory")
    ml.add(assistant("continued", id="r1"), "response")
    assert ids(ml) == ["m1"]
    assert ml.get_source("m1") == "response"
    assert [m.id for m in ml.drain_unsaved_messages()] == ["m1"]


# ======================================================================= views


def test_views_filter_by_source_in_conversation_order() -> None:
    ml = conversation()
    assert ids(ml) == ["m1", "m2", "u1", "r1"]
    assert [m.id for m in ml.get.remembered.db()] == ["m1", "m2"]
    assert [m.id for m in ml.get.input.db()] == ["u1"]
    assert [m.id for m in ml.get.response.db()] == ["r1"]
    assert [m.id for m in ml] == ids(ml)
    assert len(ml) == 4


def test_db_returns_live_objects_in_a_fresh_list() -> None:
    ml = conversation()
    view = ml.get.all.db()
    view.reverse()
    view.pop()
    assert ids(ml) == ["m1", "m2", "u1", "r1"]
    part = ml.get.response.db()[0].content.parts[0]
    assert isinstance(part, TextPart)
    part.text = "EDITED"
    assert ml.get.all.db()[3].text == "EDITED"
    assert ml.get.all.core()[-1] == PromptAssistantMessage([PromptTextPart("EDITED")])


def test_core_converts_each_view() -> None:
    ml = conversation()
    assert ml.get.input.core() == [PromptUserMessage([PromptTextPart("new q")])]
    assert ml.get.remembered.core() == [
        PromptUserMessage([PromptTextPart("old q")]),
        PromptAssistantMessage([PromptTextPart("old a")]),
    ]
    assert len(ml.get.all.core()) == 4


def test_all_prompt_is_untagged_system_then_tagged_then_conversation() -> None:
    ml = conversation()
    ml.add_system("from memory", tag="memory")
    ml.add_system(SystemMessage(content="instructions", provider_options={"p": {}}))
    ml.add_system("feedback", tag="processor-retry-feedback")
    prompt = ml.get.all.prompt()
    assert prompt[:3] == [
        PromptSystemMessage("instructions", {"p": {}}),
        PromptSystemMessage("from memory"),
        PromptSystemMessage("feedback"),
    ]
    assert prompt[3:] == ml.get.all.core()
    assert ml.get.input.prompt()[3:] == ml.get.input.core()


def test_view_repr_names_the_view() -> None:
    assert repr(conversation().get.input) == "<MessageView input: 1 messages>"
    assert repr(conversation().get.all) == "<MessageView all: 4 messages>"


# ============================================================= system messages


def test_all_and_tagged_system_messages_and_clearing() -> None:
    ml = MessageList()
    ml.add_system("u1").add_system("t1", tag="x").add_system("t2", tag="y")
    ml.add_system("u2")
    assert [s.content for s in ml.get_all_system_messages()] == ["u1", "u2", "t1", "t2"]
    tagged = ml.get_tagged_system_messages()
    assert {k: [s.content for s in v] for k, v in tagged.items()} == {
        "x": ["t1"],
        "y": ["t2"],
    }
    tagged["x"].clear()  # a copy
    assert ml.get_system_messages("x") != []
    ml.clear_system_messages("x")
    assert "x" not in ml.get_tagged_system_messages()
    ml.clear_system_messages()
    assert [s.content for s in ml.get_all_system_messages()] == ["t2"]


def test_replace_all_system_messages_clears_tagged_too() -> None:
    ml = MessageList()
    ml.add_system("old").add_system("tagged", tag="memory")
    ml.replace_all_system_messages([SystemMessage(content="new"), "newer"])
    assert [s.content for s in ml.get_system_messages()] == ["new", "newer"]
    assert ml.get_tagged_system_messages() == {}


def test_replace_all_system_messages_with_a_bad_entry_changes_nothing() -> None:
    ml = MessageList().add_system("keep").add_system("tag", tag="t")
    with pytest.raises(MessageFormatError, match=r"saw \'user\'"):
        ml.replace_all_system_messages(["x", {"role": "user", "content": "y"}])
    assert [s.content for s in ml.get_all_system_messages()] == ["keep", "tag"]


def test_snapshot_and_restore_keep_tags() -> None:
    ml = MessageList().add_system("base").add_system("mem", tag="memory")
    snapshot = ml.snapshot_system_messages()
    ml.add_system("feedback", tag="processor-retry-feedback")
    ml.replace_all_system_messages(["changed"])
    ml.restore_system_messages(snapshot)
    assert [s.content for s in ml.get_system_messages()] == ["base"]
    assert list(ml.get_tagged_system_messages()) == ["memory"]


# ================================================================ remove_by_ids


def test_remove_by_ids_returns_the_removed_in_order() -> None:
    ml = conversation()
    removed = ml.remove_by_ids(["r1", "m1", "unknown"])
    assert [m.id for m in removed] == ["m1", "r1"]
    assert ids(ml) == ["m2", "u1"]
    assert ml.get_source("r1") is None
    assert ml.remove_by_ids([]) == []


def test_remove_by_ids_accepts_one_id_as_a_str() -> None:
    ml = conversation()
    assert [m.id for m in ml.remove_by_ids("u1")] == ["u1"]
    assert ids(ml) == ["m1", "m2", "r1"]


def test_seed_error_recovery_example_trims_messages_1_and_2() -> None:
    ml = conversation()
    ml.add("another", "input")
    messages = ml.get.all.db()
    assert len(messages) > 4
    ml.remove_by_ids([messages[1].id, messages[2].id])
    assert ids(ml) == ["m1", "r1", messages[4].id]


# ======================================================= update_tool_invocation


def redact_dict(call_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """The seed's RedactToolResult call shape."""
    redacted = {**result, "ssn": "[REDACTED]", "email": "[REDACTED]"}
    return {
        "type": "tool-invocation",
        "toolInvocation": {
            "state": "result",
            "toolCallId": call_id,
            "toolName": "lookup-customer",
            "args": {"id": "changed-by-processor"},
            "result": redacted,
        },
    }


def with_tool_call(**part_kw: Any) -> tuple[MessageList, ToolInvocationPart]:
    ml = MessageList()
    ml.add("who is 7?", "input")
    call = tool(
        "c1",
        "result",
        {"name": "Ann", "ssn": "123", "email": "a@x"},
        **part_kw,
    )
    ml.add(assistant(call, id="a1"), "response")
    return ml, call


def test_update_tool_invocation_with_the_seed_redact_shape() -> None:
    ml, _ = with_tool_call()
    changed = ml.update_tool_invocation(
        redact_dict("c1", {"name": "Ann", "ssn": "123", "email": "a@x"})
    )
    assert changed is True
    part = by_id(ml, "a1").content.parts[0]
    assert isinstance(part, ToolInvocationPart)
    assert part.tool_invocation.result == {
        "name": "Ann",
        "ssn": "[REDACTED]",
        "email": "[REDACTED]",
    }
    assert part.tool_invocation.args == {"id": 7}  # the original args stay
    tool_message = ml.get.all.core()[-1]
    assert isinstance(tool_message, PromptToolMessage)
    assert tool_message.content[0].result["ssn"] == "[REDACTED]"


def test_update_tool_invocation_keeps_provider_executed_and_merges_metadata() -> None:
    ml, _ = with_tool_call(provider_executed=True, provider_metadata={"a": {"x": 1}})
    update = redact_dict("c1", {})
    update["providerMetadata"] = {"b": {"y": 2}}
    assert ml.update_tool_invocation(update, metadata={"redacted": True})
    message = ml.get_by_id("a1")
    assert message is not None
    part = message.content.parts[0]
    assert isinstance(part, ToolInvocationPart)
    assert part.provider_executed is True
    assert part.provider_metadata == {"a": {"x": 1}, "b": {"y": 2}}
    assert message.content.metadata == {"redacted": True}


def test_update_tool_invocation_accepts_snake_case_and_objects() -> None:
    ml, original = with_tool_call()
    assert ml.update_tool_invocation(
        {
            "type": "tool-invocation",
            "tool_invocation": {
                "state": "output-error",
                "tool_call_id": "c1",
                "tool_name": "lookup-customer",
                "error_text": "denied",
                "custom": 1,
            },
        }
    )
    part = by_id(ml, "a1").content.parts[0]
    assert isinstance(part, ToolInvocationPart)
    assert part.tool_invocation.error_text == "denied"
    assert part.tool_invocation.extra == {"custom": 1}
    replacement = tool("c1", "result", "plain", args={"ignored": True}, title="T")
    assert ml.update_tool_invocation(replacement)
    part = by_id(ml, "a1").content.parts[0]
    assert isinstance(part, ToolInvocationPart)
    assert part.tool_invocation.result == "plain"
    assert part.tool_invocation.args == {"id": 7}
    assert part.title == "T"
    assert replacement.tool_invocation.args == {"ignored": True}  # caller's untouched
    assert original.tool_invocation.result["ssn"] == "123"


def test_update_tool_invocation_searches_newest_first_and_moves_to_response() -> None:
    ml = MessageList()
    ml.add(assistant(tool("c1", "result", "old"), id="m1", created_at=at(1)), "memory")
    ml.add(user("q", "u1", created_at=at(2)), "memory")
    ml.add(
        assistant(tool("c1", "result", "newer"), id="m2", created_at=at(3)), "memory"
    )
    assert ml.update_tool_invocation(redact_dict("c1", {}))
    first = by_id(ml, "m1").content.parts[0]
    assert isinstance(first, ToolInvocationPart)
    assert first.tool_invocation.result == "old"
    assert ml.get_source("m2") == "response"
    assert ml.get_source("m1") == "memory"
    assert [m.id for m in ml.drain_unsaved_messages()] == ["m2"]


def test_update_tool_invocation_with_an_unknown_id_raises_naming_the_ids() -> None:
    """An id no tool call has is an error naming it and the ids there are (a
    redaction that silently missed would let the raw value through), and
    nothing changes."""
    ml, _ = with_tool_call()
    ml.add(assistant(tool("c2", "result", 2), id="a2"), "response")
    with pytest.raises(
        MessageFormatError,
        match=(
            r"no assistant tool call has the id 'nope'; the tool call ids in the "
            r"message list are 'c1', 'c2'"
        ),
    ):
        ml.update_tool_invocation(redact_dict("nope", {}))
    part = by_id(ml, "a1").content.parts[0]
    assert isinstance(part, ToolInvocationPart)
    assert part.tool_invocation.result["ssn"] == "123"


def test_update_tool_invocation_without_an_id_raises() -> None:
    ml, _ = with_tool_call()
    missing = redact_dict("c1", {})
    del missing["toolInvocation"]["toolCallId"]
    with pytest.raises(
        MessageFormatError,
        match=r"a part without a tool call id \(toolCallId\).*ids in the message "
        r"list are 'c1'",
    ):
        ml.update_tool_invocation(missing)


def test_update_tool_invocation_ignores_user_messages() -> None:
    """Only assistant tool calls are found: a user message's part with the
    same id is not one, and the error says there are none."""
    ml = MessageList()
    ml.add(
        Message(role="user", content=MessageContent(parts=[tool("c1", "result", 1)])),
        "input",
    )
    with pytest.raises(
        MessageFormatError,
        match="no assistant tool call has the id 'c1'; the message list has no "
        "assistant tool calls",
    ):
        ml.update_tool_invocation(redact_dict("c1", {}))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("c1", "expected a ToolInvocationPart or a dict"),
        ({"type": "text", "text": "x"}, "of type 'text'; expected 'tool-invocation'"),
        ({"type": "tool-invocation"}, "without a 'toolInvocation' object"),
        (
            {"toolInvocation": {"state": "done", "toolCallId": "c1"}},
            "the state 'done'; expected one of",
        ),
    ],
)
def test_update_tool_invocation_rejects_malformed_parts(bad: Any, match: str) -> None:
    ml, _ = with_tool_call()
    with pytest.raises(MessageFormatError, match=match):
        ml.update_tool_invocation(bad)


# ================================================================ conveniences


def test_get_source_by_message_or_id() -> None:
    ml = conversation()
    r1 = ml.get_by_id("r1")
    assert r1 is not None
    assert ml.get_source(r1) == "response"
    assert ml.get_source("m1") == "memory"
    assert ml.get_source("missing") is None
    assert ml.get_source(Message.user("x")) is None


def test_step_start_appends_once_to_the_newest_assistant() -> None:
    ml = MessageList()
    assert ml.step_start() is False
    ml.add(assistant("a", id="a1"), "response")
    ml.add("q", "input")
    assert ml.step_start(model="gpt") is True
    assert ml.step_start(model="gpt") is False
    parts = by_id(ml, "a1").content.parts
    assert parts[-1] == StepStartPart(model="gpt")
    assert [p.type for p in parts] == ["text", "step-start"]


def test_mark_response_message_boundary_by_id() -> None:
    ml = conversation()
    assert ml.mark_response_message_boundary("m2") is True
    assert by_id(ml, "m2").content.metadata == {"mastra": {"responseBoundary": True}}
    assert ml.mark_response_message_boundary("missing") is False
    assert MessageList().mark_response_message_boundary() is False


def test_get_latest_user_content() -> None:
    ml = conversation()
    assert ml.get_latest_user_content() == "new q"
    assert MessageList().get_latest_user_content() is None


def test_repr_counts_sources_and_system_messages() -> None:
    ml = conversation().add_system("s").add_system("t", tag="x")
    assert repr(ml) == (
        "<MessageList thread_id='t': 4 messages (memory=2, input=1, response=1), "
        "system=1+1 tagged>"
    )


def test_iter_is_a_snapshot() -> None:
    ml = conversation()
    seen = []
    for message in ml:
        seen.append(message.id)
        ml.remove_by_ids([message.id])
    assert seen == ["m1", "m2", "u1", "r1"]
    assert len(ml) == 0


def test_drain_unsaved_messages_returns_new_input_and_response_once() -> None:
    ml = conversation()
    assert [m.id for m in ml.drain_unsaved_messages()] == ["u1", "r1"]
    assert ml.drain_unsaved_messages() == []
    ml.add(assistant("more", id="r2"), "response")  # merges into r1
    ml.add("again", "input")
    latest = ml.get.all.db()[-1]
    ml.remove_by_ids([latest.id])
    assert [m.id for m in ml.drain_unsaved_messages()] == ["r1"]
    assert ml.step_start() is True
    assert [m.id for m in ml.drain_unsaved_messages()] == ["r1"]


# ===================================================================== prompts


def test_prompt_user_text_and_files_skip_other_parts() -> None:
    message = Message(
        role="user",
        content=MessageContent(
            parts=[
                TextPart(text="see", visibility="llm"),
                FilePart(data="https://x/y.png", mime_type="image/png", filename="y"),
                DataPart(type="data-ui", data={}),
                SourcePart(source=SourceInfo(id="s", url="https://x")),
                UnknownPart(type="mystery"),
                TextPart(text="this", provider_metadata={"anthropic": {"c": 1}}),
            ],
            provider_metadata={"openai": {"m": 1}},
        ),
    )
    assert to_prompt_messages([message]) == [
        PromptUserMessage(
            [
                PromptTextPart("see"),
                PromptFilePart("https://x/y.png", "image/png", "y"),
                PromptTextPart("this", provider_options={"anthropic": {"c": 1}}),
            ],
            provider_options={"openai": {"m": 1}},
        )
    ]


def test_prompt_tool_calls_pair_with_tool_results() -> None:
    failed = tool("c2", "output-error", name="t2")
    failed.tool_invocation.error_text = "boom"
    message = assistant("checking", tool("c1", "result", {"ok": 1}), failed, id="a")
    assert to_prompt_messages([message]) == [
        PromptAssistantMessage(
            [
                PromptTextPart("checking"),
                PromptToolCallPart("c1", "lookup-customer", {"id": 7}),
                PromptToolCallPart("c2", "t2", {"id": 7}),
            ]
        ),
        PromptToolMessage(
            [
                PromptToolResultPart("c1", "lookup-customer", {"ok": 1}),
                PromptToolResultPart("c2", "t2", "boom", is_error=True),
            ]
        ),
    ]


def test_prompt_pending_denied_and_streaming_calls() -> None:
    denied = tool("c3", "output-denied")
    denied.tool_invocation.approval = {"approved": False, "reason": "no"}
    message = assistant(tool("c1"), tool("c2", "partial-call"), denied, id="a")
    assert to_prompt_messages([message]) == [
        # c1 waits for its result (a pending approval): left out, as Mastra
        # does; a declined call's reason is its result (not an error).
        PromptAssistantMessage(
            [PromptToolCallPart("c3", "lookup-customer", {"id": 7})]
        ),
        PromptToolMessage([PromptToolResultPart("c3", "lookup-customer", "no")]),
    ]


def test_prompt_provider_executed_results_stay_in_the_assistant_message() -> None:
    message = assistant(
        tool("s1", "result", ["hit"], name="web_search", provider_executed=True),
        "found it",
        id="a",
    )
    assert to_prompt_messages([message]) == [
        PromptAssistantMessage(
            [
                PromptToolCallPart(
                    "s1", "web_search", {"id": 7}, provider_executed=True
                ),
                PromptToolResultPart(
                    "s1", "web_search", ["hit"], provider_executed=True
                ),
                PromptTextPart("found it"),
            ]
        )
    ]


def test_prompt_splits_steps_at_step_start_and_after_results() -> None:
    message = assistant(
        StepStartPart(),
        "step one",
        tool("c1", "result", 1),
        StepStartPart(),
        tool("c2", "result", 2),
        "step three, no step-start",
        id="a",
    )
    message.content.provider_metadata = {"anthropic": {"cacheControl": 1}}
    call = PromptToolCallPart
    result = PromptToolResultPart
    assert to_prompt_messages([message]) == [
        PromptAssistantMessage(
            [PromptTextPart("step one"), call("c1", "lookup-customer", {"id": 7})]
        ),
        PromptToolMessage([result("c1", "lookup-customer", 1)]),
        PromptAssistantMessage([call("c2", "lookup-customer", {"id": 7})]),
        PromptToolMessage([result("c2", "lookup-customer", 2)]),
        PromptAssistantMessage(
            [PromptTextPart("step three, no step-start")],
            provider_options={"anthropic": {"cacheControl": 1}},
        ),
    ]


def test_prompt_reasoning_keeps_signatures_and_redacted_data() -> None:
    thinking = ReasoningPart(
        reasoning="ab",
        details=[
            ReasoningDetail(type="text", text="a", signature="sig-a"),
            ReasoningDetail(type="redacted", data="opaque"),
        ],
    )
    thinking.type = "thinking"  # renamed by a processor: still reasoning
    plain = ReasoningPart(reasoning="plain")
    encrypted = ReasoningPart(provider_metadata={"openai": {"itemId": "r1"}})
    empty = ReasoningPart()
    message = assistant(thinking, plain, encrypted, empty, "answer", id="a")
    assert to_prompt_messages([message]) == [
        PromptAssistantMessage(
            [
                PromptReasoningPart("a", signature="sig-a", type="thinking"),
                PromptReasoningPart("", redacted_data="opaque", type="thinking"),
                PromptReasoningPart("plain"),
                PromptReasoningPart("", provider_options={"openai": {"itemId": "r1"}}),
                PromptTextPart("answer"),
            ]
        )
    ]


def test_prompt_drops_empty_messages_and_uses_legacy_content() -> None:
    messages = [
        Message(role="user", content=MessageContent(parts=[], content="legacy q")),
        Message(role="assistant", content=MessageContent(parts=[], content="legacy a")),
        Message(role="assistant", content=MessageContent(parts=[], content="")),
        assistant(DataPart(type="data-x", data=1), StepStartPart(), id="only-data"),
        Message(role="user", content=MessageContent(parts=[DataPart(type="data-y")])),
        Message(role="system", content=MessageContent(content="sys")),
        Message(role="signal", content=MessageContent(parts=[TextPart(text="ping")])),
    ]
    assert to_prompt_messages(messages) == [
        PromptUserMessage([PromptTextPart("legacy q")]),
        PromptAssistantMessage([PromptTextPart("legacy a")]),
        PromptSystemMessage("sys"),
        PromptUserMessage([PromptTextPart("ping")]),
    ]


def test_prompt_values_are_frozen_with_role_and_type() -> None:
    message = PromptUserMessage([PromptTextPart("x")])
    assert message.content == (PromptTextPart("x"),)
    assert message.role == "user"
    assert message.content[0].type == "text"
    assert PromptToolMessage([]).role == "tool"
    assert PromptFilePart("d", "m").type == "file"
    assert PromptReasoningPart("r").type == "reasoning"
    assert PromptToolCallPart("c", "t", {}).type == "tool-call"
    assert PromptToolResultPart("c", "t", 1).type == "tool-result"
    assert PromptSystemMessage("s").role == "system"
    with pytest.raises(
        attrs.exceptions.FrozenInstanceError, match="can't set attribute"
    ):
        message.role = "assistant"  # type: ignore[misc,assignment]


def test_to_prompt_messages_does_not_modify_its_input() -> None:
    message = assistant("a", tool("c1", "result", 1), id="a")
    snapshot = attrs.evolve(message, content=attrs.evolve(message.content))
    snapshot.content.parts = list(message.content.parts)
    to_prompt_messages([message])
    assert message == snapshot
