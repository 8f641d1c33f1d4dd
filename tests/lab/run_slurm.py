#!/usr/bin/env python3
"""Run tests/lab/train.py as real SLURM batch jobs (srun --label + torchrun) and write
scrubbed .out files.  Needs a running single-node SLURM (.ci/slurm-up.sh).

    python tests/lab/run_slurm.py --out tests/fixtures/slurm [scenario ...]

Each scenario is submitted as

    sbatch --time=T --output=WORKDIR/job.out --wrap \
      "srun --label --kill-on-bad-exit=1 --wait=60 <python> -m torch.distributed.run \
           --nproc_per_node 4 --tee 3 <repo>/tests/lab/train.py"

with LAB_* settings passed through the environment (--export=ALL), from a fresh temporary
working directory.  The runner waits for the job to leave the queue (or scancels it for the
``scancel`` scenario), records the final state from ``sacct -c`` (job-completion text file,
there is no slurmdbd; falls back to ``scontrol show job``), then writes the scrubbed
output to ``<out>/<name>.out`` (same scrubbing as run_faults.py: hostname -> node01, temp dir
-> /work/job, venv -> /opt/lab/venv, repo -> /opt/lab/logscope).

Importable: ``run_slurm_scenario(name, out_dir, timeout_s) -> Path`` (the job's state is in
``LAST_STATES[name]``); ``run_two_attempts(out_dir, timeout_s) -> [Path, Path]``.
"""

import argparse
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_faults import (
    job_env,
    lab_python,
    path_replacements,
    scrub_text,
    torchrun_cmd,
)

# name -> (sbatch --time, LAB_* env, scancel_after_s or None)
SCENARIOS = {
    "healthy": ("00:05:00", {"LAB_FAULT": "none", "LAB_ITERS": "40"}, None),
    "crash_label": (
        "00:05:00",
        {"LAB_FAULT": "raise", "LAB_FAULT_RANK": "1", "LAB_FAULT_ITER": "17"},
        None,
    ),
    "crash_segv": (
        "00:05:00",
        {"LAB_FAULT": "segv", "LAB_FAULT_RANK": "3", "LAB_FAULT_ITER": "17"},
        None,
    ),
    # rank 1 sleeps forever, PG timeout far beyond the job's time limit: nobody notices
    "timelimit_hang": (
        "00:01:00",
        {
            "LAB_FAULT": "hang_all",
            "LAB_FAULT_RANK": "1",
            "LAB_FAULT_ITER": "17",
            "LAB_PG_TIMEOUT": "3600",
            "LAB_ITERS": "1000",
        },
        None,
    ),
    # healthy, still making progress when the time limit hits
    "timelimit_progress": ("00:01:00", {"LAB_FAULT": "none", "LAB_ITERS": "1000"}, None),
    # healthy long job, scancel'ed ~20 s after the first iteration line
    "scancel": ("00:10:00", {"LAB_FAULT": "none", "LAB_ITERS": "1000"}, 20.0),
}
DEFAULT_TIMEOUT_S = 300
LAST_STATES = {}
LAST_JOB_IDS = {}


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def job_state(job_id):
    """Final job state: sacct (job-completion file, `sacct -c`), then plain sacct, then scontrol."""
    for cmd in (
        ["sacct", "-c", "-j", str(job_id), "-X", "-n", "-o", "State"],
        ["sacct", "-j", str(job_id), "-X", "-n", "-o", "State"],
    ):
        r = _run(cmd)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.split()[0]
    r = _run(["scontrol", "show", "job", str(job_id)])
    m = re.search(r"JobState=(\S+)", r.stdout)
    return m.group(1) if m else "UNKNOWN"


def job_in_queue(job_id):
    r = _run(["squeue", "-h", "-j", str(job_id), "-o", "%T"])
    return r.returncode == 0 and r.stdout.strip() != ""


def submit(name, workdir, time_limit, lab_env, python, out_file):
    env = job_env(workdir, lab_env)
    inner = ["srun", "--label", "--kill-on-bad-exit=1", "--wait=60", *torchrun_cmd(python)]
    cmd = [
        "sbatch",
        "--parsable",
        f"--job-name=lab-{name}",
        f"--time={time_limit}",
        f"--output={out_file}",
        f"--chdir={workdir}",
        "--export=ALL",
        "--wrap",
        shlex.join(inner),
    ]
    r = _run(cmd, env=env, cwd=workdir)
    if r.returncode != 0:
        raise RuntimeError(f"sbatch failed: {r.stderr.strip()}")
    return int(r.stdout.strip().split(";")[0])


