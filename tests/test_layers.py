"""Prefix layers learned per input (lines.layers): constructed stacks of an emitter's prefixes in
any order, each read back; lines that only look like a layer once are not taken for one."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from logscope.cli import app
from logscope.lines.decode import learn_layers, parse_line
from logscope.model import Line

YEAR = 2024
RANKS = 12  # two-digit task ids: srun pads the one-digit ones (` 3: `)
HOSTS = ("gpu-a01", "gpu-a02", "10.0.4.17")
WHEN = datetime(YEAR, 5, 6, 7, 8, 9, 123456)


@dataclass(frozen=True)
class Layer:
    """One emitter's prefix: how it prints it for rank `r` on host `h`, and what it says."""

    name: str
    render: Callable[[int, str], str]
    says: frozenset[str]  # the fields of a Line it sets: rank, task, host, time
    glued: bool = False  # the emitter puts no space after it (OpenMPI's tag)
    time: datetime | None = None  # the time it states
    after_time: bool = False  # its emitter prints it right after a time only


def _task(r: int) -> str:
    # slurm write_labelled_message.c: "%*d: ", the width of the largest task id
    return f"{r:>{len(str(RANKS - 1))}}: "


MS = WHEN.replace(microsecond=123000)
SECOND = WHEN.replace(microsecond=0)
TIME_LAYERS = (
    Layer("iso", lambda r, h: "2024-05-06T07:08:09.123456Z ", frozenset({"time"}), time=WHEN),
    Layer("asctime", lambda r, h: "[2024-05-06 07:08:09,123] ", frozenset({"time"}), time=MS),
    Layer("syslog", lambda r, h: "May  6 07:08:09 ", frozenset({"time"}), time=SECOND),
    Layer(
        "epoch",
        lambda r, h: f"{WHEN.replace(tzinfo=UTC).timestamp():.3f} ",
        frozenset({"time"}),
        time=MS,
    ),
    Layer("clock", lambda r, h: "[07:08:09] ", frozenset()),  # no date: no time
    # a Cloud Logging copy: the entry's severity, then its time
    Layer(
        "gcp",
        lambda r, h: f"{('INFO', 'ERROR')[r % 2]} 2024-05-06T07:08:09.123456789Z ",
        frozenset({"time"}),
        time=WHEN,
    ),
    # a CloudWatch CSV export: `timestamp,message`, the time in epoch milliseconds
    Layer(
        "epoch-ms-csv",
        lambda r, h: f"{int(WHEN.replace(tzinfo=UTC).timestamp() * 1000)},",
        frozenset({"time"}),
        time=MS,
    ),
)
TAG_LAYERS = (
    Layer("srun", lambda r, h: _task(r), frozenset({"task"})),
    Layer("srun-unpadded", lambda r, h: f"{r}: ", frozenset({"task"})),
    Layer("ompi", lambda r, h: f"[1,{r}]<stderr>:", frozenset({"rank"}), glued=True),
    # horovodrun's Gloo launcher (runner/util/safe_shell_exec.py): the worker index alone
    Layer("horovodrun", lambda r, h: f"[{r}]<stdout>:", frozenset({"rank"}), glued=True),
    Layer("hydra", lambda r, h: f"[{r}] ", frozenset({"rank"})),
    # SageMaker's mpirun (aws/sagemaker-training-toolkit): the rank, then the host
    Layer("sagemaker", lambda r, h: f"[1,mpirank:{r},{h}]<stderr>:", frozenset({"rank", "host"})),
)
HOST_LAYERS = (
    Layer("pdsh", lambda r, h: f"{h}: ", frozenset({"host"})),
    Layer("bracket-host", lambda r, h: f"[{h}] ", frozenset({"host"})),
    Layer("compose", lambda r, h: f"{h:<12} | ", frozenset({"host"})),
    Layer("kubectl", lambda r, h: f"[pod/{h}/trainer] ", frozenset({"host"})),
    # torchx's `{role}/{replica_id} ` (util/log_tee_helpers.py): peeled, it names no rank or host
    Layer("torchx", lambda r, h: f"nemo.collections.llm.api.pretrain/{r % 2} ", frozenset()),
    # milabench's terminal formatter (milabench/log.py): the run's tag and the pipe, peeled
    Layer("milabench", lambda r, h: f"dinov2-giant-nodes.{h} [stderr] ", frozenset()),
    # the subprocess tee of HF's test utilities (accelerate test_utils/testing.py): the pipe
    Layer("subprocess-tee", lambda r, h: ("stdout: ", "stderr: ")[r % 2], frozenset()),
    # syslog's HOSTNAME and TAG, after its TIMESTAMP
    Layer(
        "syslog-tag",
        lambda r, h: f"{h} python3[{4242 + r}]: ",
        frozenset({"host"}),
        after_time=True,
    ),
)
DECOR = (
    ("indent", lambda t: "    " + t),
    ("quote", lambda t: "> " + t),
    ("gutter", lambda t: "│ " + t),
    ("comment", lambda t: "# " + t),  # output quoted as shell comments in a doc or a README
)


