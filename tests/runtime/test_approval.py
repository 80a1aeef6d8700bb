"""A person in the loop (issue 22): a tool call that needs approval pauses the
run, which is kept in storage; an answer continues the same run, exactly
once, in this process or another. Mastra's visible behaviour is pinned where
the seed is silent (the research note: chunk shapes, the stream's end, the
other calls of the step, the decline's words, memory)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import attrs
import pytest
import trio

from procession import (
    Agent,
    ApprovalAlreadyDecided,
    NoRunStorageError,
    Processor,
    SnapshotError,
    ToolCallNotPendingError,
    WaitingRunNotFound,
    tool,
)
from procession.data import PromptToolCallPart, ToolInvocation, ToolInvocationPart
from procession.memory import Memory, SqliteStorage
from procession.runtime.tools import ToolContext
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    text_turn,
    tool_call_turn,
)

THREAD = {"thread": "t-1", "resource": "ada"}


@attrs.frozen
class RecordId:
    id: int


class Ledger:
    """What the tools did, to count executions."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def tools(self) -> list[Any]:
        ledger = self

        @tool(require_approval=True)
        def delete_record(args: RecordId, ctx: ToolContext) -> dict[str, Any]:
            """Delete a record."""
            ledger.calls.append(("delete_record", args.id))
            return {"deleted": args.id}

        @tool
        def lookup(args: RecordId) -> dict[str, Any]:
            """Look a record up."""
            ledger.calls.append(("lookup", args.id))
            return {"found": args.id}

        @tool
        def ask_colour(args: RecordId, ctx: ToolContext) -> dict[str, Any]:
            """Ask the person for a colour."""
            if ctx.resume_data is None:
                ledger.calls.append(("ask_colour:suspend", args.id))
                ctx.suspend({"question": "Which colour?"})
            ledger.calls.append(("ask_colour", ctx.resume_data))
            return {"colour": ctx.resume_data["colour"], "asked": ctx.suspend_payload}

        return [delete_record, lookup, ask_colour]


def _agent(
    tmp_path: pathlib.Path,
    turns: list[Any],
    ledger: Ledger,
    **options: Any,
) -> Agent:
    tmp_path.mkdir(parents=True, exist_ok=True)
    storage = SqliteStorage(tmp_path / "memory.db")
    return Agent(
        id="clerk",
        model=ScriptedModel(turns),
        tools=ledger.tools(),
        memory=Memory(storage=storage),
        **options,
    )


async def _run(stream_cm: Any) -> tuple[list[Any], Any]:
    async with stream_cm as stream:
        chunks = [c async for c in stream]
        return chunks, await stream.result()


def _last_invocation(message: Any) -> ToolInvocation:
    part = message.content.parts[-1]
    assert isinstance(part, ToolInvocationPart)
    return part.tool_invocation


def _types(chunks: list[Any]) -> list[str]:
    return [c.type for c in chunks]


async def test_a_call_needing_approval_pauses_as_mastra_does(
    tmp_path: pathlib.Path,
) -> None:
    ledger = Ledger()
    agent = _agent(
        tmp_path,
        [tool_call_turn("delete_record", {"id": 42}), text_turn("Deleted.")],
        ledger,
    )
    chunks, result = await _run(agent.stream("delete 42", memory=THREAD))
    # The approval chunk is the last: no step-finish, no finish (Mastra).
    assert _types(chunks)[-2:] == ["tool-call", "tool-call-approval"]
    approval = chunks[-1]
    assert approval.run_id == result.run_id
    assert approval.payload.tool_call_id == chunks[-2].payload.tool_call_id
    assert approval.payload.args == {"id": 42}
    assert json.loads(approval.payload.resume_schema)["required"] == ["approved"]
    assert result.finish_reason == "suspended"
    assert result.outcome.kind == "suspended"
    [pending] = result.pending_tool_calls
    assert (pending.tool_name, pending.kind) == ("delete_record", "approval")
    assert ledger.calls == []  # nothing ran
    # The turn so far is saved, the call shown waiting (Mastra's metadata).
    storage = agent.run_storage
    assert storage is not None
    saved = await agent.memory.storage.list_messages("t-1", "ada")  # type: ignore[union-attr]
    assert [m.role for m in saved] == ["user", "assistant"]
    assert _last_invocation(saved[1]).state == "call"
    metadata = saved[1].content.metadata or {}
    assert pending.tool_call_id in metadata["pendingToolApprovals"]
    [listed] = await agent.list_suspended_runs(resource_id="ada")
    assert listed.run_id == result.run_id
    assert listed.tool_calls == result.pending_tool_calls


