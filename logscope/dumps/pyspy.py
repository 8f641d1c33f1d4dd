"""`py-spy dump --pid N` text, one process or several concatenated, and Linux /proc/<pid>/status
files: where each rank's Python is, and whether its process runs at all.

py-spy prints, per process (py-spy 0.3/0.4, src/dump.rs):

    Process 18465: /usr/bin/python -u train.py
    Python v3.11.7 (/usr/bin/python3.11)

    Thread 18465 (idle): "MainThread"
        all_gather (torch/distributed/distributed_c10d.py:4287)
        step (train.py:87)

a thread's status is `idle`, `active`, `gil` or `active+gil`; a frame is `name (file:line)`,
innermost first; `--locals` adds indented `Arguments:`/`Locals:` blocks. A rank is read from a
line before the process that names it (`rank 2`, `==> rank2.txt <==`) or the file's name."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .flight_recorder import Frame
from .names import host_from_name, rank_from_name

_PROCESS = re.compile(r"^Process (?P<pid>\d+): (?P<cmd>.*)$")
_THREAD = re.compile(
    r'^Thread (?P<tid>0x[0-9A-Fa-f]+|\d+) \((?P<status>[a-z+]+)\)(?:: "(?P<name>.*)")?\s*$'
)
_FRAME = re.compile(r"^\s{4}(?P<name>\S.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)\s*$")
_RANK_HINT = re.compile(r"\brank[-_ :=]*(?P<rank>\d+)\b", re.I)
_STATE = re.compile(r"^State:\s*(?P<code>[A-Za-z])\s*(?:\((?P<word>[^)]*)\))?", re.M)
_PID = re.compile(r"^Pid:\s*(?P<pid>\d+)", re.M)
_NAME = re.compile(r"^Name:\s*(?P<name>.*)$", re.M)


@dataclass(frozen=True, slots=True)
class Thread:
    tid: str
    name: str | None
    status: str
    lineno: int
    """Its header line's number in the file; its frames follow, innermost first."""
    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class ProcessStack:
    path: str
    lineno: int
    """The `Process N:` line's number in the file."""
    pid: int
    command: str
    rank: int | None
    host: str | None
    threads: tuple[Thread, ...]
    error: str | None = None
    """What py-spy said instead of a stack (`Error: Failed to suspend process`, `Reason: ...`)."""

    @property
    def main(self) -> Thread | None:
        """The main thread: py-spy names it `MainThread`; else the first listed."""
        for t in self.threads:
            if t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None


@dataclass(frozen=True, slots=True)
class ProcStatus:
    """A copy of /proc/<pid>/status."""

    path: str
    pid: int | None
    name: str | None
    state: str
    """The one-letter state: R running, S sleeping, D disk wait, T stopped, t traced, Z zombie."""
    state_word: str | None
    rank: int | None
    host: str | None


def read_pyspy(path: str, text: str) -> tuple[list[ProcessStack], list[str]]:
    """The processes of a py-spy dump text, and warnings for what could not be read."""
    out: list[ProcessStack] = []
    warnings: list[str] = []
    lines = text.splitlines()
    name_rank = rank_from_name(path)
    count = sum(1 for line in lines if _PROCESS.match(line))
    hint: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _PROCESS.match(line)
        if not m:
            h = _RANK_HINT.search(line)
            if h and not line.startswith((" ", "\t")):
                hint = int(h.group("rank"))
            i += 1
            continue
        start = i + 1
        threads: list[Thread] = []
        current: tuple[str, str | None, str, int] | None = None
        frames: list[Frame] = []
        errors: list[str] = []
        i += 1
        while i < len(lines) and not _PROCESS.match(lines[i]):
            t = _THREAD.match(lines[i])
            f = _FRAME.match(lines[i])
            if t:
                if current is not None:
                    threads.append(Thread(*current, tuple(frames)))
                current = (t.group("tid"), t.group("name"), t.group("status"), i + 1)
                frames = []
            elif lines[i].startswith(("Error:", "Reason:")):
                errors.append(lines[i].strip())
            elif f and current is not None:
                frames.append(Frame(f.group("name"), f.group("file"), _line(f.group("line"))))
            elif lines[i].strip() and not lines[i].startswith(" ") and _RANK_HINT.search(lines[i]):
                break  # a header naming the next process's rank
            i += 1
        if current is not None:
            threads.append(Thread(*current, tuple(frames)))
        rank = hint if hint is not None else (name_rank if count == 1 else None)
        if not threads and not errors:
            warnings.append(
                f"{path}:{start}: py-spy dump of process {m.group('pid')} has no thread"
            )
        out.append(
            ProcessStack(
                path,
                start,
                int(m.group("pid")),
                m.group("cmd"),
                rank,
                host_from_name(path),
                tuple(threads),
                " ".join(errors)[:300] or None,
            )
        )
        hint = None
    if not out:
        first = next((x.strip() for x in lines if x.strip()), "")
        warnings.append(
            f"{path}: py-spy output without a process" + (f": {first[:120]}" if first else "")
        )
    return out, warnings


def _line(value: str | None) -> int | None:
    return int(value) if value else None


def read_proc_status(path: str, text: str) -> ProcStatus | None:
    state = _STATE.search(text)
    if state is None:
        return None
    pid = _PID.search(text)
    name = _NAME.search(text)
    return ProcStatus(
        path,
        int(pid.group("pid")) if pid else None,
        name.group("name").strip() if name else None,
        state.group("code"),
        state.group("word"),
        rank_from_name(path),
        host_from_name(path),
    )
