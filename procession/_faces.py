"""Public faces: give every public object the module a user imports it from.

Implementation lives in private ``_x.py`` modules; each public module re-exports
its names with ``__all__`` and calls ``fixup_module_metadata`` at its end, so
``repr``, tracebacks, pickles and docs show ``procession.ConfigurationError``,
not ``procession._errors.ConfigurationError`` (trio does the same). An object's
home is the first public module that claims it; ``procession`` itself claims
its names with ``force=True``, so the top-level face always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["fixup_module_metadata"]


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
