"""Reading provider JSON into precise types, and the JSON decoder of every
server-sent event's ``data``.

``loads`` is ``msgspec``'s decoder when the ``fastjson`` extra is installed
(about 1 µs less per event than ``json.loads``: a tenth of what a bare SSE
read costs in all; see ``benchmarks/provider_path.py``), else
``json.loads``. Both give the same value for any text: what msgspec refuses
(``NaN``, ``1e400``, an escaped lone surrogate, text that is not JSON) is
handed to ``json.loads``, which reads it as it always did or raises its own
``JSONDecodeError``. ``orjson`` is not used: it turns integers beyond 64 bits
into floats, silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "as_dict",
    "best_loads",
    "dumps",
    "get_dict",
    "get_int",
    "get_str",
    "fast_loads",
    "loads",
    "parse_args",
]


def fast_loads() -> Callable[[str], Any] | None:
    """A decoder that gives what ``json.loads`` gives, on msgspec (``None``
    when msgspec is not installed)."""
    try:
        import msgspec
    except ImportError:
        return None
    decode = msgspec.json.Decoder().decode

    def loads(text: str) -> Any:
        """``text`` parsed as JSON: the value ``json.loads`` gives, or its
        ``JSONDecodeError``."""
        try:
            return decode(text)
        except Exception:
            # Rare (not JSON, or JSON msgspec reads otherwise): the stdlib's word.
            return json.loads(text)

    return loads


def best_loads() -> Callable[[str], Any]:
    """The decoder ``loads`` is: the fast one if msgspec is installed, else
    ``json.loads``."""
    return fast_loads() or json.loads


loads = best_loads()
"""Parse JSON text (a server-sent event's ``data``, streamed tool arguments):
the value ``json.loads`` gives, or its ``JSONDecodeError``."""


def as_dict(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty dict."""
    return value if isinstance(value, dict) else {}


def get_dict(value: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``value[key]`` if it is a JSON object, else an empty dict."""
    return as_dict(value.get(key))


def get_str(value: Mapping[str, Any], key: str) -> str | None:
    """``value[key]`` if it is a string, else ``None``."""
    item = value.get(key)
    return item if isinstance(item, str) else None


def get_int(value: Mapping[str, Any], key: str) -> int | None:
    """``value[key]`` if it is an integer (not a bool), else ``None``."""
    item = value.get(key)
    return item if isinstance(item, int) and not isinstance(item, bool) else None


def parse_args(text: str) -> Any:
    """Tool-call arguments streamed as JSON text: the parsed value (``{}`` for
    empty text), or the text itself when it is not valid JSON (the agent then
    reports the bad arguments to the model as a tool error)."""
    if not text.strip():
        return {}
    try:
        return loads(text)
    except ValueError:
        return text


def dumps(value: object) -> str:
    """Compact JSON text of ``value`` (non-JSON values by their ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
