"""The actor kernel: processor actors, links and the output-stream pipeline."""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._actor import ProcessorActor as ProcessorActor
from ._actor import actors_for as actors_for
from ._pipeline import Barrier as Barrier
from ._pipeline import Deliver as Deliver
from ._pipeline import EndRun as EndRun
from ._pipeline import ExecutionMode as ExecutionMode
from ._pipeline import NewAttempt as NewAttempt
from ._pipeline import OutputPipeline as OutputPipeline
from ._pipeline import PipelineDriver as PipelineDriver
from ._pipeline import PipelineOutcome as PipelineOutcome
from ._pipeline import PipelineStatistics as PipelineStatistics
from ._pipeline import open_output_pipeline as open_output_pipeline

__all__ = [
    "Barrier",
    "Deliver",
    "EndRun",
    "ExecutionMode",
    "NewAttempt",
    "OutputPipeline",
    "PipelineDriver",
    "PipelineOutcome",
    "PipelineStatistics",
    "ProcessorActor",
    "actors_for",
    "open_output_pipeline",
]

_fixup_module_metadata(__name__, globals())