async def test_an_approval_continues_the_same_run_once(tmp_path: pathlib.Path) -> None:
    ledger = Ledger()
    agent = _agent(
        tmp_path,
        [tool_call_turn("delete_record", {"id": 42}), text_turn("Deleted it.")],
        ledger,
    )
    _chunks, paused = await _run(agent.stream("delete 42", memory=THREAD))
    chunks, result = await _run(agent.approve_tool_call(paused.run_id))
    assert ledger.calls == [("delete_record", 42)]
    # No start on resume; the paused step's result and step-finish come first.
    assert _types(chunks)[:2] == ["tool-result", "step-finish"]
    assert chunks[0].payload.result == {"deleted": 42}
    assert {c.run_id for c in chunks} == {paused.run_id}
    assert result.run_id == paused.run_id
    assert result.finish_reason == "stop"
    assert result.text == "Deleted it."
    assert [s.step_number for s in result.steps] == [0, 1]
    assert result.steps[0].tool_results[0].result == {"deleted": 42}
    # Memory: the waiting message updated in place, the answer after it.
    saved = await agent.memory.storage.list_messages("t-1", "ada")  # type: ignore[union-attr]
    assert [m.role for m in saved] == ["user", "assistant", "assistant"]
    assert len({m.id for m in saved}) == 3
    assert _last_invocation(saved[1]).state == "result"
    assert saved[2].text == "Deleted it."
    # Applied once: a second answer, of either kind, is refused, bare.
    for again in (
        agent.approve_tool_call(paused.run_id),
        agent.decline_tool_call(paused.run_id),
    ):
        with pytest.raises(ApprovalAlreadyDecided, match="already answered") as info:
            async with again:
                pass
        assert info.value.decision == "approved"
    assert ledger.calls == [("delete_record", 42)]
    assert await agent.list_suspended_runs() == []


async def test_a_decline_reaches_the_model_as_the_tools_result(
    tmp_path: pathlib.Path,
) -> None:
    ledger = Ledger()
    seen: list[str] = []

    class Watch(Processor):
        id = "watch"

        def process_tool_result(self, args: Any) -> None:
            seen.append(args.tool_name)

    model = ScriptedModel(
        [tool_call_turn("delete_record", {"id": 7}), text_turn("Understood.")] * 2
    )
    agent = Agent(
        id="clerk",
        model=model,
        tools=ledger.tools(),
        memory=Memory(storage=SqliteStorage(tmp_path / "m.db")),
        output_processors=[Watch()],
    )
    for reason, expected in (
        (None, "Tool call was not approved by the user"),
        ("Not today", "Not today"),
    ):
        _c, paused = await _run(agent.stream("delete 7", memory=THREAD))
        chunks, result = await _run(
            agent.decline_tool_call(paused.run_id, reason=reason)
        )
        denied = chunks[0]
        assert denied.type == "tool-output-denied"
        assert denied.payload.approval.approved is False
        assert denied.payload.approval.reason == expected
        # The model's next prompt carries the reason as the call's result.
        prompt = model.calls[-1].prompt
        results = [p for m in prompt if m.role == "tool" for p in m.content]
        assert results[-1].result == expected
        assert result.finish_reason == "stop"
    assert ledger.calls == []  # never executed
    assert seen == []  # process_tool_result is not asked for a declined call


async def test_the_calls_of_a_step_wait_one_at_a_time_in_model_order(
    tmp_path: pathlib.Path,
) -> None:
    """Mastra: calls before the waiting one run before the pause (their
    results held), calls after it wait; a second call needing approval
    pauses the run again; every result goes out when the last is answered."""
    ledger = Ledger()
    calls = [
        item
        for index, (name, record) in enumerate(
            [("lookup", 1), ("delete_record", 2), ("lookup", 3), ("delete_record", 4)]
        )
        for item in tool_call_turn(name, {"id": record}, tool_call_id=f"c{index}")
    ]
    agent = _agent(tmp_path, [calls, text_turn("Done.")], ledger)
    chunks, first = await _run(agent.stream("clean up", memory=THREAD))
    assert _types(chunks)[-1] == "tool-call-approval"
    assert "tool-result" not in _types(chunks)
    assert ledger.calls == [("lookup", 1)]
    [waiting] = first.pending_tool_calls
    chunks, second = await _run(agent.approve_tool_call(first.run_id))
    assert _types(chunks) == ["tool-call-approval"]  # paused again, at call 4
    # (Between two waiting calls the calls run concurrently, as tools do.)
    assert sorted(ledger.calls) == [("delete_record", 2), ("lookup", 1), ("lookup", 3)]
    [waiting_again] = second.pending_tool_calls
    assert waiting_again.tool_call_id != waiting.tool_call_id
    with pytest.raises(ApprovalAlreadyDecided, match="'c1'"):
        async with agent.approve_tool_call(first.run_id, waiting.tool_call_id):
            pass  # that call was answered: never twice
    with pytest.raises(ToolCallNotPendingError, match="does not wait on tool call"):
        async with agent.approve_tool_call(first.run_id, "c2"):
            pass  # a call that never waited
    chunks, last = await _run(
        agent.decline_tool_call(first.run_id, waiting_again.tool_call_id)
    )
    assert _types(chunks)[:5] == [
        "tool-result",
        "tool-result",
        "tool-result",
        "tool-output-denied",
        "step-finish",
    ]
    assert [c.payload.tool_call_id for c in chunks[:4]] == ["c0", "c1", "c2", "c3"]
    assert last.finish_reason == "stop"
    assert sorted(ledger.calls) == [("delete_record", 2), ("lookup", 1), ("lookup", 3)]


