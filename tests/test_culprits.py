# ruff: noqa: E501  (log lines are kept whole)
"""Who is to blame (logscope/analysis/culprits.py), rule by rule and not through the CLI: the
ranks a log shows (build_world, World.rank_of) and each rule that names a culprit, called on the
events a real Engine makes of constructed lines (formats: shared/FORMATS.md §1-§3)."""

from __future__ import annotations

from logscope.analysis.culprits import (
    attribute,
    build_world,
    locate,
    pg_culprit,
    reported_culprit,
    silent_culprit,
)
from logscope.model import Culprit, Event, Stream

from .helpers import Failure, child_failed_block, fed, incidents_of

# c10 logger lines of torch 2.4 (FORMATS §2.2, §2.4): `[rankN]:` is the global rank
WATCHDOG = "[rank{r}]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800017 milliseconds before timing out."
DETECTED = "[rank{r}]:[E126 01:17:58.183820380 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at work: 14217, last enqueued NCCL work: {enqueued}, last completed NCCL work: 14216."
# torchrun's agent, torch >= 2.4 logger (FORMATS §3.2)
SIGTERM = "W0409 07:28:49.531000 1359 torch/distributed/elastic/multiprocessing/api.py:897] Sending process {pid} closing signal SIGTERM"
FAILED = "E0409 07:28:50.980000 1359 torch/distributed/elastic/multiprocessing/api.py:984] failed (exitcode: {code}) local_rank: {local} (pid: {pid}) of binary: /opt/venv/bin/python3"
# a C++ exception with no rank prefix (FORMATS §2.5, §2.8)
TERMINATE = [
    "terminate called after throwing an instance of 'c10::CUDAError'",
    "  what():  CUDA error: an illegal memory access was encountered",
]
FIRST_ERROR = Culprit(None, None, None, 0.6, "first error")
"""What the incident engine starts from when the root cause's line names no rank."""


def events_of(lines: list[str]) -> list[Event]:
    return fed(lines).failures


def events_at_the_end(lines: list[str]) -> list[Event]:
    """The events of `lines` once the input has ended (a block still open is closed)."""
    engine = fed(lines)
    engine.finish()
    return engine.failures


def the(events: list[Event], signature: str) -> Event:
    (e,) = [e for e in events if e.signature == signature]
    return e


# -- the ranks of a job ------------------------------------------------------------------------


def test_tee_headers_of_one_node_are_global_ranks() -> None:
    world = build_world([(None, None, 0, None), (None, None, 3, None)])
    assert (world.nodes, world.nproc_per_node, world.size) == (1, 4, 4)
    assert not world.multi_node_tee
    assert world.rank_of_stream(Stream(None, None, 3, None)) == 3
    assert world.ranks == frozenset({0, 3})


def test_a_declared_world_larger_than_one_nodes_headers_makes_them_ambiguous() -> None:
    # BLOOM's main log: 48 nodes all print `[default3]:`, and Megatron says the world is 384
    world = build_world([(None, None, lr, None) for lr in range(8)], declared_size=384)
    assert world.multi_node_tee and world.size == 384
    assert world.rank_of_stream(Stream(None, None, 3, None)) is None
    # a prefix that says the global rank still names it
    assert world.rank_of_stream(Stream(None, None, 3, 27)) == 27


def test_a_task_whose_lines_name_one_rank_is_that_rank() -> None:
    # srun --label over ranks it started itself: `3: [rank3]:` ties task 3 to rank 3, so a
    # bare `3: ` line (a Python traceback, printed without the c10 prefix) is rank 3's
    lines = [
        f"{t}: [rank{t}]:[W1203 10:00:0{t}.000000000 socket.cpp:464] waiting" for t in range(4)
    ]
    lines.append(
        "3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.02 GiB is free."
    )
    engine = fed(lines)
    world = engine.world()
    oom = the(engine.failures, "cuda.out_of_memory")
    assert world.rank_of(oom.line) == 3
    # a task that printed for two ranks (several ranks a task) ties neither
    world = build_world([Stream(0, None, None, 0), Stream(0, None, None, 1)])
    assert world.rank_of_stream(Stream(0, None, None, None)) is None


