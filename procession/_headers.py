"""HTTP response headers as errors and the fake provider carry them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

__all__ = ["Headers"]


class Headers(Mapping[str, str]):
    """A read-only, case-insensitive mapping of HTTP response headers."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, tuple[str, str]] = {}
        for key, value in (items or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(
                    f"header names and values must be str, got {key!r}: {value!r}"
                )
            self._items[key.lower()] = (key, value)

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()][1]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return (original for original, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({dict(self)!r})"