async def test_who_decides_a_call_needs_approval(tmp_path: pathlib.Path) -> None:
    ledger = Ledger()
    turns = [tool_call_turn("lookup", {"id": 1}), text_turn("ok")] * 4
    agent = _agent(tmp_path, turns, ledger, require_tool_approval=True)
    # The agent's policy: every call waits.
    _c, paused = await _run(agent.stream("look", memory=THREAD))
    assert paused.finish_reason == "suspended"
    await _run(agent.decline_tool_call(paused.run_id))
    # Per call wins over the agent's: False lets it run.
    _c, ran = await _run(
        agent.stream("look", memory=THREAD, require_tool_approval=False)
    )
    assert ran.finish_reason == "stop"
    asked: list[tuple[str, Any]] = []

    def policy(name: str, args: Any, context: Any) -> bool:
        asked.append((name, args))
        raise RuntimeError("the policy service is down")

    # A policy that raises fails closed: the call waits.
    _c, closed = await _run(
        agent.stream("look", memory=THREAD, require_tool_approval=policy)
    )
    assert closed.finish_reason == "suspended"
    assert asked == [("lookup", {"id": 1})]


async def test_a_tool_policy_function_decides_alone(tmp_path: pathlib.Path) -> None:
    executed: list[int] = []

    @tool(require_approval=lambda args, ctx: args.id > 10)
    def refund(args: RecordId) -> str:
        """Refund."""
        executed.append(args.id)
        return "refunded"

    agent = Agent(
        id="a",
        model=ScriptedModel(
            [
                tool_call_turn("refund", {"id": 5}),
                "ok",
                tool_call_turn("refund", {"id": 50}),
                "ok",
            ]
        ),
        tools=[refund],
        storage=SqliteStorage(tmp_path / "runs.db"),
        require_tool_approval=True,  # overridden by the tool's own function
    )
    small = await agent.generate("refund 5")
    large = await agent.generate("refund 50")
    assert small.finish_reason == "stop"
    assert large.finish_reason == "suspended"  # generate returns, never raises
    assert executed == [5]
    result = await agent.approve_tool_call_generate(large.run_id)
    assert result.finish_reason == "stop"
    assert executed == [5, 50]


async def test_a_tool_suspends_itself_and_resumes_with_data(
    tmp_path: pathlib.Path,
) -> None:
    ledger = Ledger()
    agent = _agent(
        tmp_path,
        [tool_call_turn("ask_colour", {"id": 1}), text_turn("Blue it is.")],
        ledger,
    )
    chunks, paused = await _run(agent.stream("pick a colour", memory=THREAD))
    suspended = chunks[-1]
    assert suspended.type == "tool-call-suspended"
    assert suspended.payload.suspend_payload == {"question": "Which colour?"}
    [pending] = paused.pending_tool_calls
    assert pending.kind == "suspended"
    with pytest.raises(ToolCallNotPendingError, match="resume_stream"):
        async with agent.approve_tool_call(paused.run_id):
            pass
    chunks, result = await _run(agent.resume_stream(paused.run_id, {"colour": "blue"}))
    assert chunks[0].type == "tool-result"
    assert chunks[0].payload.result == {
        "colour": "blue",
        "asked": {"question": "Which colour?"},
    }
    assert result.text == "Blue it is."
    assert ledger.calls == [
        ("ask_colour:suspend", 1),
        ("ask_colour", {"colour": "blue"}),
    ]


