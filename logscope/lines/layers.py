"""Prefix layers learned per input. A log passes through several hands before it is read, and
each may put its own prefix at every line's start: a launcher's tag (srun `--label`, OpenMPI's
`--tag-output`, pdsh's host), a timestamp (`ts`, `kubectl logs --timestamps`, a container
runtime's log file, a cloud log export), a host or service column, a Markdown indent or quote
gutter (or the `# ` of output quoted as shell comments in docs), a terminal multiplexer's pane
border. Which of them an input has, and in what order they stack, is learned once from its
first lines (`learn`): a layer is learned only when it repeats at the start of many of them, so
that one line that happens to start `12: ` or with a date is never read as a labelled one.
Every line is then peeled in that order (`peel`), each layer optional, before lines.headers
strips the emitters' own headers (tee header, c10, loggers).

The formats, from their emitters:
- srun `--label` (slurm src/common/write_labelled_message.c): `"%*d: "`, the task id
  right-aligned to the width of the largest task id (` 3: ` of 16 tasks, `3: ` of 8),
  `P%u %*d: ` for a heterogeneous job's component (FORMATS.md §1.4).
- OpenMPI `--tag-output` (orte/mca/iof/base/iof_base_output.c, PRRTE in v5): `[%s,%s]<%s>:`,
  jobid, vpid (the rank) and stdout/stderr/stddiag, glued to the text; with
  `--timestamp-output` a ctime string glued in front of it (FORMATS.md §1.5). SageMaker's
  mpirun tags `[1,mpirank:3,algo-2]<stderr>:` (aws/sagemaker-training-toolkit), with the host.
  horovodrun's own launchers (Gloo, and its Spark/Ray runs; horovod/runner/util/safe_shell_exec.py
  prefix_connection) tag `{time}[{index}]<{stream}>:`, the worker's index (its rank) alone, the
  time a ctime string when asked for (`--prefix-timestamp`).
- MPICH / Intel MPI Hydra `mpiexec -prepend-rank` (`-l`): `[%d] ` before each line.
- pdsh (src/pdsh/dsh.c): `"%S: %s"`, the host as in the host list (FORMATS.md §1.6).
- docker compose `up` / `logs`: the service name padded to the longest and ` | `.
- `kubectl logs --prefix` (kubectl pkg/cmd/logs): `[pod/<pod>/<container>] `; the pod is the host.
- torchx `log` and its tee of a local job (torchx/util/log_tee_helpers.py, cli/cmd_log.py):
  `{role}/{replica_id} ` (colored on a terminal), as NeMo-Run's local and SLURM executors print it.
- HF's test utilities' subprocess tee (accelerate `test_utils/testing.py`, transformers
  `testing_utils.py`, behind `accelerate test`): `stdout: ` or `stderr: `, the line's own indent
  after it.
- milabench's terminal output (milabench/log.py `TagConsole.print`): the benchmark run's tag and
  the pipe, `{tag} [stderr] `, before each line of its processes.
- A syslog / journal record after its time (RFC 3164 HOSTNAME and TAG, `journalctl -o
  short-iso`): `<host> <program>[<pid>]: `.
- CRI container log files (kubelet, kubernetes/cri-api logs format): `<RFC 3339 nano time>
  <stdout|stderr> <F|P> <text>`; `kubectl logs --timestamps` and `docker logs -t`: an RFC 3339
  (nano) time and a space; GCP and CloudWatch exports: an ISO 8601 or epoch-milliseconds time
  and a tab, a space or a CSV comma; a Cloud Logging copy puts the entry's severity (LogSeverity:
  DEFAULT, DEBUG, INFO, NOTICE, WARNING, ERROR, CRITICAL, ALERT, EMERGENCY) before its time.
- moreutils `ts` (default `%b %d %H:%M:%S`) and syslog: a month name, day and clock.
- Epoch seconds or milliseconds, bracketed or not (many `date +%s.%N`-style wrappers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType

LAYER_SAMPLE = 1 << 20
"""Bytes at an input's start whose lines teach its layers."""
MAX_SAMPLE_LINES = 400
"""Non-blank lines the layers are learned from, at most (spread over LAYER_SAMPLE)."""
MIN_SHARE = 0.2
"""A layer is learned when it starts at least this share of the sampled lines ..."""
MIN_LINES = 3
"""... and at least this many of them."""
DECOR_SHARE = 0.95
"""An indent or a gutter is learned when (nearly) every line carries it."""
MIN_SAMPLE = 8
"""Non-blank lines needed to learn by share, decorations and pane borders: fewer (a short
excerpt, a stream's first block) teach only the layers that start every one of them."""
MIN_EDGE = 20
"""A pane border is looked for right of this column only."""
TRACEBACK_INDENT = 4
"""The deepest indent of a Python traceback's own lines (2 for a frame, 4 for its source line):
an indent wider than this on every line behind a time column is the export's padding."""

