"""`tail --on-hang collect`'s collection, on real processes: a launcher named `torchrun` (how
torchrun's console script shows in /proc) starting workers with RANK in their environment, each
with a child of its own (a data loader worker inherits RANK and is not a rank); real py-spy;
real programs for the time and size limits."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from logscope.live.actions import Actions, HangCollect, name_culprit
from logscope.live.bounded import Limits, Tools, find_tools, run_bounded
from logscope.live.collect import (
    Evidence,
    NodeEvidence,
    RankEvidence,
    collect,
    collect_node,
    log_files,
    node_from_doc,
    srun_argv,
)
from logscope.live.flight_recorder import NO_SERVER
from logscope.live.ranks import choose_agents, find_agents, is_agent, rank_processes
from logscope.live.watcher import Alert

from .helpers import skip_or_fail

PYSPY = find_tools().pyspy
needs_pyspy = pytest.mark.skipif(PYSPY is None, reason="py-spy not installed (the test extra)")

LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    WORKER = '''
    import os, socket, subprocess, sys, time
    served = os.environ.get("TORCH_WORKER_SERVER_SOCKET")
    if served:  # a server that never answers: accepts nothing
        server = socket.socket(socket.AF_UNIX)
        server.bind(served + os.environ["LOCAL_RANK"])
        server.listen(4)
    dump = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if dump:  # as torch's DebugInfoWriter names it: the prefix and the rank
        open(dump + os.environ["RANK"], "wb").write(b"trace of " + os.environ["RANK"].encode())
    def wait_in_collective():
        time.sleep(3600)
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    print("worker up", flush=True)
    wait_in_collective()
    '''
    n = int(sys.argv[1])
    for r in range(n):
        env = {**os.environ, "RANK": str(10 + r), "LOCAL_RANK": str(r), "WORLD_SIZE": "8"}
        subprocess.Popen([sys.executable, "-c", WORKER], env=env)
    time.sleep(3600)
    """
)


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for e in Path("/proc").iterdir():
        if e.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((e / "stat").read_text().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(e.name))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


@contextlib.contextmanager
def launched(
    tmp_path: Path, n: int = 3, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """The launcher writing to tmp_path/run.log, its n workers up (each with a child)."""
    script = tmp_path / "torchrun"
    script.write_text(LAUNCHER)
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(n)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while log.read_text().count("worker up") < n or len(_descendants(proc.pid)) < 2 * n:
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.05)
        yield proc, log
    finally:
        victims = _descendants(proc.pid)
        for pid in [proc.pid, *victims]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def test_torchrun_agents_are_recognized_by_their_command_line() -> None:
    assert is_agent(("/venv/bin/python3", "/venv/bin/torchrun", "--nproc_per_node", "4", "t.py"))
    assert is_agent(("torchrun", "t.py"))
    assert is_agent(("python", "-u", "-m", "torch.distributed.run", "t.py"))
    assert is_agent(("python", "-m", "torch.distributed.launch", "t.py"))
    assert is_agent(("/usr/bin/python3.11", "-u", "-X", "dev", "/venv/bin/torchrun", "t.py"))
    assert not is_agent(("python", "train.py", "--torchrun"))
    assert not is_agent(("srun", "--label", "python", "-m", "torch.distributed.run", "t.py"))
    assert not is_agent(("srun", "torchrun", "t.py"))
    assert not is_agent(("python", "t.py", "-m", "torch.distributed.run"))
    assert not is_agent(("python", "-m", "torch.distributed.elastic.agent", "x"))
    assert not is_agent(())


