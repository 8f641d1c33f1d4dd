"""Prefix decoding: every routing and logger prefix of FORMATS.md §1 and the hazards of §9."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from logscope.cli import app
from logscope.lines.decode import decode, parse_line
from logscope.lines.discovery import prefix_lines, routing_prefixes
from logscope.model import Line


class _Any:
    """A field the row does not pin down."""

    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()
FIELDS = ("text", "rank", "local_rank", "task", "host", "level", "time", "role")
SAME: Any = object()  # the text is the whole line: nothing may be stripped
YEAR = 2024  # completes c10/glog `MMDD` stamps, which carry no year

C10_TIME = datetime(
    YEAR, 10, 3, 18, 37, 1
)  # the c10 fraction is CLOCK_MONOTONIC: only whole seconds are kept
WATCHDOG = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, OpType=ALLREDUCE)"
NCCL_CONNECT = "NCCL WARN Connect to 10.148.3.247<56821> failed : Connection refused"
SIGTERM = "Sending process 6950 closing signal SIGTERM"


def row(raw: str, text: Any, **want: Any) -> Any:
    """A physical line and what the decoder must find in it; fields not named must be None."""
    expected = dict.fromkeys(FIELDS) | {"text": raw if text is SAME else text} | want
    return pytest.param(raw, tuple(expected[f] for f in FIELDS), id=repr(raw[:48]))


ROWS = [
    # §1.1 torchrun --tee header: local rank, no space after the colon, text verbatim
    row(
        "[default3]:terminate called after throwing an instance of 'c10::CUDAError'",
        "terminate called after throwing an instance of 'c10::CUDAError'",
        local_rank=3,
        role="default",
    ),
    row(
        "[default7]: iteration    12695/  115311 | consumed samples:      9841584 |",
        " iteration    12695/  115311 | consumed samples:      9841584 |",
        local_rank=7,
        role="default",
    ),
    # `--role $(hostname -s):` puts the host in the header
    row("[r6i4n5:3]:hello", "hello", local_rank=3, host="r6i4n5", role=ANY),
    # §1.2 c10 C++ logger `[rank3]:[E…]`: global rank
    row(
        "[rank3]:[E ProcessGroupNCCL.cpp:542] [Rank 3] Collective WorkNCCL(SeqNum=89) raised",
        "[Rank 3] Collective WorkNCCL(SeqNum=89) raised",
        rank=3,
        level="E",
    ),
    # Python excepthook `[rank3]: `: global rank, colon + space
    row(
        "[rank3]: Traceback (most recent call last):", "Traceback (most recent call last):", rank=3
    ),
    row(
        '[rank6]:   File "train.py", line 10, in <module>',
        '  File "train.py", line 10, in <module>',
        rank=6,
    ),
    # torchtitan `--role rank` tee header `[rank0]:text`: the LOCAL rank
    row("[rank0]:step  10  loss:  7.9", "step  10  loss:  7.9", local_rank=0, role=ANY),
    # OLMo's stdout header (olmo/util.py setup_logging): the host and the local rank
    row(
        "2024-03-02 17:20:41.318\tgpu-node-4:3\tolmo.train:1240\tWARNING\tloss spike at step 7380",
        "loss spike at step 7380",
        host="gpu-node-4",
        local_rank=3,
        level="W",
        time=datetime(2024, 3, 2, 17, 20, 41, 318000),
    ),
    # OLMo's interactive handler (olmo/util.py RichHandler): level, logger and the LOCAL rank
    row(
        "[2024-04-18 15:55:06] CRITICAL [olmo.util:158, rank=6] Uncaught ValueError: bad shard",
        "Uncaught ValueError: bad shard",
        local_rank=6,
        level="C",
        time=datetime(2024, 4, 18, 15, 55, 6),
    ),
    row(
        "[2024-04-18 15:55:06] INFO     [root, rank=0] Saving checkpoint...",
        "Saving checkpoint...",
        local_rank=0,
        level="I",
        time=datetime(2024, 4, 18, 15, 55, 6),
    ),
    # torch._logging's TorchLogsFormatter once a process group exists: `[rank5]:` and a glog
    # header (torch 2.13 torch/_logging/_internal.py): the GLOBAL rank
    row(
        "[rank5]:W1202 09:14:07.512000 3317 torch/_dynamo/convert_frame.py:1016] recompiling",
        "recompiling",
        rank=5,
        level="W",
        time=datetime(YEAR, 12, 2, 9, 14, 7, 512000),
    ),
    # torchtitan header + c10 prefix: local 0, global 8
    row(
        "[rank0]:[rank8]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 8] " + WATCHDOG,
        "[Rank 8] " + WATCHDOG,
        rank=8,
        local_rank=0,
        level="E",
        time=C10_TIME,
        role=ANY,
    ),
    # §9.11 srun label + tee header + c10 rank + C++ header
    row(
        " 3: [default7]:[rank31]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 31] "
        + WATCHDOG,
        "[Rank 31] " + WATCHDOG,
        rank=31,
        local_rank=7,
        task=3,
        level="E",
        time=C10_TIME,
        role="default",
    ),
    # c10 header forms, oldest → newest (§1.2)
    row(
        "[E ProcessGroupNCCL.cpp:414] Some NCCL operations have failed or timed out.",
        "Some NCCL operations have failed or timed out.",
        level="E",
    ),
    row(
        "[W411 23:36:06.965860675 Utils.hpp:137] Warning: Environment variable is deprecated",
        "Warning: Environment variable is deprecated",
        level="W",
        time=datetime(YEAR, 4, 11, 23, 36, 6),
    ),
    # a Windows build names the whole source path (constructed)
    row(
        "[W D:\\a\\pytorch\\torch\\csrc\\distributed\\c10d\\socket.cpp:601] [c10d] The client "
        "socket has failed to connect to [node-1]:29500 (system error: 10061).",
        "[c10d] The client socket has failed to connect to [node-1]:29500 (system error: 10061).",
        level="W",
    ),
    # `%(name)s %(levelname)s %(asctime)s `: Paddle's launcher (logger LAUNCH)
    row(
        "LAUNCH WARNING 2025-06-13 17:55:57,156 save gpu log failed",
        "save gpu log failed",
        level="W",
        time=datetime(2025, 6, 13, 17, 55, 57, 156000),
    ),
    row(
        "I0820 14:27:21.482718 4030958 ProcessGroupNCCL.cpp:980] [PG 0 Rank 1] NCCL options",
        "[PG 0 Rank 1] NCCL options",
        level="I",
        time=datetime(YEAR, 8, 20, 14, 27, 21, 482718),
    ),
    # §1.4 srun --label: right-aligned, space-padded to the widest task id (384 tasks: 3 wide)
    row("  3: hello world", "hello world", task=3),
    row("383: hello world", "hello world", task=383),
    row(" 0: [default0]:ready", "ready", task=0, local_rank=0, role="default"),
    # het job: "P%u %*d: ", so the padding sits between the component and the task id
    row("P1 3: het", "het", task=3),
    row("P1   3: het", "het", task=3),
    # §1.5 OpenMPI --tag-output, with and without --timestamp-output
    row(
        "[1,3]<stderr>:Traceback (most recent call last):",
        "Traceback (most recent call last):",
        rank=3,
    ),
    row("[1,3]<stdout>:hello", "hello", rank=3),
    row(
        "Mon Mar 21 13:34:34 2022[1,3]<stderr>:Traceback (most recent call last):",
        "Traceback (most recent call last):",
        rank=3,
        time=datetime(2022, 3, 21, 13, 34, 34),
    ),
    # horovodrun's own launchers (runner/util/safe_shell_exec.py): the worker index alone, with
    # and without --prefix-timestamp
    row("[3]<stderr>:RuntimeError: boom", "RuntimeError: boom", rank=3),
    row(
        "Tue Apr 21 18:22:53 2020[12]<stdout>:epoch 1",
        "epoch 1",
        rank=12,
        time=datetime(2020, 4, 21, 18, 22, 53),
    ),
    # SageMaker's mpirun (aws/sagemaker-training-toolkit test_process.py): rank, then host
    row(
        "[1,mpirank:10,algo-2]<stderr>:FileNotFoundError: [Errno 2] No such file or directory",
        "FileNotFoundError: [Errno 2] No such file or directory",
        rank=10,
        host="algo-2",
    ),
    # §1.6 pdsh: the hostfile's IP or name
    row(
        "104.171.201.172: [2023-04-16 02:38:19,113] [INFO] [launch.py:247:main] dist_world_size=16",
        "dist_world_size=16",
        host="104.171.201.172",
        level="I",
        time=datetime(2023, 4, 16, 2, 38, 19, 113000),
    ),
    row("worker-1: some text", "some text", host="worker-1"),
    # §4 NCCL host:pid:tid [cudaDev]: the device index is not a rank
    row(
        "r6i6n4:257714:257714 [0] NCCL INFO Bootstrap : Using ib0:10.148.7.175<0>",
        "NCCL INFO Bootstrap : Using ib0:10.148.7.175<0>",
        host="r6i6n4",
        level=ANY,
    ),
    row(
        "r11i6n2:486514:486651 [1] include/socket.h:403 " + NCCL_CONNECT,
        "include/socket.h:403 " + NCCL_CONNECT,
        host="r11i6n2",
        level=ANY,
    ),
    # v2.26+: `[%F %T] ` stamp before the host (WARN only, by default)
    row(
        "[2025-03-01 10:00:00] r11i6n2:486514:486651 [1] include/socket.h:403 " + NCCL_CONNECT,
        "include/socket.h:403 " + NCCL_CONNECT,
        host="r11i6n2",
        level=ANY,
        time=datetime(2025, 3, 1, 10, 0, 0),
    ),
    # glog / torch._logging (elastic agent)
    row(
        "W1129 12:53:57.233000 6934 torch/distributed/elastic/multiprocessing/api.py:1028] "
        + SIGTERM,
        SIGTERM,
        level="W",
        time=datetime(YEAR, 11, 29, 12, 53, 57, 233000),
    ),
    # glog >= 0.6 writes the year (FLAGS_log_year_in_prefix, on by default): it is the record's
    row(
        "F20230801 07:29:34.701110  2256 fs_coordinator.cc:42] Invalid tracker path: /x",
        "Invalid tracker path: /x",
        level="F",
        time=datetime(2023, 8, 1, 7, 29, 34, 701110),
    ),
    # abseil before absl::InitializeLog: the raw Unix seconds (UTC, where the log's other
    # stamps are local time) in the seconds' place: the level, no time
    row(
        "I0000 00:00:1714000000.250000  812345 grpc_server_lib.cc:467] Started server",
        "Started server",
        level="I",
        time=None,
    ),
    row(
        "[2024-04-10 16:02:56,193] torch.distributed.elastic.multiprocessing.api: [WARNING] "
        + SIGTERM,
        SIGTERM,
        level="W",
        time=datetime(2024, 4, 10, 16, 2, 56, 193000),
    ),
    row("WARNING:torch.distributed.elastic.multiprocessing.api:" + SIGTERM, SIGTERM, level="W"),
    # §1.7 DeepSpeed logger: `[Rank 0]` stays in the message
    row(
        "[2021-05-27 21:32:00,332] [INFO] [logging.py:60:log_dist] [Rank 0] DeepSpeed info: v=0.4",
        "[Rank 0] DeepSpeed info: v=0.4",
        level="I",
        time=datetime(2021, 5, 27, 21, 32, 0, 332000),
    ),
    row(
        "104.171.201.171: [2023-04-16 02:38:19,527] [INFO] [launch.py:229:main] nnodes=2",
        "nnodes=2",
        host="104.171.201.171",
        level="I",
        time=datetime(2023, 4, 16, 2, 38, 19, 527000),
    ),
    # §9.6 `[Rank N]` inside a message is a process-group rank, not a global rank
    row(
        "[default1]:[E ProcessGroupNCCL.cpp:458] [Rank 1] " + WATCHDOG,
        "[Rank 1] " + WATCHDOG,
        local_rank=1,
        level="E",
        role="default",
    ),
    row("[Rank 1] " + WATCHDOG, SAME),
    # §9.12 ANSI escapes are stripped before anything else
    row(
        "\x1b[32m[default1]:\x1b[0mhello \x1b[1mworld\x1b[0m",
        "hello world",
        local_rank=1,
        role="default",
    ),
    row("\x1b[H\x1b[2J[default2]:after clear", "after clear", local_rank=2, role="default"),
    # messages that must not be taken for a pdsh host
    row("RuntimeError: boom", SAME),
    row("srun: error: node01: task 1: Exited with exit code 1", SAME),
    row("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", SAME),
    # a digit in a module name makes a dotted exception name look like a pdsh host
    row("urllib3.exceptions.ProtocolError: ('Connection aborted.', RemoteDisconnected('x'))", SAME),
    row("boto3.exceptions.S3UploadFailedError: Failed to upload /ckpt/iter_100.pt", SAME),
    # decorations a line picks up before it reaches logscope. A quote in a post or
    # e-mail, a box or table gutter, an indent before a routing prefix
    row("> [rank3]: ValueError: x", "ValueError: x", rank=3),
    row("> > [default1]:boom", "boom", local_rank=1, role="default"),
    row("| [1,5]<stderr>:boom", "boom", rank=5),
    row(
        "    [rank2]:[E301 09:00:00.1 ProcessGroupNCCL.cpp:1] boom",
        "boom",
        rank=2,
        level="E",
        time=ANY,
    ),
    # an indent before text that is no routing prefix stays (a traceback frame)
    row('  File "train.py", line 3, in main', SAME),
    # the poster's Markdown emphasis around the line that mattered; glog's and slurmstepd's
    # `*** ... ***` banners are no emphasis
    row(
        "**OSError: [Errno 28] No space left on device**",
        "OSError: [Errno 28] No space left on device",
    ),
    row("> **[rank2]: KeyError: 'x'** ", "KeyError: 'x'", rank=2),
    row("*** SIGSEGV (@0x0) received by PID 4120 (TID 0x7f) from PID 0; stack trace: ***", SAME),
    row("** WARNING **", SAME),
    # Ray worker and raylet prefixes (ray/_private/log_monitor.py); the ip names the node
    row(
        "(TorchTrainer pid=287, ip=10.0.0.218) Started distributed worker processes:",
        "Started distributed worker processes:",
        host="10.0.0.218",
    ),
    row("(RayTrainWorker pid=43515) [rank1]: KeyError: 'x'", "KeyError: 'x'", rank=1),
    # a worker with no actor or task name (ray/_private/worker.py print_worker_logs)
    row("(pid=51234, ip=10.0.4.7) RuntimeWarning: slow", "RuntimeWarning: slow", host="10.0.4.7"),
    row("\x1b[36m(pid=51234)\x1b[0m step 3 loss 1.2", "step 3 loss 1.2"),
    # a copy that lost the escape bytes keeps the colour codes as text
    row("[2m[36m(RayTrainWorker pid=7, ip=10.2.0.3)[0m hello", "hello", host="10.2.0.3"),
    # SkyPilot's run log (sky/skylet/log_lib.py): its rank numbers nodes, so the node is the host
    row("(head, rank=0, pid=911) ValueError: bad shard", "ValueError: bad shard", host="head"),
    row(
        "(worker3, rank=3, pid=4120, ip=10.8.0.12) [rank25]: KeyError: 'x'",
        "KeyError: 'x'",
        host="10.8.0.12",
        rank=25,
    ),
    row("(finetune, pid=77) step 3 loss 1.2", "step 3 loss 1.2"),
    # Ray's C++ logger header after the raylet prefix
    row(
        "(raylet, ip=172.31.70.203) [2022-04-24 20:11:54,239 E 133 133] (raylet) "
        "worker_pool.cc:502: Some workers of the worker process(2377) have not registered within"
        " the timeout.",
        "worker_pool.cc:502: Some workers of the worker process(2377) have not registered within"
        " the timeout.",
        host="172.31.70.203",
        level="E",
        time=datetime(2022, 4, 24, 20, 11, 54, 239000),
    ),
    # Determined: the launcher's `[rank=N] ` (wrap_rank.py), the master's task log around it
    row(
        "[rank=5] OSError: [Errno 5] Input/output error",
        "OSError: [Errno 5] Input/output error",
        rank=5,
    ),
    row(
        "[2023-09-14T08:01:02.250000Z] 7c1e9a02 [rank=13] || ERROR: KeyError: 'x'",
        "KeyError: 'x'",
        rank=13,
        level="E",
        time=datetime(2023, 9, 14, 8, 1, 2, 250000),
    ),
    row("[] [rank=2] || OSError: x", "OSError: x", rank=2),
    # the same tag behind a time with a space and no zone, and a `<...>` column before it
    row(
        "<>        [2021-12-07 10:41:31] 5fabfb53 [rank=3] || OSError: x",
        "OSError: x",
        rank=3,
        time=datetime(2021, 12, 7, 10, 41, 31),
    ),
    row("[rank=1.5] loss 2.0", "[rank=1.5] loss 2.0"),
    # YARN's log collector: ISO time, then the container
    row(
        "2021-02-03T04:05:06.000Z /container_e12_1612345678901_0001_01_000003: OSError: x",
        "OSError: x",
        time=datetime(2021, 2, 3, 4, 5, 6),
    ),
    # detectron2's file logger and the Paddle suites' copies: `[%(asctime)s] [name ]LEVEL: `,
    # the date `%m/%d` or `%Y/%m/%d`; detectron2's console `[%(asctime)s name]: `
    row(
        "[05/10 08:01:12] ppdet.engine INFO: Epoch: [2] [ 40/916] learning_rate: 0.010000",
        "Epoch: [2] [ 40/916] learning_rate: 0.010000",
        level="I",
        time=datetime(YEAR, 5, 10, 8, 1, 12),
    ),
    row(
        "[2023/05/10 08:01:12] ppcls ERROR: OSError: x",
        "OSError: x",
        level="E",
        time=datetime(2023, 5, 10, 8, 1, 12),
    ),
    row(
        "[2023/05/10 08:01:12] WARNING: x",
        "x",
        level="W",
        time=datetime(2023, 5, 10, 8, 1, 12),
    ),
    row(
        "ERROR [03/15 10:00:00 d2.engine.train_loop]: Exception during training:",
        "Exception during training:",
        level="E",
        time=datetime(YEAR, 3, 15, 10, 0, 0),
    ),
    # PaddleVideo's logger (paddlevideo/utils/logger.py): `[%(asctime)s] ` alone
    row(
        "[03/14 09:12:44] training ppTSM finished",
        "training ppTSM finished",
        time=datetime(YEAR, 3, 14, 9, 12, 44),
    ),
    # a bracketed date with no clock's seconds is the message's
    row("[05/10 08:01] loss 2.0", "[05/10 08:01] loss 2.0"),
    row("[05/10] loss 2.0", "[05/10] loss 2.0"),
    # DeepSpeed's pdsh runner with `localhost` in its hostfile
    row(
        "localhost: [rank0]: OSError: x",
        "OSError: x",
        host="localhost",
        rank=0,
    ),
    # SkyPilot's logger (sky/sky_logging.py) and vLLM's taken from it (vllm/logger.py):
    # `%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] `, datefmt `%m-%d %H:%M:%S`
    row(
        "E 03-04 10:11:12 backend_utils.py:998] Failed to cancel jobs on cluster c-7.",
        "Failed to cancel jobs on cluster c-7.",
        level="E",
        time=datetime(YEAR, 3, 4, 10, 11, 12),
    ),
    row(
        "(EngineCore_DP0 pid=812) WARNING 11-30 23:59:01 [v1/worker/gpu_worker.py:44] x",
        "x",
        level="W",
        time=datetime(YEAR, 11, 30, 23, 59, 1),
    ),
    # TensorFlow's C++ logger (platform/default/logging.cc): ISO time, microseconds, level,
    # the thread id under TF_CPP_LOG_THREAD_ID
    row(
        "2022-10-23 01:07:26.771566: E external/xla/service/gpu/nccl_utils.cc:70] x",
        "x",
        level="E",
        time=datetime(2022, 10, 23, 1, 7, 26, 771566),
    ),
    row(
        "2021-03-01 10:00:00.123456: I   31337 tensorflow/core/common_runtime/gpu_device.cc:141] x",
        "x",
        level="I",
        time=datetime(2021, 3, 1, 10, 0, 0, 123456),
    ),
    # ParlAI (parlai/utils/distributed.py `'rank:{:3d} |'.format(rank)` before a worker's print
    # and log calls) over its log file header (parlai/utils/logging.py LOGFILE_FORMAT
    # `%(asctime)s %(levelname)-8s | `, its own levels among them)
    row(
        "rank: 12 | 2021-07-09 11:02:03,456 ERROR    | x",
        "x",
        rank=12,
        level="E",
        time=datetime(2021, 7, 9, 11, 2, 3, 456000),
    ),
    row("rank:  1 | x", "x", rank=1),
    row(
        "2021-07-09 11:02:03,456 REPORT   | x",
        "x",
        level="R",
        time=datetime(2021, 7, 9, 11, 2, 3, 456000),
    ),
    # loguru's default format (loguru/_defaults.py LOGURU_FORMAT)
    row(
        "2025-01-24 15:34:50.240 | ERROR    | __main__:<module>:12 - x",
        "x",
        level="E",
        time=datetime(2025, 1, 24, 15, 34, 50, 240000),
    ),
    row(
        "2025-01-24 15:34:50.240 | SUCCESS  | trainer.loop:fit:88 - x",
        "x",
        level="S",
        time=datetime(2025, 1, 24, 15, 34, 50, 240000),
    ),
    # the Hugging Face example scripts' basicConfig (`%m/%d/%Y %H:%M:%S - LEVEL - name - `), and
    # scripts that copied it without the logger's name
    row(
        "03/07/2025 14:02:11 - ERROR - __main__ - x",
        "x",
        level="E",
        time=datetime(2025, 3, 7, 14, 2, 11),
    ),
    row(
        "11/30/2023 08:15:59 - INFO - accelerate.utils.other -   x",
        "x",
        level="I",
        time=datetime(2023, 11, 30, 8, 15, 59),
    ),
    row(
        "02/14/2022 23:59:31 - WARNING - x y",
        "x y",
        level="W",
        time=datetime(2022, 2, 14, 23, 59, 31),
    ),
    # a rank word in a message, no column after it
    row("rank: 3 of 8 joined", "rank: 3 of 8 joined"),
    # a month-day time with no source position after it is the message's
    row("I 03-04 10:11:12 step 3 done", "I 03-04 10:11:12 step 3 done"),
    # dmesg -H relative stamps
    row("[  +0.000004] pcieport 0000:00:03.0: AER: x", "pcieport 0000:00:03.0: AER: x"),
]


def fields(line: Line) -> tuple[Any, ...]:
    return tuple(getattr(line, f) for f in FIELDS)


@pytest.mark.parametrize(("raw", "want"), ROWS)
def test_prefix(raw: str, want: tuple[Any, ...]) -> None:
    got = parse_line(raw, "job.log", 42, year=YEAR)
    assert len(got) == 1, [fields(g) for g in got]
    line = got[0]
    assert (line.path, line.lineno, line.raw) == ("job.log", 42, raw)
    mismatched = {
        f: (g, w)
        for f, g, w in zip(FIELDS, fields(line), want, strict=True)
        if w is not ANY and g != w
    }
    assert not mismatched, f"{raw!r}: (got, want) {mismatched}"


def test_stamps_without_year_get_no_time_when_year_unknown() -> None:
    for raw in (
        "[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog",
        "W1129 12:53:57.233000 6934 torch/distributed/elastic/multiprocessing/api.py:1028] x",
    ):
        (line,) = parse_line(raw, "f", 1, year=None)
        assert line.time is None, (raw, line)
        assert line.level in ("E", "W"), line


def test_carriage_return_states_are_separate_records_on_one_line() -> None:
    raw = "[default0]: 12%|#1 | 2/16\r[default0]: 19%|#9 | 3/16\r[default0]:done\n"
    got = parse_line(raw, "job.log", 9)
    assert [g.text for g in got] == [" 12%|#1 | 2/16", " 19%|#9 | 3/16", "done"], got
    assert {g.lineno for g in got} == {9}
    assert {g.local_rank for g in got} == {0}
    assert all(g.raw == raw.rstrip("\n") for g in got), got


def test_carriage_return_state_without_header_inherits_the_stream() -> None:
    # §9.2: log text appended to the last tqdm state
    raw = " 3: [default1]:Epoch 0: 100%|##| 4/4\rEpoch 0: : 10000it [25:24,  6.56it/s]"
    got = parse_line(raw, "job.log", 5)
    assert [g.text for g in got] == [
        "Epoch 0: 100%|##| 4/4",
        "Epoch 0: : 10000it [25:24,  6.56it/s]",
    ]
    assert [(g.task, g.local_rank) for g in got] == [(3, 1), (3, 1)], got


def test_crlf_is_not_a_progress_state() -> None:
    got = parse_line("[default2]:hello\r\n", "job.log", 3)
    assert [(g.text, g.local_rank) for g in got] == [("hello", 2)], got


def test_glued_cpp_header_splits_into_two_records() -> None:
    raw = (
        "[default0]: iteration 6000 | consumed_samples=2.56e+7][E ProcessGroupNCCL.cpp:458] "
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120)"
    )
    got = parse_line(raw, "job.log", 77)
    assert len(got) == 2, got
    first, second = got
    assert first.text == " iteration 6000 | consumed_samples=2.56e+7]", first
    assert second.text.startswith("[Rank 0] Watchdog caught"), second
    assert second.level == "E", second
    assert second.rank is None, second  # `[Rank 0]` is not a global rank
    assert (first.lineno, second.lineno) == (77, 77)
    assert first.raw == second.raw == raw


def test_glued_after_traceback_carets() -> None:
    # §9.1: `^^^^^[rank1]:[E1003 …` after a Python traceback caret line
    raw = (
        "[rank0]:    ^^^^^^^^^^^^^^^^^^[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] "
        "[Rank 1] Watchdog caught collective operation timeout"
    )
    got = parse_line(raw, "job.log", 4, year=YEAR)
    assert [(g.text, g.rank) for g in got] == [
        ("   ^^^^^^^^^^^^^^^^^^", 0),
        ("[Rank 1] Watchdog caught collective operation timeout", 1),
    ], [fields(g) for g in got]


def test_glued_tee_header_of_another_rank() -> None:
    # §1.1 partial-line hazard: another rank's tailer writes into the middle of a line
    raw = "[default0]: 12%|#1 | 2/16[default5]:rank 5 ready"
    got = parse_line(raw, "job.log", 1)
    assert [(g.text, g.local_rank) for g in got] == [(" 12%|#1 | 2/16", 0), ("rank 5 ready", 5)]


def test_a_slurm_record_glued_after_an_unfinished_line() -> None:
    # slurmstepd writes into the task's own output: a line with no newline yet goes on with it
    bar = " 40%|####      | 4/10 [03:12<04:48, 48.1s/it]"
    stamp = "[2026-03-01T04:05:06.789] "
    step = "error: *** STEP 7.0 ON gpu-b3 CANCELLED AT 2026-03-01T04:05:06 DUE TO TIME LIMIT ***"
    got = parse_line(bar + "slurmstepd: " + step, "job.log", 9)
    assert [g.text for g in got] == [bar, "slurmstepd: " + step], got
    done = "[after training is done] datetime: 2026-03-01 03:40:00 "
    got = parse_line(done + stamp + step)
    assert [g.text for g in got] == [done, step]
    assert got[1].time == datetime(2026, 3, 1, 4, 5, 6, 789000), got
    # a message that names srun, and a record that starts its line, are one record
    for whole in (
        "RuntimeError: launcher failed: srun: error: Unable to allocate resources",
        "srun: error: gpu-b3: task 2: Exited with exit code 1",
        stamp + step,
    ):
        assert len(parse_line(whole)) == 1, whole


def test_a_record_glued_after_a_progress_bar_is_a_record_of_its_own() -> None:
    # tqdm's bar ends `{n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]` with no newline;
    # the next write (here the warnings module's `file:line: Category: message`) goes on it
    warning = "/opt/app/data/video.py:419: UserWarning: Failed to load clip /d/c1.mp4: bad header"
    for bar in (
        "  1%|          | 102/11206 [5:14:43<574:22:39, 186.22s/it]",
        " 40%|####      | 4/10 [03:12<04:48, 48.1s/it, loss=0.712]",
        "Map:   3%|3         | 3.00k/100k [00:01<?, ?ex/s]",
    ):
        got = parse_line(bar + warning, "job.log", 3)
        assert [g.text for g in got] == [bar, warning], got
    # a bar with a space after it, and a bar that ends its line, stay one record
    for whole in (
        " 40%|####      | 4/10 [03:12<04:48, 48.1s/it] epoch 2",
        " 40%|#### | 4/10 [03:12<04:48, 48.1s/it]",
    ):
        assert len(parse_line(whole)) == 1, whole


def test_the_text_shown_of_a_redrawn_line_is_the_state_that_holds_the_record() -> None:
    bar = "  2%|▏         | 265/11206 [13:41:09<566:25:{s:02d}, 186.38s/it]"
    step = "slurmstepd: error: *** STEP 77.0 ON gpu52 CANCELLED AT 2025-08-11T19:10:32 ***"
    raw = "\r".join(bar.format(s=s) for s in range(3)) + step
    records = parse_line(raw, "job.log", 5)
    assert records[-1].text == step
    assert records[-1].shown == bar.format(s=2) + step
    # a line with no `\r` state is shown whole
    (plain,) = parse_line(step, "job.log", 6)
    assert plain.shown == step


def test_a_bracketed_host_before_its_port_is_no_glued_header() -> None:
    # c10d prints sockets as `addr=[host]:port`: a host with a digit in its name, then `]:`
    raw = (
        "[rank29]:[W818 03:13:25.177502783 TCPStore.cpp:125] [c10d] recvValue failed on "
        "SocketImpl(fd=69, addr=[nid006853]:38514, remote=[nid006844]:8888): Failed to recv"
    )
    (line,) = parse_line(raw, "job.log", 1, year=YEAR)
    assert line.rank == 29 and line.level == "W", fields(line)
    assert line.text.startswith("[c10d] recvValue failed") and line.text.endswith("Failed to recv")


def test_invalid_utf8_is_replaced() -> None:
    data = b"[default1]:caf\xe9 \xff\xfe failed\n"
    (line,) = parse_line(decode(data), "job.log", 1)
    assert line.local_rank == 1
    assert line.text == "caf\ufffd \ufffd\ufffd failed", repr(line.text)


def test_control_characters_are_dropped() -> None:
    (line,) = parse_line("[default1]:a\x00b\x07c\x08d", "job.log", 1)
    assert line.text == "abcd", repr(line.text)


def test_blank_line_gives_one_empty_record() -> None:
    got = parse_line("", "job.log", 8)
    assert [(g.text, g.lineno) for g in got] == [("", 8)]
    got = parse_line("\r\r\n", "job.log", 9)
    assert [(g.text, g.lineno) for g in got] == [("", 9)]


def test_cli_reports_invalid_utf8_and_ansi_lines(tmp_path: Path) -> None:
    f = tmp_path / "job.log"
    f.write_bytes(
        b"\x1b[H\x1b[2J[default0]:rank 0 ready\n"
        b"[default1]:[rank1]: ValueError: bad byte \xff in batch\n"
    )
    result = CliRunner().invoke(app, ["analyze", str(f), "--format", "json"])
    assert result.exit_code == 1, result.output + result.stderr
    doc = json.loads(result.stdout)
    root = doc["incidents"][0]["root_cause"]
    assert root["line"] == 2, root
    assert root["rank"] == 1, root
    assert "\ufffd" in root["text"], root


def test_cli_exception_from_a_module_with_a_digit_is_an_incident(tmp_path: Path) -> None:
    # `urllib3.exceptions.X: ...` taken as pdsh host `urllib3.exceptions.X` hides the exception
    f = tmp_path / "job.log"
    f.write_text(
        "Traceback (most recent call last):\n"
        '  File "download.py", line 3, in <module>\n'
        "urllib3.exceptions.ProtocolError: ('Connection aborted.', RemoteDisconnected('x'))\n"
    )
    result = CliRunner().invoke(app, ["analyze", str(f), "--format", "json"])
    assert result.exit_code == 1, result.output + result.stderr
    doc = json.loads(result.stdout)
    assert doc["incidents"][0]["root_cause"]["line"] == 3, doc["incidents"]
    assert doc["job"]["hosts"] == [], doc["job"]


def test_torch_loggings_rank_prefix_names_global_ranks_in_the_world(tmp_path: Path) -> None:
    # srun --label tasks, each one rank, whose torch._logging lines (torch 2.13 DDP's logger.info
    # at distributed.py:1776) say `[rankN]:` before a glog header: the world is the ranks named,
    # not tasks times local ranks
    lines = [
        f"{t:2d}: [rank{t}]:I1202 09:14:{t:02d}.736000 {4100 + t} "
        "torch/nn/parallel/distributed.py:1776] Reducer buckets have been rebuilt in this "
        "iteration."
        for t in range(12)
    ]
    lines.append(" 0: step 1 loss 2.5")
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["analyze", str(log), "--format", "json"])
    assert json.loads(result.stdout)["job"]["world_size"] == 12, result.stdout


def test_rank_discovery_reads_a_glog_header_after_the_rank_prefix_as_decode_does() -> None:
    # discovery keeps the header's level letter where decode's GLOG_HEADER follows, abseil's
    # pre-init `0000 00:00:<unix seconds>` form too; a torchtitan tee header's text stays local
    data = (
        b"[rank3]:I1202 09:14:07.512000 3317 torch/nn/parallel/distributed.py:1776] x\n"
        b"[rank4]:W0000 00:00:1755712869.739954 1154753 xla/pjrt/client.cc:699] x\n"
        b"[rank5]:Iteration 5 done\n"
    )
    lines = [prefix_lines(p, "-")[0] for p in sorted(routing_prefixes(data, 0))]
    assert {(ln.rank, ln.local_rank) for ln in lines} == {(3, None), (4, None), (None, 5)}