async def test_the_processors_state_and_the_retry_count_come_back(
    tmp_path: pathlib.Path,
) -> None:
    class Count(Processor):
        id = "count"

        def process_output_stream(self, args: Any) -> Any:
            args.state["chunks"] = args.state.get("chunks", 0) + 1
            return args.part

        def process_output_result(self, args: Any) -> None:
            totals.append(args.state["chunks"])

    class RetryFirstDraft(Processor):
        id = "retry-draft"

        def process_output_step(self, args: Any) -> None:
            if "draft" in args.text:
                args.abort("no drafts", retry=True)

    totals: list[int] = []
    ledger = Ledger()
    agent = Agent(
        id="clerk",
        model=ScriptedModel(
            [
                text_turn("a draft"),
                tool_call_turn("delete_record", {"id": 1}),
                text_turn("Done."),
            ]
        ),
        tools=ledger.tools(),
        memory=Memory(storage=SqliteStorage(tmp_path / "m.db")),
        output_processors=[Count(), RetryFirstDraft()],
        max_processor_retries=3,
    )
    before, paused = await _run(agent.stream("go", memory=THREAD))
    assert paused.retry_count == 1
    after, result = await _run(agent.approve_tool_call(paused.run_id))
    assert result.retry_count == 1  # the budget as it was
    # The counter went on from where the paused run left it.
    assert totals == [len(before) - 1 + len(after)]


async def test_without_storage_the_run_fails_at_once_naming_it() -> None:
    ledger = Ledger()
    agent = Agent(
        id="clerk",
        model=ScriptedModel([tool_call_turn("delete_record", {"id": 1})]),
        tools=ledger.tools(),
    )
    with trio.fail_after(5):  # never a hang
        result = await agent.generate("delete 1")
    assert result.finish_reason == "error"
    assert isinstance(result.error, NoRunStorageError)
    assert "storage" in str(result.error)
    assert "'delete_record'" in str(result.error) or "delete_record" in str(
        result.error
    )
    assert ledger.calls == []
    with pytest.raises(NoRunStorageError, match="no storage"):
        async with agent.approve_tool_call("run-x"):
            pass


async def test_state_that_is_not_json_is_named_at_the_pause(
    tmp_path: pathlib.Path,
) -> None:
    class Keeps(Processor):
        id = "keeps"

        def process_output_stream(self, args: Any) -> Any:
            args.state["when"] = object()
            return args.part

    ledger = Ledger()
    agent = Agent(
        id="clerk",
        model=ScriptedModel([tool_call_turn("delete_record", {"id": 1})]),
        tools=ledger.tools(),
        storage=SqliteStorage(tmp_path / "runs.db"),
        output_processors=[Keeps()],
    )
    result = await agent.generate("delete 1")
    assert isinstance(result.error, SnapshotError)
    assert "processor 'keeps'" in str(result.error)
    assert "['when']" in str(result.error)
    assert await agent.list_suspended_runs() == []


async def test_unknown_runs_and_other_resources_are_not_found(
    tmp_path: pathlib.Path,
) -> None:
    ledger = Ledger()
    agent = _agent(tmp_path, [tool_call_turn("delete_record", {"id": 1})], ledger)
    _c, paused = await _run(agent.stream("delete", memory=THREAD))
    with pytest.raises(WaitingRunNotFound, match="run-nope"):
        async with agent.approve_tool_call("run-nope"):
            pass
    with pytest.raises(WaitingRunNotFound, match=r"is waiting to be answered"):
        async with agent.approve_tool_call(paused.run_id, resource_id="bob"):
            pass
    other = Agent(
        id="other",
        model=ScriptedModel([]),
        storage=agent.run_storage,
    )
    with pytest.raises(WaitingRunNotFound, match=r"is waiting to be answered"):
        async with other.approve_tool_call(paused.run_id):
            pass
    assert ledger.calls == []
    assert len(await agent.list_suspended_runs(resource_id="ada")) == 1


async def test_an_approval_past_its_ttl_declines_the_call(
    tmp_path: pathlib.Path,
) -> None:
    ledger = Ledger()
    agent = _agent(
        tmp_path,
        [tool_call_turn("delete_record", {"id": 1}), text_turn("ok")],
        ledger,
        approval_ttl=0.05,
    )
    _c, paused = await _run(agent.stream("delete", memory=THREAD))
    await trio.sleep(0.1)  # real time: the stored run's clock is the wall's
    chunks, _result = await _run(agent.approve_tool_call(paused.run_id))
    assert chunks[0].type == "tool-output-denied"
    assert "expired" in chunks[0].payload.approval.reason
    assert ledger.calls == []
    decisions = await agent.run_storage.run_decisions(paused.run_id)  # type: ignore[union-attr]
    assert [d.decision for d in decisions] == ["expired"]


