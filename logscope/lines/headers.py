"""The headers emitters put at a line's start, one regex each (launchers' and taggers' routing
prefixes, loggers' time and level), and `strip_prefixes`, which takes them from the left one at a
time and says what they named. Prefixes stack (srun label, torchrun tee header, c10 rank prefix,
C++ logger header, as in ` 3: [default7]:[rank31]:[E1003 18:37:01.83 F.cpp:607] msg`); each is
optional."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType

from .layers import CANN_CODE, HOST_NAME, PATTERNS, Layers, Peeled, parse_ctime, peel

# OpenMPI's `--tag-output` (and SageMaker's mpirun tag) is taken wherever a line's prefixes
# hold it, as lines.layers reads it
_OMPI = PATTERNS["ompi"]
_SRUN = re.compile(r" *(?:P\d+ +)?(?P<task>\d+): ")
# pdsh puts the hostfile's name in front: a HOST_NAME or `localhost`
_PDSH = re.compile(
    r"(?!slurmstepd|srun|sbatch|salloc|slurmd|python\d|" + CANN_CODE + r")"
    r"(?![\w.-]*(?:Error|Exception|Warning|Interrupt|Exit|Failure|Fault|Expired): )"
    r"(?P<host>" + HOST_NAME + r"|localhost): (?=\S)"
)
# torchrun's tee header `[{role}{local_rank}]:` (FORMATS.md §1.1); the role may be empty, as
# torchx's dist.ddp launches it (`--role ""`, pytorch/torchx torchx/components/dist.py): `[3]:`,
# taken only with text after it (alone on a line it is a ChildFailedError block's entry)
_TEE = re.compile(r"\[(?:(?P<role>[A-Za-z_][\w.-]*?)(?P<colon>:?)|(?=\d+\]:.))(?P<n>\d+)\]:")
_C10 = re.compile(
    r"\[(?P<lvl>[FEWIV])(?P<md>\d{3,4})? ?"
    r"(?:(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:\.(?P<frac>\d+))? )?"
    # the source file as c10's logging names it: a basename, or on Windows builds the whole path
    # (`[W D:\a\pytorch\torch\csrc\distributed\c10d\socket.cpp:601]`)
    r"(?P<src>(?:[A-Za-z]:\\)?[\w.+\\-]+:\d+)\] ?"
)
GLOG_HEADER = re.compile(
    # glog's and abseil's `<L><MMDD> <HH:MM:SS>.<frac> <pid> <file>:<line>] ` (torchrun's agent,
    # torch._logging, XLA, TensorFlow). glog since 0.6 writes the year too, by default
    # (src/logging.cc LogMessage::Init under FLAGS_log_year_in_prefix: `F20220801 07:29:34.701110
    # 2256 file.cc:42] `). Abseil, before absl::InitializeLog, writes `0000 00:00:`
    # and the raw Unix seconds (`W0000 00:00:1755712869.739954 1154753 file.cc:699] `,
    # absl/log/internal/log_format.cc): its level is read, not its time (UTC, where the log's
    # other stamps are local time). DINOv2's logger (facebookresearch/dinov2
    # dinov2/logging/__init__.py) copies the shape with Python's logging:
    # `%(levelname).1s%(asctime)s %(process)s %(name)s %(filename)s:%(lineno)s] `, datefmt
    # `%Y%m%d %H:%M:%S` (no fraction, the logger's name before the file)
    r"(?P<lvl>[VIWEFC])"
    r"(?:(?P<y>\d{4})?(?P<md>\d{4}) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)|0000 00:00:\d{9,11})"
    r"(?:\.(?P<frac>\d+) +| )"
    r"(?P<pid>\d+) (?:[\w.]+ )?(?P<src>[^\s\]]+:\d+)\] ?"
)
_ASCTIME = r"(?P<date>\d{4}-\d\d-\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d),(?P<frac>\d{3})"
_PYLOG_NAMED = re.compile(r"\[" + _ASCTIME + r"\] [\w.]+: \[(?P<lvl>[A-Z]+)\] ?")
_DEEPSPEED = re.compile(r"\[" + _ASCTIME + r"\] \[(?P<lvl>[A-Z]+)\] \[[^\]]*\] ?")
_HF = re.compile(r"\[(?P<lvl>[A-Z]+)\|[^\]]+\] " + _ASCTIME + r" >> ")
# `%(name)s %(levelname)s %(asctime)s `: Paddle's launcher (paddle/distributed/launch/context
# `get_logger`, logger `LAUNCH`) and the loggers that take its format
_NAME_LEVEL = re.compile(
    r"[A-Za-z][\w.]* (?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) " + _ASCTIME + " "
)
# `%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] ` with datefmt `%m-%d %H:%M:%S`: SkyPilot's
# logger (sky/sky_logging.py, the level's initial, no brackets) and vLLM's, taken from it
# (vllm/logger.py: the whole level name; brackets and a path under vllm/ since 0.8)
_LEVEL_MONTHDAY = re.compile(
    r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL|[DIWEC]) (?P<mo>\d\d)-(?P<dd>\d\d) "
    r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d) (?:\[[\w./-]+:\d+\]|[\w.-]+\.py:\d+\]) ?"
)
# TensorFlow's C++ logger (tensorflow/core/platform/default/logging.cc, later tsl/platform):
# `%Y-%m-%d %H:%M:%S.%06d: %c[ %7u] %s:%d] `, the level one of IWEF, the thread id only under
# TF_CPP_LOG_THREAD_ID; XLA inside JAX and PyTorch/XLA logged through it before abseil
_TF_LOG = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\.(?P<frac>\d{6}): "
    r"(?P<lvl>[IWEF])(?: +\d+)? [^\s\]]+:\d+\] ?"
)
_PYLOG_PLAIN = re.compile(r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:[\w.]+):")
_NCCL = re.compile(
    r"(?:\[(?P<date>\d{4}-\d\d-\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:\.\d+)?\] )?"
    r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<gpu>\d+)\] "
)
_BRACKET_TIME = re.compile(
    r" ?\[(?P<date>\d{4}-\d\d-\d\d)[ T](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<frac>\d+))?\] "
)
# after an ISO time: ParlAI's log file header (parlai/utils/logging.py LOGFILE_FORMAT
# `%(asctime)s %(levelname)-8s | `, with its own levels REPORT, SUCCESS and VERBOSE), loguru's
# default format (loguru/_defaults.py LOGURU_FORMAT `{time:YYYY-MM-DD HH:mm:ss.SSS} |
# {level: <8} | {name}:{function}:{line} - `), a `| ` column, a `- name - LEVEL - ` logger header,
# or icefall's (k2-fsa icefall/utils.py setup_logger) `LEVEL [file.py:line] (rank/world_size) `,
# whose rank is the process's own (dist.get_rank()); without a process group it logs no
# `(rank/world_size)`
_ISO_START = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<frac>\d+))?"
    r"(?:Z|[+-]\d\d:?\d\d)? "
    r"(?:(?P<clvl>DEBUG|INFO|WARNING|ERROR|CRITICAL|REPORT|SUCCESS|VERBOSE) +\| "
    r"|\| (?P<glvl>TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) +\| "
    r"(?:[\w.<>-]+:[\w.<>-]+:\d+ - )?"
    r"|\| |- [\w.]+ - (?P<lvl>[A-Z]+) - "
    r"|(?P<pylvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) \[[\w.-]+:\d+\] (?:\((?P<rank>\d+)/\d+\) )?)?"
)
# OLMo's stdout handler (allenai/OLMo olmo/util.py `setup_logging`, non-interactive):
# `%(asctime)s\t%(hostname)s:%(local_rank)s\t%(name)s:%(lineno)s\t%(levelname)s\t`, the time with
# milliseconds after a dot: the host and the process's local rank
_OLMO = re.compile(
    r"(?P<date>\d{4}-\d\d-\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\.(?P<frac>\d{3})\t"
    r"(?P<host>[^\s:]+):(?P<local_rank>\d+)\t[\w.]+:\d+\t(?P<lvl>[A-Z]+)\t"
)
_OLMO_TAB = 23
"""Where OLMo's header has its first tab: after the time."""
# OLMo's interactive handler (olmo/util.py `RichHandler`): `[%Y-%m-%d %X] `, the level padded to
# 8, then `[<logger>:<line>, rank=<local rank>] ` (`[root, rank=N] ` for the root logger): the
# rank it prints is the process's local rank
_OLMO_RICH = re.compile(
    r"\[(?P<date>\d{4}-\d\d-\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)\] "
    r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) +"
    r"\[(?:[\w.<>-]+:\d+|root), rank=(?P<local_rank>\d+)\] "
)
# mmengine's MMLogger (mmengine/logging/logger.py): `%(asctime)s - %(name)s - %(levelname)s - `
# with datefmt `%m/%d %H:%M:%S` on the terminal and `%Y/%m/%d %H:%M:%S` in its log file
_MMLOG = re.compile(
    r"(?:(?P<y>\d{4})/)?(?P<mo>\d\d)/(?P<dd>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    r" - [\w.]+ - (?P<lvl>[A-Z]+) - "
)
# The Hugging Face example scripts' logging (diffusers 58eb52c0, 90 example scripts, and
# accelerate 16cb6eb8 examples: `logging.basicConfig(format="%(asctime)s - %(levelname)s -
# %(name)s - %(message)s", datefmt="%m/%d/%Y %H:%M:%S")`), and the scripts that copied it
# without the logger's name: `MM/DD/YYYY HH:MM:SS - LEVEL - [name - ]`
_MDY_LOG = re.compile(
    r"(?P<mo>\d\d)/(?P<dd>\d\d)/(?P<y>\d{4}) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    r" - (?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?:[\w.]+ - +)?"
)
# `[%(asctime)s] [%(name)s ]%(levelname)s: ` with datefmt `%m/%d %H:%M:%S` or `%Y/%m/%d ...`:
# detectron2's file logger (detectron2/utils/logger.py `setup_logger`) and the PaddlePaddle
# suites' loggers copied from it (ppdet, ppcls; PaddleSeg's has no name); detectron2's console
# writes `[%(asctime)s %(name)s]: `, a warning or an error with `WARNING ` / `ERROR ` before it;
# PaddleVideo's (paddlevideo/utils/logger.py) writes `[%(asctime)s] ` alone below DEBUG
_SLASH_LOG = re.compile(
    r"(?:(?P<clvl>WARNING|ERROR) )?\[(?:(?P<y>\d{4})/)?(?P<mo>\d\d)/(?P<dd>\d\d) "
    r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    r"(?:\] (?:[\w.]+ )?(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL): | [\w.]+\]: |\] )"
)
# nanotron's logger (huggingface/nanotron src/nanotron/logging/base.py): `%(asctime)s
# [%(levelname)s|DP=..|PP=..|TP=..|<node>]: ` with datefmt `%m/%d/%Y %H:%M:%S` (until 2025) or
# `%m/%d %H:%M:%S`; the parallel ranks in the brackets are not the world rank
_NANOTRON = re.compile(
    r"(?P<mo>\d\d)/(?P<dd>\d\d)(?:/(?P<y>\d{4}))? (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    r" \[(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL)(?:\|[^\]\s]*)?\]: "
)
# ParlAI's distributed workers (parlai/utils/distributed.py `distributed_context`) print and log
# with `rank:{:3d} |` and a space before every line when the worker is not rank 0 (or runs
# verbose): the worker's global rank
_PARLAI_RANK = re.compile(r"rank: *(?P<rank>\d+) \| ")
_DMESG = re.compile(r"\[ *\+?\d+\.\d+\] ")
_SYSLOG = re.compile(
    r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<day>\d\d?) "
    # the host a name or an address: a `host: ` or `[host] ` tag after the time is a layer's
    r"(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d) (?P<host>[\w.-]+) [\w./-]+(?:\[\d+\])?: "
)
# Decorations a line picks up on its way to the reader: a Markdown or e-mail quote
# `> `, a table or box gutter `| `, a shell or editor indent before a routing prefix. They carry
# nothing, and are stripped once, before the first routing prefix.
_QUOTE = re.compile(r"(?:> ?|\| )+(?=\S)")
# Markdown's strong emphasis around a whole line: two asterisks each side, not glog's or
# slurmstepd's `*** ... ***` banners
_BOLD = re.compile(r"\*\*(?P<line>[^*\s](?:.*[^*\s])?)\*\*\s*")
_INDENT = re.compile(r"[ \t]+(?=\[(?:[A-Za-z_][\w.:-]*?\d+|\d+,(?:mpirank:)?\d+[\w.,-]*)\]<?[:\w])")
# Ray prefixes every line of a worker with `(ActorName pid=N[, ip=A.B.C.D])` (a worker with no
# actor or task name: `(pid=N[, ip=...])`) and the raylet's lines with `(raylet[, ip=...])`
# (ray/_private/worker.py print_worker_logs, log_monitor.py): the ip names the node.
# SkyPilot's run log (sky/skylet/log_lib.py) has the same shape with its node in front: `(head,
# rank=0, pid=N)`, `(worker1, rank=1, pid=N, ip=A.B.C.D)`, `(task, pid=N)`; its rank numbers
# nodes, not processes, so the node's name (or its ip) is the host; a task name is not.
_RAY = re.compile(
    # a copy without the escape bytes keeps the colour codes as text: `[2m[36m(...)[0m`
    r"(?:\[[0-9;]*m)*\((?:(?:[\w.:-]+,? )?pid=\d+|(?P<node>[\w.:-]+), rank=\d+, pid=\d+"
    r"|raylet|gcs_server|autoscaler|monitor)"
    r"(?:, ip=(?P<ip>[\w.:-]+))?\)(?:\[[0-9;]*m)* ?"
)
# Ray's C++ logger (ray/util/logging.cc): `[2025-04-02 15:02:00,117 E 135782 135782] `
_RAY_CPP = re.compile(r"\[" + _ASCTIME + r" (?P<lvl>[DIWEF]) \d+ \d+\] ")
# Determined's launcher (harness/determined/launch/wrap_rank.py) writes `[rank=N] ` before every
# line of worker N; its master's task log (master/pkg/model/task.go, TaskLog.Message) puts the
# record's time and the container's id in front and `|| LEVEL: ` after it:
# `[2022-03-02T02:15:18.299569Z] f6114bb3 [rank=1] || INFO: text` (an empty id is blank, older
# masters and the CLI's format_trial_log bracket it: `[f6114bb3]`, `[]`). The rank is the
# worker's global rank; the container's own lines have none (`<time> f6114bb3 || text`).
_DETERMINED = re.compile(
    # the time as the master writes it (`T`, micro, `Z`) or as Determined's views render it (a
    # space, no zone, a bracketed `<...>` column before it)
    r"(?:(?:<[^<>]{0,40}> +)?\[(?P<date>\d{4}-\d\d-\d\d)[T ](?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)"
    r"(?:\.(?P<frac>\d+))?Z?\] )?"
    r"(?:\[[0-9a-f]{0,8}\] +|[0-9a-f]{8} +| {8} )?"
    # the rank tag, or `|| ` right after a container id (the time's `]` alone is not one)
    r"(?:\[rank=(?P<rank>\d+)\] (?:\|\| )?|(?<=[0-9a-f\]] )(?<!Z\] )(?<!:\d\d\] )\|\| )"
    r"(?:(?<=\|\| )(?P<lvl>[A-Z]+): )?"
)
_DETERMINED_REACH = 64
"""How far into a line Determined's tag can start (after the master's time and id)."""
# Hadoop YARN's log collector: `<ISO time> /container_e559_1557431881457_79419_05_000002: `
_CONTAINER = re.compile(r"/?container_\w+: ")
_MONTHS = MappingProxyType(
    {
        m: i
        for i, m in enumerate(
            ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
        )
    }
)

