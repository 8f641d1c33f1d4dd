# ruff: noqa: E501  (log lines are kept whole)
"""What the run outlived is not what ended it: errors followed by progress or by the run's own
completion marker are survived notes, errors after that marker teardown notes; the verdict names
only what the job did not survive. Logs are constructed from the emitters' formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from logscope.render.html import render as render_html

from .helpers import analyze_doc, cli, verdict_incident, write


def _iteration(n: int, total: int = 20) -> str:
    return (
        f" iteration {n:8d}/{total:8d} | consumed samples: {n * 64:12d} | elapsed time per "
        f"iteration (ms): 812.4 | learning rate: 1.000E-04 | global batch size:    64 | "
        f"lm loss: {7.0 - n * 0.01:.6E} | loss scale: 1.0 | grad norm: 1.234 | number of "
        f"skipped iterations:   0 | number of nan iterations:   0 |"
    )


def _mllog(key: str, metadata: str, value: str = "null", event: str = "POINT_IN_TIME") -> str:
    return (
        f':::MLLOG {{"namespace": "", "time_ms": 1700000000000, "event_type": "{event}", '
        f'"key": "{key}", "value": {value}, "metadata": {{"file": "train.py", "lineno": 7'
        f"{metadata}}}}}"
    )


def _epochs(first: int, last: int) -> list[str]:
    return [
        _mllog("epoch_start", f', "epoch_num": {n}', event="INTERVAL_START")
        for n in range(first, last + 1)
    ]


RUN_STOP = _mllog("run_stop", ', "status": "success"', event="INTERVAL_END")
OPTIONAL_IMPORT = [
    "[rank{r}]: Import of fused_rope from fastkernels.ops failed with: "
    "Traceback (most recent call last):",
    '[rank{r}]:   File "/opt/fastkernels/ops/__init__.py", line 12, in <module>',
    "[rank{r}]:     from ._C import fused_rope",
    "[rank{r}]: ModuleNotFoundError: No module named 'fastkernels._C'",
]
PRINTED_TRACEBACK = [
    "[rank{r}]: Traceback (most recent call last):",
    '[rank{r}]:   File "/workspace/train.py", line 40, in <module>',
    "[rank{r}]:     import wandb",
    "[rank{r}]: ModuleNotFoundError: No module named 'wandb'",
]
CRASH = "[rank3]: RuntimeError: shape mismatch in layer 12: expected 4096, got 4095"


def _analyze(tmp_path: Path, lines: list[str]) -> tuple[int, dict[str, Any]]:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    code, doc, _ = analyze_doc(str(log))
    return code, doc


def _startup_noise(ranks: int = 2, lines: list[str] = PRINTED_TRACEBACK) -> list[str]:
    return [line.format(r=r) for r in range(ranks) for line in lines]


def test_a_startup_traceback_the_run_outlived_is_a_survived_note(tmp_path: Path) -> None:
    lines = _startup_noise() + [_iteration(n) for n in range(1, 21)]
    code, doc = _analyze(tmp_path, lines)
    assert code == 0, doc["incidents"]
    assert doc["verdict"] is None and doc["incidents"] == []
    assert doc["job"]["outcome"] == "completed", doc["job"]
    [note] = doc["survived"]
    assert note["kind"] == "survived" and note["category"] == "python_exception", note
    assert note["count"] == 2 and note["ranks"] == [
        {"rank": 0, "count": 1},
        {"rank": 1, "count": 1},
    ], note
    assert "wandb" in note["template"] and note["first"]["line"] == 4, note
    assert "steps after it" in note["reason"], note


def test_an_optional_import_logged_with_its_traceback_is_survived_by_nature(
    tmp_path: Path,
) -> None:
    """No progress after it, and still no failure: the library logged the traceback at INFO
    and went on with a fallback."""
    after = ["[rank0]: building the model", "[rank1]: building the model"]
    code, doc = _analyze(tmp_path, _startup_noise(lines=OPTIONAL_IMPORT) + after)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    [note] = doc["survived"]
    assert note["count"] == 2 and "fastkernels" in note["template"], note
    assert "below error level" in note["reason"], note
    # the same traceback printed on its own is a failure the log ends on
    code, doc = _analyze(tmp_path, _startup_noise() + after)
    assert code == 1 and doc["incidents"][0]["category"] == "python_exception", doc
    assert doc["survived"] == []


def test_a_traceback_a_logger_prints_at_warning_level_was_caught(tmp_path: Path) -> None:
    """Every line of the traceback carries the logger's WARNING header (a compiler falling back
    to eager mode): the program went on, and the scheduler's time limit ended the job."""
    head = "[2024-06-02 10:04:57,788] torch._dynamo.convert_frame: [{level}] "
    record = [
        "WON'T CONVERT forward /work/model.py line 88",
        "due to: ",
        "Traceback (most recent call last):",
        '  File "/work/env/lib/python3.11/site-packages/torch/_inductor/codecache.py", line 40',
        "    raise self._exception",
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
        "FileNotFoundError: [Errno 2] No such file or directory: 'ldconfig'",
    ]
    end = (
        "slurmstepd: error: *** JOB 4242 ON gpu07 CANCELLED AT 2024-06-03T10:05:00 "
        "DUE TO TIME LIMIT ***"
    )
    _code, doc = _analyze(tmp_path, [head.format(level="WARNING") + r for r in record] + [end])
    assert doc["verdict"]["category"] == "timelimit", doc["verdict"]
    assert doc["job"]["outcome"] == "timelimit", doc["job"]
    # the same traceback logged at ERROR is the failure
    _code, doc = _analyze(tmp_path, [head.format(level="ERROR") + r for r in record] + [end])
    assert doc["verdict"]["category"] == "io_error", doc["verdict"]


