"""Text that cannot leave the process: a lone surrogate (``"\\ud800"``) is a
``str`` Python accepts but UTF-8 cannot encode, so a request carrying one fails
deep in the HTTP layer with a bare ``UnicodeEncodeError``. These helpers find
one at the edge, where the error can still name the message and part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from .._errors import InvalidTextError

__all__ = ["check_text", "find_lone_surrogate"]

_MAX_DEPTH: Final = 64  # JSON-like values nest far less; a cycle must end


def _offset(text: str) -> int | None:
    """Where ``text`` holds its first lone surrogate, or ``None``."""
    if text.isascii():  # the common case, without allocating
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # utf-8 refuses exactly the surrogates
        return error.start
    return None


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _find(value: object, path: str, depth: int) -> tuple[str, int, int] | None:
    if isinstance(value, str):
        offset = _offset(value)
        return None if offset is None else (path, offset, ord(value[offset]))
    if depth >= _MAX_DEPTH:
        return None
    found: tuple[str, int, int] | None = None
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}[{key!r}]"
            if isinstance(key, str) and (at := _offset(key)) is not None:
                return (f"{here} (the key)", at, ord(key[at]))
            if (found := _find(item, here, depth + 1)) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := _find(item, f"{path}[{index}]", depth + 1)) is not None:
                return found
    elif attrs.has(kind := type(value)):
        for field in attrs.fields(kind):
            item = getattr(value, field.name)
            if (found := _find(item, _join(path, field.name), depth + 1)) is not None:
                return found
    return found


def find_lone_surrogate(value: object) -> tuple[str, int, int] | None:
    """The first lone surrogate in ``value``: a ``str``, or the strings inside
    mappings (keys too), lists, tuples and attrs instances, depth first.

    Returns ``(path, offset, code_point)``: the path from ``value`` in Python
    notation (``""`` for ``value`` itself, ``"text"``, ``"args['city'][0]"``),
    the offset in that string and the surrogate's code point; ``None`` when
    every string is valid Unicode. Pure-ASCII strings cost one ``isascii()``;
    other values are skipped, and nesting deeper than 64 is not searched.
    """
    return _find(value, "", 0)


def check_text(value: object, where: str, *, path: str = "") -> None:
    """Raise ``InvalidTextError`` naming ``where`` (e.g. ``"message 'm1'
    (user), part #0 (text)"``) if ``value`` holds a lone surrogate (see
    ``find_lone_surrogate``; ``path`` names ``value`` itself in ``where``);
    return ``None`` otherwise."""
    found = _find(value, path, 0)
    if found is not None:
        path, offset, code_point = found
        raise InvalidTextError(where, path, offset, code_point)
