"""A result code and the line after it that says why.

NCCL >= 2.19 ends PyTorch's `NCCL error in: ..., <result string>` exception with `Last error:` and
the text of the WARN that set the result (ncclGetLastError): `invalid usage` then `Failed to
initialize any NET plugin`, `unhandled cuda error` then `Cuda failure 'out of memory'`. The result
code is the root line (it is the exception); the reason, when a signature knows it, is what went
wrong, so it gives the incident its category. Signatures of result codes say `reason_follows`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..match.signatures import Library
from ..model import Category, Event

REASON_WITHIN = 6
"""Lines from the result code to its reason: the exception's own line, `<ncclResult>: <hint>`,
`Last error:`, the reason; a little slack for another thread's line in between."""


def stated_reason(root: Event, events: Sequence[Event], library: Library) -> Category | None:
    """The category of the reason the same process states right after a result-code root, if a
    signature of a cause that is not itself a result code or a catch-all knows that line."""
    sig = library.by_id(root.signature)
    if sig is None or not sig.reason_follows:
        return None
    for e in events:
        gap = e.line.lineno - root.line.lineno
        if e.line.path != root.line.path or e.line.stream != root.line.stream:
            continue  # another file's or another process's line explains nothing of this one
        if not 0 < gap <= REASON_WITHIN or e.category is None or not states_a_reason(e):
            continue  # a traceback's start, a warning: not a reason
        other = library.by_id(e.signature)
        if other is None or other.reason_follows or other.classify:
            continue
        return e.category
    return None


def states_a_reason(e: Event) -> bool:
    """A line that can say why a result code was returned: a cause, or a failure the process
    met waiting for others (a collective that timed out: the runtime's code for a wait)."""
    return e.role == "cause" or (e.role == "symptom" and e.severity in ("fatal", "error"))
