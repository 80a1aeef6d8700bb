"""Public faces: give every public object the module a user imports it from.

Implementation lives in private ``_x.py`` modules; each public module re-exports
its names with ``__all__`` and calls ``fixup_module_metadata`` at its end, so
``repr``, tracebacks, pickles and docs show ``procession.ConfigurationError``,
not ``procession._errors.ConfigurationError`` (trio does the same). An object's
home is the first public module that claims it; ``procession`` itself claims
its names with ``force=True``, so the top-level face always wins.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["fixup_module_metadata", "moved_names"]


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def fixup_module_metadata(
    module_name: str, namespace: Mapping[str, Any], *, force: bool = False
) -> None:
    """Set ``__module__`` of every class and function in ``namespace['__all__']``
    that still names a private module of procession (or, with ``force``, any
    module of procession) to ``module_name``."""
    for name in namespace["__all__"]:
        obj = namespace[name]
        current = getattr(obj, "__module__", None)
        if not isinstance(current, str) or not current.startswith("procession"):
            continue
        if not isinstance(obj, type) and not callable(obj):
            continue
        if force or _is_private(current):
            try:
                obj.__module__ = module_name
            except (AttributeError, TypeError):  # a builtin-backed object
                continue


def moved_names(
    module_name: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a public module whose names in
    ``homes`` left its face: each still resolves, from the module ``homes``
    names (imported lazily, so faces of a lower layer are never imported at
    import time), with a ``DeprecationWarning`` that names its one home; the
    old path goes in the next release. A home that is private means the name
    is internal and leaves the public API."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        if _is_private(home):
            advice = "it is internal and will not be public in the next release"
        else:
            advice = (
                f"import it from {home} (the old path will be removed in the next "
                f"release)"
            )
        warnings.warn(
            f"{module_name}.{name} is no longer exported here: {advice}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    def __dir__() -> list[str]:
        return sorted({*vars(importlib.import_module(module_name)), *homes})

    return __getattr__, __dir__
