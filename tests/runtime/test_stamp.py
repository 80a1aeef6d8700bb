"""``RunState.stamp``'s copier gives what ``attrs.evolve`` gives, for every
chunk class, and leaves the model's chunk as it was."""

from __future__ import annotations

import attrs
from hypothesis import given

from procession.data import DataChunk
from procession.runtime._state import _stamper
from procession.testing.strategies import chunks


@given(chunks())
def test_the_stamp_copier_equals_attrs_evolve(chunk: object) -> None:
    if chunk.__class__ is DataChunk:
        return  # data-* chunks carry no run id: never stamped
    before = attrs.evolve(chunk)  # type: ignore[misc]
    stamped = _stamper(chunk.__class__)(chunk, "run-x")
    assert stamped == attrs.evolve(chunk, run_id="run-x")  # type: ignore[misc]
    assert stamped.__class__ is chunk.__class__
    assert stamped is not chunk
    assert chunk == before  # the model's chunk is not touched
