"""``AgentFace``: what continuing a run (a person's answer, a takeover) reads
of the ``Agent`` it runs for. ``_answer`` and ``_takeover`` are typed by this
face, so they do not import the agent's module, which imports them."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from ..actors import ExecutionMode
from ..memory import RunRecord, RunStorage
from ._durable import Durable

if TYPE_CHECKING:
    from ._stream import AgentStream

__all__ = ["AgentFace"]


class AgentFace(Protocol):
    """The ``Agent`` as a run's continuation sees it (``Agent`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def max_steps(self) -> int: ...

    @property
    def execution_mode(self) -> ExecutionMode: ...

    @property
    def approval_ttl(self) -> float | None: ...

    @property
    def run_storage(self) -> RunStorage | None: ...

    @property
    def durable(self) -> Durable | None: ...

    def take_over(
        self, run: RunRecord, *, durable: bool | Durable = True
    ) -> AbstractAsyncContextManager[AgentStream]: ...
