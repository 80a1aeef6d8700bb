"""The installed distribution's version."""

from __future__ import annotations

import functools
import importlib.metadata

__all__ = ["version"]


@functools.cache
def version() -> str:
    """The installed distribution's version (``0+unknown`` when procession is
    imported from a source tree that was never installed). Read once: a
    metadata lookup scans ``sys.path`` (~0.5 ms), and the server's request
    span asks for it on every request."""
    try:
        return importlib.metadata.version("procession")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