def test_a_symptom_its_logger_prints_as_a_warning_does_not_end_the_job(tmp_path: Path) -> None:
    """A rank's c10 logger says `W` of a lost store connection (a finished step's teardown): a
    warning by its emitter's word; the time limit ended the job. At `E` it is the failure."""
    store = (
        "{r}: [rank{r}]:[{lvl}818 03:13:25.177502783 TCPStore.cpp:125] [c10d] recvValue failed on "
        "SocketImpl(fd=69, addr=[nid006853]:38514, remote=[nid006844]:8888): Failed to recv, got "
        "0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"
    )
    end = (
        "slurmstepd: error: *** STEP 3108079.2 ON nid006844 CANCELLED AT 2026-08-18T03:25:55 "
        "DUE TO TIME LIMIT ***"
    )
    lines = [store.format(r=r, lvl="W") for r in (2, 8, 29)] + [end]
    _code, doc = _analyze(tmp_path, lines)
    assert doc["verdict"]["category"] == "timelimit", doc["verdict"]
    lines = [store.format(r=r, lvl="E") for r in (2, 8, 29)] + [end]
    _code, doc = _analyze(tmp_path, lines)
    assert doc["verdict"]["category"] == "comm_error", doc["verdict"]


def test_a_caught_traceback_cut_before_its_exception_does_not_excuse_a_later_one(
    tmp_path: Path,
) -> None:
    opening = "[rank0]: Import of fused_rope from fastkernels.ops failed with: "
    lines = [opening + "Traceback (most recent call last):"]
    lines += [f"[rank0]: loading shard {n}" for n in range(500)]
    lines.append("[rank0]: ValueError: shard 501 is empty")
    code, doc = _analyze(tmp_path, lines)
    assert code == 1 and doc["incidents"], doc["survived"]
    assert doc["incidents"][0]["root_cause"]["text"].endswith("shard 501 is empty")


def test_errors_after_the_run_completed_are_teardown(tmp_path: Path) -> None:
    lines = [
        *_epochs(1, 5),
        RUN_STOP,
        "[rank2]: RuntimeError: NCCL communicator was aborted on rank 2.",
        "srun: error: node7: task 2: Exited with exit code 1",
    ]
    code, doc = _analyze(tmp_path, lines)
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["incidents"] == [] and doc["verdict"] is None, doc["incidents"]
    kinds = {n["kind"] for n in doc["survived"]}
    assert kinds == {"teardown"}, doc["survived"]
    assert "MLPerf run stopped: status success" in doc["survived"][0]["reason"]
    # the job's own exit code says it failed: the run completed, and the exit status is not 0
    assert doc["job"]["exit_code"] == 1 and code == 1, doc["job"]


def test_a_completed_run_exits_0_unless_its_job_exited_otherwise(tmp_path: Path) -> None:
    teardown = "[rank2]: RuntimeError: NCCL communicator was aborted on rank 2."
    code, doc = _analyze(tmp_path, [*_epochs(1, 5), RUN_STOP, teardown])
    assert (code, doc["job"]["exit_code"]) == (0, None), doc["job"]
    # srun reports the workers' exit code 134 after the teardown: the job failed as SLURM sees it
    lines = [
        *_epochs(1, 5),
        RUN_STOP,
        teardown,
        "srun: error: node7: tasks 1-7: Exited with exit code 134",
    ]
    code, doc = _analyze(tmp_path, lines)
    assert (code, doc["job"]["exit_code"]) == (1, 134), doc["job"]
    # an exit code before the run completed is a failure it outlived, not the job's ending
    lines = ["srun: error: node7: task 0: Exited with exit code 1", *_epochs(1, 5), RUN_STOP]
    code, doc = _analyze(tmp_path, lines)
    assert (code, doc["job"]["exit_code"]) == (0, None), doc["job"]


def test_the_failure_the_job_did_not_survive_stays_the_verdict(tmp_path: Path) -> None:
    lines = _startup_noise() + [_iteration(n) for n in range(1, 9)] + [CRASH]
    code, doc = _analyze(tmp_path, lines)
    assert code == 1 and doc["job"]["outcome"] == "crashed", doc["job"]
    [inc] = doc["incidents"]
    assert inc["root_cause"]["text"] == CRASH
    assert doc["verdict"]["incident"] == inc["id"]
    assert [n["kind"] for n in doc["survived"]] == ["survived"], doc["survived"]


def test_two_progress_lines_after_an_error_do_not_outlive_it(tmp_path: Path) -> None:
    """A rank's last lines can still print while its failure unfolds: three lines of progress
    are needed, as for splitting incidents."""
    lines = [_iteration(n) for n in range(1, 6)] + [CRASH, _iteration(6), _iteration(7)]
    code, doc = _analyze(tmp_path, lines)
    assert code == 1 and doc["survived"] == [], doc["survived"]
    assert doc["incidents"][0]["root_cause"]["text"] == CRASH


