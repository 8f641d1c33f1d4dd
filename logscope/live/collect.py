"""Evidence of a hang, collected before acting on it: each local rank's Python stack
(`py-spy dump`), its process state, and its Flight Recorder where the rank serves one; on
SLURM, the same on every node of the job through `srun --overlap`. Everything goes into one
folder; `collect.json` there says which file is which rank's.

The files hold exactly what the tools wrote (a reader recognizes them by content); the rank,
host and state are in the file names and the manifest. Programs run from argument lists, never
through a shell, each under a time limit and a size cap; what cannot run is a warning, and the
hang is acted on all the same.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..read.sources import dir_files, glob_files
from .bounded import DEFAULT_LIMITS, Limits, Tools, host_name, run_bounded, safe_name
from .flight_recorder import flight_recorder
from .ranks import PROC, STOPPED, RankProcess, choose_agents, find_agents, rank_processes

MANIFEST = "collect.json"
STATUS_BYTES = 1 << 16
SCHEMA = 1
_PTRACE_REFUSED = re.compile(r"permission denied|operation not permitted|EPERM|EACCES", re.I)


# -- one node ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankEvidence:
    host: str
    pid: int
    agent_pid: int
    rank: int | None
    local_rank: int | None
    world_size: int | None
    state: str
    state_name: str
    pyspy: str | None = None
    """The file (in the folder) holding what `py-spy dump` printed."""
    pyspy_error: str | None = None
    flight_recorder: tuple[str, ...] = ()
    """Flight Recorder files: asked for now (`.json`), written by the rank earlier (`.pickle`)."""
    fr_error: str | None = None
    status: str | None = None
    """The file holding a copy of the process's /proc/PID/status, taken with the stack."""

    def doc(self) -> dict[str, Any]:
        """The fields by name (node_from_doc reads them back)."""
        return {**asdict(self), "flight_recorder": list(self.flight_recorder)}


@dataclass(frozen=True, slots=True)
class NodeEvidence:
    host: str
    chosen: str
    """How the job's torchrun agents were picked out."""
    ranks: tuple[RankEvidence, ...]
    warnings: tuple[str, ...]

    def doc(self) -> dict[str, Any]:
        return {
            "type": "logscope-collect-node",
            "host": self.host,
            "chosen": self.chosen,
            "ranks": [r.doc() for r in self.ranks],
            "warnings": list(self.warnings),
        }


def _stem(host: str, r: RankProcess) -> str:
    who = f"rank{r.rank}" if r.rank is not None else f"pid{r.pid}"
    return f"{safe_name(host)}-{who}"


def _pyspy(
    r: RankProcess, pyspy: str, out_dir: Path, stem: str, limits: Limits
) -> tuple[str | None, str | None]:
    """(file, error). A stopped process is read without pausing it (`--nonblocking`): py-spy's
    pause attaches with ptrace, which fails on a stopped process, and a detach could resume it."""
    argv = [pyspy, "dump", "--pid", str(r.pid)]
    if r.state in STOPPED:
        argv.append("--nonblocking")
    try:
        ran = run_bounded(argv, limits.pyspy_s, limits.stack_bytes)
    except OSError as err:
        return None, f"cannot run {pyspy}: {err.strerror or err}"
    if ran.code is None:
        return None, f"py-spy dump took over {limits.pyspy_s:g} s and was stopped"
    if ran.code != 0 or not ran.out:
        return None, (ran.err.strip() or f"py-spy exited {ran.code}").splitlines()[-1][:300]
    name = f"pyspy-{stem}.txt"
    (out_dir / name).write_bytes(ran.out)
    return name, "output cut at the size cap" if ran.truncated else None


def _status(r: RankProcess, out_dir: Path, stem: str) -> str | None:
    """A copy of /proc/PID/status (its `State:` line says a process is stopped)."""
    try:
        with (PROC / str(r.pid) / "status").open("rb") as f:
            text = f.read(STATUS_BYTES)
    except OSError:
        return None
    name = f"status-{stem}.status"
    (out_dir / name).write_bytes(text)
    return name


def _one_rank(
    r: RankProcess, host: str, out_dir: Path, pyspy: str | None, limits: Limits, deadline: float
) -> RankEvidence:
    stem = _stem(host, r)
    status = _status(r, out_dir, stem)
    late = f"not collected: the collection's {limits.node_s:g} s were spent"
    stack: str | None = None
    stack_error: str | None
    left = deadline - time.monotonic()
    if left <= 0:
        stack_error = late
    elif pyspy is None:
        stack_error = "py-spy not found"
    else:
        bounded = replace(limits, pyspy_s=min(limits.pyspy_s, left))
        stack, stack_error = _pyspy(r, pyspy, out_dir, stem, bounded)
    fr: tuple[str, ...] = ()
    fr_error: str | None = late
    left = deadline - time.monotonic()
    if left > 0:
        bounded = replace(limits, fr_s=min(limits.fr_s, left))
        fr, fr_error = flight_recorder(r, out_dir, stem, bounded)
    if r.env_error is not None:
        stack_error = f"{stack_error or 'rank unknown'} (environment: {r.env_error})"
    return RankEvidence(
        host=host,
        pid=r.pid,
        agent_pid=r.agent_pid,
        rank=r.rank,
        local_rank=r.local_rank,
        world_size=r.world_size,
        state=r.state,
        state_name=r.state_name,
        pyspy=stack,
        pyspy_error=stack_error,
        flight_recorder=fr,
        fr_error=fr_error,
        status=status,
    )


