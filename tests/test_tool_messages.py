# ruff: noqa: E501  (log lines are kept whole)
"""Whole-log behaviour of messages that tools around the training program print (patterns/git.toml,
graphlearn.toml, the backtrace frames of openmpi.toml): a probe or an epoch's end that reads like
an error is no failure, and a crash's frames alone are the crash. Lines are constructed from the
emitters' format strings (see each pattern file's header)."""

from __future__ import annotations

from .helpers import Run, assert_root, told


def _step(i: int) -> str:
    return f"2024-05-01 10:{i:02d}:00 INFO step {i} loss 1.{i:02d}"


def test_gits_answer_to_a_commit_hash_probe_is_no_failure(run: Run) -> None:
    """A program asks git for its commit hash where the code is no checkout; git dies with
    `fatal: ` and the program goes on."""
    for probe in (
        ["fatal: not a git repository (or any of the parent directories): .git"],
        [
            "fatal: not a git repository (or any parent up to mount point /workspace)",
            "Stopping at filesystem boundary (GIT_DISCOVERY_ACROSS_FILESYSTEM not set).",
        ],
    ):
        code, doc, _path = run([_step(1), _step(2), *probe])
        assert code == 0 and doc["incidents"] == [], doc["incidents"]
        assert doc["job"]["outcome"] == "truncated", doc["job"]
    # git failing at something a job needs is still read as an error line
    code, doc, _path = run(
        [
            _step(1),
            "fatal: unable to access 'https://github.com/org/repo.git/': Could not resolve host: github.com",
        ]
    )
    assert code == 1 and doc["incidents"], doc["job"]


def _graphsage(epoch: int, it: int) -> str:
    return f"Epoch {epoch}, Iteration {it}, Time(s) 0.0830, Loss 0.8{it}"


def test_graphlearns_end_of_traversal_is_an_epochs_end(run: Run) -> None:
    """GraphLearn before April 2021 logs the OutOfRange that ends each traversal at ERROR."""
    end = [
        "E0717 17:30:22.467953   589 notification.cc:194] RpcNotification:Failed\treq_type:GetNodes\tstatus:Out of range:No more nodes exist.",
        "E0717 17:30:22.468039   589 distribute_runner.h:125] Rpc failed:Out of range:No more nodes exist.name:GetNodes",
    ]
    lines = [*(_graphsage(1, i) for i in range(3)), *end]
    code, doc, _path = run(lines)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    # another status from the same notification is a failure
    lost = end[0].replace("Out of range:No more nodes exist.", "Unavailable:Connect failed")
    code, doc, _path = run([*lines[:3], lost])
    assert code == 1, doc["job"]


def test_graphlearns_tracker_path_no_file_system_serves_is_the_launch_failing(run: Run) -> None:
    lines = [
        "world_size: 2, rank: 0",
        "E0801 07:29:34.700927  2256 env.cc:112] File system not implemented: hdfs://cluster/tracker",
        "F0801 07:29:34.701110  2256 fs_coordinator.cc:42] Invalid tracker path: hdfs://cluster/tracker/",
        "*** Check failure stack trace: ***",
        "    @     0x7f50dfba322e  google::LogMessage::Fail()",
    ]
    category, _rank = told(run, lines, 2)
    assert category == "launcher_error"


def test_openmpi_backtrace_frames_alone_are_the_crash_of_their_rank(run: Run) -> None:
    """A window that starts inside OpenMPI's signal handler's backtrace: the first frame is the
    crash, the rank is --tag-output's."""
    frames = [
        "[1,2]<stderr>:[gpu-n7:14623] [ 1] /lib/x86_64-linux-gnu/libc.so.6(+0x43090)[0x7fb789fe2090]",
        "[1,2]<stderr>:[gpu-n7:14623] [ 2] /opt/lib/libcore.so(_ZN4core10BufferImpl7reserveEv+0x313)[0x7fb5a5025143]",
        "[1,2]<stderr>:[gpu-n7:14623] [ 3] python(_PyEval_EvalFrameDefault+0x6b2)[0x55d1c2e8f0b2]",
    ]
    assert told(run, ["[1,0]<stdout>:step 10 loss 2.01", *frames], 1) == ("segfault", 2)
    # the reason the same process printed before its frames stays the cause
    reason = (
        "[1,2]<stderr>:  what():  cudaEventQuery failed: an illegal memory access was encountered"
    )
    category, rank = told(run, [reason, *frames], 0)
    assert (category, rank) == ("cuda_error", 2)


