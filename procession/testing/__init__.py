"""The public test kit: the sequential reference runner (and, in
``procession.testing.strategies``, Hypothesis strategies; that module needs the
``testing`` extra)."""

from ._reference import SequentialRun as SequentialRun
from ._reference import run_sequential as run_sequential

__all__ = ["SequentialRun", "run_sequential"]
