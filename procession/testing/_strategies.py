"""Hypothesis strategies for chunks, chunk streams, messages and text splits.

For testing processors (your own too): ``chunks()`` gives any chunk procession
produces, ``chunk_streams()`` plausible agent streams, ``text_splits(text)``
every way to cut a text into consecutive deltas, so you can check that a
processor gives the same verdict however the model happened to split its
output. Requires ``hypothesis`` (the ``testing`` extra).

Everything generated round-trips through ``procession.chunks.to_wire`` /
``from_wire`` exactly: values are JSON values (``None``, booleans, integers,
finite floats, unicode strings, and lists / objects of those), unknown keys
(``extra``) never collide with the keys procession models, and error chunks
carry JSON errors, not exception objects.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import attrs

try:
    from hypothesis import strategies as st
except ImportError:  # (a test imports it in a subprocess without hypothesis)
    raise ImportError(
        "procession.testing.strategies needs hypothesis, which is not installed: "
        'pip install "procession[testing]"',
        name="hypothesis",
    ) from None

from .. import data as c
from .. import data as m
from ..wire import to_wire

__all__ = [
    "chunk_streams",
    "chunks",
    "json_values",
    "messages",
    "text_chunks",
    "text_splits",
    "wire_chunks",
]

_JSON_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    # JavaScript numbers: integers beyond 2**53 would not survive a real client.
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)

_JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    _JSON_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=8), children, max_size=3),
    ),
    max_leaves=8,
)

_JSON_OBJECTS: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.text(max_size=8), _JSON_VALUES, max_size=3
)

# Modelled wire keys are camelCase ASCII; an ``x_`` prefix can never collide.
_EXTRA: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.text(max_size=8).map(lambda key: f"x_{key}"), _JSON_VALUES, max_size=2
)

_ORIGINS = st.sampled_from(["AGENT", "USER", "SYSTEM", "WORKFLOW", "NETWORK"])


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers, finite floats, unicode strings,
    and nested lists / objects of those."""
    return _JSON_VALUES


def _datetimes() -> st.SearchStrategy[_dt.datetime]:
    zones = st.sampled_from([_dt.UTC, _dt.timezone(_dt.timedelta(hours=5, minutes=30))])
    return st.one_of(
        st.datetimes(timezones=zones),
        st.datetimes(timezones=zones).map(
            # JavaScript dates: millisecond precision.
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
        ),
        st.datetimes(),
    )


def _for_type(type_: Any) -> st.SearchStrategy[Any]:
    """A strategy of JSON-able values for a field annotated ``type_``."""
    if type_ is Any:
        return _JSON_VALUES
    if type_ is str:
        return st.text(max_size=20)
    if type_ is bool:
        return st.booleans()
    if type_ is int:
        return st.integers(min_value=0, max_value=2**31)
    if type_ is _dt.datetime:
        return _datetimes()
    if type_ == dict[str, Any]:
        return _JSON_OBJECTS
    if type_ == Mapping[str, Any]:
        return _EXTRA
    if type_ == m.Part:
        return _parts()
    origin = get_origin(type_)
    if origin is Literal:
        return st.sampled_from(get_args(type_))
    if origin is list:
        (item,) = get_args(type_)
        return st.lists(_for_type(item), max_size=3)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_for_type(arg) for arg in get_args(type_)])
    if type_ is type(None):
        return st.none()
    if attrs.has(type_):
        return _record(type_)
    raise TypeError(f"no strategy for field type {type_!r}")


