"""Benchmark `logscope fleet ingest` and `fleet summary` on generated job logs.

    python bench/fleet_run.py --jobs 1000 [--workers 2] [--out bench/RESULTS.md]

Generates the logs (bench/fleet_generate.py, deterministic) under bench/data/fleet-<N>/ if
missing, ingests them into a fresh store with the real CLI (wall time and peak RSS from
/usr/bin/time), re-ingests them (idempotent: same files), summarizes, and checks that the injected
bad host tops the bad-node list.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fleet_generate import generate

HERE = Path(__file__).resolve().parent
LOGSCOPE = Path(sys.executable).parent / "logscope"


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB of the largest process, stdout) via /usr/bin/time."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    rss_kb = int(proc.stderr.strip().splitlines()[-1])
    return wall, rss_kb // 1024, proc.stdout


def files(store: Path) -> dict[str, int]:
    return {str(p.relative_to(store)): p.stat().st_size for p in store.rglob("*.parquet")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, help="append the results table to this Markdown file")
    args = ap.parse_args()

    logs = HERE / "data" / f"fleet-{args.jobs}"
    if not logs.is_dir():
        generate(logs, jobs=args.jobs, seed=0)
    paths = sorted(logs.glob("*.out"))
    mb = sum(p.stat().st_size for p in paths) / 1e6
    store = HERE / "data" / f"fleet-{args.jobs}-store"
    shutil.rmtree(store, ignore_errors=True)
    ingest = [str(LOGSCOPE), "fleet", "ingest", str(logs / "*.out"), "--store", str(store)]
    ingest += ["--jobs", str(args.workers)]

    ingest_s, ingest_rss, _ = timed(ingest)
    first = files(store)
    reingest_s, _, _ = timed(ingest)
    assert files(store) == first, "re-ingest changed the store"
    summary_s, summary_rss, out = timed(
        [str(LOGSCOPE), "fleet", "summary", "--store", str(store), "--format", "json"]
    )
    doc = json.loads(out)
    top = doc["bad_nodes"][0]
    store_mb = sum(first.values()) / 1e6
    row = {
        "jobs": len(paths),
        "log_MB": round(mb, 1),
        "workers": args.workers,
        "ingest_s": round(ingest_s, 1),
        "jobs_per_s": round(len(paths) / ingest_s, 1),
        "MBps": round(mb / ingest_s, 2),
        "ingest_rss_MB": ingest_rss,
        "reingest_s": round(reingest_s, 1),
        "files": len(first),
        "store_MB": round(store_mb, 1),
        "summary_s": round(summary_s, 2),
        "summary_rss_MB": summary_rss,
        "failures": doc["failures"],
        "top_bad_node": f"{top['host']} ({top['failures']}/{top['jobs']}, {top['score']})",
        "second": f"{doc['bad_nodes'][1]['host']} ({doc['bad_nodes'][1]['score']})",
        "exclude": ",".join(b["host"] for b in doc["bad_nodes"] if b["exclude"]),
    }
    head = "| " + " | ".join(row) + " |"
    table = "\n".join(
        [head, "|" + "---|" * len(row), "| " + " | ".join(map(str, row.values())) + " |"]
    )
    print(f"{platform.python_version()} on {os.cpu_count()} CPUs")
    print(table)
    if args.out:
        with args.out.open("a") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    main()
