"""The ranks running on this machine, found in /proc: torchrun's agent (a process running
`torchrun` or `python -m torch.distributed.run`) starts one worker per local rank with RANK,
LOCAL_RANK and WORLD_SIZE in its environment; a worker's own children (data loader workers)
inherit them, so a rank is the first process down from the agent that has RANK."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

PROC = Path("/proc")
MAX_RANKS = 512
"""Ranks one collection looks at, at most (a node runs a handful)."""
STATES = MappingProxyType(
    {
        "R": "running",
        "S": "sleeping",
        "D": "disk sleep",
        "T": "stopped",
        "t": "tracing stop",
        "Z": "zombie",
        "X": "dead",
        "I": "idle",
    }
)
"""/proc/PID/stat's state letters (proc(5))."""
STOPPED = frozenset(("T", "t"))
"""The state letters of a stopped process (by a signal, or under a tracer)."""
_LAUNCHERS = frozenset(("torch.distributed.run", "torch.distributed.launch"))
_VALUED = frozenset(("-X", "-W", "--check-hash-based-pycs"))
"""Python's options that take the next argument as their value."""
KEPT_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "SLURM_JOB_ID",
    "SLURM_PROCID",
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_WORKER_SERVER_SOCKET",
)
"""The variables a collection reads from a rank's environment (the rest stays unread)."""


@dataclass(frozen=True, slots=True)
class Agent:
    pid: int
    argv: tuple[str, ...]
    slurm_job_id: str | None
    writes_to: tuple[str, ...]
    """The files its standard output and error are (resolved), when readable."""


@dataclass(frozen=True, slots=True)
class RankProcess:
    pid: int
    agent_pid: int
    state: str
    """/proc/PID/stat's state letter ('?' when it could not be read)."""
    env: Mapping[str, str]
    """KEPT_ENV's variables the process has; empty when its environment could not be read."""
    env_error: str | None = None

    @property
    def rank(self) -> int | None:
        return _int(self.env.get("RANK"))

    @property
    def local_rank(self) -> int | None:
        return _int(self.env.get("LOCAL_RANK"))

    @property
    def world_size(self) -> int | None:
        return _int(self.env.get("WORLD_SIZE"))

    @property
    def state_name(self) -> str:
        return STATES.get(self.state, "unknown")


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_argv(pid: int, proc: Path = PROC) -> tuple[str, ...]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ()
    return tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)


def read_state(pid: int, proc: Path = PROC) -> tuple[int, str] | None:
    """(parent pid, state letter) from /proc/PID/stat; the command name may hold spaces and
    parentheses, so the fields are counted from the last ')'."""
    try:
        text = (proc / str(pid) / "stat").read_text(errors="replace")
        state, ppid = text.rsplit(")", 1)[1].split()[:2]
        return int(ppid), state
    except (OSError, IndexError, ValueError):
        return None


def read_env(pid: int, proc: Path = PROC) -> dict[str, str]:
    """KEPT_ENV's variables from /proc/PID/environ (raises OSError when it is not readable)."""
    raw = (proc / str(pid) / "environ").read_bytes()
    out = {}
    for item in raw.split(b"\0"):
        name, eq, value = item.partition(b"=")
        key = name.decode("utf-8", "replace")
        if eq and key in KEPT_ENV:
            out[key] = value.decode("utf-8", "replace")
    return out


def is_agent(argv: tuple[str, ...]) -> bool:
    """torchrun's console script (`torchrun ...`, or `python .../torchrun ...` as its shebang
    runs it) or `python -m torch.distributed.run|launch`; not a program that runs one (`srun
    torchrun ...`), whose own arguments name it too."""
    if not argv:
        return False
    if Path(argv[0]).name == "torchrun":
        return True
    if not Path(argv[0]).name.startswith("python"):
        return False
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
        i += 2 if argv[i] in _VALUED else 1  # the interpreter's own options
    if argv[i : i + 1] == ("-m",):
        return argv[i + 1 : i + 2] in [(m,) for m in _LAUNCHERS]
    return i < len(argv) and Path(argv[i]).name == "torchrun"


