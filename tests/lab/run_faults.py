#!/usr/bin/env python3
"""Run tests/lab/train.py under torchrun with injected faults and write scrubbed logs.

    python tests/lab/run_faults.py --out tests/fixtures/lab [scenario ...]

Each scenario runs as

    <python> -m torch.distributed.run --nproc_per_node 4 --tee 3 tests/lab/train.py

with stdout+stderr merged into ``<out>/<scenario>.log``, in a fresh temporary working
directory, under a hard wall-clock timeout (the whole process group is killed on overrun).
The log is then scrubbed of machine-specific strings (temp dir, venv, repo path, hostname);
PIDs, ports and times are kept as they are.

``<python>`` is the current interpreter unless ``--python`` / env ``LAB_PYTHON`` says
otherwise (it must have torch installed).  Stdlib only, so it can be imported by pytest:
``run_scenario(name, out_dir, timeout_s) -> Path``.
"""

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAB_DIR = Path(__file__).resolve().parent
REPO_DIR = LAB_DIR.parent.parent
TRAIN_PY = LAB_DIR / "train.py"

# Placeholders used in the scrubbed logs.
JOB_DIR_PLACEHOLDER = "/work/job"
VENV_PLACEHOLDER = "/opt/lab/venv"
BASE_PYTHON_PLACEHOLDER = "/opt/lab/python"
REPO_PLACEHOLDER = "/opt/lab/logscope"
HOST_PLACEHOLDER = "node01"

# LAB_* environment per scenario (see train.py for the meaning of each knob).
SCENARIOS = {
    "healthy": {"LAB_FAULT": "none"},
    "raise_rank1": {"LAB_FAULT": "raise", "LAB_FAULT_RANK": "1", "LAB_FAULT_ITER": "17"},
    "sigkill_rank2": {"LAB_FAULT": "sigkill", "LAB_FAULT_RANK": "2", "LAB_FAULT_ITER": "17"},
    "segv_rank3": {"LAB_FAULT": "segv", "LAB_FAULT_RANK": "3", "LAB_FAULT_ITER": "17"},
    "hang_rank1": {
        "LAB_FAULT": "hang",
        "LAB_FAULT_RANK": "1",
        "LAB_FAULT_ITER": "17",
        "LAB_PG_TIMEOUT": "15",
    },
    # rank 1 sleeps, PG timeout far away: the job just sits.  The runner kills it (SIGKILL to
    # the whole process group) after SCENARIO_WALL_S seconds, so the log simply stops.
    "hang_all_rank1": {
        "LAB_FAULT": "hang_all",
        "LAB_FAULT_RANK": "1",
        "LAB_FAULT_ITER": "17",
        "LAB_PG_TIMEOUT": "3600",
    },
    # fail-slow and training health: nothing stops, the log says what it cost
    "slow_rank1": {
        "LAB_FAULT": "slow",
        "LAB_FAULT_RANK": "1",
        "LAB_FAULT_ITER": "31",
        "LAB_ITERS": "70",
        "LAB_SLOW_S": "0.03",
        "LAB_SAVE_INTERVAL": "0",
    },
    "nan_rank2": {"LAB_FAULT": "nan", "LAB_FAULT_RANK": "2", "LAB_FAULT_ITER": "25"},
}
# scenarios that are *expected* to be killed by the wall clock, and after how long
SCENARIO_WALL_S = {"hang_all_rank1": 45}
COMMON_ENV = {
    "LAB_ITERS": "40",
    "LAB_ITER_SLEEP": "0.25",
    "LAB_SAVE_INTERVAL": "10",
    "LAB_PG_TIMEOUT": "15",
}
DEFAULT_TIMEOUT_S = 150


def lab_python():
    return os.environ.get("LAB_PYTHON") or sys.executable


def python_prefixes(python):
    """(sys.prefix, sys.base_prefix) of the interpreter that will run torchrun
    (the venv root and the base installation, e.g. /root/.pyenv/versions/3.11.7)."""
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    prefix, base = out.stdout.split("\n")[:2]
    return prefix.strip(), base.strip()