async def test_a_new_message_on_a_waiting_thread_runs_and_the_wait_goes_on(
    tmp_path: pathlib.Path,
) -> None:
    """Mastra: a new turn on a thread with a waiting call runs at once, the
    unanswered call left out of its prompt; the waiting run can still be
    answered later (against the history it paused with)."""
    ledger = Ledger()
    model = ScriptedModel(
        [
            tool_call_turn("delete_record", {"id": 1}),
            text_turn("The weather is fine."),
            text_turn("Deleted after all."),
        ]
    )
    agent = Agent(
        id="clerk",
        model=model,
        tools=ledger.tools(),
        memory=Memory(storage=SqliteStorage(tmp_path / "m.db")),
    )
    _c, paused = await _run(agent.stream("delete 1", memory=THREAD))
    with trio.fail_after(5):  # the paused run holds no lock on the thread
        _c, other = await _run(agent.stream("weather?", memory=THREAD))
    assert other.text == "The weather is fine."
    prompt = model.calls[1].prompt
    assert not any(
        isinstance(p, PromptToolCallPart)
        for m in prompt
        if not isinstance(m.content, str)
        for p in m.content
    )
    _c, late = await _run(agent.approve_tool_call(paused.run_id))
    assert late.text == "Deleted after all."
    assert ledger.calls == [("delete_record", 1)]


async def test_every_execution_mode_pauses_and_resumes_alike(
    tmp_path: pathlib.Path,
) -> None:
    """The chain of processors gives the same chunks, around and across the
    pause, in every execution mode."""

    class Upper(Processor):
        id = "upper"

        async def process_output_stream(self, args: Any) -> Any:
            await trio.lowlevel.checkpoint()  # an async hook: it may split off
            if args.part.type == "text-delta":
                text = args.part.payload.text.upper()
                return attrs.evolve(
                    args.part, payload=attrs.evolve(args.part.payload, text=text)
                )
            return args.part

    shapes = {}
    for mode in ("adaptive", "fused", "actors"):
        ledger = Ledger()
        agent = _agent(
            tmp_path / mode,
            [tool_call_turn("delete_record", {"id": 3}), text_turn("All done now.")],
            ledger,
            output_processors=[Upper()],
            execution_mode=mode,
        )
        before, paused = await _run(agent.stream("delete 3", memory=THREAD))
        after, result = await _run(agent.approve_tool_call(paused.run_id))
        shapes[mode] = [
            (c.type, getattr(getattr(c, "payload", None), "text", None))
            for c in (*before, *after)
            if c.type != "step-start"
        ]
        assert result.text == "ALL DONE NOW."
        assert ledger.calls == [("delete_record", 3)]
    assert shapes["adaptive"] == shapes["fused"] == shapes["actors"]
    types = [t for t, _ in shapes["fused"]]
    assert types.index("tool-call-approval") < types.index("tool-result")


# --- across processes ------------------------------------------------------------

TARGET = pathlib.Path(__file__).with_name("approval_target.py")


def _process(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(TARGET), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).parents[2])},
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_a_run_paused_in_one_process_is_approved_in_another(
    tmp_path: pathlib.Path,
) -> None:
    db, ledger = str(tmp_path / "m.db"), str(tmp_path / "ledger.txt")
    first = _process("pause", db, ledger)
    assert first["finish"] == "suspended"
    second = _process("approve", db, ledger, first["run_id"])
    assert second["finish"] == "stop"
    assert second["run_id"] == first["run_id"]
    assert second["text"] == "Deleted in another process."
    again = _process("approve", db, ledger, first["run_id"])
    assert again["error"] == "ApprovalAlreadyDecided"
    assert pathlib.Path(ledger).read_text().splitlines() == ["delete_record 42"]


async def test_both_streams_keep_the_run_shape(tmp_path: pathlib.Path) -> None:
    ledger = Ledger()
    agent = _agent(
        tmp_path,
        [tool_call_turn("delete_record", {"id": 9}), text_turn("Gone.")],
        ledger,
    )
    before, paused = await _run(agent.stream("delete 9", memory=THREAD))
    assert assert_run_shape(before) == "suspended"
    after, _result = await _run(agent.approve_tool_call(paused.run_id))
    assert assert_run_shape(after, continued=True) == "finish"
    with pytest.raises(AssertionError, match="step-finish without a step-start"):
        assert_run_shape(after)  # a continued stream begins inside a step