_MAX_PREFIXES = 10


@dataclass(slots=True)
class Prefix(Peeled):
    """What every prefix of one line said: its layers' (Peeled, which peel fills in) and the
    emitters' headers'."""

    local_rank: int | None = None
    role: str | None = None
    level: str | None = None


def _time(g: dict[str, str | None], year: int | None) -> datetime | None:
    try:
        if g.get("date"):
            y, mo, d = (int(x) for x in str(g["date"]).split("-"))
        elif g.get("md"):
            stated = int(str(g["y"])) if g.get("y") else year
            if stated is None:
                return None
            md = int(str(g["md"]))
            y, mo, d = stated, md // 100, md % 100
        elif g.get("mo"):
            stated = int(str(g["y"])) if g.get("y") else year
            if stated is None:
                return None
            y, mo, d = stated, int(str(g["mo"])), int(str(g["dd"]))
        elif g.get("mon"):
            if year is None:
                return None
            y, mo, d = year, _MONTHS[str(g["mon"])], int(str(g["day"]))
        else:
            return None
        if g.get("h") is None:
            return None
        frac = (str(g.get("frac") or "0") + "000000")[:6]
        return datetime(y, mo, d, int(str(g["h"])), int(str(g["m"])), int(str(g["s"])), int(frac))
    except (ValueError, KeyError):
        return None