def scrub_text(text, replacements, hostname=None):
    """Replace machine-specific paths (longest first) and the hostname."""
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        if old and old != "/":
            text = text.replace(old, new)
    for host in {hostname or socket.gethostname(), socket.getfqdn()}:
        if not host or host in ("localhost", HOST_PLACEHOLDER):
            continue
        # SLURM's program prefix "slurmstepd-<host>:", then whole-token matches only
        # (a short hostname such as "vm" must not hit "vmalloc")
        text = text.replace(f"slurmstepd-{host}", f"slurmstepd-{HOST_PLACEHOLDER}")
        text = re.sub(r"(?<![\w-])" + re.escape(host) + r"(?![\w-])", HOST_PLACEHOLDER, text)
    return text


def path_replacements(workdir, python):
    repl = {}
    prefix, base = python_prefixes(python)
    if base not in ("/usr", "/usr/local"):  # standard locations are not machine-specific
        for p in {base, os.path.realpath(base)}:
            repl[p] = BASE_PYTHON_PLACEHOLDER
    for p in {prefix, os.path.realpath(prefix)}:
        repl[p] = VENV_PLACEHOLDER
    for p in {str(REPO_DIR), os.path.realpath(REPO_DIR)}:
        repl[p] = REPO_PLACEHOLDER
    for p in {str(workdir), os.path.realpath(workdir)}:
        repl[p] = JOB_DIR_PLACEHOLDER
    return repl


def _descendants(pid):
    """PIDs of all descendants of pid (Linux /proc).  torchrun starts every worker in its own
    session, so killing the agent's process group alone would leave the workers running."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(proc):
    """SIGKILL the launcher's process group and every descendant (workers included)."""
    victims = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def job_env(workdir, *overrides):
    """The environment of a lab job: this one's, less anything a launcher or an earlier job
    set (LAB_*, torchelastic, SLURM), plus COMMON_ENV and the overrides."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LAB_", "TORCHELASTIC_", "MASTER_", "OMP_", "SLURM_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    }
    env.update(COMMON_ENV)
    for o in overrides:
        env.update(o)
    env["LAB_CKPT_DIR"] = str(Path(workdir) / "checkpoints")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def torchrun_cmd(python):
    """torchrun with 4 CPU workers and `--tee 3`, running the lab's train.py."""
    return [
        python, "-m", "torch.distributed.run", "--nproc_per_node", "4", "--tee", "3",
        str(TRAIN_PY),
    ]  # fmt: skip


def run_scenario(name, out_dir, timeout_s=DEFAULT_TIMEOUT_S, python=None, extra_env=None):
    """Run one scenario, write the scrubbed log to out_dir/<name>.log and return its path."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    python = python or lab_python()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / f"{name}.log"

    workdir = Path(tempfile.mkdtemp(prefix=f"lab_{name}_"))
    env = job_env(workdir, SCENARIOS[name], extra_env or {})
    cmd = torchrun_cmd(python)
    expect_kill = name in SCENARIO_WALL_S
    if expect_kill:
        timeout_s = min(timeout_s, SCENARIO_WALL_S[name])
    raw_path = workdir / "raw.log"
    t0 = time.time()
    with raw_path.open("wb") as raw:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdout=raw,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            rc = proc.wait()
            print(
                f"[run_faults] {name}: wall-clock timeout after {timeout_s}s, killed"
                + (" (expected)" if expect_kill else ""),
                file=sys.stderr,
            )
    elapsed = time.time() - t0

    text = raw_path.read_text(errors="replace")
    text = scrub_text(text, path_replacements(workdir, python))
    out_path.write_text(text)
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"[run_faults] {name}: rc={rc} elapsed={elapsed:.1f}s -> {out_path}", file=sys.stderr)
    return out_path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory for <scenario>.log")
    ap.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="hard wall-clock timeout per scenario (s)",
    )
    ap.add_argument(
        "--python",
        default=None,
        help="interpreter with torch (default: $LAB_PYTHON or this interpreter)",
    )
    ap.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    args = ap.parse_args(argv)
    for name in args.scenarios or list(SCENARIOS):
        run_scenario(name, args.out, args.timeout, python=args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
