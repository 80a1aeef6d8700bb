"""Values: chunks, messages, the prompt form, results and usage.

The bottom layer: attrs classes and the helpers that build them, with no I/O
and no codec (JSON lives in ``procession.wire``). Users import these from their
public homes, ``procession.chunks`` and ``procession.messages``; the layers
above import them from here.
"""

from ._chunks import CHUNK_CLASSES as CHUNK_CLASSES
from ._chunks import CHUNK_TYPES as CHUNK_TYPES
from ._chunks import AbortChunk as AbortChunk
from ._chunks import Chunk as Chunk
from ._chunks import ChunkFrom as ChunkFrom
from ._chunks import DataChunk as DataChunk
from ._chunks import ErrorChunk as ErrorChunk
from ._chunks import FileChunk as FileChunk
from ._chunks import FinishChunk as FinishChunk
from ._chunks import ObjectChunk as ObjectChunk
from ._chunks import ObjectResultChunk as ObjectResultChunk
from ._chunks import RawChunk as RawChunk
from ._chunks import ReasoningDeltaChunk as ReasoningDeltaChunk
from ._chunks import ReasoningEndChunk as ReasoningEndChunk
from ._chunks import ReasoningSignatureChunk as ReasoningSignatureChunk
from ._chunks import ReasoningStartChunk as ReasoningStartChunk
from ._chunks import RedactedReasoningChunk as RedactedReasoningChunk
from ._chunks import ResponseMetadataChunk as ResponseMetadataChunk
from ._chunks import SourceChunk as SourceChunk
from ._chunks import StartChunk as StartChunk
from ._chunks import StepFinishChunk as StepFinishChunk
from ._chunks import StepRetryChunk as StepRetryChunk
from ._chunks import StepStartChunk as StepStartChunk
from ._chunks import TextDeltaChunk as TextDeltaChunk
from ._chunks import TextEndChunk as TextEndChunk
from ._chunks import TextStartChunk as TextStartChunk
from ._chunks import ToolCallApprovalChunk as ToolCallApprovalChunk
from ._chunks import ToolCallChunk as ToolCallChunk
from ._chunks import ToolCallDeltaChunk as ToolCallDeltaChunk
from ._chunks import ToolCallInputStreamingEndChunk as ToolCallInputStreamingEndChunk
from ._chunks import (
    ToolCallInputStreamingStartChunk as ToolCallInputStreamingStartChunk,
)
from ._chunks import ToolCallSuspendedChunk as ToolCallSuspendedChunk
from ._chunks import ToolErrorChunk as ToolErrorChunk
from ._chunks import ToolOutputChunk as ToolOutputChunk
from ._chunks import ToolOutputDeniedChunk as ToolOutputDeniedChunk
from ._chunks import ToolResultChunk as ToolResultChunk
from ._chunks import TripwireChunk as TripwireChunk
from ._chunks import abort as abort
from ._chunks import data as data
from ._chunks import error as error
from ._chunks import finish as finish
from ._chunks import is_data_chunk as is_data_chunk
from ._chunks import reasoning_delta as reasoning_delta
from ._chunks import step_finish as step_finish
from ._chunks import step_start as step_start
from ._chunks import text_delta as text_delta
from ._chunks import text_end as text_end
from ._chunks import text_start as text_start
from ._chunks import tool_call as tool_call
from ._chunks import tool_result as tool_result
from ._chunks import tripwire as tripwire
from ._messages import DataPart as DataPart
from ._messages import FilePart as FilePart
from ._messages import Message as Message
from ._messages import MessageContent as MessageContent
from ._messages import Part as Part
from ._messages import ReasoningDetail as ReasoningDetail
from ._messages import ReasoningPart as ReasoningPart
from ._messages import Role as Role
from ._messages import SourceDocumentPart as SourceDocumentPart
from ._messages import SourceInfo as SourceInfo
from ._messages import SourcePart as SourcePart
from ._messages import StepStartPart as StepStartPart
from ._messages import SystemMessage as SystemMessage
from ._messages import TextPart as TextPart
from ._messages import ToolInvocation as ToolInvocation
from ._messages import ToolInvocationPart as ToolInvocationPart
from ._messages import ToolInvocationState as ToolInvocationState
from ._messages import UnknownPart as UnknownPart
from ._messages import message_text as message_text
from ._messages import new_message_id as new_message_id
from ._messages import utc_now as utc_now
from ._payloads import AbortPayload as AbortPayload
from ._payloads import ErrorPayload as ErrorPayload
from ._payloads import FilePayload as FilePayload
from ._payloads import FinishPayload as FinishPayload
from ._payloads import RawPayload as RawPayload
from ._payloads import ReasoningDeltaPayload as ReasoningDeltaPayload
from ._payloads import ReasoningEndPayload as ReasoningEndPayload
from ._payloads import ReasoningSignaturePayload as ReasoningSignaturePayload
from ._payloads import ReasoningStartPayload as ReasoningStartPayload
from ._payloads import RedactedReasoningPayload as RedactedReasoningPayload
from ._payloads import ResponseMetadataPayload as ResponseMetadataPayload
from ._payloads import SourcePayload as SourcePayload
from ._payloads import StartPayload as StartPayload
from ._payloads import StepFinishPayload as StepFinishPayload
from ._payloads import StepOutput as StepOutput
from ._payloads import StepResultInfo as StepResultInfo
from ._payloads import StepRetryPayload as StepRetryPayload
from ._payloads import StepStartPayload as StepStartPayload
from ._payloads import TextDeltaPayload as TextDeltaPayload
from ._payloads import TextEndPayload as TextEndPayload
from ._payloads import TextStartPayload as TextStartPayload
from ._payloads import ToolApproval as ToolApproval
from ._payloads import ToolCallApprovalPayload as ToolCallApprovalPayload
from ._payloads import ToolCallDeltaPayload as ToolCallDeltaPayload
from ._payloads import (
    ToolCallInputStreamingEndPayload as ToolCallInputStreamingEndPayload,
)
from ._payloads import (
    ToolCallInputStreamingStartPayload as ToolCallInputStreamingStartPayload,
)
from ._payloads import ToolCallPayload as ToolCallPayload
from ._payloads import ToolCallSuspendedPayload as ToolCallSuspendedPayload
from ._payloads import ToolErrorPayload as ToolErrorPayload
from ._payloads import ToolOutputDeniedPayload as ToolOutputDeniedPayload
from ._payloads import ToolOutputPayload as ToolOutputPayload
from ._payloads import ToolResultPayload as ToolResultPayload
from ._payloads import TripwirePayload as TripwirePayload
from ._prompt import DECLINED_TEXT as DECLINED_TEXT
from ._prompt import Prompt as Prompt
from ._prompt import PromptAssistantMessage as PromptAssistantMessage
from ._prompt import PromptAssistantPart as PromptAssistantPart
from ._prompt import PromptFilePart as PromptFilePart
from ._prompt import PromptMessage as PromptMessage
from ._prompt import PromptReasoningPart as PromptReasoningPart
from ._prompt import PromptSystemMessage as PromptSystemMessage
from ._prompt import PromptTextPart as PromptTextPart
from ._prompt import PromptToolCallPart as PromptToolCallPart
from ._prompt import PromptToolMessage as PromptToolMessage
from ._prompt import PromptToolResultPart as PromptToolResultPart
from ._prompt import PromptUserMessage as PromptUserMessage
from ._prompt import PromptUserPart as PromptUserPart
from ._prompt import ProviderOptions as ProviderOptions
from ._prompt import joined_text as joined_text
from ._prompt import to_prompt_messages as to_prompt_messages
from ._results import OutcomeKind as OutcomeKind
from ._results import OutputResult as OutputResult
from ._results import PendingToolCall as PendingToolCall
from ._results import RunOutcome as RunOutcome
from ._results import StepResult as StepResult
from ._results import ToolCallInfo as ToolCallInfo
from ._results import ToolResultInfo as ToolResultInfo
from ._results import TripwireInfo as TripwireInfo
from ._usage import Usage as Usage
from ._usage import add_usage as add_usage

