"""Processor registration, reused across an agent's runs.

``register_processors`` checks every processor of a call and reads its hooks
(``dir()`` for misspelled ones, ``inspect`` for async): tens of microseconds
per processor, paid again by every run before its first chunk although an
agent's processors rarely change. ``Registrations`` keeps the result for the
lanes it saw, and registers again whenever a lane holds other instances or a
processor's registered attributes (its hooks, ``id``, ``name``, ``on_error``,
``on_violation``, ``process_data_parts``) are no longer what they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any, Final

from ..processors import ProcessorSet, register_processors
from ..processors._contract import HOOK_NAMES

__all__ = ["Registrations"]

_ATTRIBUTES: Final = (
    *HOOK_NAMES,
    "id",
    "name",
    "on_error",
    "on_violation",
    "process_data_parts",
)
_MISSING: Final = object()
_KEPT: Final = 16
"""Lane sets kept per agent (per-call lists or lane resolvers that make new
instances each call would otherwise grow the cache without bound)."""

_Lanes = tuple[tuple[object, ...], tuple[object, ...], tuple[object, ...]]


def _fingerprint(lanes: _Lanes) -> list[tuple[Any, ...]]:
    """What registration read of each processor, to compare the next time."""
    # getattr(processor, name, _MISSING) for every name, mapped in C: a run
    # pays this on every call, and a generator would resume once per name.
    return [
        tuple(map(getattr, repeat(processor), _ATTRIBUTES, repeat(_MISSING)))
        for lane in lanes
        for processor in lane
    ]


class Registrations:
    """One agent's registered processor lanes (see the module docstring)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[
            tuple[int, ...], tuple[_Lanes, list[tuple[Any, ...]], ProcessorSet]
        ] = {}

    def register(
        self,
        input: Sequence[object],
        output: Sequence[object],
        error: Sequence[object],
    ) -> ProcessorSet:
        """``register_processors(input=..., output=..., error=...)``, from the
        cache when the same processors, unchanged, were registered before.
        Raises what registration raises (a failed registration is not kept)."""
        lanes: _Lanes = (tuple(input), tuple(output), tuple(error))
        key = (
            len(lanes[0]),
            len(lanes[1]),
            *map(id, (*lanes[0], *lanes[1], *lanes[2])),
        )
        fingerprint = _fingerprint(lanes)
        kept = self._entries.get(key)
        # The kept lanes hold their processors, so an id in the key cannot have
        # been reused by another object while the entry exists.
        if kept is not None and kept[1] == fingerprint:
            return kept[2]
        registered = register_processors(
            input=lanes[0], output=lanes[1], error=lanes[2]
        )
        if len(self._entries) >= _KEPT:
            self._entries.clear()
        self._entries[key] = (lanes, fingerprint, registered)
        return registered
