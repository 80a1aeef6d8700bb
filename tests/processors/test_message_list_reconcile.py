"""MessageList.reconcile: making the list agree with the messages a hook
returned (SPEC §2.11), with Hypothesis properties over sources and scopes."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from procession import ProcessorContractError
from procession.messages import Message, MessageContent, SystemMessage, TextPart
from procession.processors import MessageList
from tests.processors.message_list_helpers import (
    assistant,
    at,
    by_id,
    conversation,
    ids,
    sources,
    user,
)

# ============================================================== reconciliation


def test_reconcile_same_objects_is_a_no_op() -> None:
    ml = conversation()
    ml.drain_unsaved_messages()
    before = ml.get.all.db()
    ml.reconcile(ml.get.input.db(), scope="input", default_source="input")
    ml.reconcile(ml.get.all.db(), scope="all", default_source="response")
    ml.reconcile(ml.get.response.db(), scope="response", default_source="response")
    after = ml.get.all.db()
    assert all(a is b for a, b in zip(before, after, strict=True))
    assert ml.drain_unsaved_messages() == []


def test_reconcile_same_objects_with_interleaved_sources_keeps_positions() -> None:
    ml = MessageList()
    ml.add("q1", "input")
    ml.add(assistant("a1", id="r1"), "response")
    ml.add(user("q2", "u2"), "input")
    order = ids(ml)
    ml.reconcile(ml.get.input.db(), scope="input", default_source="input")
    assert ids(ml) == order


def test_reconcile_removes_missing_scope_messages_only() -> None:
    ml = conversation()
    ml.reconcile([], scope="input", default_source="input")
    assert ids(ml) == ["m1", "m2", "r1"]
    ml.reconcile([], scope="response", default_source="response")
    assert ids(ml) == ["m1", "m2"]


def test_reconcile_new_objects_with_same_ids_replace_in_place() -> None:
    # The seed's LowercaseProcessor returns rebuilt messages with the same ids.
    ml = MessageList()
    ml.add("HELLO", "input")
    ml.add(assistant("A", id="r1"), "response")
    ml.add(user("WORLD", "u2"), "input")
    ml.drain_unsaved_messages()
    returned = [
        attrs.evolve(
            m,
            content=attrs.evolve(
                m.content,
                parts=[
                    attrs.evolve(p, text=p.text.lower())
                    for p in m.content.parts
                    if isinstance(p, TextPart)
                ],
            ),
        )
        for m in ml.get.input.db()
    ]
    ml.reconcile(returned, scope="input", default_source="input")
    assert [m.text for m in ml] == ["hello", "A", "world"]
    assert ml.get.all.db()[0] is returned[0]
    assert sources(ml) == ["input", "response", "input"]
    assert [m.id for m in ml.drain_unsaved_messages()] == [m.id for m in returned]


def test_reconcile_takes_the_returned_order_and_keeps_sources() -> None:
    ml = conversation()
    m1, _m2, u1, _r1 = ml.get.all.db()
    new = user("added", "n1")
    ml.reconcile([u1, new, m1], scope="all", default_source="input")
    assert ids(ml) == ["u1", "n1", "m1"]
    assert sources(ml) == ["input", "input", "memory"]
    assert new.thread_id == "t"


def test_reconcile_places_the_block_where_the_scope_was() -> None:
    ml = conversation()
    u1 = ml.get_by_id("u1")
    assert u1 is not None
    ml.reconcile([u1, user("extra", "u2")], scope="input", default_source="input")
    assert ids(ml) == ["m1", "m2", "u1", "u2", "r1"]
    ml.reconcile([], scope="input", default_source="input")
    ml.reconcile([user("back", "u3")], scope="input", default_source="input")
    assert ids(ml) == ["m1", "m2", "u3", "r1"]


def test_reconcile_default_source_for_new_ids() -> None:
    ml = conversation()
    ml.reconcile(
        [*ml.get.response.db(), assistant("b", id="r2")],
        scope="response",
        default_source="response",
    )
    # consecutive assistant messages merge, as in Mastra's output-result pass
    assert ids(ml) == ["m1", "m2", "u1", "r1"]
    parts = by_id(ml, "r1").content.parts
    assert [p.text for p in parts if isinstance(p, TextPart)] == ["new a", "b"]


def test_reconcile_merges_returned_assistant_messages_into_one() -> None:
    ml = MessageList()
    ml.add("q", "input")
    ml.reconcile(
        [assistant("x", id="a"), assistant("y", id="b"), assistant("z", id="c")],
        scope="response",
        default_source="response",
    )
    [reply] = ml.get.response.db()
    assert (reply.id, reply.text) == ("a", "xyz")


def test_reconcile_system_entries_become_untagged_system_messages() -> None:
    ml = conversation()
    u1 = ml.get_by_id("u1")
    ml.reconcile(
        [
            u1,  # type: ignore[list-item]  # get_by_id is Optional; u1 exists here
            {"role": "system", "content": "from dict"},
            SystemMessage(content="object"),
            Message(
                role="system",
                content=MessageContent(parts=[TextPart(text="a"), TextPart(text="b")]),
            ),
            Message(
                role="system",
                content=MessageContent(parts=[TextPart(text="p")], content="legacy"),
            ),
        ],
        scope="input",
        default_source="input",
    )
    assert [s.content for s in ml.get_system_messages()] == [
        "from dict",
        "object",
        "a\nb",
        "legacy",
    ]
    assert ids(ml) == ["m1", "m2", "u1", "r1"]


def test_reconcile_system_messages_replace_untagged_and_keep_tagged() -> None:
    ml = conversation().add_system("old").add_system("mem", tag="memory")
    ml.reconcile(
        ml.get.input.db(),
        scope="input",
        default_source="input",
        system_messages=["new", SystemMessage(content="newer")],
    )
    assert [s.content for s in ml.get_system_messages()] == ["new", "newer"]
    assert [s.content for s in ml.get_system_messages("memory")] == ["mem"]


def test_reconcile_accepts_message_dicts() -> None:
    ml = conversation()
    ml.reconcile(
        [{"role": "user", "content": "typed", "id": "u1"}],
        scope="input",
        default_source="input",
    )
    assert by_id(ml, "u1").text == "typed"
    assert ids(ml) == ["m1", "m2", "u1", "r1"]


def test_reconcile_keeps_odd_in_place_edits_of_stored_objects() -> None:
    ml = conversation()
    u1 = ml.get_by_id("u1")
    assert u1 is not None
    u1.content.parts.clear()  # a processor emptied it in place: allowed
    ml.reconcile([u1], scope="input", default_source="input")
    assert ml.get_by_id("u1") is u1


@pytest.mark.parametrize(
    ("returned", "system", "match"),
    [
        (Message.user("x"), None, r"returned Message\(.*expected a list of messages"),
        ("text", None, r"returned 'text'; expected a list"),
        ([42], None, r"returned 42 at index 0; expected a Message"),
        ([{"role": "user"}], None, r"malformed message at index 0: .*no content"),
        (
            [Message(role="user", id="e", content=MessageContent())],
            None,
            r"malformed message at index 0: message 'e'",
        ),
        (
            [Message.user("a", id="d"), Message.user("b", id="d")],
            None,
            r"two messages with the id 'd'",
        ),
        ([], [{"role": "user", "content": "x"}], r"invalid system message: Expected"),
        ([], "just text", r"system_messages='just text'; expected a list"),
    ],
)
def test_reconcile_rejects_contract_violations_without_changing_anything(
    returned: Any, system: Any, match: str
) -> None:
    ml = conversation().add_system("keep")
    before = ml.get.all.db()
    with pytest.raises(ProcessorContractError, match=match) as info:
        ml.reconcile(
            returned,
            scope="input",
            default_source="input",
            system_messages=system,
            processor_id="p1",
            hook="process_input",
        )
    assert str(info.value).startswith("processor 'p1': process_input returned")
    assert info.value.processor_id == "p1"
    assert ml.get.all.db() == before
    assert [s.content for s in ml.get_system_messages()] == ["keep"]


# ========================================================= properties (Hypothesis)


_SOURCE_LIST = st.lists(st.sampled_from(["memory", "input", "response"]), max_size=8)


def _user_rows(kinds: list[str]) -> MessageList:
    ml = MessageList()
    for index, kind in enumerate(kinds):
        ml.add(user(f"t{index}", f"m{index}", created_at=at(index)), kind)  # type: ignore[arg-type]  # parametrized source, typed str
    return ml


@given(kinds=_SOURCE_LIST, data=st.data())
def test_reconcile_all_takes_exactly_the_returned_order(
    kinds: list[str], data: st.DataObject
) -> None:
    ml = _user_rows(kinds)
    stored = ml.get.all.db()
    new = [user(f"n{i}", f"n{i}") for i in range(data.draw(st.integers(0, 3)))]
    chosen = data.draw(st.permutations(stored + new))
    chosen = chosen[: data.draw(st.integers(0, len(chosen)))]
    ml.reconcile(chosen, scope="all", default_source="response")
    assert ids(ml) == [m.id for m in chosen]
    for message in chosen:
        expected = (
            "response" if message.id.startswith("n") else kinds[int(message.id[1:])]
        )
        assert ml.get_source(message) == expected


@given(kinds=_SOURCE_LIST, scope=st.sampled_from(["input", "all", "response"]))
def test_reconcile_with_the_view_itself_never_changes_anything(
    kinds: list[str], scope: str
) -> None:
    ml = _user_rows(kinds)
    before = ml.get.all.db()
    view = {"input": ml.get.input, "all": ml.get.all, "response": ml.get.response}
    ml.reconcile(
        view[scope].db(),
        scope=scope,  # type: ignore[arg-type]  # parametrized scope, typed str
        default_source="input",
    )
    after = ml.get.all.db()
    assert len(before) == len(after)
    assert all(a is b for a, b in zip(before, after, strict=True))


@given(kinds=_SOURCE_LIST, data=st.data())
def test_reconcile_scope_leaves_other_sources_in_place(
    kinds: list[str], data: st.DataObject
) -> None:
    ml = _user_rows(kinds)
    scope: Literal["input", "response"] = data.draw(
        st.sampled_from(["input", "response"])
    )
    others = [m.id for m in ml if ml.get_source(m) != scope]
    in_scope = [m for m in ml if ml.get_source(m) == scope]
    kept = data.draw(st.permutations(in_scope))
    kept = kept[: data.draw(st.integers(0, len(kept)))]
    ml.reconcile(kept, scope=scope, default_source=scope)
    assert [m.id for m in ml if ml.get_source(m) != scope] == others
    assert [m.id for m in ml if ml.get_source(m) == scope] == [m.id for m in kept]