def _warnings(found: Sequence[RankEvidence], pyspy: str | None, chosen: str) -> list[str]:
    host = found[0].host if found else host_name()
    out = []
    if pyspy is None:
        out.append(
            f"{host}: py-spy not found (on PATH or beside {sys.executable}): no Python stacks"
            " collected (pip install py-spy)"
        )
    refused = [r for r in found if r.pyspy_error and _PTRACE_REFUSED.search(r.pyspy_error)]
    if refused:
        who = ", ".join(_who(r) for r in refused)
        out.append(
            f"{host}: ptrace not permitted, no stack of {who}: {refused[0].pyspy_error} "
            "(run as the job's user or root; see kernel.yama.ptrace_scope, CAP_SYS_PTRACE)"
        )
    failed = [r for r in found if r.pyspy_error and r not in refused and pyspy is not None]
    out.extend(f"{host}: no stack of {_who(r)}: {r.pyspy_error}" for r in failed)
    by_error: dict[str, list[RankEvidence]] = {}
    for r in found:
        if r.fr_error:
            by_error.setdefault(r.fr_error, []).append(r)
    for error, ranks in by_error.items():
        who = ", ".join(_who(r) for r in ranks)
        out.append(f"{host}: Flight Recorder of {who}: {error}")
    if not found:
        out.append(f"{host}: no torchrun ranks found ({chosen})")
    return out


def _who(r: RankEvidence) -> str:
    return f"rank {r.rank} (pid {r.pid})" if r.rank is not None else f"pid {r.pid}"