def _espnet_launch(quoted: list[str]) -> list[str]:
    """ESPnet2's launch.py after its run.pl job failed: run.pl's report, the CalledProcessError it
    prints, its own traceback ending in a bare `RuntimeError: ` whose message is the log's end."""
    return [
        "2024-02-11 08:00:01,120 (launch:349) INFO: log file: exp/asr_conformer/train.log",
        "run.pl: job failed, log is in exp/asr_conformer/train.log",
        "Command '['run.pl', '--gpu', '4', 'exp/asr_conformer/train.log', 'python3', '-m', 'espnet2.bin.asr_train']' returned non-zero exit status 1.",
        "Traceback (most recent call last):",
        '  File "/opt/espnet/espnet2/bin/launch.py", line 385, in <module>',
        "    main()",
        '  File "/opt/espnet/espnet2/bin/launch.py", line 376, in main',
        "    raise RuntimeError(",
        "RuntimeError: ",
        "################### The last 1000 lines of exp/asr_conformer/train.log ###################",
        "# python3 -m espnet2.bin.asr_train --ngpu 4 --multiprocessing_distributed true",
        "# Started at Sun Feb 11 08:00:01 UTC 2024",
        "#",
        *quoted,
        "# Accounting: time=37 threads=1",
        "# Ended (code 1) at Sun Feb 11 08:00:38 UTC 2024, elapsed time 37 seconds",
    ]


def test_a_launchers_exception_that_quotes_the_workers_log_carries_the_workers_failure(
    run: Run,
) -> None:
    """The worker's own exception inside the quote is the root cause, not the launcher's bare
    RuntimeError that carries it."""
    worker = [
        "[node3] 2024-02-11 08:00:30,101 (abs_task:1190) INFO: Loading pretrained params from /models/base.pth",
        "Traceback (most recent call last):",
        '  File "/opt/espnet/espnet2/bin/asr_train.py", line 23, in <module>',
        "    main()",
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/dump/raw/train/wav.scp'",
    ]
    lines = _espnet_launch(worker)
    category, _rank = told(run, lines, lines.index(worker[-1]))
    assert category == "io_error"
    # a quote with no failure of its own leaves the launcher's exception the root
    lines = _espnet_launch(worker[:1])
    told(run, lines, lines.index("RuntimeError: "))
    # a bare exception with no quote under it stays the root, the later failure its aftermath
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "RuntimeError: ",
        "step 1 loss 2.0",
        "Traceback (most recent call last):",
        '  File "eval.py", line 3, in <module>',
        "ValueError: no checkpoint",
    ]
    told(run, lines, 2)


def test_kaldis_job_runner_closes_its_log_with_the_commands_code(run: Run) -> None:
    """run.pl's trailer: code 0 ends the run; a non-zero code or a signal is its failure."""
    head = [
        "# python3 -m espnet2.bin.asr_train --ngpu 2",
        "# Started at Sun Feb 11 08:00:01 UTC 2024",
        "#",
        *(_step(i) for i in range(1, 4)),
        "# Accounting: time=86413 threads=1",
    ]
    code, doc, _path = run(
        [*head, "# Ended (code 0) at Mon Feb 12 08:00:14 UTC 2024, elapsed time 86413 seconds"]
    )
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    code, doc, _path = run(
        [
            *head,
            "# Ended (code 0; signal 9) at Mon Feb 12 08:00:14 UTC 2024, elapsed time 86413 seconds",
        ]
    )
    assert code == 1 and doc["job"]["outcome"] == "crashed", doc["job"]
    # a signal ended the command: the signal's category, as a launcher's report of it reads
    assert doc["incidents"][0]["category"] == "process_killed", doc["incidents"]


def test_a_blocking_write_is_an_io_error(run: Run) -> None:
    """BlockingIOError is an OSError (EAGAIN on a non-blocking file or stream): I/O."""
    lines = [
        _step(1),
        "Traceback (most recent call last):",
        '  File "/opt/lib/tensorboard/summary/writer/event_file_writer.py", line 244, in run',
        "    self._record_writer.write(data)",
        "BlockingIOError: [Errno 11] Resource temporarily unavailable",
    ]
    assert told(run, lines, 4)[0] == "io_error"