def test_tasks_are_ranks_only_when_they_are_the_whole_declared_world() -> None:
    # srun started 8 ranks itself (no agent, no rank prefix): task ids 0-7 are the 8 ranks
    world = build_world([], declared_size=8, tasks=range(8))
    assert world.rank_of_stream(Stream(5, None, None, None)) == 5
    assert world.ranks == frozenset(range(8))
    # one torchrun agent a node: 2 tasks in a world of 16 say nothing of the rank
    world = build_world([], declared_size=16, tasks=range(2))
    assert world.rank_of_stream(Stream(1, None, None, None)) is None
    # and no declared world, no guess
    assert build_world([], tasks=range(8)).rank_of_stream(Stream(5, None, None, None)) is None


def test_srun_task_is_the_node_index() -> None:
    # srun --label over one torchrun agent per node: ` 1: [default3]:` is rank 1 x 8 + 3
    lines = [
        f"{task:2d}: [default{lr}]: building the model on cuda:{lr}"
        for task in (0, 1)
        for lr in range(8)
    ] + [" 1: [default3]:RuntimeError: CUDA error: an illegal memory access was encountered"]
    engine = fed(lines)
    world = engine.world()
    assert (world.nodes, world.nproc_per_node, world.size) == (2, 8, 16)
    (error,) = engine.failures
    assert world.rank_of(error.line) == 11


# -- the rank that stayed silent ------------------------------------------------------------


def test_the_one_rank_that_reported_no_timeout_is_the_culprit() -> None:
    events = events_of([WATCHDOG.format(r=r) for r in (0, 1, 2, 3, 4, 6, 7)])
    culprit = silent_culprit(events, build_world([(None, None, None, 7)]))
    assert culprit is not None
    assert (culprit.rank, culprit.confidence) == (5, 0.8)
    assert "7 of 8 ranks report" in culprit.reason and "rank 5 reported nothing" in culprit.reason


def test_several_silent_ranks_are_named_with_low_confidence() -> None:
    events = events_of([WATCHDOG.format(r=r) for r in (0, 1, 2, 4, 6, 7)])
    culprit = silent_culprit(events, build_world([(None, None, None, 7)]))
    assert culprit is not None
    assert (culprit.rank, culprit.confidence) == (3, 0.3)
    assert "ranks 3, 5 reported no timeout" in culprit.reason


def test_one_reporting_rank_above_two_silent_ones_names_no_guess() -> None:
    # the world is known only from the highest rank seen (2): the one rank that reports is as
    # likely the one that hung as either silent rank below it
    events = events_of([WATCHDOG.format(r=2)])
    assert silent_culprit(events, build_world([(None, None, None, 2)])) is None


# the watchdog's message with no prefix (torch 1.x c10 logger; a log that printed no rank)
BARE = "[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800584 milliseconds before timing out."
IN_GROUP = "[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID 5 Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds before timing out."


def test_with_no_world_size_the_one_silent_rank_below_the_reporters_is_the_culprit() -> None:
    engine = fed([BARE.format(r=r) for r in (1, 2, 3)])
    culprit = silent_culprit(engine.failures, engine.world())
    assert culprit is not None and (culprit.rank, culprit.confidence) == (0, 0.4), culprit
    assert "the world's size is not in the log" in culprit.reason
    # counter-cases: two silent ranks below them; ranks of another process group
    for lines in ([BARE.format(r=r) for r in (2, 3)], [IN_GROUP.format(r=r) for r in (1, 2, 3)]):
        engine = fed(lines)
        assert silent_culprit(engine.failures, engine.world()) is None


def test_in_a_known_world_the_bare_watchdogs_default_group_ranks_leave_one_silent() -> None:
    # no prefix on any line, the world's size known: the default group's `[Rank r]` of each
    # report is its global rank
    world = build_world([(None, None, None, 7)])
    events = events_of([BARE.format(r=r) for r in (0, 1, 2, 4, 5, 6, 7)])
    culprit = silent_culprit(events, world)
    assert culprit is not None and (culprit.rank, culprit.confidence) == (3, 0.8), culprit
    assert "rank 3 reported nothing" in culprit.reason
    # counter-case: ranks in another process group say nothing of global ranks
    events = events_of([IN_GROUP.format(r=r) for r in (0, 1, 2, 4, 5, 6, 7)])
    assert silent_culprit(events, world) is None


