"""The processor contract and the built-in processors.

Everything a processor author needs: ``Processor`` and the hook argument and
result types, ``TripWire``, ``MessageList`` and its views, registration, and the
built-ins (``procession.processors.builtin``). For convenience it re-exports the
message and prompt types (their home is ``procession.messages``) and the error
tree (home: ``procession``). Chunks live in ``procession.chunks``.
"""

from .._errors import ConfigurationError as ConfigurationError
from .._errors import DuplicateProcessorIdError as DuplicateProcessorIdError
from .._errors import EventTooLargeError as EventTooLargeError
from .._errors import InvalidTextError as InvalidTextError
from .._errors import MessageFormatError as MessageFormatError
from .._errors import MissingFieldError as MissingFieldError
from .._errors import ModelIdleTimeout as ModelIdleTimeout
from .._errors import OverloadedError as OverloadedError
from .._errors import ProcessionError as ProcessionError
from .._errors import ProcessorContractError as ProcessorContractError
from .._errors import ProcessorError as ProcessorError
from .._errors import ProviderConnectionError as ProviderConnectionError
from .._errors import ProviderError as ProviderError
from .._errors import ProviderStatusError as ProviderStatusError
from .._errors import ProviderStreamError as ProviderStreamError
from .._errors import ProviderTimeoutError as ProviderTimeoutError
from .._errors import RateLimitError as RateLimitError
from .._errors import RunDeadlineExceeded as RunDeadlineExceeded
from .._errors import ToolArgumentsError as ToolArgumentsError
from .._errors import TripWire as TripWire
from .._errors import UnknownChunkTypeError as UnknownChunkTypeError
from .._errors import WireFormatError as WireFormatError
from .._faces import fixup_module_metadata as _fixup_module_metadata
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
from ..messages import DataPart as DataPart
from ..messages import FilePart as FilePart
from ..messages import Message as Message
from ..messages import MessageContent as MessageContent
from ..messages import Part as Part
from ..messages import ReasoningDetail as ReasoningDetail
from ..messages import ReasoningPart as ReasoningPart
from ..messages import Role as Role
from ..messages import SourceDocumentPart as SourceDocumentPart
from ..messages import SourceInfo as SourceInfo
from ..messages import SourcePart as SourcePart
from ..messages import StepStartPart as StepStartPart
from ..messages import SystemMessage as SystemMessage
from ..messages import TextPart as TextPart
from ..messages import ToolInvocation as ToolInvocation
from ..messages import ToolInvocationPart as ToolInvocationPart
from ..messages import ToolInvocationState as ToolInvocationState
from ..messages import UnknownPart as UnknownPart
from ..messages import message_text as message_text
from ..messages import new_message_id as new_message_id
from . import builtin as builtin
from ._context import AbortSignal as AbortSignal
from ._context import CollectingEmitter as CollectingEmitter
from ._context import Emitter as Emitter
from ._context import ProcessorStreamWriter as ProcessorStreamWriter
from ._context import ProcessorViolation as ProcessorViolation
from ._context import RequestContext as RequestContext
from ._context import StreamParts as StreamParts
from ._context import TracingContext as TracingContext
from ._contract import HOOK_NAMES as HOOK_NAMES
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
from .builtin import BatchParts as BatchParts
from .builtin import HoldBackWindow as HoldBackWindow
from .builtin import JudgeError as JudgeError
from .builtin import LanguageDetector as LanguageDetector
from .builtin import ModerationProcessor as ModerationProcessor
from .builtin import PatternRule as PatternRule
from .builtin import PIIDetector as PIIDetector
from .builtin import PrefillErrorHandler as PrefillErrorHandler
from .builtin import PromptInjectionDetector as PromptInjectionDetector
from .builtin import RegexFilter as RegexFilter
from .builtin import RetryMatcher as RetryMatcher
from .builtin import StreamErrorRetryProcessor as StreamErrorRetryProcessor
from .builtin import StructuredOutput as StructuredOutput
from .builtin import SystemPromptScrubber as SystemPromptScrubber
from .builtin import TokenLimiter as TokenLimiter
from .builtin import ToolCallFilter as ToolCallFilter
from .builtin import UnicodeNormalizer as UnicodeNormalizer
from .builtin import get_retry_after_ms as get_retry_after_ms
from .builtin import is_bad_request_error as is_bad_request_error
from .builtin import (
    is_retryable_openai_responses_stream_error as is_retryable_openai_responses_stream_error,  # noqa: E501 - a re-exported name cannot wrap
)
from .builtin import is_terminal_auth_error as is_terminal_auth_error

__all__ = [
    "AbortSignal",
    "BatchParts",
    "CollectingEmitter",
    "ConfigurationError",
    "DataPart",
    "DuplicateProcessorIdError",
    "Emitter",
    "ErrorProcessor",
    "EventTooLargeError",
    "FilePart",
    "HOOK_NAMES",
    "Headers",
    "HoldBackWindow",
    "HookArgs",
    "InputProcessor",
    "InvalidTextError",
    "JudgeError",
    "LanguageDetector",
    "Message",
    "MessageContent",
    "MessageFormatError",
    "MessageList",
    "MessageView",
    "MessageViews",
    "MissingFieldError",
    "ModelIdleTimeout",
    "ModerationProcessor",
    "OnError",
    "OutputProcessor",
    "OutputResult",
    "OverloadedError",
    "PIIDetector",
    "Part",
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
    "ProcessionError",
    "Processor",
    "ProcessorContractError",
    "ProcessorError",
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
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ReasoningDetail",
    "ReasoningPart",
    "RegexFilter",
    "RequestContext",
    "RetryMatcher",
    "Role",
    "RunDeadlineExceeded",
    "Source",
    "SourceDocumentPart",
    "SourceInfo",
    "SourcePart",
    "StepResult",
    "StepStartPart",
    "StreamErrorRetryProcessor",
    "StreamParts",
    "StructuredOutput",
    "SystemMessage",
    "SystemPromptScrubber",
    "TextPart",
    "TokenLimiter",
    "ToolArgumentsError",
    "ToolCallFilter",
    "ToolCallInfo",
    "ToolInvocation",
    "ToolInvocationPart",
    "ToolInvocationState",
    "ToolResultInfo",
    "TracingContext",
    "TripWire",
    "TripwireInfo",
    "UnicodeNormalizer",
    "UnknownChunkTypeError",
    "UnknownPart",
    "WireFormatError",
    "get_retry_after_ms",
    "is_bad_request_error",
    "is_retryable_openai_responses_stream_error",
    "is_terminal_auth_error",
    "message_text",
    "new_message_id",
    "register_processors",
    "to_prompt_messages",
]

_fixup_module_metadata(__name__, globals())
_fixup_module_metadata(builtin.__name__, vars(builtin))
