"""Issue 11: ``Agent(memory=Memory(...))``: the runtime loads the thread's
history before the caller's input processors, saves the turn once every
processor finished, in one transaction, and saves nothing of a run that did
not finish. On every backend (``storage`` fixture)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio
import trio.lowlevel

from procession import Agent, ConfigurationError, Processor, ProviderError
from procession.chunks import TextDeltaChunk
from procession.memory import (
    Memory,
    MemoryStorage,
    MessageHistory,
    MissingThreadError,
    ThreadOwnershipError,
)
from procession.processors import (
    PromptAssistantMessage,
    PromptSystemMessage,
    PromptUserMessage,
)
from procession.testing import ScriptedModel, text_turn, tool_call_turn

pytestmark = pytest.mark.procession_real_clock

ADA = {"thread": "t-1", "resource": "ada"}


def conversation(model: ScriptedModel, call: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for message in model.calls[call].prompt:
        if isinstance(message, PromptUserMessage | PromptAssistantMessage):
            text = "".join(getattr(p, "text", "") for p in message.content)
            out.append((message.role, text))
    return out


async def stored(storage: MemoryStorage, thread: str = "t-1") -> list[str]:
    return [m.text for m in await storage.list_messages(thread, "ada")]


async def test_two_generate_calls_remember_the_first_turn(
    storage: MemoryStorage,
) -> None:
    model = ScriptedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent(id="a", model=model, memory=Memory(storage=storage))
    first = await agent.generate("Hi, I am Ada.", memory=ADA)
    second = await agent.generate("What is my name?", memory=ADA)
    assert first.error is None
    assert second.text == "Your name is Ada."
    assert conversation(model, 1) == [
        ("user", "Hi, I am Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]
    assert await stored(storage) == [
        "Hi, I am Ada.",
        "Nice to meet you, Ada.",
        "What is my name?",
        "Your name is Ada.",
    ]


async def test_history_is_remembered_not_input_and_processors_see_it_so(
    storage: MemoryStorage,
) -> None:
    seen: list[tuple[list[str], list[str]]] = []

    class Look(Processor):
        id = "look"

        def process_input(self, args: Any) -> None:
            seen.append(
                (
                    [m.text for m in args.messages],
                    [m.text for m in args.message_list.get.remembered.db()],
                )
            )

    look = Look()
    agent = Agent(
        id="a",
        model=ScriptedModel(["one", "two"]),
        memory=Memory(storage=storage),
        input_processors=[look],
    )
    await agent.generate("first", memory=ADA)
    result = await agent.generate("second", thread_id="t-1", resource_id="ada")
    assert seen == [(["first"], []), (["second"], ["first", "one"])]
    assert [m.text for m in result.message_list.get.remembered.db()] == ["first", "one"]
    # processor_index shows the automatic processor first, the caller's after it.
    assert look.processor_index == 1


async def test_a_run_that_does_not_finish_saves_nothing(storage: MemoryStorage) -> None:
    class Block(Processor):
        id = "block"

        def process_output_stream(self, args: Any) -> Any:
            if (
                isinstance(args.part, TextDeltaChunk)
                and "secret" in args.part.payload.text
            ):
                args.abort("leak")
            return args.part

    class RejectResult(Processor):
        id = "reject-result"

        def process_output_result(self, args: Any) -> None:
            args.abort("no")

    memory = Memory(storage=storage)
    turns: list[Any] = [text_turn("a secret"), ProviderError("down"), "fine"]
    agent = Agent(id="a", model=ScriptedModel(turns), memory=memory)
    tripped = await agent.generate("one", memory=ADA, output_processors=[Block()])
    failed = await agent.generate("two", memory=ADA)
    rejected = await agent.generate(
        "three", memory=ADA, output_processors=[RejectResult()]
    )
    assert tripped.tripwire is not None
    assert failed.error is not None
    assert rejected.tripwire is not None  # Mastra #26215: a rejected reply is not saved
    assert await stored(storage) == []


async def test_an_aborted_stream_saves_nothing(storage: MemoryStorage) -> None:
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("one two three")]),
        memory=Memory(storage=storage),
    )
    async with agent.stream("hi", memory=ADA) as stream:
        async for _chunk in stream:
            await stream.cancel()
    assert await stored(storage) == []


async def test_retry_feedback_and_rejected_attempts_are_never_saved(
    storage: MemoryStorage,
) -> None:
    class OnceMore(Processor):
        id = "once-more"

        def process_output_step(self, args: Any) -> None:
            if args.text == "meh":
                args.abort("try harder", retry=True)

    model = ScriptedModel(["meh", "good answer"])
    agent = Agent(
        id="a",
        model=model,
        memory=Memory(storage=storage),
        output_processors=[OnceMore()],
        max_processor_retries=1,
    )
    result = await agent.generate("q", memory=ADA)
    assert result.text == "good answer"
    system = [m for m in model.calls[1].prompt if isinstance(m, PromptSystemMessage)]
    assert any("not accepted" in m.content for m in system)
    assert await stored(storage) == ["q", "good answer"]


async def test_tool_steps_and_custom_data_are_saved_on_the_assistant_message(
    storage: MemoryStorage,
) -> None:
    class Stamp(Processor):
        id = "stamp"

        async def process_output_result(self, args: Any) -> None:
            await args.writer.custom({"type": "data-audit", "data": {"ok": True}})
            await args.writer.custom(
                {"type": "data-ephemeral", "data": {}, "transient": True}
            )

    from procession import tool

    @tool(description="echo")
    def echo(args: dict[str, Any]) -> str:
        return "echoed"

    agent = Agent(
        id="a",
        model=ScriptedModel([tool_call_turn("echo", {}), "done"]),
        tools=[echo],
        memory=Memory(storage=storage),
        output_processors=[Stamp()],
    )
    result = await agent.generate("go", memory=ADA)
    assert result.error is None
    saved = await storage.list_messages("t-1", "ada")
    assert saved[0].role == "user"
    assert saved[0].text == "go"
    parts = [p.type for m in saved if m.role == "assistant" for p in m.content.parts]
    assert "tool-invocation" in parts
    last = [p.type for p in saved[-1].content.parts]
    assert saved[-1].role == "assistant"
    assert "data-audit" in last  # written by process_output_result: kept
    assert "data-ephemeral" not in parts  # transient: never saved


async def test_memory_needs_a_thread_and_a_resource_named_at_the_call(
    storage: MemoryStorage,
) -> None:
    agent = Agent(id="a", model=ScriptedModel(["x"]), memory=Memory(storage=storage))
    with pytest.raises(MissingThreadError, match="thread and resource"):
        agent.generate("hi").close()
    with pytest.raises(ConfigurationError, match="memory\\['thread'\\] is 't-1'"):
        agent.generate("hi", memory=ADA, thread_id="t-2").close()
    with pytest.raises(ConfigurationError, match="expected \\{'thread'"):
        agent.generate("hi", memory={"threads": "t"}).close()


async def test_another_resources_thread_is_never_read(storage: MemoryStorage) -> None:
    model = ScriptedModel(["private", "never"])
    agent = Agent(id="a", model=model, memory=Memory(storage=storage))
    await agent.generate("my secret", memory=ADA)
    result = await agent.generate(
        "show me", memory={"thread": "t-1", "resource": "eve"}
    )
    assert result.finish_reason == "error"
    cause = result.error.__cause__ if result.error is not None else None
    assert isinstance(result.error, ThreadOwnershipError) or isinstance(
        cause, ThreadOwnershipError
    )
    assert len(model.calls) == 1  # eve's run never reached the model


async def test_a_listed_memory_processor_replaces_the_automatic_one(
    storage: MemoryStorage,
) -> None:
    model = ScriptedModel(["one", "two", "three"])
    memory = Memory(storage=storage)
    agent = Agent(id="a", model=model, memory=memory)
    await agent.generate("a", memory=ADA)
    await agent.generate("b", memory=ADA)
    # Only the last message, not the default ten.
    await agent.generate(
        "c", memory=ADA, input_processors=[MessageHistory(storage, last_messages=1)]
    )
    assert conversation(model, 2) == [("assistant", "two"), ("user", "c")]


async def test_two_runs_on_one_thread_at_once_take_turns(
    storage: MemoryStorage,
) -> None:
    model = ScriptedModel([text_turn("first answer"), text_turn("second answer")])
    agent = Agent(id="a", model=model, memory=Memory(storage=storage))
    async with trio.open_nursery() as nursery:
        for question in ("one", "two"):
            nursery.start_soon(functools.partial(agent.generate, question, memory=ADA))
    texts = await stored(storage)
    # Whole turns, one after the other: never interleaved, none lost.
    assert len(texts) == 4
    assert sorted([texts[0], texts[2]]) == ["one", "two"]
    assert [texts[1], texts[3]] == ["first answer", "second answer"]
    # The second run loaded the first one's turn.
    assert conversation(model, 1)[:2] == [("user", texts[0]), ("assistant", texts[1])]


def test_memory_must_be_a_memory() -> None:
    with pytest.raises(ConfigurationError, match="memory must be a procession"):
        # Deliberately the wrong type: the error is what is tested.
        Agent(id="a", model=ScriptedModel(["x"]), memory={"thread": "t"})  # type: ignore[arg-type]


async def test_a_failed_save_is_the_runs_error_and_writes_nothing(
    storage: MemoryStorage,
) -> None:
    from procession.memory import StorageUnavailableError
    from procession.testing import assert_run_shape

    class Unreachable:
        """The storage, with the save failing as a dropped connection does."""

        def __init__(self, inner: MemoryStorage) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def save_turn(self, *args: Any, **kwargs: Any) -> Any:
            raise StorageUnavailableError("the database went away mid-save")

    memory = Memory(storage=Unreachable(storage))
    agent = Agent(id="a", model=ScriptedModel(["answer"]), memory=memory)
    async with agent.stream("hi", memory=ADA) as stream:
        chunks = [c async for c in stream]
        result = await stream.result()
    assert isinstance(result.error, StorageUnavailableError)
    assert result.finish_reason == "error"
    assert result.text == "answer"  # the client saw it; it was not saved
    assert assert_run_shape(chunks) == "error"
    assert [c.type for c in chunks[-2:]] == ["finish", "error"]
    assert await stored(storage) == []


async def test_working_memory_is_updated_by_the_model_and_shown_next_time(
    storage: MemoryStorage,
) -> None:
    from procession.memory import UPDATE_WORKING_MEMORY

    model = ScriptedModel(
        [
            tool_call_turn(UPDATE_WORKING_MEMORY, {"memory": "# User\n- Name: Ada"}),
            "Noted.",
            "Hello again, Ada.",
        ]
    )
    agent = Agent(
        id="a", model=model, memory=Memory(storage=storage, working_memory=True)
    )
    first = await agent.generate("I am Ada.", memory=ADA)
    assert first.error is None
    assert first.steps[0].tool_results[0].result == {"success": True}
    # Another thread of the same resource sees the document.
    await agent.generate("Hi!", memory={"thread": "t-2", "resource": "ada"})
    system = [
        m.content for m in model.calls[2].prompt if isinstance(m, PromptSystemMessage)
    ]
    assert any("- Name: Ada" in text for text in system)
    assert UPDATE_WORKING_MEMORY in [t.name for t in model.calls[2].tools]