def _pids(proc: Path) -> list[int]:
    try:
        return [int(e.name) for e in proc.iterdir() if e.name.isdigit()]
    except OSError:
        return []


def _writes_to(pid: int, proc: Path) -> tuple[str, ...]:
    out = []
    for fd in ("1", "2"):
        try:
            target = str((proc / str(pid) / "fd" / fd).readlink())
        except OSError:
            continue
        if target.startswith("/"):
            out.append(os.path.realpath(target))
    return tuple(out)


def find_agents(proc: Path = PROC) -> list[Agent]:
    """Every torchrun agent this process can see."""
    out = []
    for pid in _pids(proc):
        argv = read_argv(pid, proc)
        if not is_agent(argv):
            continue
        try:
            job = read_env(pid, proc).get("SLURM_JOB_ID")
        except OSError:
            job = None
        out.append(Agent(pid, argv, job, _writes_to(pid, proc)))
    return sorted(out, key=lambda a: a.pid)


def choose_agents(
    agents: Iterable[Agent], logs: Iterable[str] = (), job: str | None = None
) -> tuple[list[Agent], str]:
    """The agents of the job being watched, and how they were chosen: those of SLURM job
    `job`; else those writing to one of `logs`; else all of them."""
    agents = list(agents)
    if job is not None:
        return [a for a in agents if a.slurm_job_id == job], f"SLURM job {job}"
    wanted = {os.path.realpath(p) for p in logs}
    writing = [a for a in agents if wanted.intersection(a.writes_to)]
    if writing:
        return writing, "writing to the log"
    return agents, "every torchrun agent on this machine (none writes to the log)"


def _children(proc: Path) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for pid in _pids(proc):
        found = read_state(pid, proc)
        if found is not None:
            kids.setdefault(found[0], []).append(pid)
    return kids


def rank_processes(agents: Iterable[Agent], proc: Path = PROC) -> list[RankProcess]:
    """The workers of `agents`: the first process down each branch that has RANK. A child
    of the agent whose environment cannot be read is a worker of unknown rank."""
    kids = _children(proc)
    out: list[RankProcess] = []
    for agent in agents:
        todo = [(c, True) for c in sorted(kids.get(agent.pid, []))]
        while todo and len(out) < MAX_RANKS:
            pid, direct = todo.pop(0)
            found = read_state(pid, proc)
            state = found[1] if found is not None else "?"
            try:
                env = read_env(pid, proc)
            except OSError as err:
                if direct:
                    out.append(RankProcess(pid, agent.pid, state, {}, err.strerror or str(err)))
                continue
            if "RANK" in env:
                out.append(RankProcess(pid, agent.pid, state, MappingProxyType(env)))
            else:
                todo.extend((c, False) for c in sorted(kids.get(pid, [])))
    return sorted(out, key=lambda r: (r.rank is None, r.rank or 0, r.pid))


_LISTENING = 0x10000
"""/proc/net/unix's flag of a listening socket (__SO_ACCEPTCON)."""


def listening_sockets(pid: int, proc: Path = PROC) -> tuple[str, ...]:
    """The paths of the Unix sockets process `pid` listens on (its fds' socket inodes, found
    in /proc/net/unix); empty when its fds cannot be read."""
    inodes = set()
    fd_dir = proc / str(pid) / "fd"
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return ()
    for fd in fds:
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    try:
        table = (proc / str(pid) / "net" / "unix").read_text(errors="replace").splitlines()[1:]
    except OSError:
        return ()
    out = []
    for row in table:
        cols = row.split()
        if len(cols) >= 8 and cols[6] in inodes and int(cols[3], 16) & _LISTENING:
            out.append(cols[7])
    return tuple(sorted(set(out)))
