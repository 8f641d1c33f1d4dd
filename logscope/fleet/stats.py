"""Fleet statistics: failure mix, MTBF with its confidence interval, ETTR over time, and the
nodes whose failure rate stands out from the fleet's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import pandas as pd

from ..lines.hostlist import node_name
from ..model import NODE_EVIDENCE, rounded
from .blame import IMPLICATING
from .store import Fleet

PRIOR_JOBS = 10.0
"""Weight of the fleet-wide rate in a host's score, in jobs: a host seen in 2 jobs with 1
failure scores near the fleet rate, one seen in 50 jobs with 25 failures near 0.5."""


def gamma_p(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x): series below a+1, continued fraction above
    (Numerical Recipes 6.2), to ~1e-14."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return min(1.0, total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def chi2_ppf(q: float, df: float) -> float:
    """Quantile of the chi-square distribution: Wilson–Hilferty's start, refined by Newton
    steps on the exact CDF (the regularized gamma function)."""
    if not 0 < q < 1 or df <= 0:
        raise ValueError(f"chi2_ppf needs 0 < q < 1 and df > 0, got q={q}, df={df}")
    z = NormalDist().inv_cdf(q)
    k = 2 / (9 * df)
    x = max(df * (1 - k + z * math.sqrt(k)) ** 3, 1e-8)
    a = df / 2
    for _ in range(50):
        pdf = math.exp((a - 1) * math.log(x / 2) - x / 2 - math.lgamma(a)) / 2
        step = (gamma_p(a, x / 2) - q) / pdf if pdf > 0 else 0.0
        new = x - step
        x = new if new > 0 else x / 2
        if abs(step) < 1e-12 * max(1.0, x):
            break
    return x


def mtbf_interval(total_s: float, failures: int, level: float = 0.95) -> tuple[float, float | None]:
    """Two-sided confidence interval of an exponential MTBF from `failures` in `total_s`:
    [2T / chi2(1-α/2, 2n+2), 2T / chi2(α/2, 2n)]; no upper bound without a failure."""
    alpha = 1 - level
    lower = 2 * total_s / chi2_ppf(1 - alpha / 2, 2 * failures + 2)
    upper = 2 * total_s / chi2_ppf(alpha / 2, 2 * failures) if failures else None
    return lower, upper


def poisson_sf(k: int, mean: float) -> float:
    """P(X >= k) for X ~ Poisson(mean)."""
    return 1.0 if k <= 0 else gamma_p(k, mean)


@dataclass(frozen=True, slots=True)
class BadNode:
    host: str
    failures: int
    """Failures that implicate the node (blame.node_evidence: strong or weak)."""
    jobs: int
    """Jobs that ran on the host (it is in the job's hosts, or a failure names it)."""
    score: float
    """Shrunk rate per job of evidence against it, a weak failure counting half:
    (evidence + PRIOR_JOBS·rate) / (jobs + PRIOR_JOBS)."""
    p_value: float
    """P(at least this many implicating failures) at the fleet's rate (Poisson)."""
    exclude: bool
    """Clearly worse than the fleet: p_value below 0.05 / hosts, and 2 or more failures that
    strongly implicate the node (weak evidence alone never takes a node out of service)."""
    lost_gpu_hours: float
    strong: int = 0
    """Of `failures`, those that strongly implicate the node; the rest are weak evidence."""
    categories: dict[str, int] = field(default_factory=dict)
    gpus: dict[int, int] = field(default_factory=dict)
    """Local rank (GPU) → failures on it, when the log says."""
    expected: float = 0.0
    """Implicating failures expected in its jobs at the fleet's rate."""

    @property
    def weak(self) -> int:
        return self.failures - self.strong

    @property
    def reason(self) -> str:
        """One line: what failed, how often, against what rate."""
        cats = ", ".join(f"{n} {c}" for c, n in self.categories.items())
        gpu = ""
        if self.gpus:
            g, n = max(self.gpus.items(), key=lambda kv: (kv[1], -kv[0]))
            if n >= 2:
                gpu = f"; GPU {g} in {n} of {self.failures}"
        weak = "; weak evidence only (the program may be at fault)" if not self.strong else ""
        return (
            f"{self.host}: {self.failures} failure{'s' if self.failures != 1 else ''} implicating "
            f"the node in {self.jobs} job{'s' if self.jobs != 1 else ''} ({cats}){gpu}; "
            f"{self.expected:.2f} expected at the fleet rate (p = {self.p_value:.2g}){weak}"
        )


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    failures: int
    failures_by_category: dict[str, int]
    lost_gpu_hours_by_category: dict[str, float]
    lost_gpu_hours_by_host: dict[str, float]
    wall_s: float
    mtbf_s: float | None
    mtbf_ci_s: tuple[float, float | None]
    mtbf_by_gpus: list[dict[str, Any]]
    ettr: float | None
    """Productive time over wall time, all jobs together."""
    ettr_by_date: list[dict[str, Any]]
    ettr_by_job: list[dict[str, Any]]
    fleet_rate: float
    """Evidence against nodes per host per job (a weak failure counting half), the prior of
    every host's score."""
    bad_nodes: list[BadNode]


def summarize(fleet: Fleet) -> Summary:
    jobs, inc = fleet.jobs, fleet.incidents
    fail = inc[inc["failure"].astype(bool)]
    by_cat = fail.groupby("category").size().sort_values(ascending=False)
    lost = inc.groupby("category")["lost_gpu_hours"].sum(min_count=1).dropna()
    lost_host = inc.dropna(subset=["host"]).groupby("host")["lost_gpu_hours"].sum(min_count=1)
    wall = float(jobs["wall_s"].fillna(0).sum())
    n = len(fail)
    productive = float(jobs["productive_s"].fillna(0).sum())
    timed = jobs.dropna(subset=["wall_s"])
    by_date = timed.groupby("date")[["wall_s", "productive_s"]].sum()
    counts = timed.groupby("date").size()
    by_gpus = []
    for gpus, group in jobs.dropna(subset=["gpus"]).groupby("gpus"):
        w, f = float(group["wall_s"].fillna(0).sum()), int(group["n_failures"].sum())
        by_gpus.append(
            {
                "gpus": int(gpus),
                "jobs": len(group),
                "failures": f,
                "wall_s": w,
                "mtbf_s": _div(w, f),
            }
        )
    fleet_rate, nodes = _bad_nodes(jobs, fail)
    return Summary(
        jobs=len(jobs),
        failures=n,
        failures_by_category={str(k): int(v) for k, v in by_cat.items()},
        lost_gpu_hours_by_category=_rounded(lost),
        lost_gpu_hours_by_host=_rounded(lost_host),
        wall_s=wall,
        mtbf_s=_div(wall, n),
        mtbf_ci_s=mtbf_interval(wall, n) if wall > 0 else (0.0, None),
        mtbf_by_gpus=by_gpus,
        ettr=_div(productive, wall),
        ettr_by_date=[
            {"date": str(d), "jobs": int(counts[d]), "ettr": _div(r.productive_s, r.wall_s)}
            for d, r in by_date.iterrows()
        ],
        ettr_by_job=[
            {"job_id": r.job_id, "date": r.date, "ettr": None if pd.isna(r.ettr) else float(r.ettr)}
            for r in jobs.sort_values(["date", "job_id"]).itertuples()
        ],
        fleet_rate=fleet_rate,
        bad_nodes=nodes,
    )


def _div(a: float, b: float) -> float | None:
    return float(a) / float(b) if b else None


def _rounded(s: pd.Series) -> dict[str, float]:
    return {str(k): round(float(v), 3) for k, v in s.sort_values(ascending=False).items()}


def _evidence(inc: pd.DataFrame) -> pd.Series:
    """Each incident's node evidence: as stored, or, in a store written before it was, from its
    category (a hang's or a timeout's culprit is not known then: none)."""
    derived = (
        inc["category"].map(lambda c: NODE_EVIDENCE.get(str(c), "none")).replace("culprit", "none")
    )
    if "node_evidence" not in inc:
        return derived
    return inc["node_evidence"].fillna(derived)


def _bad_nodes(jobs: pd.DataFrame, fail: pd.DataFrame) -> tuple[float, list[BadNode]]:
    """Hosts ranked by an empirical-Bayes rate of failures that implicate them, each host's
    shrunk towards the fleet-wide rate, so one failure on a rarely used node does not top the
    list. A failure of the program (an exception, the time limit) implicates no node."""
    ran = jobs[["job_id", "hosts"]].explode("hosts").dropna().rename(columns={"hosts": "host"})
    fail = fail.assign(host=fail["host"].map(node_name, na_action="ignore"))
    ran = ran.assign(host=ran["host"].map(node_name))
    ran = pd.concat([ran, fail[["job_id", "host"]].dropna()]).drop_duplicates()
    jobs_on = ran.groupby("host")["job_id"].nunique()
    evidence = _evidence(fail)
    attributed = fail[evidence.isin(IMPLICATING)].dropna(subset=["host"])
    strength = evidence[attributed.index]
    weight = strength.map({"strong": 1.0, "weak": 0.5})
    slots = int(jobs_on.sum())
    rate = float(weight.sum()) / slots if slots else 0.0
    count_rate = len(attributed) / slots if slots else 0.0
    hosts = len(jobs_on)
    out = []
    for host, rows in attributed.groupby("host"):
        j = int(jobs_on.get(host, 0))
        n = len(rows)
        strong = int((strength[rows.index] == "strong").sum())
        p = poisson_sf(n, j * count_rate)
        gpus = rows["local_rank"].dropna().astype(int).value_counts()
        out.append(
            BadNode(
                host=str(host),
                failures=n,
                jobs=j,
                score=(float(weight[rows.index].sum()) + PRIOR_JOBS * rate) / (j + PRIOR_JOBS),
                p_value=p,
                exclude=strong >= 2 and p < 0.05 / max(1, hosts),
                lost_gpu_hours=round(float(rows["lost_gpu_hours"].sum()), 3),
                strong=strong,
                categories={str(k): int(v) for k, v in rows["category"].value_counts().items()},
                gpus={int(k): int(v) for k, v in gpus.items()},
                expected=j * count_rate,
            )
        )
    out.sort(key=lambda b: (-b.score, -b.failures, b.host))
    return rate, out


def summary_doc(s: Summary) -> dict[str, Any]:
    """The summary as the `fleet summary --format json` document."""
    return {
        "jobs": s.jobs,
        "failures": s.failures,
        "failures_by_category": s.failures_by_category,
        "lost_gpu_hours_by_category": s.lost_gpu_hours_by_category,
        "lost_gpu_hours_by_host": s.lost_gpu_hours_by_host,
        "wall_s": round(s.wall_s, 1),
        "mtbf_s": rounded(s.mtbf_s),
        "mtbf_ci_s": [rounded(s.mtbf_ci_s[0]), rounded(s.mtbf_ci_s[1])],
        "mtbf_by_gpus": [
            {**g, "wall_s": rounded(g["wall_s"]), "mtbf_s": rounded(g["mtbf_s"])}
            for g in s.mtbf_by_gpus
        ],
        "ettr": rounded(s.ettr, 4),
        "ettr_by_date": [{**d, "ettr": rounded(d["ettr"], 4)} for d in s.ettr_by_date],
        "ettr_by_job": [{**d, "ettr": rounded(d["ettr"], 4)} for d in s.ettr_by_job],
        "fleet_rate": round(s.fleet_rate, 4),
        "bad_nodes": [
            {
                "host": b.host,
                "failures": b.failures,
                "jobs": b.jobs,
                "score": round(b.score, 4),
                "p_value": float(f"{b.p_value:.3g}"),
                "exclude": b.exclude,
                "lost_gpu_hours": b.lost_gpu_hours,
                "strong": b.strong,
                "weak": b.weak,
                "categories": b.categories,
                "gpus": {str(k): v for k, v in b.gpus.items()},
                "reason": b.reason,
            }
            for b in s.bad_nodes
        ],
    }