def test_steps_numbered_past_an_error_outlive_it_in_fewer_lines(tmp_path: Path) -> None:
    """A job that logs every 10th step: two lines after an error, but 19 steps of collectives
    that every rank took part in. Before the first step, the steps after it count from the
    first one logged."""
    lines = [_iteration(n) for n in (1, 11)] + [CRASH, _iteration(21), _iteration(31)]
    code, doc = _analyze(tmp_path, [line.replace("/      20 |", "/     100 |") for line in lines])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    [note] = doc["survived"]
    assert "from iteration 11 to 31 after it" in note["reason"], note
    code, doc = _analyze(tmp_path, [CRASH, _iteration(1), _iteration(11)])
    assert code == 0 and "from iteration 1 to 11" in doc["survived"][0]["reason"], doc


def test_a_fatal_error_followed_by_a_failure_is_kept(tmp_path: Path) -> None:
    oom = (
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 "
        "has a total capacity of 79.10 GiB of which 1.02 GiB is free."
    )
    lines = [_iteration(n) for n in range(1, 4)] + [oom] + [_iteration(n) for n in range(4, 9)]
    lines.append(CRASH)
    _, doc = _analyze(tmp_path, lines)
    roots = [i["root_cause"]["text"] for i in doc["incidents"]]
    assert oom in roots and CRASH in roots, roots
    assert doc["survived"] == [], doc["survived"]


def test_a_fatal_error_the_run_completed_after_is_survived(tmp_path: Path) -> None:
    oom = (
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 "
        "has a total capacity of 79.10 GiB of which 1.02 GiB is free."
    )
    lines = [*_epochs(1, 2), oom, *_epochs(3, 6), RUN_STOP]
    _, doc = _analyze(tmp_path, lines)
    assert doc["job"]["outcome"] == "completed" and doc["incidents"] == [], doc["incidents"]
    assert doc["survived"][0]["category"] == "oom_gpu", doc["survived"]


def test_a_time_limit_is_outlived_only_by_the_runs_own_completion(tmp_path: Path) -> None:
    banner = [
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
        "slurmstepd: error: *** STEP 812.0 ON node3 CANCELLED AT 2024-05-01T05:42:27 "
        "DUE TO TIME LIMIT ***",
    ]
    _, doc = _analyze(tmp_path, [*_epochs(1, 3), *banner, *_epochs(4, 8)])
    assert doc["survived"] == [], doc["survived"]
    assert doc["incidents"][0]["category"] == "timelimit", doc["incidents"]
    _, doc = _analyze(tmp_path, [*_epochs(1, 3), *banner, *_epochs(4, 8), RUN_STOP])
    assert doc["job"]["outcome"] == "completed", doc["job"]
    assert [n["category"] for n in doc["survived"]] == ["timelimit"], doc["survived"]


def test_one_worker_exiting_or_a_sigterm_exit_is_no_completion(tmp_path: Path) -> None:
    for exit_line in (
        "[2024-03-01 10:00:00,000] [INFO] [launch.py:351:main] Process 4242 exits successfully.",
        "[exiting program after receiving SIGTERM.] datetime: 2024-04-06 04:12:11 ",
    ):
        code, doc = _analyze(tmp_path, [_iteration(1), _iteration(2), CRASH, exit_line])
        assert code == 1 and doc["survived"] == [], (exit_line, doc["survived"])
        assert doc["incidents"][0]["root_cause"]["text"] == CRASH


def test_an_aborted_mlperf_run_ended_of_its_own(tmp_path: Path) -> None:
    # `aborted` (mllog's constant) and `failure` (some submissions' own word for it)
    for status in ("aborted", "failure"):
        stop = _mllog("run_stop", f', "epoch_num": 40, "status": "{status}"', event="INTERVAL_END")
        code, doc = _analyze(tmp_path, [*_epochs(1, 40), stop])
        assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
        assert doc["job"]["outcome_reason"].endswith(f"; status {status})"), doc["job"]


def test_survived_is_always_a_list(tmp_path: Path) -> None:
    _, doc = _analyze(tmp_path, [_iteration(n) for n in range(1, 21)])
    assert doc["survived"] == [] and doc["incidents"] == []
    _, doc = _analyze(tmp_path, [_iteration(1), CRASH])
    assert doc["survived"] == [] and doc["incidents"]


def test_the_reports_show_what_the_run_survived_escaped(tmp_path: Path) -> None:
    hostile = "[rank0]: ValueError: <script>alert(1)</script> {{7*7}}"
    log = tmp_path / "job.log"
    log.write_text("\n".join([hostile, *[_iteration(n) for n in range(1, 21)]]) + "\n")
    _, text, _ = cli("analyze", str(log))
    assert "Survived" in text and "ValueError: <script>" in text, text
    _, doc, _ = analyze_doc(str(log))
    page = render_html(json.loads(json.dumps(doc)), "test")
    section = page[
        page.index("<h2>Survived</h2>") : page.index("</table>", page.index("<h2>Survived"))
    ]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section and "{{7*7}}" in section, section
    assert "<script>alert" not in section
    assert "ranks 0" in section, section