__all__ = [
    "AbortChunk",
    "AbortPayload",
    "CHUNK_CLASSES",
    "CHUNK_TYPES",
    "Chunk",
    "ChunkFrom",
    "DECLINED_TEXT",
    "DataChunk",
    "DataPart",
    "ErrorChunk",
    "ErrorPayload",
    "FileChunk",
    "FilePart",
    "FilePayload",
    "FinishChunk",
    "FinishPayload",
    "Message",
    "MessageContent",
    "ObjectChunk",
    "ObjectResultChunk",
    "OutcomeKind",
    "OutputResult",
    "Part",
    "PendingToolCall",
    "Prompt",
    "PromptAssistantMessage",
    "PromptAssistantPart",
    "PromptFilePart",
    "PromptMessage",
    "PromptReasoningPart",
    "PromptSystemMessage",
    "PromptTextPart",
    "PromptToolCallPart",
    "PromptToolMessage",
    "PromptToolResultPart",
    "PromptUserMessage",
    "PromptUserPart",
    "ProviderOptions",
    "RawChunk",
    "RawPayload",
    "ReasoningDeltaChunk",
    "ReasoningDeltaPayload",
    "ReasoningDetail",
    "ReasoningEndChunk",
    "ReasoningEndPayload",
    "ReasoningPart",
    "ReasoningSignatureChunk",
    "ReasoningSignaturePayload",
    "ReasoningStartChunk",
    "ReasoningStartPayload",
    "RedactedReasoningChunk",
    "RedactedReasoningPayload",
    "ResponseMetadataChunk",
    "ResponseMetadataPayload",
    "Role",
    "RunOutcome",
    "SourceChunk",
    "SourceDocumentPart",
    "SourceInfo",
    "SourcePart",
    "SourcePayload",
    "StartChunk",
    "StartPayload",
    "StepFinishChunk",
    "StepFinishPayload",
    "StepOutput",
    "StepResult",
    "StepResultInfo",
    "StepRetryChunk",
    "StepRetryPayload",
    "StepStartChunk",
    "StepStartPart",
    "StepStartPayload",
    "SystemMessage",
    "TextDeltaChunk",
    "TextDeltaPayload",
    "TextEndChunk",
    "TextEndPayload",
    "TextPart",
    "TextStartChunk",
    "TextStartPayload",
    "ToolApproval",
    "ToolCallApprovalChunk",
    "ToolCallApprovalPayload",
    "ToolCallChunk",
    "ToolCallDeltaChunk",
    "ToolCallDeltaPayload",
    "ToolCallInfo",
    "ToolCallInputStreamingEndChunk",
    "ToolCallInputStreamingEndPayload",
    "ToolCallInputStreamingStartChunk",
    "ToolCallInputStreamingStartPayload",
    "ToolCallPayload",
    "ToolCallSuspendedChunk",
    "ToolCallSuspendedPayload",
    "ToolErrorChunk",
    "ToolErrorPayload",
    "ToolInvocation",
    "ToolInvocationPart",
    "ToolInvocationState",
    "ToolOutputChunk",
    "ToolOutputDeniedChunk",
    "ToolOutputDeniedPayload",
    "ToolOutputPayload",
    "ToolResultChunk",
    "ToolResultInfo",
    "ToolResultPayload",
    "TripwireChunk",
    "TripwireInfo",
    "TripwirePayload",
    "UnknownPart",
    "Usage",
    "abort",
    "add_usage",
    "data",
    "error",
    "finish",
    "is_data_chunk",
    "joined_text",
    "message_text",
    "new_message_id",
    "reasoning_delta",
    "step_finish",
    "step_start",
    "text_delta",
    "text_end",
    "text_start",
    "to_prompt_messages",
    "tool_call",
    "tool_result",
    "tripwire",
    "utc_now",
]
