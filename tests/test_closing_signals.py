# ruff: noqa: E501  (log lines are kept whole)
"""A log whose only word of a failure is torchrun closing its workers
(logscope/analysis/closing_signals.py), on lines built from the elastic agent's own texts (torch
2.13 torch/distributed/elastic/multiprocessing/api.py `SubprocessContext._close` and
`MultiprocessContext._close`, and the torch 1.x logger's form), with the counter-cases."""

from __future__ import annotations

from pathlib import Path

from logscope.engine.conclude import conclude
from logscope.model import Analysis, Outcome

from .helpers import FIXTURES, analyze_doc, fed, input_of, write

START = ["loading checkpoint shards: 100%", "Model has 13.0B parameters"]
NEW = "W1202 09:26:18.136000 4410 torch/distributed/elastic/multiprocessing/api.py:1029] Sending process {pid} closing signal SIGTERM"
OLD = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {pid} closing signal SIGTERM"
SPAWN = "W1202 09:26:18.136000 4410 torch/distributed/elastic/multiprocessing/api.py:872] Closing process {pid} via signal SIGTERM"


def closing(form: str, pids: list[int]) -> list[str]:
    return [form.format(pid=p) for p in pids]


def analysed(lines: list[str]) -> Analysis:
    return conclude(fed(lines), [input_of(lines)])


def test_torchrun_closing_all_workers_but_one_is_a_crash_of_the_one_it_skipped(
    tmp_path: Path,
) -> None:
    for form in (NEW, OLD, SPAWN):
        pids = [9400 + i for i in range(8) if i != 5]
        log = write(tmp_path, "job.log", [*START, *closing(form, pids)])
        _code, doc, _ = analyze_doc(str(log))
        assert doc["job"]["outcome"] == "crashed", doc["job"]
        (inc,) = doc["incidents"]
        assert inc["category"] == "process_killed", inc
        assert inc["root_cause"]["line"] == 3, inc["root_cause"]
        assert (inc["culprit"]["rank"], inc["culprit"]["local_rank"]) == (5, 5), inc["culprit"]
        assert "rising by one but for pid 9405" in inc["culprit"]["reason"]


def test_a_real_runs_log_cut_at_the_closing_signals_names_the_killed_rank(tmp_path: Path) -> None:
    # the real torchrun run of tests/fixtures/lab/sigkill_rank2.log (rank 2 SIGKILLed itself),
    # as a post cut right after the agent's closing lines, before its report of the exit
    lines = (FIXTURES / "lab" / "sigkill_rank2.log").read_text().splitlines()
    end = next(i for i, t in enumerate(lines) if "closing signal SIGTERM" in t)
    while "closing signal SIGTERM" in lines[end]:
        end += 1
    _code, doc, _ = analyze_doc(str(write(tmp_path, "cut.log", lines[:end])))
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    (inc,) = doc["incidents"]
    assert inc["category"] == "process_killed", inc
    assert inc["culprit"]["rank"] == 2, inc["culprit"]


def test_closed_pids_that_do_not_rise_by_one_name_no_worker() -> None:
    # counter-case: another process took pids between the workers' starts
    a = analysed([*START, *closing(NEW, [9400, 9403, 9404, 9409])])
    (inc,) = a.incidents
    assert a.job.outcome is Outcome.crashed
    assert inc.culprit is None


def test_closing_signals_after_an_error_or_before_progress_are_no_crash_of_their_own() -> None:
    # counter-cases: the error before them is the incident; training that went on after them
    # (an elastic restart) ended nothing; the agent's own stop is said first
    error = ["[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered"]
    a = analysed([*START, *error, *closing(NEW, [9400, 9401, 9402])])
    (inc,) = a.incidents
    assert inc.root_cause.line.text.endswith("an illegal memory access was encountered")
    steps = [
        f"iteration {i}/ 1000 | lm loss: 2.1E+00 | elapsed time per iteration (ms): 812.1"
        for i in range(1, 6)
    ]
    a = analysed([*START, *closing(NEW, [9400, 9401, 9402]), *steps])
    assert a.job.outcome is not Outcome.crashed, a.job.outcome_reason
    stop = "W1202 09:26:18.100000 4410 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers"
    a = analysed([*START, stop, *closing(NEW, [9400, 9401, 9402])])
    assert a.job.outcome is Outcome.cancelled, a.job.outcome_reason


def test_a_process_exit_before_the_closing_signals_is_no_completion_of_the_run() -> None:
    # ProcessGroupNCCL's destructor warns as one worker's interpreter shuts down (torch 2.4's
    # and 2.5+'s wordings): one process's end, not the run's, so the agent's closing signals
    # after it still tell of a worker that failed; the run's own completion before them
    # (Lightning's fit loop returning) makes them teardown
    exits = [
        "[rank0]:[W1202 09:26:17.402113055 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. (function operator())",
        "[rank0]:[W1202 09:26:17.402113055 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    ]
    pids = [31700 + i for i in range(4) if i != 2]
    for exit_line in exits:
        a = analysed([*START, exit_line, *closing(NEW, pids)])
        assert a.job.outcome is Outcome.crashed, a.job.outcome_reason
        (inc,) = a.incidents
        # the workers were leaving of themselves: a cause the log does not show, not a kill
        assert inc.category == "unknown"
        assert "shutting down on its own" in inc.explanation
        assert inc.culprit is not None and inc.culprit.local_rank == 2
    done = "`Trainer.fit` stopped: `max_epochs=3` reached."
    a = analysed([*START, done, exits[1], *closing(NEW, pids)])
    assert a.job.outcome is Outcome.completed, a.job.outcome_reason
    assert not a.incidents
