"""logscope: log forensics for large distributed training jobs."""

from __future__ import annotations

from .engine.analyze import analyze
from .engine.feed import Engine, default_library
from .errors import InputError, LogscopeError, PatternError
from .match.loader import builtin_dirs, load_library
from .match.samples import check_samples
from .match.signatures import Library, Signature
from .model import Analysis, Culprit, Event, Incident, Job, Line, Outcome
from .render.document import document

__all__ = [
    "Analysis",
    "Culprit",
    "Engine",
    "Event",
    "Incident",
    "InputError",
    "Job",
    "Library",
    "Line",
    "LogscopeError",
    "Outcome",
    "PatternError",
    "Signature",
    "analyze",
    "builtin_dirs",
    "check_samples",
    "default_library",
    "document",
    "load_library",
]
__version__ = "0.1.0"
