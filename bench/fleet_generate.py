# ruff: noqa: E501  (log lines are written out whole)
"""Generate a fleet of small job logs from the real lab and SLURM fixtures, one bad host included.

    python bench/fleet_generate.py --jobs 1000 --out bench/data/fleet [--seed 0]

Each job runs on 1, 2, 4 or 8 hosts of a pool (`node001..node064`) and is one file,
`slurm-<id>.out`. Its lines carry a pdsh-style host prefix (`node017: ...`): every host of the job
announces itself, then the template's lines follow under the prefix of the host that fails, so
logscope names that host as the culprit. One host (`node042`) has a GPU that fails in most jobs
it runs (the BLOOM `c10::CUDAError` / `CUDA error: unknown error` block on its local rank 1);
other hosts fail now and then through the program (an exception, a SIGKILL, a segfault, a rank
that stops answering). A test host (`testbox`) runs small single-host jobs whose training script
is buggy: they fail most of the time, through the program only. Deterministic for a seed;
`generate()` returns the ground truth.
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"

# template -> (fixture, category of the incident logscope finds)
TEMPLATES = {
    "healthy": ("lab/healthy.log", None),
    "gpu": ("lab/raise_rank1.log", "gpu_hardware"),  # rank 1's traceback replaced: see _gpu
    "raise": ("lab/raise_rank1.log", "python_exception"),
    "segv": ("lab/segv_rank3.log", "segfault"),
    "sigkill": ("lab/sigkill_rank2.log", "process_killed"),
    "hang": ("lab/hang_rank1.log", "collective_timeout"),
    "cancel": ("slurm/scancel.out", "cancelled"),
    "timelimit": ("slurm/timelimit_progress.out", "timelimit"),
}
FAILURES = ("gpu", "raise", "segv", "sigkill", "hang")
CODE_BUGS = ("raise", "segv", "sigkill", "hang")
NODE_EVIDENCE = {
    "gpu": "strong",
    "segv": "weak",
    "hang": "weak",
    "raise": "none",
    "sigkill": "none",
}
"""What each failure says about its node (logscope.model.NODE_EVIDENCE; the hang template's
culprit rank is named, so it implicates that rank's node weakly)."""
CUDA_ERROR = [
    "[default1]:terminate called after throwing an instance of 'c10::CUDAError'",
    "[default1]:  what():  CUDA error: unknown error",
    "[default1]:Exception raised from query at ../aten/src/ATen/cuda/CUDAEvent.h:95 (most recent call first):",
    "[default1]:frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x42 (0x1518a06137d2 in /opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so)",
    "[default1]:frame #1: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x11a (0x15190c6c29ea in /opt/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda_cpp.so)",
]
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
    test_host: str | None = "testbox"

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

    def implicating_by_host(self) -> dict[str, int]:
        """Failures that implicate their node (strong or weak), per host."""
        out: dict[str, int] = {}
        for j in self.jobs:
            if j.culprit and NODE_EVIDENCE.get(j.template, "none") != "none":
                out[j.culprit] = out.get(j.culprit, 0) + 1
        return out


def _retime(text: str, day: date) -> str:
    text = text.replace("2026-11-29", day.isoformat())
    return GLOG.sub(lambda m: f"{m.group(1)}{day:%m%d} ", text)


def _gpu(text: str) -> str:
    """The raise template with rank 1's traceback replaced by a dying GPU's CUDA error."""
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("[default1]:[rank1]:"):
            if not out or out[-1] != CUDA_ERROR[-1]:
                out += CUDA_ERROR
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def render(template: str, job_id: int, hosts: list[str], culprit: str, day: date) -> str:
    """One job's log: host announcements, then the template under the culprit's prefix."""
    text = _retime((FIXTURES / TEMPLATES[template][0]).read_text(), day)
    if template == "gpu":
        text = _gpu(text)
    # every node's torchrun agent prints its banner: that is how the job's hosts become known
    head = [f"{h}: {BANNER}" for h in hosts]
    if template in ENDS:
        # srun --label logs: the batch host is named in the scheduler banners
        text = re.sub(r"\b(JOB|STEP) \d+", rf"\g<1> {job_id}", text)
        text = re.sub(r"StepId=\d+", f"StepId={job_id}", text)
        text = text.replace("node01", hosts[0]).replace("localhost", hosts[0])
        return "\n".join(head) + "\n" + text
    text = text.replace("localhost", culprit)
    if len(hosts) == 1:
        return text  # one node, no pdsh prefix: torchrun's failure block names the host
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
    test_host: str | None = "testbox",
    test_share: float = 0.2,
    test_fail_rate: float = 0.9,
) -> Truth:
    rng = random.Random(seed)
    pool = [f"node{i:03d}" for i in range(1, hosts + 1)]
    if bad_host not in pool:
        pool[-1] = bad_host
    out.mkdir(parents=True, exist_ok=True)
    truth = Truth(bad_host=bad_host, test_host=test_host)
    for i in range(jobs):
        job_id = 200_000 + i
        k = min(rng.choice((1, 2, 4, 8)), hosts)
        nodes = sorted(rng.sample(pool, k))
        r = rng.random()
        if test_host is not None and rng.random() < test_share:
            # the test host's small jobs: a buggy script, whatever node it runs on
            nodes = [test_host]
            if r < test_fail_rate:
                template, culprit = rng.choice(CODE_BUGS), test_host
            else:
                template, culprit = "healthy", test_host
        elif bad_host in nodes and r < bad_fail_rate:
            template, culprit = "gpu", bad_host
        elif r < fail_rate:
            template, culprit = rng.choice(CODE_BUGS), rng.choice(nodes)
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