FALLBACKS = [
    "[node2:0:5120 - context.c:594][2024-06-01 10:00:00] ERROR No Aggregation Manager (sharp_am) "
    "detected in sharp_create_job.",
    "node2:5100:5120 [0] sharp_plugin.c:365 NCCL WARN NET/IB : SHARP coll init error: "
    "Cannot create SHARP job(-11)",
    "node2:5100:5107 [0] NCCL INFO transport.cc:356 -> 2",
    "node2:5100:5107 [0] transport.cc:384 NCCL WARN Cannot initialize CollNet, using "
    "point-to-point network instead",
    "node2:5100:5100 [0] NCCL WARN NET/IB : Unable to open device mlx5_7",
    "[1717236000.000001] [node2:5100 :0]          ib_md.c:1933 UCX  ERROR "
    "ibv_open_device(mlx5_7) failed: No such file or directory",
]


def test_nccl_sharp_and_ucx_fallbacks_are_no_failure(tmp_path: Path) -> None:
    """Each line says the library goes on without a feature or a device: no incident even
    when the log ends right after them."""
    code, doc = _analyze(tmp_path, [*FALLBACKS, "node2:5100:5107 [0] NCCL INFO Init COMPLETE"])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["unrecognized"] == [], doc["unrecognized"]
    # a real NCCL failure after them is the failure, not the fallbacks before it
    failure = (
        "node2:5100:5140 [0] NCCL WARN NET/IB : Got completion from peer 10.1.0.3<40312> with "
        "status=12 opcode=0 len=0 vendor err 129 (Recv)"
    )
    code, doc = _analyze(tmp_path, [*FALLBACKS, failure])
    assert code == 1 and doc["incidents"][0]["root_cause"]["text"] == failure, doc["incidents"]


def test_a_connection_nccls_proxy_thread_dropped_is_no_failure(tmp_path: Path) -> None:
    """A foreign connection to NCCL's port: the wrong handshake, the socket error of the
    accept and its `-> 6` unwinding, then the service thread's `Accept failed`, after which it
    goes on serving (NCCL 2.18 proxy.cc, socket.cc)."""
    accept = [
        "gpu-node-4:21877:21940 [1] misc/socket.cc:428 NCCL WARN socketFinalizeAccept: wrong magic 474554202f20 != 3a8c41e7d02b5f19",
        "gpu-node-4:21877:21931 [3] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer 198.51.100.7<51112>",
        *(
            f"gpu-node-4:21877:21931 [3] NCCL INFO misc/socket.cc:{n} -> 6"
            for n in (58, 430, 562, 666)
        ),
        "gpu-node-4:21877:21931 [3] proxy.cc:1456 NCCL WARN [Service thread] Accept failed Success",
    ]
    code, doc = _analyze(tmp_path, accept)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    # the same socket error with no accept settling it is a peer gone
    code, doc = _analyze(tmp_path, accept[1:-1])
    assert code == 1 and doc["incidents"][0]["root_cause"]["text"] == accept[1], doc["incidents"]
    # nor does another process's accept settle it
    for other in (
        accept[-1].replace("21877:", "30112:"),
        accept[-1].replace("gpu-node-4", "gpu-node-5"),
    ):
        code, doc = _analyze(tmp_path, [*accept[1:-1], other])
        assert code == 1 and doc["incidents"][0]["root_cause"]["text"] == accept[1], other


def test_a_request_nccls_remote_allocator_dropped_is_no_failure(tmp_path: Path) -> None:
    """NCCL 2.7-2.11's remote allocation service reads a size from a stray connection, fails to
    allocate it and goes on (bootstrap.cc): its socket and CUDA errors were that request's."""
    thread = "gpu-node-7:4410:4472 [2]"
    request = [
        f"{thread} include/socket.h:423 NCCL WARN Net : Connection closed by remote peer 198.51.100.9<40112>",
        f"{thread} NCCL INFO include/socket.h:445 -> 2",
        f"{thread} bootstrap.cc:274 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 88)",
        f"{thread} include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
        f"{thread} NCCL INFO bootstrap.cc:231 -> 1",
        f"{thread} bootstrap.cc:274 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 88)",
    ]
    code, doc = _analyze(tmp_path, request)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    # another thread's out-of-memory is its own
    other = request[3].replace(":4472 ", ":4490 ")
    code, doc = _analyze(tmp_path, [*request[:3], other, *request[4:]])
    assert code == 1 and doc["incidents"][0]["root_cause"]["text"] == other, doc["incidents"]


def test_an_interrupt_echoed_by_the_terminal_ends_the_job_cancelled(tmp_path: Path) -> None:
    _, doc = _analyze(tmp_path, [*_epochs(1, 30), "^C^Z"])
    assert doc["job"]["outcome"] == "cancelled", doc["job"]
    assert doc["verdict"]["category"] == "cancelled", doc["verdict"]
    # the words in a message are no echo
    _, doc = _analyze(tmp_path, [*_epochs(1, 30), "Press ^C to stop the run"])
    assert doc["job"]["outcome"] != "cancelled" and doc["incidents"] == [], doc["job"]


