"""Any message the strategies can build reads back from storage as it was
saved: every part type, arbitrary unicode, JSON metadata, unknown keys."""

from __future__ import annotations

import datetime as _dt
import uuid

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from procession.memory import MemoryStorage
from procession.messages import Message, message_to_wire
from procession.testing.strategies import messages
from tests.memory.memory_helpers import Backend


def _utc(moment: _dt.datetime) -> _dt.datetime:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)
    return aware.astimezone(_dt.UTC)


def _storable(message: Message) -> bool:
    try:
        return 1000 <= _utc(message.created_at).year <= 9998
    except OverflowError:
        return False


def _unique_ids(batch: list[Message]) -> list[Message]:
    return [attrs.evolve(m, id=f"msg-{uuid.uuid4().hex}") for m in batch]


@pytest.mark.parametrize("backend", ["sqlite-file", "postgres"], indirect=True)
def test_any_message_reads_back_as_saved(backend: Backend) -> None:
    storage = backend()

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(messages().filter(_storable), min_size=1, max_size=3).map(_unique_ids)
    )
    def check(batch: list[Message]) -> None:
        thread = f"t-{uuid.uuid4().hex}"
        stored = trio.run(_save_and_read, storage, thread, batch)
        assert len(stored) == len(batch)
        for original, back in zip(batch, stored, strict=True):
            assert _utc(back.created_at) == _utc(original.created_at)
            expected = attrs.evolve(
                original,
                thread_id=thread,
                resource_id="alice",
                created_at=back.created_at,
            )
            assert message_to_wire(back) == message_to_wire(expected)

    check()


async def _save_and_read(
    storage: MemoryStorage, thread: str, batch: list[Message]
) -> list[Message]:
    await storage.save_turn(thread, "alice", batch)
    stored = await storage.list_messages(thread, "alice")
    by_id = {m.id: m for m in stored}
    return [by_id[m.id] for m in batch]