_DATE = r"(?P<date>\d{4}-\d\d-\d\d)"
_CLOCK = r"(?P<h>[01]\d|2[0-3]):(?P<m>[0-5]\d):(?P<s>[0-5]\d|60)(?:[.,](?P<frac>\d{1,9}))?"
_ZONE = r"(?:Z|[+-]\d\d:?\d\d| ?UTC)?"
_MONTH = r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# separators a time column ends with in the exports above
_SEP = r"(?:\t| ?\| | - |: |,| )"
# what follows a tag: text, or an srun label padded to its width
_NEXT = r"(?=\S| +\d+: )"
# a host name as launchers put it in front of a line: an IP, or a name with a digit in it, so that
# `RuntimeError: ` or `srun: ` is never taken for a host
HOST_NAME = r"(?:\d{1,3}\.){3}\d{1,3}|[A-Za-z][\w.-]*\d[\w.-]*"
# the CANN runtime's error codes (`EI0002: `, `EJ0001: `: E, a letter, four digits) start lines
# as a host would
CANN_CODE = r"E[A-Z]\d{4}: "

PATTERNS: Mapping[str, re.Pattern[str]] = MappingProxyType(
    {
        # the CRI file format first: its time is also an ISO one
        "cri": re.compile(_DATE + "T" + _CLOCK + _ZONE + r" (?:stdout|stderr) [FP] "),
        # Google Cloud Logging's severity column before the entry's time (LogSeverity names);
        # the export's word, not the program's level: peeled, not kept
        "gcp_severity": re.compile(
            r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) "
            r"(?=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
        ),
        "iso": re.compile(r"\[?" + _DATE + "[T ]" + _CLOCK + _ZONE + r"\]?" + _SEP),
        "syslog": re.compile(_MONTH + r" +(?P<day>\d\d?) " + _CLOCK + r"\]?" + _SEP),
        "epoch": re.compile(r"\[?(?P<epoch>1\d{9}(?:\.\d{1,9})?|1\d{12})\]?" + _SEP),
        "clock": re.compile(r"\[?" + _CLOCK + r"\]?" + _SEP),
        "srun": re.compile(r"(?:P\d+ +)? *(?P<task>\d+): (?=\S)"),
        "ompi": re.compile(
            r"(?:(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}))?"
            r"\[(?:(?P<job>\d+),(?:mpirank:)?)?(?P<rank>\d+)(?:,(?P<host>[\w.-]+))?\]"
            r"<(?:stdout|stderr|stddiag)>:"
        ),
        "hydra": re.compile(r"\[(?P<rank>\d+)\] " + _NEXT),
        # a host as pdsh prints it: an IP, a name with a digit in it (`RuntimeError: ` and
        # `srun: ` have none), or `localhost` (DeepSpeed's runner puts the launching node's
        # hostfile name through pdsh as written)
        "pdsh": re.compile(
            r"(?!(?:python|rank|default|local_rank|worker)\d+: |" + CANN_CODE + r")"
            r"(?P<host>" + HOST_NAME + r"|localhost): " + _NEXT
        ),
        "bracket_host": re.compile(
            r"\[(?!(?:rank|default|local_rank|worker)\d+\])"
            r"(?P<host>" + HOST_NAME + r")\] " + _NEXT
        ),
        "compose": re.compile(r"(?P<host>[A-Za-z0-9][\w.-]*) +\| " + _NEXT),
        "kubectl": re.compile(r"\[pod/(?P<host>[\w.-]+)/[\w.-]+\] " + _NEXT),
        # torchx (and NeMo-Run through it) `{role}/{replica_id} `: one role's replica (a node
        # running its own launcher); peeled, the names say nothing of rank or host. The line
        # after it is the replica's as printed, a traceback's frame indented.
        "torchx": re.compile(r"[A-Za-z_][\w.-]*/\d+ (?=.)"),
        # milabench's terminal formatter (milabench/log.py TagConsole): `{tag} [stdout] ` or
        # `{tag} [stderr] ` before each line a benchmark's process printed; peeled, the tag
        # names the benchmark run, not a rank
        "milabench": re.compile(r"[A-Za-z][\w.-]* \[(?:stdout|stderr)\] " + _NEXT),
        # the subprocess tee of HF's test utilities (accelerate/test_utils/testing.py and
        # transformers/testing_utils.py `_stream_subprocess`, behind `accelerate test` and the
        # multi-GPU tests): `print(label, line)`, `stdout: ` or `stderr: ` before each line of the
        # launched job, whose own indent follows; peeled, it names the pipe only
        "subprocess_tee": re.compile(r"(?:stdout|stderr): "),
        # (the TAG is a program's name, never a logging level: `trainer INFO: ` after a time is
        # Python logging's `%(name)s %(levelname)s: `, a header lines.headers reads)
        "syslog_tag": re.compile(
            r"(?P<host>[A-Za-z0-9][\w.-]*) "
            r"(?!(?:DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)(?:\[|:))"
            r"[A-Za-z][\w./-]*(?:\[\d+\])?: " + _NEXT
        ),
    }
)
"""Every layer a line may start with, tried in this order where several match."""

