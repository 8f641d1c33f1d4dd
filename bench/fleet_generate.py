"""Generate a fleet of small job logs from the real lab and SLURM fixtures, one bad host included.

    python bench/fleet_generate.py --jobs 1000 --out bench/data/fleet [--seed 0]

Each job runs on 1, 2, 4 or 8 hosts of a pool (`node001..node064`) and is one file,
`slurm-<id>.out`. Its lines carry a pdsh-style host prefix (`node017: ...`): every host of the job
announces itself, then the template's lines follow under the prefix of the host that fails, so
logscope names that host as the culprit. One host (`node042`) fails much more often than the
others. Deterministic for a seed; `generate()` returns the ground truth.
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"

# template -> (fixture, category of the incident logscope finds, counts as a failure)
TEMPLATES = {
    "healthy": ("lab/healthy.log", None),
    "raise": ("lab/raise_rank1.log", "python_exception"),
    "segv": ("lab/segv_rank3.log", "segfault"),
    "sigkill": ("lab/sigkill_rank2.log", "process_killed"),
    "hang": ("lab/hang_rank1.log", "collective_timeout"),
    "cancel": ("slurm/scancel.out", "cancelled"),
    "timelimit": ("slurm/timelimit_progress.out", "timelimit"),
}
FAILURES = ("raise", "segv", "sigkill", "hang")
ENDS = ("cancel", "timelimit")
START = date(2026, 11, 1)
BANNER = (
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed."
)
GLOG = re.compile(r"\b([EWIF])1129 ")


@dataclass
class Job:
    path: Path
    job_id: int
    template: str
    category: str | None
    hosts: list[str]
    culprit: str | None
    day: str


@dataclass
class Truth:
    jobs: list[Job] = field(default_factory=list)
    bad_host: str = "node042"

    def failures_by_category(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for j in self.jobs:
            if j.template in FAILURES and j.category:
                out[j.category] = out.get(j.category, 0) + 1
        return out

    def failures_by_host(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for j in self.jobs:
            if j.template in FAILURES and j.culprit:
                out[j.culprit] = out.get(j.culprit, 0) + 1
        return out


def _retime(text: str, day: date) -> str:
    text = text.replace("2026-11-29", day.isoformat())
    return GLOG.sub(lambda m: f"{m.group(1)}{day:%m%d} ", text)


def render(template: str, job_id: int, hosts: list[str], culprit: str, day: date) -> str:
    """One job's log: host announcements, then the template under the culprit's prefix."""
    text = _retime((FIXTURES / TEMPLATES[template][0]).read_text(), day)
    # every node's torchrun agent prints its banner: that is how the job's hosts become known
    head = [f"{h}: {BANNER}" for h in hosts]
    if template in ENDS:
        # srun --label logs: the batch host is named in the scheduler banners
        text = re.sub(r"\b(JOB|STEP) \d+", rf"\g<1> {job_id}", text)
        text = re.sub(r"StepId=\d+", f"StepId={job_id}", text)
        text = text.replace("node01", hosts[0]).replace("localhost", hosts[0])
        return "\n".join(head) + "\n" + text
    text = text.replace("localhost", culprit)
    body = [f"{culprit}: {line}" if line.strip() else line for line in text.splitlines()]
    return "\n".join(head + body) + "\n"


def generate(
    out: Path,
    jobs: int = 1000,
    seed: int = 0,
    hosts: int = 64,
    bad_host: str = "node042",
    fail_rate: float = 0.25,
    bad_fail_rate: float = 0.85,
    days: int = 28,
) -> Truth:
    rng = random.Random(seed)
    pool = [f"node{i:03d}" for i in range(1, hosts + 1)]
    if bad_host not in pool:
        pool[-1] = bad_host
    out.mkdir(parents=True, exist_ok=True)
    truth = Truth(bad_host=bad_host)
    for i in range(jobs):
        job_id = 200_000 + i
        k = min(rng.choice((1, 2, 4, 8)), hosts)
        nodes = sorted(rng.sample(pool, k))
        r = rng.random()
        if bad_host in nodes and r < bad_fail_rate:
            template, culprit = rng.choice(FAILURES), bad_host
        elif r < fail_rate:
            template, culprit = rng.choice(FAILURES), rng.choice(nodes)
        elif r < fail_rate + 0.08:
            template, culprit = rng.choice(ENDS), nodes[0]
        else:
            template, culprit = "healthy", nodes[0]
        day = START + timedelta(days=i * days // max(1, jobs))
        path = out / f"slurm-{job_id}.out"
        path.write_text(render(template, job_id, nodes, culprit, day))
        failed = template in FAILURES
        truth.jobs.append(
            Job(
                path,
                job_id,
                template,
                TEMPLATES[template][1],
                nodes,
                culprit if failed else None,
                day.isoformat(),
            )
        )
    return truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "fleet")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    truth = generate(args.out, args.jobs, args.seed)
    print(f"{len(truth.jobs)} jobs in {args.out}; failures by host (top 5):")
    for host, n in sorted(truth.failures_by_host().items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {host} {n}")


if __name__ == "__main__":
    main()
