"""Resolving model ids like ``"anthropic/claude-sonnet-4-5"`` to model objects.

The concrete providers live in ``procession.providers``, a layer above this one:
importing that package registers its prefixes (``anthropic``, ``openai``,
``openai-chat``). The registry imports it by name, lazily, the first time it is
consulted (``importlib``, so the layer contracts see no upward import), and
before anything else is registered: a test's own factory for ``"anthropic"``
registered early is never overwritten by the built-in one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Final

from .._errors import ConfigurationError
from ._model import LanguageModel

__all__ = [
    "register_provider",
    "registered_providers",
    "resolve_model",
    "unregister_provider",
]

ProviderFactory = Callable[[str], LanguageModel]

_PROVIDERS: dict[str, ProviderFactory] = {}
_BUILTIN_PROVIDERS: Final = "procession.providers"
_builtins_loaded = False


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True  # first: the package registers through us
        importlib.import_module(_BUILTIN_PROVIDERS)


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``"<name>/<model id>"`` resolve to ``factory(model_id)``.

    Registering a name again replaces the factory (tests use this to point a
    provider at a fake)."""
    if not name or "/" in name:
        raise ConfigurationError(
            f"a provider name must be non-empty and contain no '/', got {name!r}"
        )
    _load_builtins()
    _PROVIDERS[name] = factory


def unregister_provider(name: str) -> ProviderFactory | None:
    """Forget provider ``name``; return its factory (None if it was unknown)."""
    _load_builtins()
    return _PROVIDERS.pop(name, None)


def registered_providers() -> list[str]:
    """The provider names ``resolve_model`` knows, sorted."""
    _load_builtins()
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
        _load_builtins()
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