def test_markdown_lists_what_the_run_survived_escaped(tmp_path: Path) -> None:
    hostile = "[rank0]: ValueError: <img src=x onerror=alert(1)> | pipe"
    log = tmp_path / "job.log"
    log.write_text("\n".join([hostile, *[_iteration(n) for n in range(1, 21)]]) + "\n")
    _, text, _ = cli("analyze", str(log), "--format", "md")
    section = text[text.index("## Survived") :]
    assert "&lt;img src=x onerror=alert(1)&gt; \\| pipe" in section, section
    assert "<img" not in section and "ranks 0, first at" in section, section


def test_progress_of_a_later_attempt_does_not_outlive_a_crash(tmp_path: Path) -> None:
    first = tmp_path / "job-1.log"
    first.write_text("\n".join([*[_iteration(n) for n in range(1, 6)], CRASH]) + "\n")
    second = tmp_path / "job-2.log"
    second.write_text("\n".join(_iteration(n) for n in range(6, 21)) + "\n")
    _, doc, _ = analyze_doc(str(first), str(second))
    assert len(doc["attempts"]) == 2, doc["attempts"]
    assert [i["root_cause"]["text"] for i in doc["incidents"]] == [CRASH], doc["survived"]
    assert doc["survived"] == [] and doc["job"]["outcome"] == "completed", doc["job"]


def _deepspeed(exited: list[int]) -> list[str]:
    head = "[2024-03-01 10:00:00,000] [INFO] [launch.py:{}:main] "
    return [
        head.format(164) + "dist_world_size=2",
        *(
            head.format(256) + f"process {pid} spawned with command: ['python', '-u', 'train.py']"
            for pid in (4101, 4102)
        ),
        "[rank1]: KeyError: 'lr_warmup' (the run goes on with the default schedule)",
        *(head.format(351) + f"Process {pid} exits successfully." for pid in exited),
    ]


def test_every_worker_the_launcher_started_exiting_0_is_the_jobs_end(tmp_path: Path) -> None:
    code, doc = _analyze(tmp_path, _deepspeed([4102, 4101]))
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["outcome"] == "completed" and len(doc["survived"]) == 1, doc
    # one worker's clean exit says nothing of the other's
    code, doc = _analyze(tmp_path, _deepspeed([4102]))
    assert code == 1 and doc["survived"] == [], doc["survived"]


def test_a_run_that_reached_its_last_step_completed(tmp_path: Path) -> None:
    steps = [
        f"step:{n}/50 train_time:{n * 120}ms step_avg:{120 + n % 3}.00ms" for n in range(1, 51)
    ]
    code, doc = _analyze(tmp_path, [*_startup_noise(1), *steps])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["job"]["outcome_reason"] == "reached the last iteration (50/50)", doc["job"]
    assert [n["kind"] for n in doc["survived"]] == ["survived"], doc["survived"]


def test_a_document_from_before_survived_existed_still_renders(tmp_path: Path) -> None:
    from logscope.render.markdown import render as render_md

    _, doc = _analyze(tmp_path, [*_startup_noise(1), *[_iteration(n) for n in range(1, 21)]])
    assert doc.pop("survived")
    assert "Survived" not in render_html(doc, "test") and "Survived" not in render_md(doc)


def _torchrun_agents(hosts: list[str], agents: int) -> list[str]:
    """Two nodes' torchrun agents at INFO under srun --label (task N = node N): the rendezvous
    result's agent count, training, and the agents of `hosts` saying their group finished."""
    head = "torch/distributed/elastic/agent/server/api.py"
    lines = [
        f"{t}: I1202 15:53:51.515000 3235 {head}:553]   group_world_size={agents}" for t in (0, 1)
    ]
    lines += [f"0: {_iteration(n)}" for n in range(1, 6)]
    lines += [
        f"{t}: I1202 15:55:54.441000 3235 {head}:932] [default] worker group successfully "
        "finished. Waiting 300 seconds for other agents to finish."
        for t in hosts
    ]
    lines.append("1: [rank3]: RuntimeError: NCCL communicator was aborted on rank 3.")
    return lines


def test_every_torchrun_agent_of_the_rendezvous_finishing_is_the_jobs_end(tmp_path: Path) -> None:
    _, doc = _analyze(tmp_path, _torchrun_agents(["0", "1"], agents=2))
    assert doc["incidents"] == [] and doc["job"]["outcome"] == "completed", doc["incidents"]
    assert [n["kind"] for n in doc["survived"]] == ["teardown"], doc["survived"]
    # one node's agent finishing says nothing of the other node's ranks
    _, doc = _analyze(tmp_path, _torchrun_agents(["0"], agents=2))
    assert [i["category"] for i in doc["incidents"]] == ["comm_error"], doc["incidents"]
    assert doc["survived"] == [], doc["survived"]


EXIT_WARNING = (
    "[rank{r}]:[W730 15:32:17.841273251 ProcessGroupNCCL.cpp:1479] Warning: WARNING: "
    "destroy_process_group() was not called before program exit, which can leak resources. For "
    "more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown "
    "(function operator())"
)


