"""Real end-to-end: `logscope tail` follows a live SLURM job (srun --label + torchrun, 4 CPU ranks,
gloo) and acts on it while it runs.

- a rank hangs (process-group timeout far beyond the job's time limit): logscope raises a `hang`
  after `--stall-after 5s`, runs `scancel $SLURM_JOB_ID` (no shell), and the job ends CANCELLED
  long before its time limit;
- a rank raises: the crash incident arrives within 2 s of the exception line being written;
- a healthy job and one with a slow checkpoint save: no incident.

The test times every line of the job's output itself (a tight poll of the file) and every line
logscope prints, and prints the measured latencies (`pytest -s`).

Needs a single-node SLURM (`.ci/slurm-up.sh` brings one up; `.ci/run` runs it, a test never does)
and torch in $LAB_PYTHON or this interpreter. Skipped with the reason when either is missing,
except under CI (CI=true), where that is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

LAB_DIR = Path(__file__).resolve().parent / "lab"
REPO = LAB_DIR.parent.parent
sys.path.insert(0, str(LAB_DIR))
from run_faults import job_env, torchrun_cmd  # noqa: E402
from run_slurm import job_in_queue, job_state  # noqa: E402

from .helpers import skip_or_fail  # noqa: E402

LAB_PYTHON = os.environ.get("LAB_PYTHON") or sys.executable
LOGSCOPE = [sys.executable, "-m", "logscope"]
TIME_LIMIT = "00:05:00"
TIME_LIMIT_S = 300
STALL_S = 5.0
ITERATION_RE = re.compile(r"\biteration\s+(\d+)/\s*\d+ \|")
SAVED_RE = re.compile(r"successfully saved checkpoint at iteration\s+(\d+)")
SAVE_EDGES_RE = re.compile(r"(saving|successfully saved) checkpoint at iteration")

pytestmark = [pytest.mark.slurm, pytest.mark.lab, pytest.mark.slow]


# -- is there a SLURM to talk to? ------------------------------------------------------------


def _node_up() -> bool:
    try:
        r = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and any(
        s.rstrip("*") in ("idle", "mix", "alloc") for s in r.stdout.split()
    )


def _why_no_slurm() -> str | None:
    """None when a job can run here; otherwise why not."""
    torch = subprocess.run(
        [LAB_PYTHON, "-c", "import torch"], capture_output=True, text=True, check=False
    )
    if torch.returncode != 0:
        return f"torch not importable by {LAB_PYTHON} (set LAB_PYTHON or pip install -e '.[lab]')"
    if shutil.which("sbatch") and _node_up():
        return None
    return "no SLURM node answers (as root, bash .ci/slurm-up.sh brings one up; .ci/run does)"


@pytest.fixture(scope="module")
def slurm() -> None:
    reason = _why_no_slurm()
    if reason is None:
        return
    print(f"\n[slurm-e2e] cannot run a SLURM lab job: {reason}", file=sys.stderr)
    skip_or_fail(f"cannot run a SLURM lab job: {reason}")


# -- timing what is written and what logscope says ---------------------------------------------


@dataclass
class FileTimer:
    """Polls a file every few ms; stamps each complete line with the wall time it appeared."""

    path: Path
    poll_s: float = 0.005
    lines: list[tuple[float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> FileTimer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        pending = b""
        fh = None
        try:
            while not self._stop.is_set():
                if fh is None:
                    try:
                        fh = self.path.open("rb")
                    except FileNotFoundError:
                        time.sleep(self.poll_s)
                        continue
                data = fh.read()
                now = time.time()
                if not data:
                    time.sleep(self.poll_s)
                    continue
                pending += data
                *complete, pending = pending.split(b"\n")
                self.lines.extend((now, b.decode("utf-8", "replace")) for b in complete)
        finally:
            if fh is not None:
                fh.close()

    def matching(self, pattern: re.Pattern[str]) -> list[tuple[float, str]]:
        return [(t, line) for t, line in list(self.lines) if pattern.search(line)]

    def quiet_for(self, seconds: float) -> bool:
        return not self.lines or time.time() - self.lines[-1][0] >= seconds


@dataclass
class Tail:
    """A running `logscope tail ... --json`; every stdout line is stamped when read."""

    proc: subprocess.Popen[str]
    out: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    @classmethod
    def start(cls, args: list[str], env: dict[str, str]) -> Tail:
        proc = subprocess.Popen(
            [*LOGSCOPE, "tail", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=REPO,
        )
        tail = cls(proc)
        tail.threads = [
            threading.Thread(target=tail._read_out, daemon=True),
            threading.Thread(target=tail._read_err, daemon=True),
        ]
        for t in tail.threads:
            t.start()
        return tail

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            now = time.time()
            try:
                self.out.append((now, json.loads(line)))
            except json.JSONDecodeError:
                self.out.append((now, {"type": "unparsed", "text": line}))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def wait(self, timeout: float) -> int | None:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        for t in self.threads:
            t.join(5)
        return code

    def interrupt(self, timeout: float = 15) -> int | None:
        """Stop it like Ctrl-C; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def incidents(self) -> list[tuple[float, dict[str, Any]]]:
        return [(t, d) for t, d in list(self.out) if d.get("type") == "incident"]

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [d for _, d in list(self.out) if d.get("type") == "event" and d.get("kind") == kind]

    def report(self) -> str:
        unparsed = [d["text"] for _, d in self.out if d.get("type") == "unparsed"]
        incidents = [json.dumps(d) for _, d in self.incidents()]
        return "\n".join(
            [f"exit={self.proc.poll()}", "stderr:", *self.err[-20:], "incidents:", *incidents]
            + (["unparsed stdout:", *unparsed[-10:]] if unparsed else [])
        )