def collect_node(
    out_dir: Path,
    tools: Tools,
    logs: Iterable[str] = (),
    *,
    job: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> NodeEvidence:
    """Collect on this machine: the ranks of the torchrun agents of SLURM job `job`, else of
    those writing to `logs`, else of every agent here; all ranks at once."""
    host = host_name()
    agents, chosen = choose_agents(find_agents(), logs, job)
    ranks = rank_processes(agents)
    out_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + limits.node_s

    def one(r: RankProcess) -> RankEvidence:
        return _one_rank(r, host, out_dir, tools.pyspy, limits, deadline)

    with ThreadPoolExecutor(max_workers=max(1, min(limits.parallel, len(ranks) or 1))) as pool:
        found = list(pool.map(one, ranks))
    return NodeEvidence(host, chosen, tuple(found), tuple(_warnings(found, tools.pyspy, chosen)))


# -- every node of a SLURM job ----------------------------------------------------------------


def srun_argv(srun: str, job: str, out_dir: Path, python: str = sys.executable) -> list[str]:
    """One task per node of the job, sharing its resources (`--overlap`), each running
    `logscope collect-local` with this Python (the nodes see it on the shared filesystem)."""
    return [
        srun, "--overlap", "--jobid", job, "--ntasks-per-node=1", "--kill-on-bad-exit=0",
        "--quiet", python, "-m", "logscope", "collect-local", "--job", job,
        "--out", str(out_dir.resolve()),
    ]  # fmt: skip


def collect_slurm(
    out_dir: Path, job: str, srun: str, limits: Limits
) -> tuple[list[NodeEvidence], list[str]]:
    """Run the collection on every node of `job`; each prints its NodeEvidence as JSON."""
    argv = srun_argv(srun, job, out_dir)
    try:
        ran = run_bounded(argv, limits.srun_s, limits.stack_bytes)
    except OSError as err:
        return [], [f"cannot run {srun}: {err.strerror or err}"]
    nodes: list[NodeEvidence] = []
    warnings: list[str] = []
    texts = ran.out.decode("utf-8", "replace").splitlines()
    # a node's part also in its own file (a long line may come through srun cut)
    texts += [f.read_text(errors="replace") for f in sorted(out_dir.glob("collect-*.json"))]
    for text in texts:
        try:
            node = node_from_doc(json.loads(text))
        except (ValueError, KeyError, TypeError):
            continue
        if all(n.host != node.host for n in nodes):
            nodes.append(node)
    if ran.code is None:
        warnings.append(f"srun took over {limits.srun_s:g} s and was stopped")
    elif ran.code != 0 or not nodes:
        last = ran.err.strip().splitlines()[-1:] or [f"exit {ran.code}"]
        warnings.append(f"srun --overlap --jobid {job}: {last[0][:300]}")
    return nodes, warnings


def write_node(out_dir: Path, node: NodeEvidence) -> Path:
    """A node's part of the manifest, in the folder (`collect-<host>.json`)."""
    path = out_dir / f"collect-{safe_name(node.host)}.json"
    path.write_text(json.dumps(node.doc(), ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def node_from_doc(doc: dict[str, Any]) -> NodeEvidence:
    ranks = tuple(
        RankEvidence(**{**r, "flight_recorder": tuple(r.get("flight_recorder", ()))})
        for r in doc["ranks"]
    )
    return NodeEvidence(doc["host"], doc["chosen"], ranks, tuple(doc["warnings"]))


# -- the folder --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evidence:
    folder: Path
    job: str | None
    nodes: tuple[NodeEvidence, ...]
    warnings: tuple[str, ...]
    """Every warning: the coordinator's, then each node's."""
    seconds: float = 0.0
    trigger: dict[str, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> list[RankEvidence]:
        return [r for n in self.nodes for r in n.ranks]

    def dumps(self) -> list[Path]:
        """The files the tools wrote (not the manifest), for an analysis to read."""
        names = [n for r in self.ranks for n in (r.pyspy, *r.flight_recorder, r.status) if n]
        return [self.folder / n for n in names if (self.folder / n).is_file()]

    def doc(self) -> dict[str, Any]:
        return {
            "type": "logscope-collect",
            "schema": SCHEMA,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "job": self.job,
            "seconds": round(self.seconds, 2),
            "trigger": self.trigger,
            "nodes": [n.doc() for n in self.nodes],
            "ranks": [r.doc() for r in self.ranks],
            "stopped_ranks": [r.rank for r in self.ranks if r.state in STOPPED],
            "warnings": list(self.warnings),
        }

    def summary(self) -> str:
        ranks = self.ranks
        stacks = sum(1 for r in ranks if r.pyspy)
        hosts = len({r.host for r in ranks})
        parts = [f"{stacks} stacks of {len(ranks)} ranks on {hosts} host{'s' * (hosts != 1)}"]
        fr = sum(1 for r in ranks if r.flight_recorder)
        if fr:
            parts.append(f"{fr} Flight Recorder dumps")
        odd = [r for r in ranks if r.state not in ("R", "S", "D")]
        if odd:
            parts.append(", ".join(f"{_who(r)} on {r.host} is {r.state_name}" for r in odd))
        return f"{self.folder}: " + "; ".join(parts)


def evidence_folder(base: Path, job: str | None, now: datetime) -> Path:
    """A new folder under `base`, named for the job (or host) and the time."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"hang-{safe_name(job) if job else host_name()}-{stamp}"
    for n in range(100):
        folder = base / (name if n == 0 else f"{name}-{n}")
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            continue
        return folder
    raise FileExistsError(base / name)


def slurm_job_writing(logs: Iterable[str], limits: Limits) -> str | None:
    """The running SLURM job whose standard output or error is one of `logs` (squeue's
    STDOUT/STDERR fields, fixed-width: a path may hold spaces), or None."""
    squeue = shutil.which("squeue")
    wanted = {os.path.realpath(p) for p in logs}
    if squeue is None or not wanted:
        return None
    fields = "JobID:24,STDOUT:2048,STDERR:2048"
    try:
        ran = run_bounded([squeue, "-h", "-t", "RUNNING", "-O", fields], 10.0, limits.stack_bytes)
    except OSError:
        return None
    for row in ran.out.decode("utf-8", "replace").splitlines():
        job, out, err = row[:24].strip(), row[24:2072].strip(), row[2072:].strip()
        if job and wanted.intersection(os.path.realpath(p) for p in (out, err) if p):
            return job
    return None


def log_files(patterns: Iterable[str]) -> list[str]:
    """The files the followed paths name now, expanded as `tail` expands them: a directory's
    files below it (read.sources.dir_files), a glob's matches unless a file has its very name."""
    out: list[str] = []
    for p in patterns:
        if Path(p).is_dir():
            out.extend(dir_files(Path(p)))
        elif glob.has_magic(p) and not Path(p).exists():
            out.extend(glob_files(p))
        else:
            out.append(p)
    return out


def collect(
    base: Path,
    logs: Sequence[str],
    tools: Tools,
    *,
    job: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    trigger: dict[str, Any] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Evidence:
    """Collect into a new folder under `base` and write its manifest. With a SLURM job id
    (given, or the running job whose output is one of `logs` when no torchrun here writes to
    them), on every node of the job through srun (on this machine if srun is missing)."""
    start = clock()
    logs = log_files(logs)
    if job is None and tools.srun is not None:
        writing = choose_agents(find_agents(), logs)[1] == "writing to the log"
        job = None if writing else slurm_job_writing(logs, limits)
    folder = evidence_folder(base, job, datetime.now(UTC))
    warnings: list[str] = []
    nodes: list[NodeEvidence] = []
    if job is not None and tools.srun is not None:
        nodes, warnings = collect_slurm(folder, job, tools.srun, limits)
    elif job is not None:
        warnings.append(
            f"srun not found: collecting on this machine only, not on job {job}'s nodes"
        )
    if not nodes:
        nodes = [collect_node(folder, tools, logs, job=job, limits=limits)]
    warnings += [w for n in nodes for w in n.warnings]
    evidence = Evidence(
        folder, job, tuple(nodes), tuple(warnings), clock() - start, dict(trigger or {})
    )
    (folder / MANIFEST).write_text(json.dumps(evidence.doc(), indent=2) + "\n", encoding="utf-8")
    return evidence