# NCCL's own failure on one rank under OpenMPI's --tag-output (graph/xml.cc's WARN when sysfs has
# no real path for the GPU's PCI bus, then its return trace up to init), the other rank's init lines only
OWN_WARN = "[1,{r}]<stdout>:node7:687:748 [{r}] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:03/../../0000:03:00.0"
OWN_RETURN = "[1,{r}]<stdout>:node7:687:748 [{r}] NCCL INFO init.cc:540 -> 2"
INIT_INFO = "[1,{r}]<stdout>:node7:688:749 [{r}] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>"


def test_a_rank_whose_own_nccl_call_failed_is_the_culprit_not_the_silent_one() -> None:
    engine = fed(
        [INIT_INFO.format(r=0), INIT_INFO.format(r=1), OWN_WARN.format(r=0), OWN_RETURN.format(r=0)]
    )
    engine.finish()
    # its WARN says what failed on its own machine, not that it waits for rank 1
    assert silent_culprit(engine.failures, engine.world()) is None
    (incident,) = incidents_of(engine)
    assert (incident.culprit.rank, incident.culprit.host) == (0, "node7"), incident.culprit
    assert "own NCCL call failed" in incident.culprit.reason
    # counter-case: both ranks fail so (a setting the node shares): neither is named for it
    lines = [
        INIT_INFO.format(r=1),
        OWN_WARN.format(r=0),
        OWN_RETURN.format(r=0),
        OWN_WARN.format(r=1),
        OWN_RETURN.format(r=1),
    ]
    engine = fed(lines)
    engine.finish()
    (incident,) = incidents_of(engine)
    assert incident.culprit is None or incident.culprit.rank is None, incident.culprit


def test_with_every_rank_reporting_the_one_behind_in_enqueued_work_is_the_culprit() -> None:
    lines = [DETECTED.format(r=r, enqueued=14217 if r == 5 else 14221) for r in range(8)]
    engine = fed(lines)
    culprit = silent_culprit(engine.failures, engine.world())
    assert culprit is not None
    assert (culprit.rank, culprit.confidence) == (5, 0.6)
    assert "lowest last enqueued collective (14217)" in culprit.reason


def test_two_ranks_equally_behind_name_no_one() -> None:
    lines = [DETECTED.format(r=r, enqueued=14217 if r in (2, 5) else 14221) for r in range(8)]
    engine = fed(lines)
    assert silent_culprit(engine.failures, engine.world()) is None


# -- what the launcher reports ----------------------------------------------------------------


FAILED_AT = ("2025-04-09_07:28:50", "gpu-a17")


def block(rank: int, local_rank: int, exitcode: int, host: str = FAILED_AT[1]) -> list[str]:
    return child_failed_block(
        "/opt/train/pretrain.py",
        time=FAILED_AT[0],
        host=host,
        rank=rank,
        local_rank=local_rank,
        exitcode=exitcode,
        pid=1360 + rank,
    )


def test_the_rank_torchruns_root_cause_entry_names() -> None:
    culprit = reported_culprit(events_of(block(6, 6, 1)))
    assert culprit is not None
    assert (culprit.rank, culprit.confidence) == (6, 0.7)
    assert "reports rank 6 as the first process that failed" in culprit.reason


def test_a_root_cause_entry_cut_before_its_exit_code_still_names_its_rank() -> None:
    # the log (or the paste) stops right after the Root Cause entry's `rank :` line
    lines = block(6, 6, 1)
    cut = lines[: lines.index("  rank      : 6 (local_rank: 6)") + 1]
    culprit = reported_culprit(events_at_the_end(cut))
    assert culprit is not None and culprit.rank == 6, culprit
    # an entry of the other failures cut the same way says nothing: no event, no culprit
    other = [
        *lines[: lines.index("Failures:") + 1],
        *Failure(*FAILED_AT, 3, 3, 1, 1363).lines(1)[:4],
    ]
    assert other[-1] == "  rank      : 3 (local_rank: 3)"
    events = events_at_the_end(other)
    assert [e.signature for e in events] == ["torchrun.child_failed"], events
    assert reported_culprit(events) is None


