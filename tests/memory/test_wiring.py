"""The wiring the runtime will do, done by hand with today's ``Agent``: the
memory processors in ``input_processors`` and ``save_turn`` after a run that
succeeded. Two ``generate()`` calls on one thread: the second prompt carries
the first turn."""

from __future__ import annotations

import pytest

from procession.memory import Memory, MemoryStorage
from procession.processors import PromptAssistantMessage, PromptUserMessage
from procession.runtime import Agent
from procession.testing import ScriptedModel

pytestmark = pytest.mark.procession_real_clock


def prompt_texts(model: ScriptedModel, call: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for message in model.calls[call].prompt:
        if isinstance(message, PromptUserMessage | PromptAssistantMessage):
            text = "".join(getattr(p, "text", "") for p in message.content)
            out.append((message.role, text))
    return out


async def test_a_second_generate_remembers_the_first(storage: MemoryStorage) -> None:
    memory = Memory(storage=storage)
    model = ScriptedModel(["Nice to meet you, Ada.", "Your name is Ada."])
    agent = Agent(id="assistant", model=model)

    async def ask(question: str) -> str:
        result = await agent.generate(
            question,
            input_processors=memory.input_processors(),
            thread_id="t-1",
            resource_id="ada",
        )
        assert result.error is None
        await memory.save_turn(
            "t-1", "ada", result.message_list, custom_chunks=result.custom_chunks
        )
        return result.text

    assert await ask("Hi, I am Ada.") == "Nice to meet you, Ada."
    assert await ask("What is my name?") == "Your name is Ada."
    assert prompt_texts(model, 1) == [
        ("user", "Hi, I am Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]
    stored = await storage.list_messages("t-1", "ada")
    assert [m.text for m in stored] == [
        "Hi, I am Ada.",
        "Nice to meet you, Ada.",
        "What is my name?",
        "Your name is Ada.",
    ]
