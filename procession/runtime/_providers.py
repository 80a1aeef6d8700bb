"""Resolving model ids like ``"anthropic/claude-sonnet-4-5"`` to model objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..processors._errors import ConfigurationError
from ._model import LanguageModel

__all__ = [
    "register_provider",
    "registered_providers",
    "resolve_model",
    "unregister_provider",
]

ProviderFactory = Callable[[str], LanguageModel]

_PROVIDERS: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``"<name>/<model id>"`` resolve to ``factory(model_id)``.

    Registering a name again replaces the factory (tests use this to point a
    provider at a fake)."""
    if not name or "/" in name:
        raise ConfigurationError(
            f"a provider name must be non-empty and contain no '/', got {name!r}"
        )
    _PROVIDERS[name] = factory


def unregister_provider(name: str) -> ProviderFactory | None:
    """Forget provider ``name``; return its factory (None if it was unknown)."""
    return _PROVIDERS.pop(name, None)


def registered_providers() -> list[str]:
    """The provider names ``resolve_model`` knows, sorted."""
    return sorted(_PROVIDERS)


def resolve_model(model: Any) -> LanguageModel:
    """A ``LanguageModel`` for ``model``: a model object as-is, or a
    ``"provider/model-id"`` string through the registered provider factories.

    Raises:
        ConfigurationError: not a model, a malformed id, or an unknown provider
            (the message lists the known ones). Nothing is requested.
    """
    if isinstance(model, LanguageModel):
        return model
    if isinstance(model, str):
        provider, sep, model_id = model.partition("/")
        if not sep or not provider or not model_id:
            raise ConfigurationError(
                f"model id {model!r} is not of the form 'provider/model-id' "
                f"(e.g. 'anthropic/claude-sonnet-4-5')"
            )
        factory = _PROVIDERS.get(provider)
        if factory is None:
            known = ", ".join(registered_providers()) or "none yet"
            raise ConfigurationError(
                f"unknown model provider {provider!r} in {model!r}; known providers: "
                f"{known}"
            )
        return factory(model_id)
    raise ConfigurationError(
        f"model must be a LanguageModel (an object with provider, model_id and "
        f"stream()) or a 'provider/model-id' string, got {model!r}"
    )