def _olmo(text: str, pos: int = 0) -> re.Match[str] | None:
    """OLMo's header at `pos`, either handler's; each regex is tried only where the header's
    tab (after the time) or its `[` and `, rank=` stand."""
    if text.find("\t", pos + _OLMO_TAB, pos + _OLMO_TAB + 1) >= 0:
        m = _OLMO.match(text, pos)
        if m:
            return m
    if text.startswith("[", pos) and ", rank=" in text[pos : pos + 160]:
        return _OLMO_RICH.match(text, pos)
    return None


def stamped(text: str, pos: int) -> bool:
    """A logger header at `pos` that this module reads whole, its time with its level (a time
    layer is not peeled off it: see layers.Stop). A syslog record's time, host and program are
    layers (syslog, syslog_tag)."""
    if _PYLOG_NAMED.match(text, pos) or _DEEPSPEED.match(text, pos) or _HF.match(text, pos):
        return True
    if _RAY_CPP.match(text, pos) or _NCCL.match(text, pos) or _MMLOG.match(text, pos):
        return True
    if _SLASH_LOG.match(text, pos) or _NANOTRON.match(text, pos) or _TF_LOG.match(text, pos):
        return True
    if _MDY_LOG.match(text, pos) or _olmo(text, pos):
        return True
    m = _ISO_START.match(text, pos)
    return m is not None and (m["lvl"] or m["pylvl"] or m["clvl"] or m["glvl"]) is not None


