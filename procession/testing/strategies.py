"""Hypothesis strategies for chunks, chunk streams, messages and text splits.

Importing this module needs Hypothesis (``pip install "procession[testing]"``).
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._strategies import chunk_streams as chunk_streams
from ._strategies import chunks as chunks
from ._strategies import json_values as json_values
from ._strategies import messages as messages
from ._strategies import text_chunks as text_chunks
from ._strategies import text_splits as text_splits
from ._strategies import wire_chunks as wire_chunks

__all__ = [
    "chunk_streams",
    "chunks",
    "json_values",
    "messages",
    "text_chunks",
    "text_splits",
    "wire_chunks",
]

_fixup_module_metadata(__name__, globals())
