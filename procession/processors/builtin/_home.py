"""The built-in processors and their helpers that ``procession.processors``,
their one home, exports (the room's face, ``procession.processors.builtin``,
keeps their configuration types)."""

from __future__ import annotations

from ._batch import BatchParts as BatchParts
from ._batch import ToolCallFilter as ToolCallFilter
from ._judge import JudgeError as JudgeError
from ._moderation import LanguageDetector as LanguageDetector
from ._moderation import ModerationProcessor as ModerationProcessor
from ._moderation import PromptInjectionDetector as PromptInjectionDetector
from ._patterns import PatternRule as PatternRule
from ._pii import PIIDetector as PIIDetector
from ._pii import RegexFilter as RegexFilter
from ._prefill import PrefillErrorHandler as PrefillErrorHandler
from ._scrubber import SystemPromptScrubber as SystemPromptScrubber
from ._stream_error_retry import RetryMatcher as RetryMatcher
from ._stream_error_retry import StreamErrorRetryProcessor as StreamErrorRetryProcessor
from ._stream_error_retry import get_retry_after_ms as get_retry_after_ms
from ._stream_error_retry import is_bad_request_error as is_bad_request_error
from ._stream_error_retry import (
    is_retryable_openai_responses_stream_error as is_retryable_openai_responses_stream_error,  # noqa: E501 - a re-exported name cannot wrap
)
from ._stream_error_retry import is_terminal_auth_error as is_terminal_auth_error
from ._structured import StructuredOutput as StructuredOutput
from ._tokens import TokenLimiter as TokenLimiter
from ._unicode import UnicodeNormalizer as UnicodeNormalizer
from ._window import HoldBackWindow as HoldBackWindow

__all__ = [
    "BatchParts",
    "HoldBackWindow",
    "JudgeError",
    "LanguageDetector",
    "ModerationProcessor",
    "PIIDetector",
    "PatternRule",
    "PrefillErrorHandler",
    "PromptInjectionDetector",
    "RegexFilter",
    "RetryMatcher",
    "StreamErrorRetryProcessor",
    "StructuredOutput",
    "SystemPromptScrubber",
    "TokenLimiter",
    "ToolCallFilter",
    "UnicodeNormalizer",
    "get_retry_after_ms",
    "is_bad_request_error",
    "is_retryable_openai_responses_stream_error",
    "is_terminal_auth_error",
]