# -- SLURM jobs --------------------------------------------------------------------------------


def _sbatch_held(name: str, workdir: Path, out_file: Path, lab_env: dict[str, str]) -> int:
    """Submit the lab job on hold (released once logscope watches); returns the job id."""
    env = job_env(workdir, lab_env)
    inner = ["srun", "--label", "--kill-on-bad-exit=1", *torchrun_cmd(LAB_PYTHON)]
    cmd = [
        "sbatch",
        "--parsable",
        "--hold",
        f"--job-name=e2e-{name}",
        f"--time={TIME_LIMIT}",
        f"--output={out_file}",
        f"--chdir={workdir}",
        "--export=ALL",
        "--wrap",
        shlex.join(inner),  # our own paths and flags only, never log text
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir, check=False)
    assert r.returncode == 0, f"sbatch failed: {r.stderr.strip()}"
    return int(r.stdout.strip().split(";")[0])


def _wait_gone(job_id: int, timeout: float) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not job_in_queue(job_id):
            return True
        time.sleep(0.5)
    return False


@dataclass
class Run:
    job_id: int
    out_file: Path
    timer: FileTimer
    tail: Tail
    released_at: float


@contextlib.contextmanager
def lab_job(
    tmp_path: Path, name: str, lab_env: dict[str, str], tail_args: list[str]
) -> Iterator[Run]:
    """Submit a held job, start `logscope tail` on its (not yet existing) output, release the
    job; on the way out stop logscope, scancel the job if still queued, stop the file timer."""
    tmp_path.chmod(0o755)
    out_file = tmp_path / f"{name}-job.out"
    job_id = _sbatch_held(name, tmp_path, out_file, lab_env)
    tail = timer = None
    try:
        env = {**os.environ, "SLURM_JOB_ID": str(job_id)}
        # a glob: the file does not exist yet, and files that appear later are read from the start
        tail = Tail.start([str(tmp_path / f"{name}-*.out"), *tail_args], env)
        deadline = time.time() + 30
        while time.time() < deadline and tail.proc.poll() is None:
            if any("no file matches yet" in e for e in tail.err):
                break  # its first poll round ran
            time.sleep(0.05)
        assert tail.proc.poll() is None, f"logscope tail exited at once:\n{tail.report()}"
        timer = FileTimer(out_file).start()
        subprocess.run(["scontrol", "release", str(job_id)], check=True, capture_output=True)
        yield Run(job_id, out_file, timer, tail, time.time())
    finally:
        if tail is not None:
            tail.kill()
        if job_in_queue(job_id):
            subprocess.run(["scancel", str(job_id)], check=False, capture_output=True)
            _wait_gone(job_id, 30)
        if timer is not None:
            timer.stop()


