"""The processor contract and the built-in processors.

Everything a processor author writes against: ``Processor`` and the hook
argument and result types, the prompt types, ``MessageList`` and its views,
registration, and the built-ins (``procession.processors.builtin`` holds their
configuration types). Each name has one public home: ``TripWire`` and the error
tree are in ``procession``, the message types in ``procession.messages``, the
chunks in ``procession.chunks``; the old paths here warn and name the home.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from .._faces import moved_names as _moved_names
from .._headers import Headers as Headers
from ..data import OutputResult as OutputResult
from ..data import Prompt as Prompt
from ..data import PromptAssistantMessage as PromptAssistantMessage
from ..data import PromptFilePart as PromptFilePart
from ..data import PromptMessage as PromptMessage
from ..data import PromptReasoningPart as PromptReasoningPart
from ..data import PromptSystemMessage as PromptSystemMessage
from ..data import PromptTextPart as PromptTextPart
from ..data import PromptToolCallPart as PromptToolCallPart
from ..data import PromptToolMessage as PromptToolMessage
from ..data import PromptToolResultPart as PromptToolResultPart
from ..data import PromptUserMessage as PromptUserMessage
from ..data import StepResult as StepResult
from ..data import ToolCallInfo as ToolCallInfo
from ..data import ToolResultInfo as ToolResultInfo
from ..data import TripwireInfo as TripwireInfo
from ..data import to_prompt_messages as to_prompt_messages
from . import builtin as builtin
from ._context import AbortSignal as AbortSignal
from ._context import CollectingEmitter as CollectingEmitter
from ._context import Emitter as Emitter
from ._context import ProcessorStreamWriter as ProcessorStreamWriter
from ._context import ProcessorViolation as ProcessorViolation
from ._context import RequestContext as RequestContext
from ._context import StreamParts as StreamParts
from ._context import TracingContext as TracingContext
from ._contract import HookArgs as HookArgs
from ._contract import OnError as OnError
from ._contract import ProcessAPIErrorArgs as ProcessAPIErrorArgs
from ._contract import ProcessAPIErrorResult as ProcessAPIErrorResult
from ._contract import ProcessInputArgs as ProcessInputArgs
from ._contract import ProcessInputResult as ProcessInputResult
from ._contract import ProcessInputStepArgs as ProcessInputStepArgs
from ._contract import ProcessInputStepResult as ProcessInputStepResult
from ._contract import ProcessLLMRequestArgs as ProcessLLMRequestArgs
from ._contract import ProcessLLMRequestResult as ProcessLLMRequestResult
from ._contract import ProcessLLMResponseArgs as ProcessLLMResponseArgs
from ._contract import Processor as Processor
from ._contract import ProcessorMessageResult as ProcessorMessageResult
from ._contract import ProcessOutputResultArgs as ProcessOutputResultArgs
from ._contract import ProcessOutputStepArgs as ProcessOutputStepArgs
from ._contract import ProcessOutputStreamArgs as ProcessOutputStreamArgs
from ._contract import ProcessToolResultArgs as ProcessToolResultArgs
from ._message_list import MessageList as MessageList
from ._message_list import MessageView as MessageView
from ._message_list import MessageViews as MessageViews
from ._message_list import Source as Source
from ._registration import ErrorProcessor as ErrorProcessor
from ._registration import InputProcessor as InputProcessor
from ._registration import OutputProcessor as OutputProcessor
from ._registration import ProcessorSet as ProcessorSet
from ._registration import ProcessorSpec as ProcessorSpec
from ._registration import ProcessorWarning as ProcessorWarning
from ._registration import register_processors as register_processors
from .builtin._home import BatchParts as BatchParts
from .builtin._home import HoldBackWindow as HoldBackWindow
from .builtin._home import JudgeError as JudgeError
from .builtin._home import LanguageDetector as LanguageDetector
from .builtin._home import ModerationProcessor as ModerationProcessor
from .builtin._home import PatternRule as PatternRule
from .builtin._home import PIIDetector as PIIDetector
from .builtin._home import PrefillErrorHandler as PrefillErrorHandler
from .builtin._home import PromptInjectionDetector as PromptInjectionDetector
from .builtin._home import RegexFilter as RegexFilter
from .builtin._home import RetryMatcher as RetryMatcher
from .builtin._home import StreamErrorRetryProcessor as StreamErrorRetryProcessor
from .builtin._home import StructuredOutput as StructuredOutput
from .builtin._home import SystemPromptScrubber as SystemPromptScrubber
from .builtin._home import TokenLimiter as TokenLimiter
from .builtin._home import ToolCallFilter as ToolCallFilter
from .builtin._home import UnicodeNormalizer as UnicodeNormalizer
from .builtin._home import get_retry_after_ms as get_retry_after_ms
from .builtin._home import is_bad_request_error as is_bad_request_error
from .builtin._home import (
    is_retryable_openai_responses_stream_error as is_retryable_openai_responses_stream_error,  # noqa: E501 - a re-exported name cannot wrap
)
from .builtin._home import is_terminal_auth_error as is_terminal_auth_error

__all__ = [
    "AbortSignal",
    "BatchParts",
    "CollectingEmitter",
    "Emitter",
    "ErrorProcessor",
    "Headers",
    "HoldBackWindow",
    "HookArgs",
    "InputProcessor",
    "JudgeError",
    "LanguageDetector",
    "MessageList",
    "MessageView",
    "MessageViews",
    "ModerationProcessor",
    "OnError",
    "OutputProcessor",
    "OutputResult",
    "PIIDetector",
    "PatternRule",
    "PrefillErrorHandler",
    "ProcessAPIErrorArgs",
    "ProcessAPIErrorResult",
    "ProcessInputArgs",
    "ProcessInputResult",
    "ProcessInputStepArgs",
    "ProcessInputStepResult",
    "ProcessLLMRequestArgs",
    "ProcessLLMRequestResult",
    "ProcessLLMResponseArgs",
    "ProcessOutputResultArgs",
    "ProcessOutputStepArgs",
    "ProcessOutputStreamArgs",
    "ProcessToolResultArgs",
    "Processor",
    "ProcessorMessageResult",
    "ProcessorSet",
    "ProcessorSpec",
    "ProcessorStreamWriter",
    "ProcessorViolation",
    "ProcessorWarning",
    "Prompt",
    "PromptAssistantMessage",
    "PromptFilePart",
    "PromptInjectionDetector",
    "PromptMessage",
    "PromptReasoningPart",
    "PromptSystemMessage",
    "PromptTextPart",
    "PromptToolCallPart",
    "PromptToolMessage",
    "PromptToolResultPart",
    "PromptUserMessage",
    "RegexFilter",
    "RequestContext",
    "RetryMatcher",
    "Source",
    "StepResult",
    "StreamErrorRetryProcessor",
    "StreamParts",
    "StructuredOutput",
    "SystemPromptScrubber",
    "TokenLimiter",
    "ToolCallFilter",
    "ToolCallInfo",
    "ToolResultInfo",
    "TracingContext",
    "TripwireInfo",
    "UnicodeNormalizer",
    "get_retry_after_ms",
    "is_bad_request_error",
    "is_retryable_openai_responses_stream_error",
    "is_terminal_auth_error",
    "register_processors",
    "to_prompt_messages",
]

_fixup_module_metadata(__name__, globals())
_fixup_module_metadata(builtin.__name__, vars(builtin))

# Names that left this face (issue 27 §3: one public home per name): still
# importable from here, with a DeprecationWarning naming their home.
__getattr__, __dir__ = _moved_names(
    __name__,
    {
        "ConfigurationError": "procession",
        "DataPart": "procession.messages",
        "DuplicateProcessorIdError": "procession",
        "EventTooLargeError": "procession",
        "FilePart": "procession.messages",
        "HOOK_NAMES": "procession.processors._contract",
        "InvalidTextError": "procession",
        "Message": "procession.messages",
        "MessageContent": "procession.messages",
        "MessageFormatError": "procession",
        "MissingFieldError": "procession",
        "ModelIdleTimeout": "procession",
        "OverloadedError": "procession",
        "Part": "procession.messages",
        "ProcessionError": "procession",
        "ProcessorContractError": "procession",
        "ProcessorError": "procession",
        "ProviderConnectionError": "procession",
        "ProviderError": "procession",
        "ProviderStatusError": "procession",
        "ProviderStreamError": "procession",
        "ProviderTimeoutError": "procession",
        "RateLimitError": "procession",
        "ReasoningDetail": "procession.messages",
        "ReasoningPart": "procession.messages",
        "Role": "procession.messages",
        "RunDeadlineExceeded": "procession",
        "SourceDocumentPart": "procession.messages",
        "SourceInfo": "procession.messages",
        "SourcePart": "procession.messages",
        "StepStartPart": "procession.messages",
        "SystemMessage": "procession.messages",
        "TextPart": "procession.messages",
        "ToolArgumentsError": "procession",
        "ToolInvocation": "procession.messages",
        "ToolInvocationPart": "procession.messages",
        "ToolInvocationState": "procession.messages",
        "TripWire": "procession",
        "UnknownChunkTypeError": "procession",
        "UnknownPart": "procession.messages",
        "WireFormatError": "procession",
        "message_text": "procession.messages",
        "new_message_id": "procession.messages",
    },
)