def test_the_ranks_are_the_agents_workers_not_their_children(tmp_path: Path) -> None:
    with launched(tmp_path) as (proc, log):
        agents, how = choose_agents(find_agents(), [str(log)])
        assert [a.pid for a in agents] == [proc.pid], how
        assert how == "writing to the log"
        ranks = rank_processes(agents)
        assert [(r.rank, r.local_rank) for r in ranks] == [(10, 0), (11, 1), (12, 2)]
        assert all(r.agent_pid == proc.pid and r.state in ("R", "S") for r in ranks)
        children = set(_descendants(proc.pid)) - {r.pid for r in ranks}
        assert len(children) == 3  # each worker's own child, inheriting RANK, is not a rank

        os.kill(ranks[1].pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while (stopped := rank_processes(agents)[1]).state != "T":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert stopped.state_name == "stopped"


def test_agents_are_chosen_by_slurm_job_then_by_log_then_all(tmp_path: Path) -> None:
    with launched(tmp_path, 1, {"SLURM_JOB_ID": "4242"}) as (proc, _):
        everyone = find_agents()
        assert [a.pid for a in choose_agents(everyone, job="4242")[0]] == [proc.pid]
        assert choose_agents(everyone, job="4243")[0] == []
        others = tmp_path / "other.log"
        others.touch()
        chosen, how = choose_agents(everyone, [str(others)])
        assert proc.pid in [a.pid for a in chosen] and "none writes to the log" in how


@needs_pyspy
def test_collects_each_ranks_raw_stack_and_a_stopped_one_stays_stopped(tmp_path: Path) -> None:
    out = tmp_path / "evidence"
    with launched(tmp_path) as (_, log):
        agents = choose_agents(find_agents(), [str(log)])[0]
        stopped = rank_processes(agents)[2]
        os.kill(stopped.pid, signal.SIGSTOP)
        while rank_processes(agents)[2].state != "T":
            time.sleep(0.05)
        assert PYSPY is not None
        node = collect_node(out, Tools(PYSPY, None), [str(log)])
        assert rank_processes(agents)[2].state == "T", "collecting resumed a stopped process"
    assert [(r.rank, r.state, r.pyspy_error) for r in node.ranks] == [
        (10, "S", None),
        (11, "S", None),
        (12, "T", None),
    ]
    for r in node.ranks:
        assert r.pyspy == f"pyspy-{r.host}-rank{r.rank}.txt"
        text = (out / r.pyspy).read_text()
        assert text.startswith(f"Process {r.pid}: "), text  # py-spy's own output, no header
        assert "wait_in_collective (<string>:" in text, text
        assert r.status == f"status-{r.host}-rank{r.rank}.status"
        status = (out / r.status).read_text()
        assert f"\nPid:\t{r.pid}\n" in status  # /proc/PID/status, copied
        assert ("\nState:\tT (stopped)\n" in status) == (r.rank == 12), status
    assert node.warnings == ()


def test_missing_pyspy_is_a_warning_and_states_are_still_recorded(tmp_path: Path) -> None:
    with launched(tmp_path, 2) as (_, log):
        node = collect_node(tmp_path / "ev", Tools(None, None), [str(log)])
    assert [(r.rank, r.pyspy, r.state) for r in node.ranks] == [(10, None, "S"), (11, None, "S")]
    assert len(node.warnings) == 1 and "py-spy not found" in node.warnings[0]
    assert not list((tmp_path / "ev").glob("pyspy-*"))


def test_the_collection_on_a_machine_is_bounded_in_time(tmp_path: Path) -> None:
    none_left = Limits(node_s=0)
    with launched(tmp_path, 2) as (_, log):
        node = collect_node(tmp_path / "ev", Tools(PYSPY, None), [str(log)], limits=none_left)
    assert [r.pyspy for r in node.ranks] == [None, None]
    assert all("not collected: the collection's 0 s were spent" in (r.pyspy_error or "")
               for r in node.ranks)  # fmt: skip


def test_a_flight_recorder_server_that_does_not_answer_is_waited_for_boundedly(
    tmp_path: Path,
) -> None:
    env = {"TORCH_WORKER_SERVER_SOCKET": str(tmp_path / "ws-"), "TORCH_FR_BUFFER_SIZE": "100"}
    with launched(tmp_path, 2, env) as (_, log):
        t0 = time.monotonic()
        node = collect_node(tmp_path / "ev", Tools(None, None), [str(log)], limits=Limits(fr_s=1))
        took = time.monotonic() - t0
    assert took < 5, took
    assert [r.flight_recorder for r in node.ranks] == [(), ()]
    for r in node.ranks:
        assert r.fr_error == f"no answer from {tmp_path}/ws-{r.local_rank} in 1 s: timed out"
    assert any("Flight Recorder of rank 10 (pid" in w for w in node.warnings), node.warnings


def test_a_recorded_flight_recorder_without_a_server_is_a_warning(tmp_path: Path) -> None:
    with launched(tmp_path, 2, {"TORCH_FR_BUFFER_SIZE": "100"}) as (_, log):
        node = collect_node(tmp_path / "ev", Tools(None, None), [str(log)])
    assert [r.fr_error for r in node.ranks] == [NO_SERVER, NO_SERVER]
    (fr,) = [w for w in node.warnings if "Flight Recorder" in w]
    assert "Flight Recorder of rank 10 (pid" in fr and ", rank 11 (pid" in fr  # one line


def test_a_dump_the_rank_wrote_is_copied(tmp_path: Path) -> None:
    with launched(tmp_path, 2, {"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr-")}) as (_, log):
        node = collect_node(tmp_path / "ev", Tools(None, None), [str(log)])
    for r in node.ranks:
        assert r.flight_recorder == (f"fr-{r.host}-rank{r.rank}.pickle",) and r.fr_error is None
        text = (tmp_path / "ev" / r.flight_recorder[0]).read_text()
        assert text == f"trace of {r.rank}"