def test_ranks_that_reached_program_exit_with_no_failure_completed(tmp_path: Path) -> None:
    lines = [f"[rank0]: {_iteration(n)}" for n in range(1, 6)]
    code, doc = _analyze(tmp_path, [*lines, *(EXIT_WARNING.format(r=r) for r in (0, 1))])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["outcome"] == "completed", doc["job"]
    # one process's exit is not the run's completion: a failure after it is no teardown
    crash = "[rank1]: RuntimeError: shape mismatch in layer 12: expected 4096, got 4095"
    code, doc = _analyze(tmp_path, [*lines, EXIT_WARNING.format(r=0), crash])
    assert [i["category"] for i in doc["incidents"]] == ["python_exception"], doc["survived"]
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_a_save_that_fails_after_megatrons_training_loop_is_a_failure(tmp_path: Path) -> None:
    # pretrain() prints `after training is done` when train() returns, then makes the last save:
    # the loop's end is no completion, and the save failing is the job's failure
    lines = [
        *[_iteration(n, total=12) for n in range(1, 13)],
        "[after training is done] datetime: 2024-07-02 11:40:09 ",
        "saving checkpoint at iteration      12 to /ckpt/run7",
        "[rank0]: RuntimeError: [enforce fail at inline_container.cc:858] . PytorchStreamWriter "
        "failed writing file data/5: file write failed",
    ]
    _, doc = _analyze(tmp_path, lines)
    assert doc["verdict"] is not None and doc["verdict"]["category"] == "io_error", doc["survived"]
    assert doc["survived"] == [], doc["survived"]


def test_a_time_limit_after_the_training_finished_ends_a_job_that_never_exited(
    tmp_path: Path,
) -> None:
    limit = (
        "slurmstepd: error: *** STEP 5120.0 ON gpu-b07 CANCELLED AT 2024-07-02T11:58:00 "
        "DUE TO TIME LIMIT ***"
    )
    _, doc = _analyze(tmp_path, [*_epochs(1, 5), RUN_STOP, limit])
    # the run said it stopped, then sat until the limit: hung at exit, or the limit
    assert doc["job"]["outcome"] in ("timelimit", "hung"), doc["job"]
    assert doc["verdict"]["category"] in ("timelimit", "hang"), doc["incidents"]
    assert doc["survived"] == [], doc["survived"]


def test_teardown_errors_then_the_time_limit_are_the_jobs_ending(tmp_path: Path) -> None:
    # the run completed, its ranks then failed in a barrier and the job sat until its limit
    limit = (
        "slurmstepd: error: *** STEP 5120.0 ON gpu-b07 CANCELLED AT 2024-07-02T11:58:00 "
        "DUE TO TIME LIMIT ***"
    )
    teardown = "[rank2]: RuntimeError: NCCL communicator was aborted on rank 2."
    _, doc = _analyze(tmp_path, [*_epochs(1, 5), RUN_STOP, teardown, limit])
    assert doc["job"]["outcome"] != "completed", doc["job"]
    assert doc["verdict"] is not None, doc["survived"]
    # counter-case: without the limit the same errors are teardown
    _, doc = _analyze(tmp_path, [*_epochs(1, 5), RUN_STOP, teardown])
    assert doc["job"]["outcome"] == "completed" and doc["verdict"] is None, doc["job"]


def test_common_trainers_progress_outlives_an_early_error(tmp_path: Path) -> None:
    # progress formats of MetricLogger trainers (DeiT/DINO/MAE), fairseq and logfmt loops: an
    # error-looking line before them was outlived; MetricLogger's `Training time` ends the run
    noise = ["fatal: Not a git repository (or any of the parent directories): .git"]
    metric = [
        f"Epoch: [{e}]  [{i:4d}/1251]  eta: 0:0{9 - i // 200}:00  lr: 0.000400  loss: "
        f"{6.1 - e * 0.1:.4f} (6.2451)  time: 0.3876  data: 0.0012  max mem: 15122"
        for e in range(2)
        for i in (0, 400, 800, 1200)
    ]
    code, doc = _analyze(tmp_path, [*noise, *metric, "Training time 2:03:04"])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    assert doc["verdict"] is None, doc["incidents"]
    fairseq = [
        f"2023-01-09 11:0{n}:33 | INFO | train_inner | epoch 012:    {n * 100} / 1547 loss=4.1{n}, "
        f"nll_loss=2.511, ppl=5.7, wps=81234.1, num_updates={17000 + n * 100}, gnorm=0.612"
        for n in range(1, 6)
    ]
    logfmt = [f"step={n * 10} global_avg_loss=6.{n}1 throughput(tps)=111.3" for n in range(1, 6)]
    for progress in (fairseq, logfmt):
        code, doc = _analyze(tmp_path, [*noise, *progress])
        assert code == 0 and doc["verdict"] is None, doc["incidents"]
        assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_a_wait_at_a_barrier_that_a_rank_passed_later_was_no_hang(tmp_path: Path) -> None:
    """torch's _store_based_barrier logs `Waiting in store based barrier` while peers join and
    `Rank N: Completed store-based barrier for key:K` once all did: the wait was answered. The
    barrier is one store counter, so any rank's completion answers every rank's wait."""
    wait = "08/17/2022 21:31:00 - INFO - torch.distributed.distributed_c10d - Waiting in store based barrier to initialize process group for rank: 1, key: store_based_barrier_key:{k} (world_size=4, worker_count=3, timeout=0:30:00)"
    done = "08/17/2022 21:31:01 - INFO - torch.distributed.distributed_c10d - Rank {r}: Completed store-based barrier for key:store_based_barrier_key:{k} with 4 nodes."
    log = tmp_path / "job.log"
    log.write_text("\n".join([wait.format(k=2), *(done.format(r=r, k=2) for r in range(4))]) + "\n")
    _, doc, _ = analyze_doc(str(log))
    assert doc["incidents"] == [] and doc["job"]["outcome"] != "hung", doc["job"]
    assert any("barrier was passed later" in s["reason"] for s in doc["survived"]), doc["survived"]
    # rank 0 alone says it passed: the counter reached world_size, rank 1's wait is over too
    log.write_text("\n".join([wait.format(k=2), done.format(r=0, k=2)]) + "\n")
    _, doc, _ = analyze_doc(str(log))
    assert doc["incidents"] == [] and doc["job"]["outcome"] != "hung", doc["job"]
    # another key's completion (the next group's barrier), one before the wait, or none: rank 1
    # still waits
    for lines in (
        [wait.format(k=2), done.format(r=1, k=1)],
        [done.format(r=0, k=2), wait.format(k=2)],
        [wait.format(k=2)],
    ):
        log.write_text("\n".join(lines) + "\n")
        _, doc, _ = analyze_doc(str(log))
        assert doc["job"]["outcome"] == "hung", lines


