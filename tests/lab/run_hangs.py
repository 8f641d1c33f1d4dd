#!/usr/bin/env python3
"""Run tests/lab/hang_job.py under torchrun (4 ranks, gloo, Flight Recorder on), one hang kind at
a time, and write what an operator would collect: the log, each rank's Flight Recorder dump, a
`py-spy dump` of each rank while it hangs, and each rank's /proc status.

    python tests/lab/run_hangs.py --out tests/fixtures/hangs [kind ...]

writes <out>/<kind>/{run.log, fr/<dump files>, pyspy/rank<R>.txt, proc/rank<R>.status}.
Machine-specific strings are scrubbed the way run_faults.py scrubs logs; a pickled dump is
loaded (stdlib pickle: it is our own job's output), scrubbed string by string and pickled
again with the same structure (protocol 2, as torch writes it).
"""

import argparse
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_faults import HOST_PLACEHOLDER, kill_tree, lab_python, path_replacements, scrub_text

LAB_DIR = Path(__file__).resolve().parent
JOB = LAB_DIR / "hang_job.py"

KINDS = {
    "skip": {"HANG_KIND": "skip"},
    "different": {"HANG_KIND": "different"},
    "sizes": {"HANG_KIND": "sizes", "HANG_FR_JSON": "1", "HANG_FR_NAME": "host",
              "TORCH_FR_DUMP_TEMP_FILE": "{work}/fr/trace-"},
    "compute": {"HANG_KIND": "compute", "HANG_HOW": "lock",
                "TORCH_FR_DUMP_TEMP_FILE": "{work}/fr/myjob_fr_"},
    "sleep": {"HANG_KIND": "compute", "HANG_HOW": "sleep"},
    "sigstop": {"HANG_KIND": "sigstop"},
}  # fmt: skip
WAIT_AFTER_FAULT_S = 5.0
"""The peers are in their collective by then; the PG timeout (20 s) is far."""


def py_spy():
    exe = Path(lab_python()).parent / "py-spy"
    return str(exe) if exe.exists() else "py-spy"


def collect(workdir, out):
    """py-spy dump and /proc status of each rank, as `tail --on-hang collect` would."""
    (out / "pyspy").mkdir(parents=True, exist_ok=True)
    (out / "proc").mkdir(parents=True, exist_ok=True)
    for pidfile in sorted((workdir / "pids").iterdir()):
        rank, pid = pidfile.name, pidfile.read_text().strip()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            status = ""
        (out / "proc" / f"rank{rank}.status").write_text(status)
        res = subprocess.run(
            [py_spy(), "dump", "--pid", pid], capture_output=True, text=True, timeout=20
        )
        (out / "pyspy" / f"rank{rank}.txt").write_text(res.stdout + res.stderr)


def scrub_value(value, repl):
    if isinstance(value, str):
        return scrub_text(value, repl)
    if isinstance(value, dict):
        return {scrub_value(k, repl): scrub_value(v, repl) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v, repl) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_value(v, repl) for v in value)
    return value


def scrub_dump(src, dst, repl):
    data = src.read_bytes()
    if data[:1] == b"{":
        dst.write_text(scrub_text(data.decode(), repl))
        return
    dump = pickle.loads(data)  # noqa: S301 - our own job's output
    dst.write_bytes(pickle.dumps(scrub_value(dump, repl), protocol=2))


def run_kind(kind, out_root, timeout_s=120.0, python=None):
    python = python or lab_python()
    out = Path(out_root) / kind
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"hang_{kind}_"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HANG_", "TORCHELASTIC_", "MASTER_", "OMP_", "SLURM_", "TORCH_FR"))
    }
    env.update(
        {
            "HANG_OUT": str(workdir),
            "PYTHONUNBUFFERED": "1",
            "TORCH_FR_BUFFER_SIZE": "64",
            "TORCH_FR_DUMP_TEMP_FILE": f"{workdir}/fr/nccl_trace_rank_",
        }
    )
    env.update({k: v.format(work=workdir) for k, v in KINDS[kind].items()})
    cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node", "4", "--tee", "3", str(JOB)]
    raw = workdir / "raw.log"
    t0 = time.time()
    with raw.open("wb") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        while proc.poll() is None and b"hang fault" not in raw.read_bytes():
            time.sleep(0.2)
            if time.time() - t0 > timeout_s:
                break
        time.sleep(WAIT_AFTER_FAULT_S)
        if proc.poll() is None:
            collect(workdir, out)
        try:
            rc = proc.wait(timeout=max(1.0, timeout_s - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            rc = proc.wait()
    repl = path_replacements(workdir, python)
    (out / "run.log").write_text(scrub_text(raw.read_text(errors="replace"), repl))
    for sub in ("pyspy", "proc"):
        for f in sorted((out / sub).glob("*")):
            f.write_text(scrub_text(f.read_text(), repl))
    (out / "fr").mkdir()
    for f in sorted((workdir / "fr").glob("*")) if (workdir / "fr").is_dir() else ():
        if not f.name.endswith(".tmp"):
            name = f.name.replace(socket.gethostname(), HOST_PLACEHOLDER)
            scrub_dump(f, out / "fr" / name, repl)
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"[run_hangs] {kind}: rc={rc} {time.time() - t0:.1f}s -> {out}", file=sys.stderr)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--python", default=None)
    ap.add_argument("kinds", nargs="*", help=f"default: all of {', '.join(KINDS)}")
    args = ap.parse_args(argv)
    for kind in args.kinds or list(KINDS):
        run_kind(kind, args.out, python=args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