def test_two_agents_naming_different_ranks_name_no_one() -> None:
    # each node's agent prints its own block, and srun reports each node's task
    events = events_of(
        [
            *block(6, 6, 1, "gpu-a17"),
            "srun: error: gpu-a17: task 0: Exited with exit code 1",
            *block(9, 1, 1, "gpu-a18"),
            "srun: error: gpu-a18: task 1: Exited with exit code 1",
        ]
    )
    assert len([e for e in events if e.fields.get("root") == "1"]) == 2
    assert reported_culprit(events) is None


def test_a_rank_the_launcher_only_sigtermed_is_no_culprit() -> None:
    # its entry is a symptom (events.py), and the rule skips SIGTERM besides
    assert reported_culprit(events_of(block(6, 6, -15))) is None


def test_the_failure_block_gives_a_local_rank_its_global_rank_and_host() -> None:
    events = events_of(block(27, 3, -6, "jean-zay-iam23"))
    local_only = Culprit(None, 3, None, 0.6, "first error")
    culprit = locate(local_only, events)
    assert (culprit.rank, culprit.host, culprit.confidence) == (27, "jean-zay-iam23", 0.8)
    assert "names local rank 3 as rank 27 on jean-zay-iam23" in culprit.reason
    # another local rank's block says nothing of this one
    assert locate(Culprit(None, 2, None, 0.6, "first error"), events).rank is None


def test_two_blocks_with_the_same_local_rank_leave_it_unknown() -> None:
    events = events_of(
        [
            *block(3, 3, -6, "node-01"),
            "srun: error: node-01: task 0: Aborted (core dumped)",
            *block(11, 3, -6, "node-02"),
            "srun: error: node-02: task 1: Aborted (core dumped)",
        ]
    )
    assert len([e for e in events if e.fields.get("local_rank") == "3"]) == 2
    assert locate(Culprit(None, 3, None, 0.6, "first error"), events).rank is None


def test_a_bare_error_belongs_to_the_one_worker_the_agent_reports_failed() -> None:
    events = events_of(
        [*TERMINATE, SIGTERM.format(pid=1365), FAILED.format(code=-6, local=1, pid=1366)]
    )
    root = the(events, "cuda.illegal_memory_access")
    culprit = attribute(FIRST_ERROR, root, events, build_world([]))
    assert (culprit.rank, culprit.local_rank, culprit.confidence) == (1, 1, 0.7)
    assert "launcher reports one failed worker only (rank 1)" in culprit.reason


def test_two_failed_workers_leave_a_bare_error_unattributed() -> None:
    events = events_of(
        [
            *TERMINATE,
            FAILED.format(code=-6, local=1, pid=1366),
            FAILED.format(code=-6, local=2, pid=1367),
        ]
    )
    root = the(events, "cuda.illegal_memory_access")
    assert attribute(FIRST_ERROR, root, events, build_world([])) == FIRST_ERROR


# -- a process group's rank -------------------------------------------------------------------

PG_ERROR = "[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1515] {prefix} Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered"


def pg(prefix: str) -> Culprit:
    events = events_of([PG_ERROR.format(prefix=prefix)])
    return pg_culprit(FIRST_ERROR, events[0], events, 40)


def test_the_default_process_groups_rank_is_the_global_rank() -> None:
    culprit = pg("[PG ID 0 PG GUID 0(default_pg) Rank 5]")
    assert (culprit.rank, culprit.confidence) == (5, 0.7)
    assert "names rank 5 of the default process group" in culprit.reason


def test_a_rank_of_an_unnamed_group_is_assumed_global_with_less_confidence() -> None:
    culprit = pg("[Rank 5]")
    assert (culprit.rank, culprit.confidence) == (5, 0.5)


def test_a_rank_of_another_process_group_is_no_global_rank() -> None:
    assert pg("[PG ID 2 PG GUID 9 Rank 5]") == FIRST_ERROR


def test_the_rank_of_a_process_group_message_behind_terminates_what() -> None:
    # libstdc++'s terminate handler prints the uncaught exception's message behind `what():`
    # (nested once per rethrow); the message is ProcessGroupNCCL's, its rank prefix first
    for what in ("  what():  ", "  what():    what():  "):
        line = f"{what}[PG ID 0 PG GUID 0(default_pg) Rank 6] Process group watchdog thread terminated with exception: CUDA error: device-side assert triggered"
        events = events_of([line])
        culprit = pg_culprit(FIRST_ERROR, events[0], events, 40)
        assert culprit.rank == 6, (what, culprit)


