"""``LangidJudge``: ``LanguageDetector``'s offline detector, ``py3langid`` (the
``langid`` extra), answering the same verdicts a judge model would.

``py3langid`` ships its model in the wheel: nothing is downloaded. Loading it
takes about a second, once per process, in a worker thread; a text is then
classified in well under a millisecond, in the caller's task.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from typing import Any, Final

import trio

from ..._errors import ConfigurationError

__all__ = ["LangidJudge"]

_NAMES: Final = {
    "ar": "Arabic",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "hi": "Hindi",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}
"""English names of common ISO 639-1 codes (others are named by their code)."""


def require_langid() -> None:
    """Raise ``ConfigurationError`` unless ``py3langid`` can be imported."""
    if importlib.util.find_spec("py3langid") is None:
        raise ConfigurationError(
            "LanguageDetector(detector='py3langid') needs the py3langid package: "
            "pip install 'procession[langid]' (or pass a model instead)"
        )


@functools.cache
def _identifier() -> Any:
    """The py3langid identifier with normalised probabilities (loaded once)."""
    langid = importlib.import_module("py3langid.langid")
    return langid.LanguageIdentifier.from_model_file(langid.MODEL_FILE, norm_probs=True)


class LangidJudge:
    """Duck-types ``Judge``: ``await ask(text)`` gives ``{"language",
    "iso_code", "confidence"}``; ``calls`` counts the texts classified."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        require_langid()
        self.calls = 0

    async def ask(self, text: str) -> dict[str, Any]:
        """The language of ``text``. Checkpoints (the first call loads the
        model in a worker thread; cancelled, it is loaded by the next)."""
        self.calls += 1
        if _identifier.cache_info().currsize:
            await trio.lowlevel.checkpoint()
            identifier = _identifier()
        else:
            identifier = await trio.to_thread.run_sync(_identifier)
        code, probability = identifier.classify(text)
        return {
            "language": _NAMES.get(code, code),
            "iso_code": code,
            "confidence": float(probability),
        }
