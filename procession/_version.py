"""The installed distribution's version."""

from __future__ import annotations

import functools
import importlib.metadata

__all__ = ["version"]


@functools.cache  # read from the installed metadata: ~2 ms a call
def version() -> str:
    """The installed distribution's version (``0+unknown`` when procession is
    imported from a source tree that was never installed). Read once."""
    try:
        return importlib.metadata.version("procession")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
