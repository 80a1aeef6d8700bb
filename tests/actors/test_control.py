"""The run's source queue (``ControlSource``) and the settle ``Barrier``: the
coordinator queues without waiting, the order is kept, and the waits behave
like a zero-capacity channel's (a cancelled send sends nothing, a cancelled
read loses nothing)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession.actors._control import ControlSource
from procession.actors._markers import Barrier


async def _drain(source: ControlSource) -> list[Any]:
    return [item async for item in source]


async def test_items_are_read_in_the_order_they_were_put() -> None:
    source = ControlSource()
    for item in ("a", "b", "c"):
        source.put(item)
    source.close()
    assert await _drain(source) == ["a", "b", "c"]


async def test_put_never_waits_and_wait_taken_waits_for_the_reader() -> None:
    source = ControlSource()
    taken = trio.Event()
    read: list[Any] = []

    async def sender() -> None:
        source.put("a")
        source.put("b")
        assert source.pending
        await source.wait_taken("b")
        assert read == ["a", "b"]  # both taken before the wait returns
        taken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert not taken.is_set()
        read.append(await source.__anext__())
        await trio.testing.wait_all_tasks_blocked()
        assert not taken.is_set()  # "b" is still queued
        read.append(await source.__anext__())
    assert taken.is_set()
    assert not source.pending


async def test_a_cancelled_wait_takes_back_its_own_item_only() -> None:
    source = ControlSource()
    source.put("queued before")
    with trio.CancelScope() as scope:
        scope.cancel()
        source.put("own")
        await source.wait_taken("own")
    assert scope.cancelled_caught
    source.close()
    assert await _drain(source) == ["queued before"]


async def test_a_reader_waiting_for_an_item_is_woken_by_put() -> None:
    source = ControlSource()
    got: list[Any] = []

    async def reader() -> None:
        got.append(await source.__anext__())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        source.put("x")
    assert got == ["x"]


async def test_a_cancelled_read_loses_nothing() -> None:
    source = ControlSource()
    with trio.move_on_after(0):
        await source.__anext__()
    source.put("kept")
    source.close()
    assert await _drain(source) == ["kept"]


async def test_the_reader_leaving_breaks_a_waiting_send() -> None:
    source = ControlSource()
    source.put("never read")

    async def leave() -> None:
        await trio.testing.wait_all_tasks_blocked()
        await source.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leave)
        with pytest.raises(trio.BrokenResourceError, match="pipeline has closed"):
            await source.wait_taken("never read")
    with pytest.raises(trio.BrokenResourceError, match="pipeline has closed"):
        source.put("late")


async def test_a_take_that_woke_the_sender_stands_if_the_reader_leaves_after() -> None:
    source = ControlSource()
    source.put("taken")
    done: list[str] = []

    async def sender() -> None:
        await source.wait_taken("taken")
        done.append("sent")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert await source.__anext__() == "taken"  # wakes the sender...
        await source.aclose()  # ...and the reader leaves before it runs
    assert done == ["sent"]


async def test_put_after_close_is_refused() -> None:
    source = ControlSource()
    source.close()
    with pytest.raises(trio.ClosedResourceError, match="source is closed"):
        source.put("x")
    assert await _drain(source) == []


async def test_one_sender_at_a_time() -> None:
    source = ControlSource()
    source.put("a")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(source.wait_taken)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="already sending"):
            await source.wait_taken()
        await source.__anext__()


# --- Barrier -------------------------------------------------------------------------


async def test_a_barrier_wakes_its_waiter_when_released() -> None:
    barrier = Barrier()
    passed: list[bool] = []

    async def waiter() -> None:
        await barrier.wait()
        passed.append(barrier.passed)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert passed == []
        barrier.release()
        barrier.release()  # a second release changes nothing
    assert passed == [True]


async def test_waiting_on_a_released_barrier_still_checkpoints() -> None:
    barrier = Barrier()
    barrier.release()
    with trio.CancelScope() as scope:
        scope.cancel()
        await barrier.wait()
    assert scope.cancelled_caught


async def test_a_cancelled_barrier_wait_can_be_waited_again() -> None:
    barrier = Barrier()
    with trio.move_on_after(0):
        await barrier.wait()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(barrier.wait)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match="already waiting"):
            await barrier.wait()
        barrier.release()


@pytest.mark.parametrize("yield_per_item", [False, True])
async def test_yield_per_item_makes_every_read_a_schedule_point(
    yield_per_item: bool,
) -> None:
    source = ControlSource(yield_per_item=yield_per_item)
    source.put("a")
    checks = (
        trio.testing.assert_checkpoints
        if yield_per_item
        else trio.testing.assert_no_checkpoints
    )
    with checks():
        assert await source.__anext__() == "a"


# --- RunControl.settle_ahead ------------------------------------------------------


class _Observer:
    def attempt_began(self, view: Any) -> None:
        pass

    def delivered(self, chunk: Any) -> None:
        pass


def _control(*, queue_ahead: bool = True) -> Any:
    from procession.actors import RunControl

    return RunControl(
        run_id="r",
        may_retry=lambda: False,
        on_outcome=lambda _outcome: None,
        observer=_Observer(),
        queue_ahead=queue_ahead,
    )


async def _client_end(source: ControlSource, seen: list[Any]) -> None:
    """A pipeline's reading end, reduced to what settle needs: barriers are
    released as they are read."""
    async for item in source:
        seen.append(item)
        if isinstance(item, Barrier):
            item.release()


async def test_settle_after_settle_ahead_waits_for_the_queued_barrier() -> None:
    control = _control()
    seen: list[Any] = []
    control.source.put("chunk")
    control.settle_ahead()
    # (On the autojump clock: a settle that never returns fails at once.)
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_client_end, control.source, seen)
            await trio.testing.wait_all_tasks_blocked()
            # The barrier passed before settle was called: settle sends no other.
            assert [type(i) for i in seen] == [str, Barrier]
            await control.settle()
            control.close()
    assert [type(i) for i in seen] == [str, Barrier]


async def test_a_send_after_settle_ahead_makes_settle_send_its_own_barrier() -> None:
    control = _control()
    seen: list[Any] = []
    control.settle_ahead()
    await control.send_ahead("later")
    # (On the autojump clock: a settle that never returns fails at once.)
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_client_end, control.source, seen)
            await control.settle()
            # settle returned only once "later" (sent after the queued barrier)
            # had been read: its own barrier came after it.
            assert [type(i) for i in seen] == [Barrier, str, Barrier]
            assert seen[1] == "later"
            control.close()


async def test_settle_ahead_waits_for_nothing_and_settle_still_waits() -> None:
    control = _control()
    control.settle_ahead()
    assert control.source.pending
    done = trio.Event()

    async def settler() -> None:
        await control.settle()
        done.set()

    # (On the autojump clock: a settle that never returns fails at once.)
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(settler)
            await trio.testing.wait_all_tasks_blocked()
            assert not done.is_set()  # the queued barrier has not been read yet
            barrier = await control.source.__anext__()
            assert isinstance(barrier, Barrier)
            barrier.release()
    assert done.is_set()


async def test_settle_ahead_does_nothing_without_queue_ahead() -> None:
    control = _control(queue_ahead=False)
    control.settle_ahead()
    assert not control.source.pending


# --- take_nowait ------------------------------------------------------------------


async def test_take_nowait_takes_what_is_queued_and_wakes_the_sender_when_empty() -> (
    None
):
    from procession.actors._flow import NOTHING

    source = ControlSource()
    assert source.take_nowait() is NOTHING
    source.put("a")
    source.put("b")
    sent: list[str] = []

    async def sender() -> None:
        await source.wait_taken("b")
        sent.append("b taken")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.testing.wait_all_tasks_blocked()
        assert source.take_nowait() == "a"
        await trio.testing.wait_all_tasks_blocked()
        assert sent == []  # "b" is still queued
        assert source.take_nowait() == "b"
    assert sent == ["b taken"]
    assert source.take_nowait() is NOTHING


async def test_take_nowait_takes_nothing_once_every_read_must_yield() -> None:
    from procession.actors._flow import NOTHING

    source = ControlSource()
    source.put("a")
    source.yield_per_item()
    assert source.take_nowait() is NOTHING
    assert source.pending  # still there for the next read
