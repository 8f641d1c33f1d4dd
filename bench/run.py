"""Benchmark `logscope analyze` against `grep -E -c` with logscope's triggers, same file and run.

    python bench/run.py --sizes 100M 1G [--profiles sparse dense hf] [--out bench/RESULTS.md]
    python bench/run.py --sizes 1G --compressed gz zst lz4

Generates the logs (bench/generate.py, deterministic) under bench/data/ if missing, then measures
wall time and peak RSS (/usr/bin/time) of: grep -E -c with the trigger set; logscope analyze
--format json (all cores, the default) and with --jobs 1, whose documents must be equal; and
logscope's stages alone in one process: read, read + prefilter, read + prefilter + decode + match.

logscope is timed as installed: its bytecode compiled first, as `pip install` does. An editable
checkout under PYTHONDONTWRITEBYTECODE (this workplace sets it) compiles every module again at
each start, ~0.25 s that no installed copy pays.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from generate import PROFILES, generate, parse_size

import logscope
from logscope.engine.feed import default_library
from logscope.match.prefilter import Prefilter, escape_literal
from logscope.match.signatures import Library
from logscope.read.windows import read_windows
from logscope.scan.range_scan import RangeTask, scan_range

HERE = Path(__file__).resolve().parent
LOGSCOPE = Path(sys.executable).parent / "logscope"


def ere(library_triggers: tuple[str, ...]) -> str:
    """The trigger set as one POSIX ERE, for grep -E."""
    return "|".join(escape_literal(t) for t in library_triggers)


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of the largest process in MB, stdout) of a command, by
    /usr/bin/time: nothing else runs meanwhile."""
    t0 = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rss_kb = int(done.stderr.strip().splitlines()[-1])
    return wall, rss_kb // 1024, done.stdout


def tree_peak(cmd: list[str]) -> int:
    """Peak memory of a command's whole process tree in MB: the sum of the processes' PSS (a
    page shared by N processes counts 1/N in each: forked workers share their parent's),
    sampled every 50 ms from /proc. A run of its own: reading /proc that often takes ~15% of
    two cores from the command, so the timed runs are not sampled."""
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.05)
    return peak >> 20


def tree_rss(root: int) -> int:
    """Bytes resident in a process and all its descendants (PSS), now."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        m = re.search(r"^Pss:\s+(\d+) kB", rollup, re.M)
        total += int(m.group(1)) << 10 if m else 0
    return total


def stage_read(path: Path) -> float:
    t0 = time.perf_counter()
    for _ in read_windows(str(path), 0, path.stat().st_size):
        pass
    return time.perf_counter() - t0


def stage_prefilter(path: Path, prefilter: Prefilter) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    for w in read_windows(str(path), 0, path.stat().st_size):
        n += sum(1 for _ in prefilter.candidates(w.data, w.size))
    return time.perf_counter() - t0, n


def stage_parse(path: Path, library: Library, prefilter: Prefilter) -> float:
    """Read, prefilter, decode and match: one worker's whole job, on the whole file."""
    t0 = time.perf_counter()
    size = path.stat().st_size
    scan_range(
        RangeTask(str(path), 0, size, prefilter.pattern, library, None, literals=prefilter.literals)
    )
    return time.perf_counter() - t0


def log_path(size: str, profile: str) -> Path:
    """bench/data/main_log_1G.txt (sparse), dense_1G.txt, hf_1G.txt."""
    name = "main_log" if profile == "sparse" else profile
    return HERE / "data" / f"{name}_{size}.txt"


def bench(path: Path) -> dict[str, float | int | str]:
    library = default_library()
    prefilter = Prefilter.for_library(library)
    mb = path.stat().st_size / 1e6
    pattern = ere(library.triggers)
    # warm the page cache so the first contender does not pay for the disk
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    g_wall, g_rss, g_out = timed(["grep", "-E", "-c", pattern, str(path)])
    analyze = [str(LOGSCOPE), "analyze", str(path), "--format", "json"]
    l_wall, l_rss, l_out = timed(analyze)
    one_wall, one_rss, one_out = timed([*analyze, "--jobs", "1"])
    l_tree = tree_peak(analyze)
    doc = json.loads(l_out)
    same = json.loads(one_out) == doc
    read_s = stage_read(path)
    pre_s, candidates = stage_prefilter(path, prefilter)
    parse_s = stage_parse(path, library, prefilter)
    inc = doc["incidents"][-1] if doc["incidents"] else {}
    return {
        "file": path.name,
        "MB": round(mb, 1),
        "progress_lines": progress_lines(path, library),
        "grep_s": round(g_wall, 2),
        "grep_lines": int(g_out.strip() or 0),
        "grep_rss_MB": g_rss,
        "logscope_s": round(l_wall, 2),
        "logscope_MBps": round(mb / l_wall, 1),
        "ratio": round(l_wall / g_wall, 2),
        "logscope_rss_MB": l_rss,
        "tree_rss_MB": l_tree,
        "j1_s": round(one_wall, 2),
        "j1_ratio": round(one_wall / g_wall, 2),
        "j1_rss_MB": one_rss,
        "j1_same": same,
        "read_MBps": round(mb / read_s, 1),
        "prefilter_MBps": round(mb / pre_s, 1),
        "parse_MBps": round(mb / parse_s, 1),
        "candidates": candidates,
        "scan": prefilter.engine,
        "verdict": verdict(inc),
    }