TIME_LAYERS = frozenset({"cri", "iso", "syslog", "epoch", "clock"})
AFTER: Mapping[str, frozenset[str]] = MappingProxyType({"syslog_tag": TIME_LAYERS})
"""Layers that only ever follow one of these: a syslog record's host and program follow its
time (`node1 kernel: ` alone is too like `Train loss: `)."""
_GUTTER = re.compile(r"(?:> ?|# ?|[│┃║] ?|\| )")
# tmux and screen draw pane borders with box-drawing bars; a `|` is not taken for one (Megatron
# lines end in ` |` at one column)
_BORDERS = "│┃║"
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = MappingProxyType({m: i for i, m in enumerate(_MONTH_NAMES, 1)})


@dataclass(frozen=True, slots=True)
class Layers:
    """An input's learned prefix layers, outermost first."""

    decor: tuple[str, ...] = ()
    """Decorations on (nearly) every line, in order: `>` / `│` gutters (kept as written) and
    indents (as a count of spaces, `"4"`)."""
    order: tuple[str, ...] = ()
    """The PATTERNS layers, in the order they stack."""
    edge: int | None = None
    """The column of a pane border: the line is cut there (a multiplexer's capture)."""
    pad: int = 0
    """Spaces behind the layers on (nearly) every line: a console export's column padding
    between its time and the message (AWS CloudWatch's copied rows)."""

    def __bool__(self) -> bool:
        return bool(self.decor or self.order or self.edge is not None or self.pad)


NONE = Layers()


@dataclass(slots=True)
class Peeled:
    """What the layers of one line said."""

    host: str | None = None
    rank: int | None = None
    task: int | None = None
    time: datetime | None = None


Stop = Callable[[str, int], bool]
"""Whether the text at a position is a header lines.headers reads whole (a logger's own time and
level): a time layer is not peeled off it."""


