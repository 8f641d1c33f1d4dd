"""A log that ends while the ranks wait in init_process_group (logscope/analysis/startup_wait.py),
on lines built from Lightning's own texts (lightning 2.4.0 fabric/utilities/distributed.py
`_init_dist_connection`, pytorch-lightning 1.2.10 plugins/training_type/ddp.py), with the
counter-cases that must stay no failure."""

from __future__ import annotations

from logscope.engine.conclude import conclude
from logscope.model import Analysis, Outcome

from .helpers import fed, input_of

START = ["GPU available: True (cuda), used: True", "TPU available: False, using: 0 TPU cores"]


def members(ranks: range, size: int, old: bool = False) -> list[str]:
    said = "initializing ddp" if old else "Initializing distributed"
    return [f"{said}: GLOBAL_RANK: {r}, MEMBER: {r + 1}/{size}" for r in ranks]


def analysed(lines: list[str]) -> Analysis:
    return conclude(fed(lines), [input_of(lines)])


def test_ranks_of_the_world_never_heard_of_leave_the_others_waiting_at_init() -> None:
    for old in (False, True):
        lines = [*START, *members(range(4), 8, old)]
        a = analysed(lines)
        assert a.job.outcome is Outcome.hung, a.job.outcome_reason
        (inc,) = a.incidents
        assert inc.category == "hang" and inc.root_cause.line.lineno == 3, inc
        assert "4 of 8 ranks announced themselves" in inc.title
    # one rank missing is the one the others wait for
    (inc,) = analysed([*START, *members(range(3), 4)]).incidents
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit


def test_no_hang_when_the_wait_ended_or_every_rank_announced_itself() -> None:
    registered = [
        "----------------------------------------------------------------------------------------------------",
        "distributed_backend=nccl",
        "All distributed processes registered. Starting with 8 processes",
    ]
    for lines in (
        [*START, *members(range(8), 8)],  # a log cut right after a whole start-up
        [*START, *members(range(8), 8), *registered],
        # rank 0 said the wait ended: the ranks of other nodes are in their own logs
        [*START, *members(range(4), 8), *registered],
        # a node's own log without rank 0's line: nothing here says the wait did not end
        [*START, *members(range(4, 8), 8)],
    ):
        a = analysed(lines)
        assert a.incidents == () and a.job.outcome is Outcome.truncated, (lines, a.incidents)