def _record(
    cls: type[Any], **overrides: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """``st.builds(cls)`` with every field (optional ones too) drawn from its type."""
    attrs.resolve_types(cls)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for field in attrs.fields(cls):
        if field.name in overrides:
            kwargs[field.name] = overrides[field.name]
        elif field.name == "extra":
            # Messages type it dict, chunks Mapping: either way, unmodelled keys.
            kwargs[field.name] = _EXTRA
        elif field.name == "type" and field.default is not attrs.NOTHING:
            # A part's type picks its class; keep the class's own.
            continue
        else:
            kwargs[field.name] = _for_type(field.type)
    return st.builds(cls, **kwargs)


def _envelope(
    cls: type[Any], **overrides: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    return _record(
        cls,
        run_id=st.none() | st.text(max_size=10),
        from_=st.none() | _ORIGINS,
        **overrides,
    )


_DATA_TYPES = st.text(min_size=1, max_size=12).map(lambda name: f"data-{name}")


def _chunk_strategies() -> list[st.SearchStrategy[Any]]:
    strategies: list[st.SearchStrategy[Any]] = []
    for cls in c.CHUNK_TYPES.values():
        if cls is c.ErrorChunk:
            # An exception object is written as {name, message} and reads back as
            # that dict; JSON errors round-trip.
            payload = _record(c.ErrorPayload, error=_JSON_VALUES)
            strategies.append(_envelope(cls, payload=payload))
        else:
            strategies.append(_envelope(cls))
    strategies.append(_record(c.DataChunk, type=_DATA_TYPES))
    return strategies


def chunks() -> st.SearchStrategy[c.Chunk]:
    """Any chunk procession produces, of every type, with arbitrary JSON values,
    unicode text and unknown ``extra`` keys at every level."""
    return st.one_of(_chunk_strategies())


def text_chunks() -> st.SearchStrategy[c.TextDeltaChunk]:
    """``text-delta`` chunks with arbitrary unicode text (possibly empty)."""
    return st.builds(
        c.text_delta,
        st.text(),
        id=st.sampled_from(["text-1", "text-2", "0"]),
        run_id=st.none() | st.just("run-1"),
    )


def text_splits(text: str) -> st.SearchStrategy[list[str]]:
    """Lists of non-empty strings that concatenate to ``text`` (``[]`` for ``""``):
    every way a model could have streamed it as deltas."""
    if len(text) <= 1:
        return st.just([text] if text else [])
    cuts = st.sets(st.integers(min_value=1, max_value=len(text) - 1))

    def split(points: set[int]) -> list[str]:
        bounds = [0, *sorted(points), len(text)]
        return [text[a:b] for a, b in itertools.pairwise(bounds)]

    return cuts.map(split)


@st.composite
def chunk_streams(draw: st.DrawFn) -> list[c.Chunk]:
    """A plausible agent stream: ``start``, ``step-start``, ``text-start``, one or
    more ``text-delta``\\ s, ``text-end``, maybe a ``tool-call``, ``step-finish``,
    ``finish``; one run id throughout."""
    run_id = draw(st.sampled_from(["run-1", "run-2"]))
    text = draw(st.text(min_size=1, max_size=60))
    pieces = draw(text_splits(text))
    stream: list[c.Chunk] = [
        c.StartChunk(run_id=run_id),
        c.step_start(run_id=run_id),
        c.text_start(run_id=run_id),
        *(c.text_delta(piece, run_id=run_id) for piece in pieces),
        c.text_end(run_id=run_id),
    ]
    reason = "stop"
    if draw(st.booleans()):
        reason = "tool-calls"
        stream.append(
            c.tool_call(
                draw(st.text(min_size=1, max_size=8).map(lambda s: f"call-{s}")),
                draw(st.sampled_from(["search", "weather", "calculator"])),
                draw(_JSON_OBJECTS),
                run_id=run_id,
            )
        )
    usage = draw(st.none() | _record(c.Usage, raw=st.none(), extra=st.just({})))
    stream.append(c.step_finish(reason, text=text, usage=usage, run_id=run_id))
    stream.append(c.finish(reason, usage=usage, run_id=run_id))
    return stream


_KNOWN_PART_TYPES = frozenset(
    {
        "text",
        "reasoning",
        "tool-invocation",
        "file",
        "source",
        "source-document",
        "step-start",
    }
)


def _parts() -> st.SearchStrategy[m.Part]:
    unknown = st.builds(
        m.UnknownPart,
        type=st.text(min_size=1, max_size=12).filter(
            lambda t: t not in _KNOWN_PART_TYPES and not t.startswith("data-")
        ),
        fields=_EXTRA,
    )
    return st.one_of(
        _record(m.TextPart),
        _record(m.ReasoningPart),
        _record(m.ToolInvocationPart),
        _record(m.FilePart),
        _record(m.SourcePart),
        _record(m.SourceDocumentPart),
        _record(m.StepStartPart),
        _record(m.DataPart, type=_DATA_TYPES),
        unknown,
    )


def messages() -> st.SearchStrategy[m.Message]:
    """``Message`` objects with every part type (unknown ones too), arbitrary
    unicode, JSON metadata and ``extra`` keys; ``created_at`` UTC, offset or naive,
    at millisecond or microsecond precision."""
    return _record(m.Message)


@st.composite
def _with_explicit_nulls(draw: st.DrawFn, chunk: c.Chunk) -> dict[str, Any]:
    wire = to_wire(chunk)
    if isinstance(chunk, c.DataChunk):
        return wire
    for key in ("runId", "metadata"):
        if key not in wire and draw(st.booleans()):
            wire[key] = None
    payload = wire.get("payload")
    payload_obj = getattr(chunk, "payload", None)
    if isinstance(payload, dict) and payload_obj is not None:
        for field in attrs.fields(type(payload_obj)):
            key = _camel(field.name)
            if field.default is None and key not in payload and draw(st.booleans()):
                payload[key] = None
    return wire


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def wire_chunks() -> st.SearchStrategy[dict[str, Any]]:
    """Mastra-shaped chunk JSON objects: every type, unknown extra keys at every
    level, and optional keys sometimes present as explicit ``null``."""
    return chunks().flatmap(_with_explicit_nulls)
