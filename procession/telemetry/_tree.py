"""``span_tree``: finished spans drawn as an indented tree, for a terminal, a
README or a test failure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from . import _conventions as c

__all__ = ["span_tree"]

_SHOWN = (
    c.OUTCOME,
    c.FINISH_REASON,
    c.RETRY_COUNT,
    c.GEN_AI_RESPONSE_FINISH_REASONS,
    c.GEN_AI_USAGE_OUTPUT_TOKENS,
    c.CHUNKS_DELIVERED,
    c.CHUNKS_IN,
    c.CHUNKS_DROPPED,
    c.CHUNKS_EMITTED,
    c.ERROR_TYPE,
)


def _label(span: Any) -> str:
    attributes = dict(span.attributes or {})
    shown = [
        f"{key.rsplit('.', 1)[-1]}={_value(attributes[key])}"
        for key in _SHOWN
        if key in attributes
    ]
    events = [_event(e) for e in span.events or ()]
    parts = [span.name, *(["[" + ", ".join(shown) + "]"] if shown else []), *events]
    return "  ".join(parts)


def _value(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return ",".join(map(str, value))
    return str(value)


def _event(event: Any) -> str:
    attributes = dict(event.attributes or {})
    detail = (
        attributes.get(c.TRIPWIRE_REASON)
        or attributes.get(c.RETRY_CAUSE)
        or attributes.get("message")
        or ""
    )
    name = event.name.rsplit(".", 1)[-1]
    return f"⚑ {name}" + (f" ({detail})" if detail else "")


def span_tree(spans: Iterable[Any]) -> str:
    """The finished ``spans`` (the SDK's ``ReadableSpan``, e.g. from its
    ``InMemorySpanExporter``) as one indented tree per trace, children in start
    order, each line with the span's key attributes and its events."""
    spans = sorted(spans, key=lambda s: s.start_time or 0)
    ids = {s.context.span_id for s in spans}
    children: dict[int | None, list[Any]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def draw(span: Any, prefix: str, last: bool, root: bool) -> None:
        branch = "" if root else ("└─ " if last else "├─ ")
        lines.append(prefix + branch + _label(span))
        below = children.get(span.context.span_id, [])
        extension = "" if root else ("   " if last else "│  ")
        for index, child in enumerate(below):
            draw(child, prefix + extension, index == len(below) - 1, False)

    for root in children.get(None, []):
        draw(root, "", True, True)
    return "\n".join(lines)