def _wait_job_done(run: Run, timeout: float) -> None:
    """The job left the queue and its output file stopped growing."""
    assert _wait_gone(run.job_id, timeout), f"job {run.job_id} still queued after {timeout} s"
    deadline = time.time() + 10
    while time.time() < deadline and not run.timer.quiet_for(1.0):
        time.sleep(0.1)


def _one_incident(run: Run) -> tuple[float, dict[str, Any]]:
    incidents = run.tail.incidents()
    assert len(incidents) == 1, run.tail.report()
    return incidents[0]


# -- the tests ---------------------------------------------------------------------------------


def test_hang_is_cancelled_by_logscope_long_before_the_time_limit(
    slurm: None, tmp_path: Path
) -> None:
    lab_env = {
        "LAB_FAULT": "hang",
        "LAB_FAULT_RANK": "1",
        "LAB_FAULT_ITER": "17",
        "LAB_PG_TIMEOUT": "3600",
        "LAB_ITERS": "1000",
    }
    args = [
        "--stall-after",
        f"{STALL_S:g}s",
        "--on-incident",
        "scancel $SLURM_JOB_ID",
        "--exit-on-incident",
        "--json",
        "--max-duration",
        "150s",
    ]
    with lab_job(tmp_path, "hang", lab_env, args) as run:
        code = run.tail.wait(160)
        t_exit = time.time()
        assert code == 1, run.tail.report()
        t_incident, inc = _one_incident(run)
        assert _wait_gone(run.job_id, 60), f"job {run.job_id} still queued 60 s after scancel"
        t_gone = time.time()
        state = job_state(run.job_id)
        time.sleep(1)  # the last lines slurmstepd writes (CANCELLED banner)
        iterations = run.timer.matching(ITERATION_RE)
        saved = run.timer.matching(SAVED_RE)
        text = run.out_file.read_text(errors="replace")

    assert iterations, f"no iteration line in the job output:\n{text[-3000:]}"
    t_last, last_line = iterations[-1]
    last_it = int(ITERATION_RE.search(last_line).group(1))
    last_ckpt = int(SAVED_RE.search(saved[-1][1]).group(1)) if saved else None
    latency = t_incident - t_last
    print(
        f"\n[slurm-e2e] hang: job {run.job_id} last iteration {last_it} written "
        f"{t_last - run.released_at:.1f} s after release; incident {latency:.2f} s later "
        f"(since_progress_s={inc['since_progress_s']}, --stall-after {STALL_S:g}s); "
        f"logscope exited {t_exit - t_incident:.2f} s after the incident; job left the queue "
        f"{t_gone - t_incident:.1f} s after the incident, {t_gone - run.released_at:.0f} s after "
        f"release; state {state}"
    )
    assert (last_it, last_ckpt) == (16, 10), (last_it, last_ckpt)
    assert inc["kind"] == "hang", inc
    assert inc["iteration"] == last_it, inc
    assert inc["last_checkpoint_iteration"] == last_ckpt, inc
    assert [a["action"] for a in inc["actions"]] == ["on-incident"], inc
    assert inc["actions"][0]["ok"], inc
    assert latency <= STALL_S + 5, f"hang detected {latency:.2f} s after the last progress line"
    assert latency >= STALL_S - 0.5, f"hang called after only {latency:.2f} s of silence"
    assert state == "CANCELLED", state
    assert t_gone - run.released_at < TIME_LIMIT_S / 3, "not long before the time limit"
    assert "DUE TO TIME LIMIT" not in text
    assert re.search(rf"\*\*\* JOB {run.job_id} ON \S+ CANCELLED AT", text), text[-2000:]


