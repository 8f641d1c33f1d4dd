"""Benchmark `logscope analyze` against `grep -E -c` with logscope's triggers, same file and run.

    python bench/run.py --sizes 100M 1G [--out bench/RESULTS.md]

Generates the logs (bench/generate.py, deterministic) under bench/data/ if missing, then measures
wall time and peak RSS (/usr/bin/time) of: grep -E -c with the trigger set; logscope analyze
--format json; and logscope's stages alone in-process (read, read+prefilter).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from generate import generate, parse_size

from logscope.engine import default_library
from logscope.events import Prefilter
from logscope.sources import ReadStats, Source, read_blocks

HERE = Path(__file__).resolve().parent
LOGSCOPE = Path(sys.executable).parent / "logscope"


def ere(library_triggers: tuple[str, ...]) -> str:
    """The trigger set as one POSIX ERE, for grep -E."""
    return "|".join(re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", t) for t in library_triggers)


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB, stdout) of a command, via /usr/bin/time."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    rss_kb = int(proc.stderr.strip().splitlines()[-1])
    return wall, rss_kb // 1024, proc.stdout


def stage_read(path: Path) -> float:
    t0 = time.perf_counter()
    for _ in read_blocks(Source(str(path)), ReadStats()):
        pass
    return time.perf_counter() - t0


def stage_prefilter(path: Path, prefilter: Prefilter) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = 0
    for block in read_blocks(Source(str(path)), ReadStats()):
        n += sum(1 for _ in prefilter.candidates(block.data))
    return time.perf_counter() - t0, n


def bench(path: Path) -> dict[str, float | int | str]:
    library = default_library()
    mb = path.stat().st_size / 1e6
    pattern = ere(library.triggers)
    # warm the page cache so the first contender does not pay for the disk
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    g_wall, g_rss, g_out = timed(["grep", "-E", "-c", pattern, str(path)])
    l_wall, l_rss, l_out = timed(
        [str(LOGSCOPE), "analyze", str(path), "--format", "json", "--jobs", "1"]
    )
    p_wall, p_rss, p_out = timed(
        [str(LOGSCOPE), "analyze", str(path), "--format", "json", "--jobs", "2"]
    )
    doc = json.loads(l_out)
    same = json.loads(p_out) == doc
    read_s = stage_read(path)
    pre_s, candidates = stage_prefilter(path, Prefilter.for_library(library))
    inc = doc["incidents"][-1] if doc["incidents"] else {}
    return {
        "file": path.name,
        "MB": round(mb, 1),
        "grep_s": round(g_wall, 2),
        "grep_lines": int(g_out.strip() or 0),
        "grep_rss_MB": g_rss,
        "logscope_s": round(l_wall, 2),
        "logscope_MBps": round(mb / l_wall, 1),
        "ratio": round(l_wall / g_wall, 2),
        "logscope_rss_MB": l_rss,
        "j2_s": round(p_wall, 2),
        "j2_ratio": round(p_wall / g_wall, 2),
        "j2_rss_MB": p_rss,
        "j2_same": same,
        "read_MBps": round(mb / read_s, 1),
        "prefilter_MBps": round(mb / pre_s, 1),
        "candidates": candidates,
        "verdict": f"{inc.get('category')} rank {((inc.get('culprit') or {}).get('rank'))}",
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
    import os

    py = platform.python_version()
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores ({cpu}), Python {py}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["100M"])
    ap.add_argument("--out", type=Path, default=None, help="append a Markdown table here")
    args = ap.parse_args()
    rows = []
    for size in args.sizes:
        path = HERE / "data" / f"main_log_{size}.txt"
        if not path.exists():
            generate(path, parse_size(size))
        rows.append(bench(path))
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
