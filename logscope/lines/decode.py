"""Decode physical lines into records: text, `\\r` states, ANSI escapes, pieces another rank's
output glued in; each record's prefixes are read by lines.headers."""

from __future__ import annotations

import re

from ..model import Line
from .headers import Prefix, stamped, strip_prefixes
from .layers import LAYER_SAMPLE, MAX_SAMPLE_LINES, Layers, learn, panes

_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>]"
)
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# the same head anywhere in a raw line, behind whatever prefixes: which process printed it
_NCCL_PROCESS = re.compile(r"(?:^|\s|\])(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[\d+\] ")

# Another rank's output glued into this line (TailLog forwards partial lines, FORMATS.md §1.1):
# a tee header, or a C++ logger header, that does not start the line.
# The literal `[` comes first so the search skips to each `[` (35x faster than a lookbehind
# tried at every position); the match starts at the header's `[`.
# (a host in brackets before its port, `remote=[nid006844]:8888`, is no header)
GLUED_HEADER = re.compile(
    r"\[(?<=\S\[)(?=[A-Za-z_][\w.-]*?:?\d+\]:(?!\d)"
    r"|[FEWI]\d{0,4}(?: \d\d:\d\d:\d\d\.\d+)? [\w.+-]+\.(?:cpp|hpp|cc|h):\d+\] )"
)
"""Another rank's header glued inside a line (the bulk parse leaves such lines to the decoder)."""

# A SLURM daemon's or client's record glued after a task's unfinished line: slurmstepd and srun
# write to the task's own output file, so a progress bar or a `print(..., end="")` with no
# newline yet is continued by `slurmstepd: error: *** STEP ...`. Their records have log.c's shape,
# `argv0: level: ` (glued: a message that quotes `... failed: srun: error: ...` is one record) or,
# with log timestamps, `[2025-11-24T22:14:50.004] level: `.
GLUED_SLURM = re.compile(
    r"(?:(?<=\S)(?<![A-Za-z_-])(?:slurmstepd|srun|salloc|sbatch)(?:-[\w.-]+)?: "
    r"|(?:(?<=\S)|(?<=\S ))\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\] )(?:error|fatal): "
)
"""A SLURM record glued inside a line."""
# A tqdm bar not ended by a newline yet, continued by another write (a warning, an error, a
# launcher's record): tqdm's default format ends `{n_fmt}/{total_fmt} [{elapsed}<{remaining},
# {rate_fmt}{postfix}]` (tqdm/std.py format_meter), and the glued record begins right after it.
GLUED_AFTER_BAR = re.compile(
    r"\d(?:\.\d+)?[kMGTPEZY]?/(?:\d+(?:\.\d+)?[kMGTPEZY]?|\?) \[[\d:?]+<[\d:?]+, [^\]]*\](?=\S)"
)
"""A record glued after a progress bar's end (the match ends at the bar's `]`)."""
_SLURM_DAEMON = ("slurmstepd: ", "slurmstepd-")
"""slurmstepd writes its records into the step's output, where srun --label gives them the label
of the task stream they went to: they are no task's output, and name no rank."""


def nccl_head(raw: str) -> tuple[str, str] | None:
    """The (host, pid) of the process that printed an NCCL line: its `host:pid:tid [dev] ` head."""
    head = _NCCL_PROCESS.search(raw)
    return (head["host"], head["pid"]) if head is not None else None


def nccl_thread(raw: str) -> tuple[str, str, str] | None:
    """The (host, pid, tid) of the thread that printed an NCCL line, from the same head."""
    head = _NCCL_PROCESS.search(raw)
    return (head["host"], head["pid"], head["tid"]) if head is not None else None


def clean(raw: str) -> str:
    """Strip ANSI escapes and control characters (but not `\\r`) from decoded text."""
    if raw.isprintable():
        return raw  # neither escapes nor control characters (the common case, C-fast)
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    return _CTRL.sub("", raw)


def learn_layers(data: bytes | bytearray | str) -> Layers | None:
    """The prefix layers of an input (lines.layers), from lines spread over its first bytes: a
    job's script may print hundreds of lines of its own before the launcher's labelled ones."""
    text = decode(bytes(data[:LAYER_SAMPLE])) if not isinstance(data, str) else data[:LAYER_SAMPLE]
    lines = text.split("\n")
    if len(data) > LAYER_SAMPLE:
        lines = lines[:-1]  # the last is cut
    lines = [t for t in lines if t.strip()]
    step = max(1, len(lines) // MAX_SAMPLE_LINES)
    return learn((clean(t) for t in lines[::step]), stamped)


def parse_line(
    raw: str,
    path: str = "-",
    lineno: int = 1,
    year: int | None = None,
    layers: Layers | None = None,
) -> list[Line]:
    """Decode one physical line into records: one per `\\r` state and per glued-in piece.

    `year` completes timestamps that carry none (c10 `E1129 ...`, glog, syslog). `layers`: the
    prefix layers learned from the line's input (learn_layers), peeled from its start.
    """
    raw = raw.rstrip("\r\n")
    text = clean(raw)
    out: list[Line] = []
    inherit: Prefix | None = None
    segments: list[str] = []
    for pane in panes(text, layers) if layers is not None and layers.edge is not None else (text,):
        segments.extend(pane.split("\r") if "\r" in pane else (pane,))
    outer = layers
    for segment in segments:
        if not segment.strip():
            continue
        piece: str | None = segment
        first_piece = True
        while piece is not None:
            p = Prefix()
            # the layers start a physical line (or a pane of it), not a `\r` state or a piece
            msg = strip_prefixes(piece, p, year, outer if first_piece else None)
            piece = None
            cut = _glued_at(msg)
            if cut:
                msg, piece = msg[:cut], msg[cut:]
            if p.task is not None and msg.startswith(_SLURM_DAEMON):
                p.task = None  # slurmstepd's record in a task's stream: not the task's own
            if inherit is not None:
                # a `\r` state or a glued piece belongs to the same srun task / pdsh host, and a
                # `\r` state with no header of its own to the same rank
                p.task = p.task if p.task is not None else inherit.task
                p.host = p.host or inherit.host
                if first_piece and p.local_rank is None and p.rank is None:
                    p.local_rank, p.rank, p.role = inherit.local_rank, inherit.rank, inherit.role
            out.append(
                Line(
                    path=path,
                    lineno=lineno,
                    raw=raw,
                    text=msg,
                    host=p.host,
                    rank=p.rank,
                    local_rank=p.local_rank,
                    task=p.task,
                    role=p.role,
                    level=p.level,
                    time=p.time,
                )
            )
            if inherit is None or first_piece:
                inherit = p
            first_piece = False
        outer = None
    if not out:
        out.append(Line(path=path, lineno=lineno, raw=raw, text=""))
    return out


def _glued_at(msg: str) -> int:
    """Where another record glued into a message begins (0: none)."""
    glued = GLUED_HEADER.search(msg)
    end = glued.start() if glued else len(msg)
    slurm = GLUED_SLURM.search(msg, 1, end) if "error: " in msg or "fatal: " in msg else None
    if slurm and msg[: slurm.start()].strip():
        end = slurm.start()
    bar = GLUED_AFTER_BAR.search(msg, 0, end) if "<" in msg else None
    if bar:
        return bar.end()
    return end if end < len(msg) else 0


def decode(data: bytes) -> str:
    """Bytes to text: UTF-8 with invalid bytes replaced, never an error."""
    return data.decode("utf-8", errors="replace")