RETRY = "gpu-b3:811:870 [1] NCCL INFO socketPollConnect: connect to 10.1.2.3<52333> returned Connection refused, retrying ({n}/34) after sleep for {ms} msec"


def test_connect_retries_nccl_answered_were_a_peer_starting(tmp_path: Path) -> None:
    """NCCL retries a refused connect while a peer starts (linux.cc) and says `Connected all
    rings` once the ranks are joined: a survived note. A log that ends inside the retries ends
    before the job did: an incident, and the log truncated."""
    retries = [RETRY.format(n=n, ms=100 * n) for n in (1, 2)]
    connected = "gpu-b3:811:870 [1] NCCL INFO Connected all rings, use ring PXN 0 GDR 1"
    code, doc = _analyze(tmp_path, [*retries, connected])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert "NCCL connected after the retries" in doc["survived"][0]["reason"], doc["survived"]
    code, doc = _analyze(tmp_path, retries)
    assert code == 1 and doc["incidents"][0]["category"] == "comm_error", doc["incidents"]
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    assert "the log ends while it retries" in doc["job"]["outcome_reason"]


def test_a_trainer_polling_its_vllm_server_until_it_answers_went_on(tmp_path: Path) -> None:
    """TRL's client logs a retry every 2 s while the generation server loads (vllm_client.py
    check_server) and `Server is up!` once it answers: a survived note. A log that ends in the
    polling ends in a wait; one where the client gave up ends in its ConnectionError."""
    head = "[2025-06-02 11:04:{s:02d},313] [INFO] [trl.extras.vllm_client.check_server:129] "
    polls = [
        head.format(s=s) + "[PID:88] Server is not up yet. Retrying in 2.0 seconds..."
        for s in (2, 4, 6)
    ]
    up = head.format(s=8) + "[PID:88] Server is up!"
    code, doc = _analyze(tmp_path, [*polls, up])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert "the server answered after the retries" in doc["survived"][0]["reason"], doc["survived"]
    code, doc = _analyze(tmp_path, polls)
    assert code == 1 and doc["incidents"][0]["category"] == "launcher_error", doc["incidents"]
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    gave_up = (
        "ConnectionError: The vLLM server can't be reached at 0.0.0.0:8000 after 240.0 seconds. "
        "Make sure the server is running by running `trl vllm-serve`."
    )
    code, doc = _analyze(tmp_path, [*polls, "Traceback (most recent call last):", gave_up])
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert doc["incidents"][0]["root_cause"]["line"] == 5, doc["incidents"][0]["root_cause"]


def test_a_tensorflow_master_waiting_for_its_tasks_hangs_until_they_answer(tmp_path: Path) -> None:
    """TF's master logs every 10 s, with no timeout, each task that has not answered
    (master.cc DeviceFinder::Wait), and `Start master session` once all have
    (master_session.cc): answered, the waits are a survived note; a log that ends in them is a
    hang."""
    head = "2021-09-14 03:22:{s:02d}.104512: I tensorflow/core/distributed_runtime/"
    waits = [
        head.format(s=s) + "master.cc:268] CreateSession still waiting for response from "
        "worker: /job:worker/replica:0/task:3"
        for s in (10, 20, 30)
    ]
    started = (
        head.format(s=41) + "master_session.cc:1161] Start master session 9c04be21d7aa3f10 "
        "with config: allow_soft_placement: true"
    )
    code, doc = _analyze(tmp_path, [*waits, started])
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    assert "every task answered after the waits" in doc["survived"][0]["reason"], doc["survived"]
    code, doc = _analyze(tmp_path, waits)
    assert code == 1 and doc["incidents"][0]["category"] == "hang", doc["incidents"]
    assert doc["job"]["outcome"] == "hung", doc["job"]
    assert "/job:worker/replica:0/task:3" in doc["incidents"][0]["title"], doc["incidents"][0]


