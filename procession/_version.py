"""The installed distribution's version."""

from __future__ import annotations

import importlib.metadata

__all__ = ["version"]


def version() -> str:
    """The installed distribution's version (``0+unknown`` when procession is
    imported from a source tree that was never installed)."""
    try:
        return importlib.metadata.version("procession")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