def test_crash_is_raised_within_two_seconds(slurm: None, tmp_path: Path) -> None:
    lab_env = {"LAB_FAULT": "raise", "LAB_FAULT_RANK": "1", "LAB_FAULT_ITER": "17"}
    args = ["--exit-on-incident", "--json", "--max-duration", "150s"]
    with lab_job(tmp_path, "crash", lab_env, args) as run:
        code = run.tail.wait(160)
        assert code == 1, run.tail.report()
        t_incident, inc = _one_incident(run)
        time.sleep(0.5)  # let the timer catch up with what was written meanwhile
        raised = run.timer.matching(re.compile(r"\[rank1\]: ValueError: injected fault"))
        _wait_gone(run.job_id, 30)
        state = job_state(run.job_id)
        text = run.out_file.read_text(errors="replace")

    assert raised, f"no ValueError line in the job output:\n{text[-3000:]}"
    t_raised, _ = raised[0]
    latency = t_incident - t_raised
    print(
        f"\n[slurm-e2e] crash: job {run.job_id} ValueError line written "
        f"{t_raised - run.released_at:.1f} s after release; incident {latency:.2f} s later; "
        f"root cause {(inc['root_cause'] or {}).get('text')!r}; job state {state}"
    )
    assert inc["kind"] == "crash", inc
    assert inc["category"] == "python_exception", inc
    assert inc["rank"] == 1, inc
    assert "ValueError: injected fault at iteration 17" in inc["root_cause"]["text"], inc
    assert latency <= 2.0, f"crash incident {latency:.2f} s after the ValueError line"


@pytest.mark.parametrize(
    ("case", "lab_env", "stall"),
    [
        ("healthy", {"LAB_FAULT": "none", "LAB_ITERS": "40"}, None),
        # an 8 s checkpoint save with --stall-after 3s: the save phase allows more
        ("slowsave", {"LAB_FAULT": "none", "LAB_ITERS": "20", "LAB_SAVE_SLEEP": "8"}, "3s"),
    ],
)
def test_no_false_alarm(
    slurm: None, tmp_path: Path, case: str, lab_env: dict[str, str], stall: str | None
) -> None:
    args = ["--json", "--max-duration", "150s"]
    if stall is not None:
        args += ["--stall-after", stall]
    total = int(lab_env["LAB_ITERS"])
    with lab_job(tmp_path, case, lab_env, args) as run:
        _wait_job_done(run, 150)
        assert run.tail.proc.poll() is None, f"logscope stopped early:\n{run.tail.report()}"
        # the job is over: give logscope a few polls for the last lines, then stop it
        deadline = time.time() + 10
        while time.time() < deadline and not any(
            e["fields"].get("iteration") == str(total) for e in run.tail.events("iteration")
        ):
            time.sleep(0.2)
        time.sleep(1)
        code = run.tail.interrupt()
        state = job_state(run.job_id)
        iterations = run.timer.matching(ITERATION_RE)
        saves = run.timer.matching(SAVE_EDGES_RE)

    pauses = [b[0] - a[0] for a, b in zip(saves[::2], saves[1::2], strict=False)]
    print(
        f"\n[slurm-e2e] {case}: job {run.job_id} state {state}, {len(iterations)} iteration lines, "
        f"checkpoint saves took {', '.join(f'{p:.1f}' for p in pauses)} s, "
        f"incidents {len(run.tail.incidents())}, logscope exit {code}"
    )
    assert state == "COMPLETED", state
    assert len(iterations) == total
    seen = [int(e["fields"]["iteration"]) for e in run.tail.events("iteration")]
    assert seen == list(range(1, total + 1)), "logscope did not see every iteration line"
    if "LAB_SAVE_SLEEP" in lab_env:
        # (the lines pass through torchrun's tee and srun: a few 100 ms of jitter)
        assert pauses and min(pauses) >= float(lab_env["LAB_SAVE_SLEEP"]) - 0.5, pauses
    hangs = [d for _, d in run.tail.incidents() if d["kind"] == "hang"]
    assert not hangs, run.tail.report()
    assert not run.tail.incidents(), run.tail.report()
    assert code == 0, run.tail.report()