def test_the_shells_prompt_after_the_output_says_the_command_returned(run: Run) -> None:
    """A bare prompt after the training's output: the program exited; a failure it printed is
    still how it ended."""
    prompt = "(venv) ml@gpu-07:~/runs/bert$ "
    steps = [
        f"step {i} step_time 3.{i}1s throughput 14.{i} seq/s loss 2.{i} grad norm 0.{i}"
        for i in range(1, 9)
    ]
    code, doc, _path = run([f"{prompt}torchrun --nproc-per-node 2 train.py", *steps, prompt])
    assert code == 0 and doc["job"]["outcome"] == "completed", doc["job"]
    # a prompt with the next command typed, and a prompt before more training: no end
    code, doc, _path = run([*steps[:4], f"{prompt}tail -f train.log", *steps[4:]])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    code, doc, _path = run([*steps[:4], prompt, *steps[4:]])
    assert doc["job"]["outcome"] == "truncated", doc["job"]
    # a crash, then the prompt: it crashed
    crash = [*steps, "Traceback (most recent call last):", '  File "train.py", line 9, in <module>']
    lines = [*crash, "ValueError: shard 17 is empty", "root@4f2c9a1e7b20:/workspace# "]
    assert told(run, lines, len(crash))[0] == "python_exception"
    code, doc, _path = run(lines)
    assert doc["job"]["outcome"] == "crashed", doc["job"]


def test_open_mpis_ofi_transport_failing_is_the_cause_of_the_abort_after_it(run: Run) -> None:
    """Open MPI's OFI MTL exits the process when libfabric fails under it (mtl_ofi_endpoint.h);
    libfabric's cleanup then asserts in the exit handlers, and the signal handler prints the
    abort: the transport is the cause, the abort its consequence, the dead rank the culprit."""
    proc = "[node-b:51377]"
    lines = [
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 128M step: 2(factor) warmup iters: 5 iters: 20",
        f"{proc} mtl_ofi_endpoint.h:49: *** The Open MPI OFI MTL is aborting the MPI job (via exit(3)).",
        "all_reduce_perf: prov/util/src/util_mem_monitor.c:177: ofi_monitor_cleanup: Assertion `dlist_empty(&monitor->list)' failed.",
        f"{proc} *** Process received signal ***",
        f"{proc} Signal: Aborted (6)",
        f"{proc} [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x42520)[0x7f3e1c642520]",
        f"{proc} [ 1] /lib/x86_64-linux-gnu/libc.so.6(abort+0xd3)[0x7f3e1c6287f3]",
        f"{proc} *** End of error message ***",
        "--------------------------------------------------------------------------",
        "prterun noticed that process rank 3 with PID 51377 on node node-b exited on",
        "signal 6 (Aborted).",
    ]
    _code, doc, _path = run(lines)
    (inc,) = doc["incidents"]
    assert inc["category"] == "comm_error", inc["title"]
    assert inc["root_cause"]["line"] == 2, inc["root_cause"]
    assert inc["culprit"]["rank"] == 3, inc["culprit"]
    assert doc["job"]["outcome"] == "crashed"


def _extension_build(failed: str) -> list[str]:
    """torch.utils.cpp_extension building a JIT op with ninja (ninja's status printer, then the
    compiler's output, then torch's exception), one edge failing."""
    return [
        "Emitting ninja build file /root/.cache/torch_extensions/py311_cu121/fused_adam/build.ninja...",
        "Building extension module fused_adam...",
        "[1/3] /usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=fused_adam -c multi_tensor_adam.cu -o multi_tensor_adam.cuda.o",
        failed,
        "/usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=fused_adam -c multi_tensor_adam.cu -o multi_tensor_adam.cuda.o",
        "/opt/ops/csrc/includes/type_shim.h:4:10: fatal error: cuda_bf16.h: No such file or directory",
        "compilation terminated.",
        "ninja: build stopped: subcommand failed.",
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.11/site-packages/torch/utils/cpp_extension.py", line 2107, in _run_ninja_build',
        "    subprocess.run(",
        "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "    optimizer = FusedAdam(model.parameters())",
        "RuntimeError: Error building extension 'fused_adam'",
    ]