def wait_job(job_id, out_file, timeout_s, scancel_after_s=None):
    t0 = time.time()
    first_progress = None
    cancelled = False
    while job_in_queue(job_id):
        if scancel_after_s is not None and not cancelled:
            if (
                first_progress is None
                and out_file.exists()
                and " iteration " in out_file.read_text(errors="replace")
            ):
                first_progress = time.time()
            if first_progress is not None and time.time() - first_progress >= scancel_after_s:
                _run(["scancel", str(job_id)])
                cancelled = True
        if time.time() - t0 > timeout_s:
            _run(["scancel", str(job_id)])
            print(
                f"[run_slurm] job {job_id}: wall-clock timeout after {timeout_s}s, scancel'ed",
                file=sys.stderr,
            )
            t_kill = time.time()
            while job_in_queue(job_id) and time.time() - t_kill < 60:
                time.sleep(1)
            break
        time.sleep(1)
    time.sleep(2)  # let slurmstepd finish writing the output file / job record


def _scrub_out(raw, dest, workdir, python):
    text = raw.read_text(errors="replace")
    text = scrub_text(text, path_replacements(workdir, python))
    dest.write_text(text)


def run_slurm_scenario(name, out_dir, timeout_s=DEFAULT_TIMEOUT_S, python=None):
    """Submit one scenario, wait for it, write out_dir/<name>.out (scrubbed); return the path."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    time_limit, lab_env, scancel_after = SCENARIOS[name]
    python = python or lab_python()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"lab_slurm_{name}_"))
    workdir.chmod(0o755)
    raw = workdir / "job.out"
    t0 = time.time()
    job_id = submit(name, workdir, time_limit, lab_env, python, raw)
    wait_job(job_id, raw, timeout_s, scancel_after)
    state = job_state(job_id)
    LAST_STATES[name], LAST_JOB_IDS[name] = state, job_id
    dest = out_dir / f"{name}.out"
    _scrub_out(raw, dest, workdir, python)
    shutil.rmtree(workdir, ignore_errors=True)
    print(
        f"[run_slurm] {name}: job {job_id} state={state} elapsed={time.time() - t0:.0f}s -> {dest}",
        file=sys.stderr,
    )
    return dest


def run_two_attempts(out_dir, timeout_s=DEFAULT_TIMEOUT_S, python=None):
    """Attempt 1 crashes (ValueError on rank 1 at iteration 17, checkpoint at 10);
    attempt 2 resumes from the checkpoint (LAB_RESUME=1) and completes.  Both jobs share
    one working directory.  Writes out_dir/two_attempts/attempt{1,2}.out."""
    python = python or lab_python()
    dest_dir = Path(out_dir) / "two_attempts"
    dest_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="lab_slurm_two_attempts_"))
    workdir.chmod(0o755)
    attempts = [
        ("attempt1", {"LAB_FAULT": "raise", "LAB_FAULT_RANK": "1", "LAB_FAULT_ITER": "17"}),
        ("attempt2", {"LAB_FAULT": "none", "LAB_RESUME": "1"}),
    ]
    paths = []
    for label, lab_env in attempts:
        raw = workdir / f"{label}.out"
        job_id = submit(f"two-{label}", workdir, "00:05:00", lab_env, python, raw)
        wait_job(job_id, raw, timeout_s)
        state = job_state(job_id)
        LAST_STATES[f"two_attempts/{label}"] = state
        LAST_JOB_IDS[f"two_attempts/{label}"] = job_id
        dest = dest_dir / f"{label}.out"
        _scrub_out(raw, dest, workdir, python)
        print(
            f"[run_slurm] two_attempts/{label}: job {job_id} state={state} -> {dest}",
            file=sys.stderr,
        )
        paths.append(dest)
    shutil.rmtree(workdir, ignore_errors=True)
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory for <scenario>.out")
    ap.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="hard wall-clock timeout per job (s); the job is scancel'ed after it",
    )
    ap.add_argument(
        "--python",
        default=None,
        help="interpreter with torch (default: $LAB_PYTHON or this interpreter)",
    )
    ap.add_argument(
        "scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)} and two_attempts"
    )
    args = ap.parse_args(argv)
    for name in args.scenarios or [*SCENARIOS, "two_attempts"]:
        if name == "two_attempts":
            run_two_attempts(args.out, args.timeout, python=args.python)
        else:
            run_slurm_scenario(name, args.out, args.timeout, python=args.python)
    for k, v in LAST_STATES.items():
        print(f"{k}\tjob {LAST_JOB_IDS[k]}\t{v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
