"""A log that ends on a py-spy dump pasted into it: the header of a process's main thread
(`Thread <tid> (idle): "MainThread"`, patterns/pyspy.toml `pyspy.main_thread`), no step after
it, no exit and no failure a signature knows. Nobody dumps the stacks of a process that runs
well: the process was stopped where its frames show, and the log ends on that hang. (A dump
whose frames are in a collective is a failure of its own, `pyspy.waits_in_collective`; a dump
given as a file is read by logscope.dumps.)"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import Event, Incident, Outcome, Progress
from .hung_rank import DUMPED_EXPLANATION, DUMPED_REMEDIES
from .job_outcome import Ending, hang_at

DUMP_FIELD = "stack_dump"


def dumped_hang(markers: Sequence[Event], progress: Progress) -> tuple[Incident, Ending] | None:
    """The hang of a log whose last main-thread dump header has no progress after it, and the
    job's ending (hung). The caller asks only where no incident and no exit were found."""
    dump = next((m for m in reversed(markers) if DUMP_FIELD in m.fields), None)
    if dump is None or progress.count_after(dump.seq):
        return None
    title = f"A py-spy dump of the main thread ({dump.fields[DUMP_FIELD]}) ends the log"
    incident = hang_at(dump, title, DUMPED_EXPLANATION, DUMPED_REMEDIES)
    return incident, Ending(Outcome.hung, "the log ends on a py-spy dump of a stopped process")
