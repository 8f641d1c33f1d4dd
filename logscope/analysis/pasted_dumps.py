"""A log that ends on a py-spy dump pasted into it: the header of a process's main thread
(`Thread <tid> (idle): "MainThread"`, patterns/pyspy.toml `pyspy.main_thread`), no step after
it, no exit and no failure a signature knows. Nobody dumps the stacks of a process that runs
well: the process was stopped where its frames show, and the log ends on that hang. (A dump
whose frames are in a collective is a failure of its own, `pyspy.waits_in_collective`; a dump
given as a file is read by logscope.dumps.)"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Event, Incident, Outcome, Progress
from .job_outcome import Ending, hang_at

DUMP_FIELD = "stack_dump"

_EXPLANATION = (
    "The log ends on a py-spy dump of a process's threads. Nobody dumps the stacks of a process "
    "that runs well: it was stopped where the main thread's frames under this line show, the "
    "innermost first. Inside a collective or barrier it would wait for a peer; elsewhere (a "
    "lock, a file, a data loader, a GPU synchronization in backward) the wait is its own."
)
_REMEDIES = (
    "Read the main thread's frames: the innermost says what it waits for, the first of your "
    "code where",
    "Dump every rank (`py-spy dump --pid PID` on each node) and give the dumps as files with "
    "the log: logscope compares them and names the rank the others wait for",
)


def dumped_hang(markers: Sequence[Event], progress: Progress) -> tuple[Incident, Ending] | None:
    """The hang of a log whose last main-thread dump header has no progress after it, and the
    job's ending (hung). The caller asks only where no incident and no exit were found."""
    dump = next((m for m in reversed(markers) if DUMP_FIELD in m.fields), None)
    if dump is None or progress.count_after(dump.seq):
        return None
    title = f"A py-spy dump of the main thread ({dump.fields[DUMP_FIELD]}) ends the log"
    incident = hang_at(dump, title, _EXPLANATION, _REMEDIES)
    return incident, Ending(Outcome.hung, "the log ends on a py-spy dump of a stopped process")