def strip_prefixes(text: str, p: Prefix, year: int | None, layers: Layers | None = None) -> str:
    """Strip every prefix from the left of text, filling p. `layers`: the input's learned
    layers, peeled first; then the srun label and pdsh host are taken at the line's start only
    if they were learned (None: no input's plan, they are taken wherever a line starts so)."""
    first = True
    if layers is not None:
        rest = peel(text, layers, p, year, stamped) if layers else text
        first = len(rest) == len(text) and ("srun" in layers.order or "pdsh" in layers.order)
        text = rest
    m = _QUOTE.match(text) or _INDENT.match(text)
    if m:
        text = text[m.end() :]
    if text.startswith("**"):
        m = _BOLD.fullmatch(text)
        if m:
            text = m["line"]  # the poster's Markdown emphasis of the line that mattered
    for _ in range(_MAX_PREFIXES):
        m = _OMPI.match(text)
        if m:
            p.rank = int(m["rank"])
            p.host = p.host or m["host"]
            if m["ctime"]:
                p.time = parse_ctime(m["ctime"]) or p.time
            text = text[m.end() :]
            first = False
            continue
        if first:
            m = _SRUN.match(text)
            if m and m.end() < len(text):
                p.task = int(m["task"])
                text = text[m.end() :]
                first = False
                continue
            m = _PDSH.match(text)
            if m and not _NCCL.match(text):
                p.host = m["host"]
                text = text[m.end() :]
                first = False
                continue
        first = False
        if text.startswith(" ") and not text.startswith(" ["):
            break  # of the prefixes below, only a bracketed time starts with a space
        m = _PARLAI_RANK.match(text) if text.startswith("rank:") else None
        if m:
            p.rank = int(m["rank"])
            text = text[m.end() :]
            continue
        m = _TEE.match(text)
        if m:
            rest = text[m.end() :]
            n = int(m["n"])
            if m["role"] == "rank" and not m["colon"]:
                if p.local_rank is not None:
                    # after a tee header (`[default3]:[rank19]:`): tee headers never stack, so
                    # this is the c10 / excepthook prefix, a global rank, whatever follows it
                    p.rank = n
                    if rest.startswith(" "):
                        rest = rest[1:]
                elif rest.startswith("[rank") and _TEE.match(rest):
                    p.local_rank = n  # torchtitan `--role rank` tee header, then the c10 prefix
                elif rest.startswith(("[", " ")) or not rest:
                    p.rank = n  # c10 logger `[rank3]:[E...` or Python excepthook `[rank3]: `
                    if rest.startswith(" "):
                        rest = rest[1:]
                elif GLOG_HEADER.match(rest):
                    # torch._logging's TorchLogsFormatter: `{rankprefix}{shortlevel}{asctime}...`,
                    # `[rank3]:I0124 15:34:58.736000 <pid> <file>:<line>] ` once a group exists
                    p.rank = n
                else:
                    p.local_rank = n  # torchtitan tee header `[rank0]:text`
            else:
                p.local_rank = n
                p.role = m["role"] or ""
                if m["colon"]:
                    p.host = m["role"]  # `--role $(hostname -s):` style
            text = rest
            continue
        # (a substring test first: the pattern is tried only where its tag can be)
        m = (
            _DETERMINED.match(text)
            if text.find("[rank=", 0, _DETERMINED_REACH) >= 0
            or text.find("|| ", 0, _DETERMINED_REACH) >= 0
            else None
        )
        if m:
            if m["rank"] is not None:
                p.rank = int(m["rank"])
            p.time = _time(m.groupdict(), year) or p.time
            if m["lvl"]:
                p.level = m["lvl"][0]
            text = text[m.end() :]
            continue
        m = _C10.match(text) or GLOG_HEADER.match(text)
        if m:
            p.level = m["lvl"]
            g = m.groupdict()
            if m.re is _C10:
                # c10's 9-digit fraction comes from CLOCK_MONOTONIC, not the printed second
                # (FORMATS.md §1.2): keep the whole seconds only
                g["frac"] = None
            p.time = _time(g, year) or p.time
            text = text[m.end() :]
            continue
        m = (
            _PYLOG_NAMED.match(text)
            or _DEEPSPEED.match(text)
            or _HF.match(text)
            or _NAME_LEVEL.match(text)
            or _LEVEL_MONTHDAY.match(text)
            or _TF_LOG.match(text)
        )
        if m:
            p.level = m["lvl"][0]
            p.time = _time(m.groupdict(), year) or p.time
            text = text[m.end() :]
            continue
        m = _NCCL.match(text)
        if m:
            p.host = p.host or m["host"]
            p.time = _time(m.groupdict(), year) or p.time
            text = text[m.end() :]
            continue
        m = _olmo(text)
        if m:
            p.host = p.host or m.groupdict().get("host")
            if p.local_rank is None:
                p.local_rank = int(m["local_rank"])
            p.level = m["lvl"][0]
            p.time = _time(m.groupdict(), year) or p.time
            text = text[m.end() :]
            continue
        m = (
            _BRACKET_TIME.match(text)
            or _ISO_START.match(text)
            or _MMLOG.match(text)
            or _MDY_LOG.match(text)
            or _SLASH_LOG.match(text)
            or _NANOTRON.match(text)
        )
        if m:
            g = m.groupdict()
            p.time = _time(g, year) or p.time
            lvl = g.get("lvl") or g.get("pylvl") or g.get("clvl") or g.get("glvl")
            if lvl:
                p.level = lvl[0]
            if g.get("rank") and p.rank is None:
                p.rank = int(g["rank"])
            text = text[m.end() :]
            continue
        m = _SYSLOG.match(text)
        if m:
            p.host = p.host or m["host"]
            p.time = _time(m.groupdict(), year) or p.time
            text = text[m.end() :]
            continue
        m = _RAY.match(text)
        if m:
            p.host = p.host or m["ip"] or m["node"]
            text = text[m.end() :]
            continue
        m = _RAY_CPP.match(text)
        if m:
            p.level = m["lvl"]
            p.time = _time(m.groupdict(), year) or p.time
            text = text[m.end() :]
            continue
        m = _CONTAINER.match(text)
        if m:
            text = text[m.end() :]
            continue
        m = _DMESG.match(text) or _PYLOG_PLAIN.match(text)
        if m:
            if m.re is _PYLOG_PLAIN:
                p.level = m["lvl"][0]
            text = text[m.end() :]
            continue
        break
    return text