def test_another_ranks_timeout_a_few_lines_on_names_no_rank_for_the_error() -> None:
    # a bare OOM (no prefix), then a peer's watchdog timing out on the collective it waited in:
    # the `[Rank 1]` is the waiting peer's, not the rank of the process that ran out of memory
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.90 GiB. GPU 0 has a total capacity of 39.39 GiB of which 8.17 GiB is free."
    timeout = "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=175487, OpType=ALLREDUCE, NumelIn=1030, NumelOut=1030, Timeout(ms)=1800000) ran for 1800495 milliseconds before timing out."
    events = events_of([oom, timeout])
    assert pg_culprit(FIRST_ERROR, events[0], events, 40) == FIRST_ERROR
    # the same error's own watchdog line a few lines on still names its rank
    events = events_of(
        [
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            PG_ERROR.format(prefix="[Rank 3]"),
        ]
    )
    assert pg_culprit(FIRST_ERROR, events[0], events, 40).rank == 3


def test_the_deepspeed_launchers_command_line_is_the_last_workers_and_names_no_culprit() -> None:
    # launch.py's sigkill_handler logs `{cmd} exits with return code = {last_return_code}`, cmd
    # the spawn loop's variable: the last worker's argv (`--local_rank=3` of 4), whoever failed
    line = (
        "[2024-05-02 11:03:07,411] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python3', "
        "'-u', 'train.py', '--local_rank={r}', '--deepspeed', 'ds.json'] exits with return "
        "code = {code}"
    )
    kills = [
        f"[2024-05-02 11:03:07,2{i}0] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 7{i}"
        for i in range(4)
    ]
    for code, signature in ((-9, "deepspeed.worker_killed"), (1, "deepspeed.worker_failed")):
        events = events_of([line.format(r=3, code=code)])
        fields = the(events, signature).fields
        assert fields.get("last_local_rank") == "3" and "local_rank" not in fields, code
        (inc,) = incidents_of(fed([*kills, line.format(r=3, code=code)]))
        # the return code, not the kill list (the launcher's reaction to it), is the root
        assert inc.root_cause.signature == signature, code
        assert inc.culprit is None or inc.culprit.local_rank is None, inc.culprit


def test_a_worker_the_launcher_reports_failed_is_the_culprit_when_it_said_nothing() -> None:
    # torchrun's agent: its peers SIGTERMed, then the first worker that failed, exit code 1
    lines = [SIGTERM.format(pid=p) for p in (33051, 33052, 33053)]
    lines.append(FAILED.format(code=1, local=3, pid=33054))
    (inc,) = incidents_of(fed(lines))
    assert inc.root_cause.line.raw == lines[-1]
    assert inc.culprit is not None and (inc.culprit.rank, inc.culprit.local_rank) == (3, 3)
    assert "launcher reports this worker failed (exit code 1)" in inc.culprit.reason
    # a worker's own error, when there is one, names the culprit instead
    own = "[rank1]: ValueError: bad batch"
    (inc,) = incidents_of(fed([own, *lines]))
    assert inc.culprit is not None and inc.culprit.rank == 1, inc.culprit


def test_ray_trains_failed_worker_index_is_the_rank_of_a_worker_death_with_none() -> None:
    # the raylet's report of a dead worker names its node, never its rank; Ray Train's driver
    # then logs the index (world rank) of the worker whose actor died (train/_internal/utils.py)
    died = "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffffffffffffffff2b Worker ID: 9c Node ID: 4e Worker IP address: 10.4.0.17 Worker port: 10010 Worker PID: 5120"
    (inc,) = incidents_of(fed([died, "(TorchTrainer pid=880) Worker 5 has failed."]))
    assert inc.root_cause.signature == "ray.worker_died"
    assert inc.culprit is not None and inc.culprit.rank == 5, inc.culprit
    assert "launcher reports one failed worker only (rank 5)" in inc.culprit.reason


