"""Text that cannot leave the process: a lone surrogate (``"\\ud800"``) is a
``str`` Python accepts but UTF-8 cannot encode, so a request carrying one fails
deep in the HTTP layer with a bare ``UnicodeEncodeError``. These helpers find
one at the edge, where the error can still name the message and part.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Final, cast

import attrs

from .._errors import InvalidTextError

__all__ = ["check_text", "find_lone_surrogate", "holds_lone_surrogate"]

_MAX_DEPTH: Final = 64  # JSON-like values nest far less; a cycle must end
_SCALARS: Final = (type(None), bool, int, float)
# Items skipped without a call: no string can be inside them. (Other objects
# that are neither attrs instances nor containers are searched by a call
# that finds nothing; the types of a message's own fields are listed here.)
_LEAVES: Final = frozenset({*_SCALARS, _dt.datetime})
_CONTAINERS: Final = frozenset({dict, list, tuple})
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_RECORDS: dict[type, tuple[str, ...]] = {}
"""The attrs classes ``_search`` met (no str, Mapping, list or tuple), with
their field names."""

_Hit = tuple[list[str], int, int]  # path segments (innermost first), offset, code


def _offset(text: str) -> int | None:
    """Where ``text`` holds its first lone surrogate, or ``None``."""
    if text.isascii():  # the common case, without allocating
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # utf-8 refuses exactly the surrogates
        return error.start
    return None


def _field_names(kind: type) -> tuple[str, ...]:
    """The attrs fields of ``kind`` (none for other classes), looked up once."""
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = tuple(f.name for f in attrs.fields(kind)) if attrs.has(kind) else ()
        _FIELD_NAMES[kind] = names
    return names


def _search(value: object, depth: int) -> _Hit | None:
    # The path is built only on a hit, while unwinding, and a scalar, an ASCII
    # str or an empty container is skipped without a call: valid text, the
    # common case, stays cheap.
    kind = type(value)
    names = _RECORDS.get(kind)
    if names is None:
        if kind is str or isinstance(value, str):
            text = cast("str", value)
            offset = _offset(text)
            return None if offset is None else ([], offset, ord(text[offset]))
        if kind in _SCALARS or depth >= _MAX_DEPTH:
            return None
        if isinstance(value, Mapping):
            return _search_mapping(value, depth)
        if isinstance(value, list | tuple):
            return _search_sequence(value, depth)
        names = _field_names(kind)
        if not names:
            return None
        # An attrs class that is no str, Mapping, list or tuple: from now on
        # its instances go straight to their fields (the isinstance checks
        # above cost an ABC check each, per value).
        _RECORDS[kind] = names
    elif depth >= _MAX_DEPTH:
        return None
    for name in names:
        item = getattr(value, name)
        kind = type(item)
        if (
            kind in _LEAVES
            or (kind is str and item.isascii())
            or (kind in _CONTAINERS and not item)
        ):
            continue
        if (found := _search(item, depth + 1)) is not None:
            found[0].append(f".{name}")
            return found
    return None


def _search_mapping(value: Mapping[object, object], depth: int) -> _Hit | None:
    for key, item in value.items():
        if isinstance(key, str) and (at := _offset(key)) is not None:
            return ([f"[{key!r}] (the key)"], at, ord(key[at]))
        kind = type(item)
        if (
            kind in _LEAVES
            or (isinstance(item, str) and item.isascii())
            or (kind in _CONTAINERS and not item)
        ):
            continue
        if (found := _search(item, depth + 1)) is not None:
            found[0].append(f"[{key!r}]")
            return found
    return None


def _search_sequence(
    value: list[object] | tuple[object, ...], depth: int
) -> _Hit | None:
    for index, item in enumerate(value):
        kind = type(item)
        if (
            kind in _LEAVES
            or (isinstance(item, str) and item.isascii())
            or (kind in _CONTAINERS and not item)
        ):
            continue
        if (found := _search(item, depth + 1)) is not None:
            found[0].append(f"[{index}]")
            return found
    return None


def find_lone_surrogate(value: object) -> tuple[str, int, int] | None:
    """The first lone surrogate in ``value``: a ``str``, or the strings inside
    mappings (keys too), lists, tuples and attrs instances, depth first.

    Returns ``(path, offset, code_point)``: the path from ``value`` in Python
    notation (``""`` for ``value`` itself, ``"text"``, ``"args['city'][0]"``),
    the offset in that string and the surrogate's code point; ``None`` when
    every string is valid Unicode. Pure-ASCII strings cost one ``isascii()``;
    other values are skipped, and nesting deeper than 64 is not searched.
    """
    found = _search(value, 0)
    if found is None:
        return None
    segments, offset, code_point = found
    return "".join(reversed(segments)).removeprefix("."), offset, code_point


def holds_lone_surrogate(value: object, *, nested: int = 0) -> bool:
    """Whether ``value`` holds a lone surrogate (see ``find_lone_surrogate``),
    searched once, with the depth limit counted from ``nested`` levels inside
    it: ``False`` promises that ``find_lone_surrogate`` finds none in
    ``value``, nor in any value up to ``nested`` levels inside it searched on
    its own. Cheaper than naming where: no path is built."""
    return _search(value, -nested) is not None


def check_text(
    value: object, where: str | Callable[[], str], *, path: str = ""
) -> None:
    """Raise ``InvalidTextError`` naming ``where`` (e.g. ``"message 'm1'
    (user), part #0 (text)"``, or a function making it, called only then) if
    ``value`` holds a lone surrogate (see ``find_lone_surrogate``; ``path``
    names ``value`` itself); return ``None`` otherwise."""
    found = find_lone_surrogate(value)
    if found is not None:
        inner, offset, code_point = found
        if path and inner:
            inner = path + ("" if inner.startswith("[") else ".") + inner
        named = where() if callable(where) else where
        raise InvalidTextError(named, inner or path, offset, code_point)