def test_other_ranks_printing_the_step_under_way_is_not_training_going_on(tmp_path: Path) -> None:
    # every rank prints each step; the ranks that outlive rank 3 by a moment print the same one
    step = "[rank{r}]:2025-03-02 10:{m:02d}:0{r},000 - INFO - step: {it:3d}  loss:  2.1031"
    lines = [step.format(r=r, m=i, it=10 * i) for i in range(1, 5) for r in (3, 0, 1, 2)]
    crash = "[rank3]:RuntimeError: CUDA error: an illegal memory access was encountered"
    tail = [step.format(r=r, m=5, it=50) for r in (0, 1, 2)]
    _, doc, _ = analyze_doc(
        str(write(tmp_path, "a.log", [*lines, step.format(r=3, m=5, it=50), crash, *tail]))
    )
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert doc["verdict"]["category"] == "cuda_error", doc["verdict"]
    # three more steps after it: the run went on
    more = [step.format(r=r, m=m, it=10 * m) for m in (6, 7, 8) for r in (0, 1, 2, 3)]
    _, doc, _ = analyze_doc(str(write(tmp_path, "b.log", [*lines, crash, *more])))
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_a_run_whose_step_lines_reach_their_last_iteration_outlived_what_came_before(
    tmp_path: Path,
) -> None:
    # fewer steps after the error than training-went-on needs, but the last of the run's
    # own `N/N`: it completed
    noise = "fatal: unable to access 'https://github.com/org/repo.git/': Could not resolve host: github.com"
    code, doc = _analyze(tmp_path, [noise, _iteration(1, 2), _iteration(2, 2)])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    (note,) = doc["survived"]
    assert note["reason"] == "the run reached its last iteration after it (2/2)", note
    # one step short of the last is no completion
    code, doc = _analyze(tmp_path, [noise, _iteration(1, 3), _iteration(2, 3)])
    assert code == 1 and doc["survived"] == [], doc["survived"]


def _logged_error(n: int) -> list[str]:
    # a worker that catches a bad sample and logs it with logging.exception (root logger's
    # `%(levelname)s:%(message)s`), then goes on
    return [
        "ERROR:root:could not parse the reward of a sample",
        "Traceback (most recent call last):",
        '  File "/workspace/reward.py", line 88, in score',
        "    return parse_answer(text)",
        f"ValueError: sample {n}: no answer tag in the completion",
    ]


def test_an_error_that_recurs_while_training_goes_on_was_caught_each_time(
    tmp_path: Path,
) -> None:
    # two or one steps between each error (too few after any one of them), eight in all among
    # them, and the log ends right after the last: the same error, outlived every time
    lines = [_iteration(1)]
    for n in range(2, 10, 2):
        lines += [*_logged_error(n), _iteration(n), _iteration(n + 1)]
    lines += _logged_error(10)
    _code, doc = _analyze(tmp_path, lines)
    assert doc["incidents"] == [], doc["incidents"]
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    [note] = doc["survived"]
    assert "came again while training went on" in note["reason"], note


def test_a_recurring_error_then_another_or_a_launchers_report_is_kept(tmp_path: Path) -> None:
    # counter-cases: a different error after the recurring ones, or the launcher's report that
    # a worker failed, says the last one ended the job: a failure of its own once training went
    # on since the first
    lines = [_iteration(1)]
    for n in range(2, 10, 2):
        lines += [*_logged_error(n), _iteration(n), _iteration(n + 1)]
    _code, doc = _analyze(tmp_path, [*lines, CRASH])
    assert doc["job"]["outcome"] == "crashed", doc["job"]
    assert verdict_incident(doc)["root_cause"]["text"] == CRASH
    report = "E1202 09:26:18.136000 4410 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 4411) of binary: /usr/bin/python"
    _code, doc = _analyze(tmp_path, [*lines, *_logged_error(10), report])
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_an_unknown_error_before_every_process_joined_was_outlived(tmp_path: Path) -> None:
    """A start-up milestone every process must reach (Lightning's registration, NCCL's rings, a
    store-based barrier) after an error line no signature knows: the job went on past it."""
    noise = "Importing matplotlib failed. Plots will not work."
    for milestone in (
        "All distributed processes registered. Starting with 4 processes",
        "gpu1:4410:4470 [0] NCCL INFO Connected all rings",
    ):
        code, doc = _analyze(tmp_path, [noise, "Global seed set to 7", milestone])
        assert code == 0 and doc["incidents"] == [], (milestone, doc["incidents"])
        assert doc["survived"], doc
    # the milestone before the error leaves it the failure
    code, doc = _analyze(
        tmp_path, ["All distributed processes registered. Starting with 4 processes", noise]
    )
    assert code == 1 and doc["incidents"], doc["incidents"]
    # a failure a signature knows is not outlived by a milestone of another process
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    code, doc = _analyze(
        tmp_path, [oom, "All distributed processes registered. Starting with 4 processes"]
    )
    assert code == 1 and doc["incidents"], doc["incidents"]