def test_no_hang_after_the_job_completed(slurm: None, tmp_path: Path) -> None:
    lab_env = {"LAB_FAULT": "none", "LAB_ITERS": "12"}
    args = ["--json", "--max-duration", "150s", "--stall-after", f"{STALL_S:g}s"]
    with lab_job(tmp_path, "finished", lab_env, args) as run:
        _wait_job_done(run, 150)
        t_done = run.timer.lines[-1][0] if run.timer.lines else time.time()
        while time.time() < t_done + STALL_S + 3 and run.tail.proc.poll() is None:
            time.sleep(0.2)
        code = run.tail.interrupt()
        state = job_state(run.job_id)
        text = run.out_file.read_text(errors="replace")
    during = [d for t, d in run.tail.incidents() if t <= t_done]
    after = [(t - t_done, d) for t, d in run.tail.incidents() if t > t_done]
    print(
        f"\n[slurm-e2e] finished: job {run.job_id} state {state}; incidents while it ran "
        f"{len(during)}, after its last line {[(round(t, 1), d['title']) for t, d in after]}; "
        f"logscope exit {code}"
    )
    # preconditions (a failure here is a real failure, not the expected one)
    if state != "COMPLETED" or "[after training is done]" not in text or during:
        pytest.fail(f"precondition: state {state}\n{run.tail.report()}", pytrace=False)
    assert not after, f"hang raised after the job completed: {after}"
    assert code == 0


def test_hang_evidence_is_collected_on_the_jobs_nodes_before_it_is_cancelled(
    slurm: None, tmp_path: Path
) -> None:
    """`--on-hang collect` on a SLURM job's output: logscope finds the job by its output file,
    runs `srun --overlap` on its nodes for every rank's py-spy stack, then cancels it."""
    lab_env = {"LAB_FAULT": "hang", "LAB_FAULT_RANK": "1", "LAB_FAULT_ITER": "17",
               "LAB_PG_TIMEOUT": "3600", "LAB_ITERS": "1000"}  # fmt: skip
    reports = tmp_path / "reports"
    args = ["--stall-after", f"{STALL_S:g}s", "--on-hang", "collect", "--out", str(reports),
            "--on-incident", "scancel $SLURM_JOB_ID", "--exit-on-incident", "--json",
            "--max-duration", "150s"]  # fmt: skip
    with lab_job(tmp_path, "collect", lab_env, args) as run:
        code = run.tail.wait(160)
        assert code == 1, run.tail.report()
        t_incident, inc = _one_incident(run)
        assert _wait_gone(run.job_id, 60), f"job {run.job_id} still queued 60 s after scancel"
        state = job_state(run.job_id)
        t_last = run.timer.matching(ITERATION_RE)[-1][0]
    latency = t_incident - t_last
    print(f"\n[slurm-e2e] collect: incident {latency:.1f} s after the last progress line; "
          f"{inc['actions'][0]['detail']}; stderr {run.tail.err}")  # fmt: skip
    assert [a["action"] for a in inc["actions"]] == ["collect", "on-incident"], inc
    assert inc["actions"][0]["ok"] and inc["actions"][1]["ok"], inc
    (folder,) = reports.glob(f"hang-{run.job_id}-*")
    manifest = json.loads((folder / "collect.json").read_text())
    assert manifest["job"] == str(run.job_id)
    assert manifest["warnings"] == [], manifest["warnings"]  # srun ran: no fallback to here
    assert [n["chosen"] for n in manifest["nodes"]] == [f"SLURM job {run.job_id}"]
    assert [r["rank"] for r in manifest["ranks"]] == [0, 1, 2, 3]
    parts = [f"collect-{n['host']}.json" for n in manifest["nodes"]]
    assert [p.name for p in folder.glob("collect-*.json")] == parts  # each node's own part
    for r in manifest["ranks"]:
        text = (folder / f"pyspy-{r['host']}-rank{r['rank']}.txt").read_text()
        assert text.startswith(f"Process {r['pid']}: ")
        assert ("inject_fault" in text) == (r["rank"] == 1), text
    assert latency <= STALL_S + 30, f"incident {latency:.1f} s after the last progress line"
    assert state == "CANCELLED", state