def test_find_tools_looks_beside_the_python_too(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_tools(path=str(empty), beside=str(tmp_path / "python")) == Tools(None, None)
    (tmp_path / "py-spy").write_text("#!/bin/sh\n")
    (tmp_path / "py-spy").chmod(0o755)
    found = find_tools(path=str(empty), beside=str(tmp_path / "python"))
    assert found.pyspy == str(tmp_path / "py-spy") and found.srun is None


def test_a_program_past_its_time_is_killed() -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    t0 = time.monotonic()
    ran = run_bounded([sleep, "30"], 0.5, 1000)
    assert ran.code is None and time.monotonic() - t0 < 5


def test_output_past_the_cap_is_cut_and_the_program_stopped() -> None:
    yes = shutil.which("yes")
    assert yes is not None
    t0 = time.monotonic()
    ran = run_bounded([yes, "evidence"], 30, 100_000)
    assert ran.truncated and len(ran.out) == 100_000 and time.monotonic() - t0 < 5
    assert ran.out.startswith(b"evidence\nevidence\n")
    ok = run_bounded([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"], 30, 100)
    assert (ok.code, ok.out, ok.truncated) == (3, b"x\n", False)


def test_a_job_without_srun_is_a_warning_and_collected_here(tmp_path: Path) -> None:
    with launched(tmp_path, 1, {"SLURM_JOB_ID": "777"}) as (_, log):
        ev = collect(tmp_path / "reports", [str(log)], Tools(PYSPY, None), job="777")
    assert ev.folder.parent == tmp_path / "reports" and ev.folder.name.startswith("hang-777-")
    assert "srun not found" in ev.warnings[0]
    assert [r.rank for r in ev.ranks] == [10]
    doc = json.loads((ev.folder / "collect.json").read_text())
    assert doc["job"] == "777" and doc["ranks"][0]["rank"] == 10 and doc["stopped_ranks"] == []
    (r,) = ev.ranks
    written = {n for n in (r.pyspy, r.status) if n}
    assert {p.name for p in ev.dumps()} == written and r.status in written  # not the manifest


def test_srun_runs_the_collection_once_per_node_of_the_job(tmp_path: Path) -> None:
    argv = srun_argv("/usr/bin/srun", "55", tmp_path, "/venv/bin/python")
    assert argv[:5] == ["/usr/bin/srun", "--overlap", "--jobid", "55", "--ntasks-per-node=1"]
    assert argv[-8:] == [
        "/venv/bin/python", "-m", "logscope", "collect-local", "--job", "55", "--out",
        str(tmp_path.resolve()),
    ]  # fmt: skip


def _hang() -> Alert:
    return Alert("A1", "hang", "hang", "No progress for 10 s", "", None, since_progress_s=10.0)


def test_a_hang_is_acted_on_after_collecting_even_without_pyspy(tmp_path: Path) -> None:
    switch = tmp_path / "stop-now"
    seen = tmp_path / "seen"
    warned: list[str] = []
    with launched(tmp_path, 1) as (_, log):
        spec = HangCollect(tmp_path / "reports", (str(log),), Tools(None, None))
        actions = Actions(
            command=f'{sys.executable} -c \'import os,sys; open(sys.argv[1], "w").write('
            f'os.environ["LOGSCOPE_EVIDENCE"])\' {seen}',
            kill_switch_path=switch,
            environ=dict(os.environ),
            hang_collect=spec,
            warn=warned.append,
        )
        results = actions.on_alert(_hang())
    assert [r.action for r in results] == ["collect", "kill-switch", "on-incident"]
    assert switch.exists() and results[2].ok, results
    folder = Path(seen.read_text())
    assert folder.parent == tmp_path / "reports" and (folder / "collect.json").is_file()
    assert str(folder) in results[0].detail and "0 stacks of 1 ranks" in results[0].detail
    assert len(warned) == 1 and "py-spy not found" in warned[0]


def test_a_crash_collects_nothing(tmp_path: Path) -> None:
    spec = HangCollect(tmp_path / "reports", (), Tools(None, None))
    crash = Alert("A1", "crash", "python_exception", "ValueError", "", None)
    assert Actions(hang_collect=spec).on_alert(crash) == []
    assert not (tmp_path / "reports").exists()


@needs_pyspy
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_refused_ptrace_is_a_warning(tmp_path: Path) -> None:
    """The collection run as `nobody` against root's processes: the kernel refuses ptrace."""
    shared = Path(tempfile.mkdtemp(prefix="logscope-ptrace-"))  # tmp_path's parent is 0700
    shared.chmod(0o777)
    out = shared / "ev"
    repo = Path(__file__).resolve().parents[1]
    nobody = [shutil.which("setpriv") or "setpriv", "--reuid=65534", "--regid=65534"]
    argv = [*nobody, "--clear-groups", sys.executable, "-m", "logscope", "collect-local"]
    env = {**os.environ, "PYTHONPATH": str(repo), "PATH": str(Path(PYSPY or "").parent)}
    probe = subprocess.run(
        [*nobody, "--clear-groups", sys.executable, "-c", "import logscope"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        shutil.rmtree(shared, ignore_errors=True)
        # a clone under a private directory (mktemp -d, a 0700 home): `nobody` cannot run it
        skip_or_fail(f"user nobody cannot run logscope from {repo}: {probe.stderr.strip()}")
    with launched(tmp_path, 1) as (proc, _):
        ran = subprocess.run(
            [*argv, "--out", str(out)], capture_output=True, text=True, timeout=60, env=env
        )
    shutil.rmtree(shared, ignore_errors=True)
    assert ran.stdout.startswith("{"), ran.stderr
    doc = json.loads(ran.stdout)
    ours = [r for r in doc["ranks"] if r["agent_pid"] == proc.pid]
    assert len(ours) == 1 and ours[0]["rank"] is None and ours[0]["pyspy"] is None, doc
    assert "permission denied" in ours[0]["pyspy_error"].lower()
    assert any("ptrace not permitted" in w for w in doc["warnings"]), doc["warnings"]


def test_the_culprit_is_the_analysis_of_the_log_and_the_evidence(tmp_path: Path) -> None:
    """What analyze names from the log and the folder together is what the alert says."""
    hung = Path(__file__).parent / "fixtures" / "lab" / "hang_rank1.log"
    (tmp_path / "ev").mkdir()
    (tmp_path / "ev" / "collect.json").write_text("{}\n")
    ev = Evidence(tmp_path / "ev", None, (), ())
    named = name_culprit((str(hung),), ev)
    assert named is not None and named.ok and named.detail.startswith("rank 1: "), named
    healthy = Path(__file__).parent / "fixtures" / "lab" / "healthy.log"
    assert name_culprit((str(healthy),), ev) is None


def test_the_logs_a_collection_matches_are_the_files_tail_follows(tmp_path: Path) -> None:
    nested = tmp_path / "logs" / "node1" / "rank0.out"
    nested.parent.mkdir(parents=True)
    nested.write_text("x\n")
    (tmp_path / "logs" / ".hidden").write_text("x\n")
    literal = tmp_path / "run[1].log"  # a file whose name looks like a glob
    literal.write_text("x\n")
    (tmp_path / "run1.log").write_text("x\n")
    assert log_files([str(tmp_path / "logs")]) == [str(nested)]
    assert log_files([str(literal)]) == [str(literal)]
    assert log_files([str(tmp_path / "run?.log")]) == [str(tmp_path / "run1.log")]


def test_a_nodes_part_of_the_manifest_reads_back_as_it_was_written() -> None:
    rank = RankEvidence(
        "n1", 12, 10, 3, 1, 8, "T", "stopped", None, "permission denied", ("fr-n1-rank3.json",),
        fr_error="no answer", status="status-n1-rank3.status",
    )  # fmt: skip
    node = NodeEvidence("n1", "SLURM job 5", (rank, replace(rank, pid=13, rank=None)), ("w",))
    doc = json.loads(json.dumps(node.doc()))
    assert doc["ranks"][0]["flight_recorder"] == ["fr-n1-rank3.json"]
    assert doc["ranks"][0]["world_size"] == 8 and doc["type"] == "logscope-collect-node"
    assert node_from_doc(doc) == node