def _never(text: str, pos: int) -> bool:
    return False


def _stamp(g: Mapping[str, str | None], year: int | None) -> datetime | None:
    try:
        if g.get("epoch"):
            value = float(str(g["epoch"]))
            value = value / 1000 if value > 1e11 else value
            return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
        if g.get("date"):
            y, mo, d = (int(x) for x in str(g["date"]).split("-"))
        elif g.get("mon") and year is not None:
            y, mo, d = year, _MONTHS[str(g["mon"])], int(str(g["day"]))
        else:
            return None
        frac = (str(g.get("frac") or "0") + "000000")[:6]
        return datetime(y, mo, d, int(str(g["h"])), int(str(g["m"])), int(str(g["s"])), int(frac))
    except (ValueError, KeyError, OverflowError, OSError):
        return None


def parse_ctime(text: str) -> datetime | None:
    """`Mon Mar 21 13:34:34 2022` (ctime, OpenMPI) to a datetime."""
    try:
        return datetime.strptime(text, "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None


def _take(name: str, m: re.Match[str], out: Peeled, year: int | None) -> None:
    g = m.groupdict()
    if name in TIME_LAYERS:
        out.time = _stamp(g, year) or out.time
    elif name == "srun":
        out.task = int(m["task"])
    elif name in ("ompi", "hydra"):
        out.rank = int(m["rank"])
        out.host = out.host or g.get("host")
        if g.get("ctime"):
            out.time = parse_ctime(str(g["ctime"])) or out.time
    elif "host" in g:
        out.host = out.host or m["host"]


def _decor(text: str, decor: Iterable[str]) -> int:
    pos = 0
    for d in decor:
        if d.isdigit():
            n = int(d)
            if text.startswith(" " * n, pos):
                pos += n
            elif text.startswith("\t", pos):
                pos += 1
        elif text.startswith(d, pos):
            pos += len(d)
        elif text.startswith(d.rstrip(), pos):
            pos += len(d.rstrip())  # an empty quoted line: `>` without its space
    return pos


def panes(text: str, layers: Layers) -> list[str]:
    """A multiplexer capture's line cut at its pane border: the pane left of it and, when it
    holds anything, the one right of it; any other line as it is."""
    edge = layers.edge
    if edge is None or len(text) <= edge or text[edge] not in _BORDERS:
        return [text]
    left, right = text[:edge].rstrip(), text[edge + 1 :]
    return [left, right] if right.strip() else [left]


def peel(
    text: str, layers: Layers, out: Peeled, year: int | None = None, stop: Stop = _never
) -> str:
    """`text` without the learned layers it starts with (each optional, in the learned order),
    what they said filled into `out`."""
    pos = _decor(text, layers.decor) if layers.decor else 0
    prev = ""
    for name in layers.order:
        if name in TIME_LAYERS and stop(text, pos):
            break
        if name in AFTER and prev not in AFTER[name]:
            continue
        m = PATTERNS[name].match(text, pos)
        if m is not None and m.end() < len(text):
            _take(name, m, out, year)
            pos = m.end()
            prev = name
    if layers.pad and text.startswith(" " * layers.pad, pos):
        pos += layers.pad
    return text[pos:]


def _first_layers(text: str, stop: Stop) -> list[str]:
    """The layers a line starts with, greedily, each once, in any order."""
    names: list[str] = []
    pos = 0
    while len(names) < len(PATTERNS):
        for name, pattern in PATTERNS.items():
            if name in names or (name in TIME_LAYERS and stop(text, pos)):
                continue
            if name in AFTER and (names[-1] if names else "") not in AFTER[name]:
                continue
            m = pattern.match(text, pos)
            if m is not None and m.end() < len(text):
                names.append(name)
                pos = m.end()
                break
        else:
            break
    return names


def _learn_decor(lines: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """Gutters and indents on nearly every line, outermost first, and the lines without them."""
    decor: list[str] = []
    need = max(1, int(len(lines) * DECOR_SHARE))
    for _ in range(4):
        gutters: dict[str, int] = {}
        for t in lines:
            m = _GUTTER.match(t)
            if m:
                gutters[m.group(0)] = gutters.get(m.group(0), 0) + 1
        best = max(gutters, key=lambda k: gutters[k], default=None)
        same = sum(v for k, v in gutters.items() if k.rstrip() == (best or "").rstrip())
        if best is not None and same >= need:
            decor.append(best)
            lines = [t[_decor(t, (best,)) :] for t in lines]
            continue
        widths = sorted(len(t) - len(t.lstrip(" ")) for t in lines)
        indent = widths[len(widths) - need] if len(widths) >= need else 0
        if indent >= 1:
            decor.append(str(indent))
            lines = [t[_decor(t, (str(indent),)) :] for t in lines]
            continue
        break
    return tuple(decor), lines


def _borders(text: str) -> set[int]:
    """The columns right of MIN_EDGE that hold a pane border (str.find: a long line costs its
    borders, not its length in Python steps)."""
    out: set[int] = set()
    for ch in _BORDERS:
        i = text.find(ch, MIN_EDGE + 1)
        while i >= 0:
            out.add(i)
            i = text.find(ch, i + 1)
    return out


def _learn_edge(lines: list[str]) -> int | None:
    """The column a pane border stands at in most of the long lines, if one does."""
    counts: dict[int, int] = {}
    long = 0
    for t in lines:
        if len(t) <= MIN_EDGE:
            continue
        long += 1
        for c in _borders(t):
            counts[c] = counts.get(c, 0) + 1
    if not counts or long < MIN_LINES:
        return None
    col = max(counts, key=lambda k: counts[k])
    return col if counts[col] >= max(MIN_LINES, long // 2) else None


def learn(sample: Iterable[str], stop: Stop = _never) -> Layers | None:
    """The layers of an input from its first lines (decoded, escapes removed); None when they
    are too few to tell, fewer than MIN_LINES (lines.headers then takes a line-start srun label
    or pdsh host on sight, as it does without a plan)."""
    lines = [t.rstrip("\r\n") for t in sample]
    lines = [t for t in lines if t.strip()][:MAX_SAMPLE_LINES]
    if len(lines) < MIN_LINES:
        return None
    few = len(lines) < MIN_SAMPLE
    edge = None if few else _learn_edge(lines)
    if edge is not None:
        lines = [p for t in lines for p in panes(t, Layers(edge=edge)) if p.strip()]
    decor, lines = ((), lines) if few else _learn_decor(lines)
    seen: dict[str, list[int]] = {}
    for t in lines:
        for i, name in enumerate(_first_layers(t, stop)):
            seen.setdefault(name, []).append(i)
    # a few lines (a short excerpt, a stream's first block) teach only the layers every one of
    # them starts with
    need = len(lines) if few else max(MIN_LINES, int(len(lines) * MIN_SHARE))
    learned = [n for n, at in seen.items() if len(at) >= need]
    learned.sort(key=lambda n: sum(seen[n]) / len(seen[n]))
    if few and not learned:
        return None  # too few to tell that there are none: the line-start rules stand
    layers = Layers(decor, tuple(learned), edge)
    if any(n in TIME_LAYERS for n in learned):
        layers = Layers(decor, tuple(learned), edge, _learn_pad(lines, layers, stop, few))
    return layers


def _learn_pad(lines: list[str], layers: Layers, stop: Stop, few: bool) -> int:
    """The padding every line (nearly, of a long sample) carries behind its time column, when it
    is wider than any indent a traceback has of its own; else 0."""
    peeled = (peel(t, layers, Peeled(), None, stop) for t in lines)
    widths = sorted(len(t) - len(t.lstrip(" ")) for t in peeled)
    need = len(widths) if few else max(1, int(len(widths) * DECOR_SHARE))
    pad = widths[len(widths) - need]
    return pad if pad > TRACEBACK_INDENT else 0