def test_the_rank_a_desync_report_names_is_the_culprit_of_the_timeout() -> None:
    # ProcessGroupNCCL's watchdog with TORCH_NCCL_DESYNC_DEBUG=1 (c10d/TraceUtils.h)
    timeout = "[rank2]:[E1203 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLGATHER, NumelIn=8, NumelOut=32, Timeout(ms)=60000) ran for 60071 milliseconds before timing out."
    report = [
        "[rank2]:\t - [2] Timeout at collective: ALLGATHER, #41",
        "[rank2]:\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "[rank2]:\t   - [{lagging}] joined but didn't finish collective #40 (count from 1)",
    ]
    lines = [timeout, *(line.format(lagging=3) for line in report)]
    (inc,) = incidents_of(fed(lines))
    assert inc.root_cause.signature == "nccl.watchdog_timeout"
    assert inc.culprit is not None and inc.culprit.rank == 3, inc.culprit
    # counter-case: two ranks behind name no one
    lines = [timeout, *(line.format(lagging="0, 3") for line in report)]
    (inc,) = incidents_of(fed(lines))
    assert inc.culprit is None or inc.culprit.rank != 3, inc.culprit


def test_the_one_rank_absent_from_horovods_ready_ranks_is_the_culprit() -> None:
    # Horovod 0.1x's stall warning lists, per stalled tensor, the ranks that did submit it
    head = "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. Stalled ops: "
    (inc,) = incidents_of(
        fed(
            [
                head
                + "allreduce.grad_0 [ready ranks: 3, 0, 1], allreduce.grad_1 [ready ranks: 0, 3, 1]"
            ]
        )
    )
    assert inc.culprit is not None and inc.culprit.rank == 2, inc.culprit
    # the highest rank absent: the line alone cannot tell it from a smaller world
    (inc,) = incidents_of(fed([head + "allreduce.grad_0 [ready ranks: 2, 0, 1]"]))
    assert inc.culprit is None or inc.culprit.rank is None, inc.culprit


def test_an_error_that_names_its_own_rank_names_the_culprit() -> None:
    # Megatron-Core's rerun state machine says which rank rejected the result (no rank prefix)
    line = "ERROR:megatron.core.rerun_state_machine:Unexpected result nan on rank 6 at iteration #4100 invocation #1 (message='found NaN in local grad norm for bucket #0 in backward pass before data-parallel communication collective')"
    (inc,) = incidents_of(fed([line]))
    assert inc.root_cause.signature == "python.megatron_unexpected_result"
    assert inc.culprit is not None and inc.culprit.rank == 6, inc.culprit
    assert "names its own rank (6)" in inc.culprit.reason
    # its disabled-rerun form, with the node it ran on
    line = "RuntimeError: Rank 11, node gpu-b04, device 3, iteration 77: Unexpected result inf (message='loss is infinite')"
    (inc,) = incidents_of(fed([line]))
    assert inc.culprit is not None and (inc.culprit.rank, inc.culprit.host) == (11, "gpu-b04")


# Paddle's trainer log (glog headers): the TCPStore master line only global rank 0 prints
# (store_utils.cc `is_master = (cur_rank == 0)`, tcp_utils.cc `tcp_listen`), then a traceback
PADDLE_STORE = [
    "I0624 11:20:28.975574   766 tcp_utils.cc:181] The server starts to listen on IP_ANY:62597",
    "I0624 11:20:28.975834   766 tcp_utils.cc:130] Successfully connected to 10.0.0.1:62597",
]
PADDLE_CRASH = [
    "Traceback (most recent call last):",
    '  File "tools/train.py", line 172, in <module>',
    "OSError: (External) CUDA error(719), unspecified launch failure.",
]


def test_a_paddle_trainer_that_started_the_store_is_rank_0() -> None:
    (incident,) = incidents_of(fed([*PADDLE_STORE, *PADDLE_CRASH]))
    assert incident.culprit.rank == 0, incident.culprit
    assert "rank 0's process only" in incident.culprit.reason


def test_the_store_master_names_no_rank_where_another_rank_shows_or_before_it() -> None:
    # another trainer's ring line in the same file: not one trainer's output
    other = "I0624 11:20:30.001117   766 nccl_context.cc:189] init nccl context nranks: 4 local rank: 2 gpu id: 2 ring id: 0"
    (incident,) = incidents_of(fed([*PADDLE_STORE, other, *PADDLE_CRASH]))
    assert incident.culprit.rank is None, incident.culprit
    # the error before the store was started: the line says nothing of what came before
    (incident, *_) = incidents_of(fed([*PADDLE_CRASH, *PADDLE_STORE]))
    assert incident.culprit.rank is None, incident.culprit