def progress_lines(path: Path, library: Library) -> int:
    """Lines holding an iteration signature's trigger (grep -c -F)."""
    triggers = sorted({t for s in library.signatures if s.kind == "iteration" for t in s.trigger})
    args = [a for t in triggers for a in ("-e", t)]
    out = subprocess.run(["grep", "-c", "-F", *args, str(path)], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def verdict(incident: dict[str, Any]) -> str:
    """`gpu_hardware local rank 3`: what the last incident says, to check runs agree."""
    local_rank = (incident.get("culprit") or {}).get("local_rank")
    return f"{incident.get('category')} local rank {local_rank}"


COMPRESSORS = {
    # name: (compress the file, the shell's way to read it back)
    "gz": (["gzip", "-1", "-k", "-f"], "zcat"),
    "zst": (["zstd", "-q", "-k", "-f"], "zstd -dc"),
    "lz4": (["lz4", "-q", "-k", "-f", "-m"], "lz4 -dc"),
}


def bench_compressed(path: Path, kind: str) -> dict[str, float | int | str]:
    """`logscope analyze X.kind` against `<decompressor> X.kind | grep -E -c` (two processes each:
    logscope decompresses in a child when it has more than one core)."""
    compress, reader = COMPRESSORS[kind]
    packed = path.with_name(f"{path.name}.{kind}")
    if not packed.exists():
        subprocess.run([*compress, str(path)], check=True)
    pattern = ere(default_library().triggers)
    subprocess.run(["cat", str(packed)], stdout=subprocess.DEVNULL, check=True)
    # the file and the pattern reach the shell as arguments, never as its text
    pipeline = f'{reader} "$1" | grep -E -c "$2"'
    g_wall, _, g_out = timed(["bash", "-c", pipeline, "bench", str(packed), pattern])
    analyze = [str(LOGSCOPE), "analyze", str(packed), "--format", "json"]
    l_wall, l_rss, l_out = timed(analyze)
    l_tree = tree_peak(analyze)
    inc = (json.loads(l_out)["incidents"] or [{}])[-1]
    return {
        "file": packed.name,
        "MB": round(packed.stat().st_size / 1e6, 1),
        "text_MB": round(path.stat().st_size / 1e6, 1),
        "pipeline": f"{reader} | grep -E -c",
        "pipeline_s": round(g_wall, 2),
        "grep_lines": int(g_out.strip() or 0),
        "logscope_s": round(l_wall, 2),
        "ratio": round(l_wall / g_wall, 2),
        "logscope_rss_MB": l_rss,
        "tree_rss_MB": l_tree,
        "verdict": verdict(inc),
    }


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    py = platform.python_version()
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), Python {py}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["100M"])
    ap.add_argument("--profiles", nargs="+", choices=PROFILES, default=["sparse"])
    ap.add_argument("--out", type=Path, default=None, help="append a Markdown table here")
    ap.add_argument(
        "--compressed",
        nargs="*",
        choices=sorted(COMPRESSORS),
        default=[],
        help="the log compressed so (made beside it once), against its decompressor | grep",
    )
    args = ap.parse_args()
    compileall.compile_dir(Path(logscope.__file__).parent, quiet=1)  # as installed (see above)
    rows = []
    for size in args.sizes:
        for profile in args.profiles:
            path = log_path(size, profile)
            if not path.exists():
                generate(path, parse_size(size), profile=profile)
            for kind in args.compressed or [None]:
                rows.append(bench(path) if kind is None else bench_compressed(path, kind))
                print(json.dumps(rows[-1]), flush=True)
    cols = list(rows[0])
    table = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    table += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    text = f"\n### {time.strftime('%Y-%m-%d')} on {machine()}\n\n" + "\n".join(table) + "\n"
    print(text)
    if args.out:
        with args.out.open("a") as f:
            f.write(text)


if __name__ == "__main__":
    main()