def test_ninjas_failed_edge_is_the_cause_of_a_jit_extension_that_was_not_built(run: Run) -> None:
    """ninja's `FAILED: <outputs>` (with `[code=N]` since ninja 1.13) is the first word of the
    build failing; torch's CalledProcessError and `Error building extension` follow from it."""
    for failed in (
        "FAILED: multi_tensor_adam.cuda.o ",
        "FAILED: [code=1] multi_tensor_adam.cuda.o ",
    ):
        lines = _extension_build(failed)
        _code, doc, _path = run(lines)
        (inc,) = doc["incidents"]
        assert inc["root_cause"]["line"] == 4, (failed, inc["root_cause"])
        assert inc["category"] == "python_exception"
    # a build the program went on from (an optional op it replaced): training went on
    steps = [f"step={n} loss=2.{n:02d}" for n in range(1, 6)]
    _code, doc, _path = run([*_extension_build("FAILED: multi_tensor_adam.cuda.o ")[:8], *steps])
    assert doc["incidents"] == [], doc["incidents"]


def test_gsplats_worker_wrapper_says_the_job_s_function_returned(run: Run) -> None:
    """gsplat's `_distributed_worker` prints `Job Done for worker: n / N` after the barrier every
    worker passes once its function returned: the run completed. Cut before it, the log says
    nothing of its end."""
    bar = "loss=0.035| sh degree=3| : 100%|##########| {n}/15000 [09:15<00:00, 26.98it/s]"
    steps = ["Distributed worker: 1 / 2", "Distributed worker: 2 / 2", bar.format(n=14000)]
    _code, doc, _path = run([*steps, "Job Done for worker: 2 / 2", "Job Done for worker: 1 / 2"])
    assert doc["job"]["outcome"] == "completed" and not doc["incidents"], doc["job"]
    _code, doc, _path = run(steps)
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_lightgbms_connect_retries_answered_are_no_failure_and_unanswered_a_wait(run: Run) -> None:
    """LightGBM's socket set-up retries a refused connect (`Connecting to rank N failed, waiting
    for M milliseconds`); `Connected to rank N` says the links came up. A log that ends in the
    retries waits for a rank that never listened."""
    retry = "[LightGBM] [Warning] Connecting to rank {r} failed, waiting for {ms} milliseconds"
    retries = [retry.format(r=3, ms=ms) for ms in (200, 260, 338)]
    answered = [
        *retries,
        "[LightGBM] [Info] Connected to rank 3",
        "[LightGBM] [Info] Finished linking network in 1.21 seconds",
    ]
    code, doc, _path = run(answered)
    assert code == 0 and doc["incidents"] == [], doc["incidents"]
    _code, doc, _path = run(retries)
    (inc,) = doc["incidents"]
    assert inc["category"] == "comm_error" and doc["job"]["outcome"] == "truncated", doc["job"]
    # unprefixed machines interleaved: one's links came up (its `Connected to rank 1`, well
    # after the other's retries of rank 3, which it does not answer); that info line ends no
    # process: still a wait
    binds = ["[LightGBM] [Info] Trying to bind port 4515{n}...", "[LightGBM] [Info] Listening..."]
    lines = [*retries, *(b.format(n=n) for n in range(8) for b in binds)]
    lines.append("[LightGBM] [Info] Connected to rank 1")
    _code, doc, _path = run(lines)
    (inc,) = doc["incidents"]
    assert doc["job"]["outcome"] == "truncated", doc["job"]


def test_a_dask_worker_out_of_memory_pauses_then_its_nanny_restarts_it(run: Run) -> None:
    """Dask's worker pauses above its memory pause fraction and its nanny kills it above the
    terminate fraction: host memory ran out, first seen at the pause. A log that ends at the
    pause was cut while the worker waited."""
    pause = "2024-03-01 10:11:10,001 - distributed.worker.memory - WARNING - Worker is at 86% memory usage. Pausing worker.  Process memory: 6.89 GiB -- Worker memory limit: 8.00 GiB"
    restart = "2024-03-01 10:11:12,345 - distributed.nanny.memory - WARNING - Worker tcp://10.0.0.7:40211 (pid=81723) exceeded 95% memory budget. Restarting..."
    _code, doc, path = run([pause, restart])
    inc = doc["incidents"][0]
    assert inc["category"] == "oom_host" and doc["job"]["outcome"] == "crashed", doc["job"]
    assert_root(inc, path, 1, pause)
    # a note beside it that a thread handled an error says nothing of how the worker ended
    linked = [
        "[LightGBM] [Warning] Connecting to rank 1 failed, waiting for 200 milliseconds",
        "[LightGBM] [Info] Connected to rank 1",
    ]
    for lines in ([pause], [*linked, pause]):
        _code, doc, _path = run(lines)
        assert [i["category"] for i in doc["incidents"]] == ["oom_host"], doc["incidents"]
        assert doc["job"]["outcome"] == "truncated", doc["job"]