def _host(r: int) -> str:
    return HOSTS[r % len(HOSTS)]


def _lines(stack: tuple[Layer, ...], decor: Callable[[str], str] = lambda t: t) -> list[str]:
    out = []
    for r in range(RANKS):
        prefix = "".join(layer.render(r, _host(r)) for layer in stack)
        out.append(decor(f"{prefix}RuntimeError: rank {r} failed at step 7"))
    return out


def _decoded(lines: list[str]) -> list[Line]:
    layers = learn_layers("\n".join(lines) + "\n")
    return [parse_line(t, "job.log", i, YEAR, layers)[0] for i, t in enumerate(lines, 1)]


def _check(stack: tuple[Layer, ...], got: list[Line]) -> None:
    says = frozenset().union(*(layer.says for layer in stack))
    for r, line in enumerate(got):
        assert line.text == f"RuntimeError: rank {r} failed at step 7", (stack, line.raw)
        host = _host(r)
        want = {
            "rank": r if "rank" in says else None,
            "task": r if "task" in says else None,
            "host": host if "host" in says else None,
            "time": next((layer.time for layer in stack if layer.time), None),
        }
        seen = {"rank": line.rank, "task": line.task, "host": line.host, "time": line.time}
        if seen["time"] is not None:
            seen["time"] = seen["time"].replace(microsecond=seen["time"].microsecond // 1000 * 1000)
            want["time"] = want["time"].replace(microsecond=want["time"].microsecond // 1000 * 1000)
        assert seen == want, (line.raw, [layer.name for layer in stack])


def _stacks() -> list[tuple[Layer, ...]]:
    out: list[tuple[Layer, ...]] = []
    for t, g, h in itertools.product(TIME_LAYERS, TAG_LAYERS, HOST_LAYERS):
        for n in (2, 3):
            for stack in itertools.permutations((t, g, h), n):
                if all(
                    not layer.after_time or (i > 0 and stack[i - 1] in TIME_LAYERS)
                    for i, layer in enumerate(stack)
                ):
                    out.append(stack)
    return out


@pytest.mark.parametrize("stack", _stacks(), ids=lambda s: "+".join(layer.name for layer in s))
def test_stacked_layers_are_read_in_any_order(stack: tuple[Layer, ...]) -> None:
    _check(stack, _decoded(_lines(stack)))


@pytest.mark.parametrize("decor", DECOR, ids=lambda d: d[0])
@pytest.mark.parametrize(
    "stack",
    [(TIME_LAYERS[0], TAG_LAYERS[2]), (TAG_LAYERS[0], TIME_LAYERS[2]), (HOST_LAYERS[0],)],
    ids=lambda s: "+".join(layer.name for layer in s),
)
def test_a_decoration_on_every_line_is_peeled_first(
    decor: tuple[str, Callable[[str], str]], stack: tuple[Layer, ...]
) -> None:
    _check(stack, _decoded(_lines(stack, decor[1])))


def test_container_runtime_lines_keep_the_ranks_they_carry() -> None:
    # CRI log file: `<RFC 3339 nano> <stream> <F|P> <text>`, then torchrun's tee header
    lines = [
        f"2024-05-06T07:08:09.123456789Z stderr F [default{r}]:RuntimeError: boom" for r in range(8)
    ]
    got = _decoded(lines)
    assert [(g.local_rank, g.text) for g in got] == [(r, "RuntimeError: boom") for r in range(8)]
    assert all(g.time == WHEN for g in got)


def test_a_pane_border_at_one_column_cuts_the_line() -> None:
    # a multiplexer's capture: the left pane padded to the border, the right pane after it
    lines = [f"{f'[1,{r}]<stderr>:RuntimeError: rank {r}':<70}│ top - {r}%" for r in range(10)]
    lines += [f"{'[1,0]<stdout>:step 5':<70}│" for _ in range(4)]
    got = _decoded(lines)
    want = [(r, f"RuntimeError: rank {r}") for r in range(10)]
    assert [(g.rank, g.text) for g in got[:10]] == want
    assert (got[-1].rank, got[-1].text) == (0, "step 5")
    right = parse_line(lines[3], "job.log", 4, YEAR, learn_layers("\n".join(lines)))
    assert [p.text for p in right] == ["RuntimeError: rank 3", " top - 3%"]


def test_a_number_and_colon_once_is_no_label() -> None:
    plain = [f"2024-05-06T07:08:0{i % 10}Z loading shard {i}" for i in range(20)]
    lines = [*plain[:10], "2024-05-06T07:08:09Z 12: unexpected key in state dict", *plain[10:]]
    got = _decoded(lines)
    assert (got[10].task, got[10].rank, got[10].text) == (
        None,
        None,
        "12: unexpected key in state dict",
    )
    # and at the line start, in a log none of whose other lines is labelled
    lines = [f"loading shard {i}" for i in range(20)] + ["3: unexpected key", "[7] item seven"]
    got = _decoded(lines)
    assert (got[-2].task, got[-2].text) == (None, "3: unexpected key")
    assert (got[-1].rank, got[-1].text) == (None, "[7] item seven")


def test_deepspeeds_pdsh_runner_names_its_own_node_localhost() -> None:
    # the hostfile's names as written: the launching node is often `localhost`
    lines = [
        f"{h}: [rank{r}]: RuntimeError: rank {r} failed at step 7"
        for r, h in enumerate(["10.0.4.17", "localhost"] * 5)
    ]
    got = _decoded(lines)
    assert [(g.host, g.rank) for g in got[:2]] == [("10.0.4.17", 0), ("localhost", 1)]
    assert got[1].text == "RuntimeError: rank 1 failed at step 7"


def test_labels_on_many_lines_are_learned_among_unlabelled_ones() -> None:
    lines = [f"+ echo setting up {i}" for i in range(30)]
    lines += [f"2024-05-06T07:08:09Z {_task(r)}rank {r} ready" for r in range(RANKS)]
    lines.append(f"2024-05-06T07:08:09Z {_task(3)}12: unexpected key")
    got = _decoded(lines)
    assert [g.task for g in got[30:-1]] == list(range(RANKS))
    # the label is peeled once: the text after it is the task's own
    assert (got[-1].task, got[-1].text) == (3, "12: unexpected key")


def test_a_column_of_bars_is_no_pane_border() -> None:
    # Megatron's training_log pads its fields: `|` at the same columns of every line
    lines = [
        f" iteration {i:8d}/  100000 | consumed samples: {i * 512:12d} | lm loss: 2.5E+00 |"
        for i in range(1, 30)
    ]
    layers = learn_layers("\n".join(lines))
    assert layers is not None and layers.edge is None
    assert parse_line(lines[0], layers=layers)[0].text == lines[0].lstrip()


def test_a_logger_header_keeps_its_level_under_layers() -> None:
    # DeepSpeed's `[asctime] [LEVEL] [file:line:func]` is read whole, not as a bare time
    lines = [
        f"10.0.0.{r}: [2023-04-16 02:38:19,113] [INFO] [launch.py:247:main] dist_world_size=16"
        for r in range(10)
    ]
    got = _decoded(lines)
    assert [(g.host, g.level, g.text) for g in got[:2]] == [
        ("10.0.0.0", "I", "dist_world_size=16"),
        ("10.0.0.1", "I", "dist_world_size=16"),
    ]


@pytest.mark.parametrize(
    "header",
    [
        # OLMo's stdout handler: `%(asctime)s\t%(hostname)s:%(local_rank)s\t%(name)s:...`
        "2025-03-04 10:00:0{r}.123\tnode-7:{r}\tolmo.train:1240\tINFO\t",
        # OLMo's rich handler: `[%Y-%m-%d %X] LEVEL    [logger:line, rank=N] `
        "[2025-03-04 10:00:0{r}] INFO     [olmo.train:1240, rank={r}] ",
    ],
    ids=["olmo", "olmo-rich"],
)
def test_a_header_that_starts_with_a_time_keeps_its_rank_under_layers(header: str) -> None:
    # a log of one logger only: its time on every line must not be peeled as a bare time layer
    lines = [header.format(r=r) + f"Building model (part {n})" for n in range(3) for r in range(8)]
    got = _decoded(lines)
    assert [(g.local_rank, g.level, g.text) for g in got[:2]] == [
        (0, "I", "Building model (part 0)"),
        (1, "I", "Building model (part 0)"),
    ]


def test_too_few_lines_teach_nothing() -> None:
    assert learn_layers("0: a\n1: b\n") is None


@pytest.mark.parametrize("stack", _stacks()[::7], ids=lambda s: "+".join(layer.name for layer in s))
def test_a_short_excerpt_teaches_the_layers_all_its_lines_start_with(
    stack: tuple[Layer, ...],
) -> None:
    # a pasted excerpt of a few lines (fewer than a share can be taken of)
    lines = _lines(stack)[:4]
    _check(stack, _decoded(lines))


def test_a_layer_missing_from_one_line_of_a_short_excerpt_is_not_learned() -> None:
    # counter-case: of five lines, one starts with no time: no layer is learned from so few
    lines = [f"2021-03-10T13:22:37.48{r}Z: [1,{r}]<stderr>:rank {r} step 7" for r in range(4)]
    lines.insert(2, "OSError: cannot identify image file")
    layers = learn_layers("\n".join(lines))
    assert layers is None or "iso" not in layers.order, layers


def test_analyze_names_the_rank_behind_a_timestamp(tmp_path: Path) -> None:
    lines = [f"2024-05-06T07:08:0{r}.5Z [1,{r}]<stdout>:rank {r} ready" for r in range(4)]
    lines += [
        f"2024-05-06T07:08:10.{i}Z [1,{r}]<stdout>:step {i} loss 2.{i}"
        for i in range(5)
        for r in range(4)
    ]
    lines += [
        "2024-05-06T07:08:11.0Z [1,2]<stderr>:Traceback (most recent call last):",
        '2024-05-06T07:08:11.0Z [1,2]<stderr>:  File "train.py", line 9, in <module>',
        "2024-05-06T07:08:11.0Z [1,2]<stderr>:RuntimeError: CUDA error: an illegal memory "
        "access was encountered",
    ]
    f = tmp_path / "job.log"
    f.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["analyze", str(f), "--format", "json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    inc = doc["incidents"][0]
    assert inc["root_cause"]["line"] == len(lines), inc["root_cause"]
    assert inc["root_cause"]["rank"] == 2, inc["root_cause"]
    assert inc["culprit"]["rank"] == 2, inc["culprit"]


@pytest.mark.parametrize("tag", ["[1,{r}]<stdout>:", "[{r}] "], ids=["ompi", "hydra"])
def test_a_silent_rank_behind_timestamps_is_found(tmp_path: Path, tag: str) -> None:
    # every rank says it started (only the discovery of rank prefixes sees those lines); ranks
    # 0, 1 and 2 then time out in a collective: rank 3, which says nothing more, is the culprit
    # (only its start-up line says the world holds a rank 3)
    stamp = "2024-05-06T07:08:{:02d}.5Z "
    lines = [stamp.format(r) + tag.format(r=r) + f"rank {r} ready" for r in range(4)]
    lines += [stamp.format(10 + i) + tag.format(r=i % 3) + f"loading shard {i}" for i in range(9)]
    lines += [
        stamp.format(30 + r)
        + tag.format(r=r)
        + f"[rank{r}]:[E506 07:08:30.832146912 ProcessGroupNCCL.cpp:607] "
        f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800017 "
        "milliseconds before timing out."
        for r in (0, 1, 2)
    ]
    f = tmp_path / "job.log"
    f.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["analyze", str(f), "--format", "json"])
    doc = json.loads(result.stdout)
    culprit = doc["incidents"][0]["culprit"]
    assert culprit["rank"] == 3, culprit
    assert "rank 3 reported nothing" in culprit["reason"], culprit


def test_a_loggers_name_and_level_after_a_time_is_no_syslog_tag() -> None:
    # Python logging's `%(asctime)s %(name)s %(levelname)s: %(message)s` (PyTorch-Ignite's
    # default): `trainer INFO: ` names no host, whether learned from many lines or from a few
    for n in (12, 4):
        lines = [
            f"2025-01-06 20:55:{10 + i:02d},014 trainer INFO: Epoch[1] Iteration[{i}] loss 0.5"
            for i in range(n)
        ]
        got = _decoded(lines)
        assert got[0].host is None and got[0].text.startswith("trainer INFO: "), got[0]


def test_a_syslog_record_keeps_its_host() -> None:
    # a kernel log: the host and program follow the time (the program has no pid here)
    lines = [
        f"May  6 07:08:{s:02d} gpu-a0{s % 3} kernel: NVRM: Xid (PCI:0000:0{s}:00): 79, GPU has "
        "fallen off the bus."
        for s in range(10)
    ]
    got = _decoded(lines)
    assert [(g.host, g.text[:5]) for g in got[:3]] == [
        ("gpu-a00", "NVRM:"),
        ("gpu-a01", "NVRM:"),
        ("gpu-a02", "NVRM:"),
    ]
    # a host and program with no time before them are no layer: neither learned so ...
    lines = [f"Train loss: {i / 10}" for i in range(20)]
    layers = learn_layers("\n".join(lines))
    assert layers is not None and layers.order == ()
    # ... nor peeled where the layer was learned but a line has no time
    kernel = [f"May  6 07:08:{s:02d} gpu-a01 kernel: NVRM: Xid 79" for s in range(10)]
    got = _decoded([*kernel, "Train loss: 0.5"])
    assert (got[-1].host, got[-1].text) == (None, "Train loss: 0.5")


def test_labels_after_a_long_preamble_are_learned() -> None:
    # a batch script's own 600 lines (module loads, `set -x` echoes) before srun's labelled ones
    preamble = [f"+ export VAR_{i}=value" for i in range(600)]
    labelled = [f"{_task(i % RANKS)}step {i} loss 2.5" for i in range(2400)]
    got = _decoded([*preamble, *labelled])
    assert [g.task for g in got[600 : 600 + RANKS]] == list(range(RANKS))


def test_context_and_last_lines_read_ranks_behind_layers(tmp_path: Path) -> None:
    # MPICH Hydra's `-prepend-rank` tag behind a timestamp: only the layers name the ranks
    stamp = "2024-05-06T07:08:{:02d}.5Z "
    lines = [stamp.format(i % 60) + f"[{i % 4}] step {i // 4} loss 2.5" for i in range(40)]
    lines.append(stamp.format(50) + "[2] RuntimeError: CUDA error: an illegal memory access")
    lines += [stamp.format(51) + f"[{r}] waiting" for r in (0, 1, 3)]
    f = tmp_path / "job.log"
    f.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["analyze", str(f), "--format", "json"])
    doc = json.loads(result.stdout)
    inc = doc["incidents"][0]
    assert inc["root_cause"]["rank"] == 2, inc["root_cause"]
    # the root's context: rank 2's own lines around it, no other rank's
    context = [c["line"] for c in inc["context"]]
    assert context == [23, 27, 31, 35, 39, 41], context
    last = {s["rank"]: s["line"] for s in doc["last_seen"]}
    assert last == {0: 42, 1: 43, 2: 41, 3: 44}, last


def test_determined_trial_log_lines_name_their_rank() -> None:
    # the master's trial-log format, and the CLI's (container bracketed); the container's own
    # lines carry no rank
    for tag in ("5c902731", "[5c902731]"):
        lines = [
            f"[2024-05-06T07:08:09.123456Z] {tag} [rank={r}] || RuntimeError: rank {r} failed"
            for r in range(8)
        ]
        lines.append(f"[2024-05-06T07:08:10.000000Z] {tag} || Process 1 exit with status code 1.")
        got = _decoded(lines)
        assert [(g.rank, g.text) for g in got[:8]] == [
            (r, f"RuntimeError: rank {r} failed") for r in range(8)
        ], [g.raw for g in got]
        assert (got[8].rank, got[8].text) == (None, "Process 1 exit with status code 1.")
        assert got[0].time is not None and got[0].time.second == 9


def test_the_subprocess_tee_keeps_the_indent_of_the_line_it_labels() -> None:
    # accelerate/test_utils/testing.py `print(label, line)`: the launched job's traceback frames
    # and its launcher's failure table keep their own indent after `stderr: `
    lines = [
        "stdout: epoch 0 step 12 loss 2.31",
        "stderr: Traceback (most recent call last):",
        """stderr:   File "train.py", line 88, in <module>""",
        "stderr:   rank      : 3 (local_rank: 1)",
        "stdout: epoch 0 step 13 loss 2.29",
    ]
    got = [line.text for line in _decoded(lines)]
    assert got == [
        "epoch 0 step 12 loss 2.31",
        "Traceback (most recent call last):",
        """  File "train.py", line 88, in <module>""",
        "  rank      : 3 (local_rank: 1)",
        "epoch 0 step 13 loss 2.29",
    ]


def test_torchx_replicas_keep_their_indent_and_the_empty_roles_local_rank() -> None:
    # torchx's tee (`{role}/{replica_id} `) of a dist.ddp job, which runs torchrun with
    # `--role ""`: its tee header is `[N]:`; the worker's traceback frames keep their indent,
    # and the launcher's failure block keeps its `[N]:` entry line
    lines = [
        "trainer/0 [0]:epoch 0 step 12 loss 2.31",
        "trainer/0 [1]:epoch 0 step 12 loss 2.30",
        "trainer/0 [1]:Traceback (most recent call last):",
        """trainer/0 [1]:  File "train.py", line 88, in <module>""",
        "trainer/0 [1]:ValueError: bad shard",
        "trainer/0 Traceback (most recent call last):",
        "trainer/0     raise ChildFailedError(",
        "trainer/0 Root Cause (first observed failure):",
        "trainer/0 [0]:",
        "trainer/0   rank      : 1 (local_rank: 1)",
    ]
    got = [(line.local_rank, line.text) for line in _decoded(lines)]
    assert got == [
        (0, "epoch 0 step 12 loss 2.31"),
        (1, "epoch 0 step 12 loss 2.30"),
        (1, "Traceback (most recent call last):"),
        (1, """  File "train.py", line 88, in <module>"""),
        (1, "ValueError: bad shard"),
        (None, "Traceback (most recent call last):"),
        (None, "    raise ChildFailedError("),
        (None, "Root Cause (first observed failure):"),
        (None, "[0]:"),
        (None, "  rank      : 1 (local_rank: 1)"),
    ]


@pytest.mark.parametrize("count", [4, 12])
def test_padding_behind_a_time_column_on_every_line_is_peeled(count: int) -> None:
    # a console export's rows copied with the message column padded out from the time
    # (CloudWatch's event table): the padding is the export's, the traceback's indent stays
    body = [
        "Traceback (most recent call last):",
        '  File "train.py", line 88, in <module>',
        "    loss.backward()",
        "torch.cuda.OutOfMemoryError: CUDA out of memory.",
    ]
    lines = [f"2024-01-12T19:26:34.{i:03d}+08:00{' ' * 16}{body[i % 4]}" for i in range(count)]
    got = [line.text for line in _decoded(lines)]
    assert got == [body[i % 4] for i in range(count)]


def test_a_tracebacks_own_indent_behind_a_time_is_kept() -> None:
    # counter-case: an excerpt of frames only, every line indented, the indent a traceback's own
    lines = [
        '2024-01-12T19:26:34.787Z   File "train.py", line 88, in <module>',
        "2024-01-12T19:26:34.787Z     loss.backward()",
        '2024-01-12T19:26:34.788Z   File "torch/_tensor.py", line 522, in backward',
        "2024-01-12T19:26:34.788Z     torch.autograd.backward(",
    ]
    got = [line.text for line in _decoded(lines)]
    assert got == [t[len("2024-01-12T19:26:34.787Z ") :] for t in lines]
