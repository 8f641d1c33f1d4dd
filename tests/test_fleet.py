"""Fleet store and summary: ingest, idempotent re-ingest, schemas, statistics, bad nodes, CLI."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from bench.fleet_generate import Truth, generate
from logscope.fleet import (
    EVENTS,
    INCIDENTS,
    JOBS,
    PARTITIONING,
    chi2_ppf,
    gamma_p,
    load,
    mtbf_interval,
    poisson_sf,
    summarize,
)

from .helpers import FIXTURES

LAB = sorted((FIXTURES / "lab").glob("*.log"))
SLURM = sorted((FIXTURES / "slurm").glob("*.out"))


def _files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*.parquet"))
        if ".staging" not in p.parts
    }


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    """40 generated jobs on 8 hosts, node042 failing in most jobs it runs, ingested by the CLI
    with 2 processes."""
    from typer.testing import CliRunner

    from logscope.cli import app

    root = tmp_path_factory.mktemp("fleet")
    # a small pool (node001..node007 and node042) so every host sees several jobs
    truth = generate(root / "logs", jobs=40, seed=3, hosts=8, bad_fail_rate=0.9)
    result = CliRunner().invoke(
        app,
        [
            "fleet",
            "ingest",
            str(root / "logs" / "*.out"),
            "--store",
            str(root / "store"),
            "-j",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    return root / "store", truth


def test_lab_fixtures_ingest_and_summary(run_cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, _, err = run_cli(
        "fleet", "ingest", *map(str, LAB + SLURM), "--store", str(store), "-j", "1"
    )
    assert code == 0, err
    assert f"stored {len(LAB) + len(SLURM)} of {len(LAB) + len(SLURM)} jobs" in err
    code, out, err = run_cli("fleet", "summary", "--store", str(store), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["jobs"] == len(LAB) + len(SLURM)
    # tests/fixtures/expected.toml: raise (lab, srun), segv (lab, srun), hung rank, SIGKILL,
    # the hang killed by its time limit
    assert doc["failures_by_category"] == {
        "python_exception": 2,
        "segfault": 2,
        "collective_timeout": 1,
        "process_killed": 1,
        "hang": 1,
    }
    assert doc["failures"] == 7
    assert "timelimit" not in doc["failures_by_category"]  # a time limit is not a failure
    assert doc["mtbf_ci_s"][0] < doc["mtbf_s"] < doc["mtbf_ci_s"][1]
    assert {"jobs", "lost_gpu_hours_by_category", "ettr", "bad_nodes"} <= set(doc)
    assert doc["bad_nodes"][0]["host"] == "localhost"


def test_analyze_store_adds_one_job_keyed_by_slurm_id(run_cli, tmp_path: Path) -> None:
    store = tmp_path / "store"
    code, _, err = run_cli(
        "analyze", str(FIXTURES / "slurm" / "scancel.out"), "--store", str(store)
    )
    assert code == 1, err
    assert list(_files(store)) == [
        "events/date=2026-11-29/7-0.parquet",
        "incidents/date=2026-11-29/7-0.parquet",
        "jobs/date=2026-11-29/7-0.parquet",
    ]


def test_generated_fleet_counts_and_bad_node_first(fleet: tuple[Path, Truth]) -> None:
    store, truth = fleet
    s = summarize(load(store, engine="pandas"))
    assert s.jobs == len(truth.jobs)
    assert s.failures_by_category == truth.failures_by_category()
    assert s.bad_nodes[0].host == "node042"
    top = s.bad_nodes[0]
    # only the failures that implicate a node count against it: node042's GPU, yes; the test
    # host's buggy script, no
    assert top.failures == truth.implicating_by_host()["node042"]
    assert top.categories == {"gpu_hardware": top.failures}
    assert top.gpus == {1: top.failures}  # the same GPU every time
    assert f"GPU 1 in {top.failures} of {top.failures}" in top.reason
    assert top.jobs == sum("node042" in j.hosts for j in truth.jobs)
    assert top.exclude
    assert [b.host for b in s.bad_nodes if b.exclude] == ["node042"]
    assert truth.failures_by_host()["testbox"] > truth.failures_by_host()["node042"] / 2
    assert not any(b.exclude for b in s.bad_nodes if b.host == "testbox")
    scores = [b.score for b in s.bad_nodes]
    assert scores == sorted(scores, reverse=True)
    assert {d["date"] for d in s.ettr_by_date} == {j.day for j in truth.jobs}


def test_summary_formats(fleet: tuple[Path, Truth], run_cli) -> None:
    store, _ = fleet
    code, out, _ = run_cli("fleet", "summary", "--store", str(store), "--exclude-list")
    assert (code, out) == (0, "node042\n")
    code, out, _ = run_cli("fleet", "summary", "--store", str(store), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["host"] == "node042" and rows[0]["exclude"] == "True"
    code, out, _ = run_cli("fleet", "summary", "--store", str(store))
    assert code == 0
    assert "MTBF" in out and "--exclude=node042" in out


def test_reingest_is_idempotent_and_touches_only_its_job(
    fleet: tuple[Path, Truth], run_cli
) -> None:
    store, truth = fleet
    before = _files(store)
    one = truth.jobs[5].path
    mtimes = {p: p.stat().st_mtime_ns for p in store.rglob("*.parquet")}
    code, _, err = run_cli("fleet", "ingest", str(one), "--store", str(store), "-j", "1")
    assert code == 0, err
    assert _files(store) == before
    changed = {p.name for p in store.rglob("*.parquet") if p.stat().st_mtime_ns != mtimes.get(p)}
    assert changed == {f"{truth.jobs[5].job_id}-0.parquet"}
    # the same job re-dated moves partitions: its old files go, nothing else does
    path = truth.jobs[5].path
    text = path.read_text()
    path.write_text(text.replace(truth.jobs[5].day, "2027-01-15"))
    try:
        code, _, err = run_cli("fleet", "ingest", str(path), "--store", str(store), "-j", "1")
        assert code == 0, err
        after = _files(store)
        moved = {k for k in after if "2027-01-15" in k}
        assert moved and all(f"/{truth.jobs[5].job_id}-0.parquet" in k for k in moved)
        assert len(after) == len(before)
        assert summarize(load(store, engine="pandas")).jobs == len(truth.jobs)
    finally:
        path.write_text(text)
        run_cli("fleet", "ingest", str(path), "--store", str(store), "-j", "1")


@pytest.mark.parametrize(
    ("name", "schema"), [("jobs", JOBS), ("incidents", INCIDENTS), ("events", EVENTS)]
)
def test_schema_is_explicit_and_hive_partitioned(
    fleet: tuple[Path, Truth], name: str, schema
) -> None:
    store, _ = fleet
    files = sorted((store / name).glob("date=*/*.parquet"))
    assert files
    stored = pq.read_schema(files[0])
    assert stored.names == [n for n in schema.names if n != "date"]
    for f in stored:
        assert f.type == schema.field(f.name).type, f.name
    table = ds.dataset(store / name, format="parquet", partitioning=PARTITIONING).to_table()
    assert set(table.column("date").to_pylist()) <= {
        p.name.removeprefix("date=") for p in (store / name).iterdir()
    }


# scipy.stats.chi2.ppf values
@pytest.mark.parametrize(
    ("q", "df", "expected"),
    [
        (0.975, 2, 7.377758908),
        (0.025, 2, 0.05063561596),
        (0.95, 1, 3.841458821),
        (0.01, 1, 1.570878579e-4),
        (0.025, 20, 9.590777392),
        (0.975, 22, 36.78071208),
        (0.5, 10, 9.341817766),
        (0.99, 100, 135.8067232),
        (0.9999, 3, 21.10751347),
    ],
)
def test_chi2_quantile(q: float, df: int, expected: float) -> None:
    assert chi2_ppf(q, df) == pytest.approx(expected, rel=1e-7)


def test_gamma_and_poisson() -> None:
    assert gamma_p(1, 2.0) == pytest.approx(1 - 2.718281828459045**-2, rel=1e-12)
    # P(X >= 3), X ~ Poisson(1) = 1 - e^-1 (1 + 1 + 1/2)
    assert poisson_sf(3, 1.0) == pytest.approx(1 - 2.5 * 2.718281828459045**-1, rel=1e-9)
    assert poisson_sf(0, 5.0) == 1.0


def test_mtbf_interval() -> None:
    lo, hi = mtbf_interval(1000.0, 10)
    assert lo == pytest.approx(2000 / 36.78071208, rel=1e-7)
    assert hi == pytest.approx(2000 / 9.590777392, rel=1e-7)
    lo, hi = mtbf_interval(1000.0, 0)
    assert hi is None and lo == pytest.approx(2000 / 7.377758908, rel=1e-7)
    with pytest.raises(ValueError):
        chi2_ppf(1.0, 2)


def test_failed_job_is_skipped_exit_1(run_cli, tmp_path: Path) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01\x02" * 4096)
    good = FIXTURES / "lab" / "healthy.log"
    code, _, err = run_cli(
        "fleet", "ingest", str(good), str(binary), "--store", str(tmp_path / "s")
    )
    assert code == 1
    assert f"{binary}: skipped:" in err and "stored 1 of 2 jobs" in err
    assert len(list((tmp_path / "s" / "jobs").rglob("*.parquet"))) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["fleet", "ingest", "/no/such/log", "--store", "STORE"],
        ["fleet", "ingest", str(FIXTURES / "lab" / "healthy.log"), "--store", "STORE", "-j", "0"],
        ["fleet", "ingest", str(FIXTURES / "lab" / "healthy.log")],
        ["fleet", "summary", "--store", "STORE"],
        ["fleet", "summary", "--store", "STORE", "--format", "xml"],
    ],
)
def test_usage_errors_exit_2(run_cli, tmp_path: Path, args: list[str]) -> None:
    args = [a.replace("STORE", str(tmp_path / "empty")) for a in args]
    code, _, err = run_cli(*args)
    assert code == 2, err
    assert "Traceback" not in err


def test_duckdb_reads_the_same(fleet: tuple[Path, Truth]) -> None:
    pytest.importorskip("duckdb")
    store, _ = fleet
    a, b = summarize(load(store, "pandas")), summarize(load(store, "duckdb"))
    assert (a.jobs, a.failures_by_category, a.bad_nodes) == (
        b.jobs,
        b.failures_by_category,
        b.bad_nodes,
    )


def test_a_node_is_blamed_only_on_evidence_that_implicates_it(tmp_path: Path, run_cli) -> None:
    """Six 384-GPU runs on jean-zay-iam[01-34,36-49] whose GPU on jean-zay-iam17 dies every time
    (each run also hangs once and is cancelled by hand: no culprit, a banner naming the batch
    host jean-zay-iam01), and the lab's small jobs on one host, whose training script raises,
    is SIGKILLed, segfaults or hangs."""
    from .generators.bloom_run import generate as bloom

    runs = [tmp_path / f"run{seed}" for seed in range(6)]
    for seed, run in enumerate(runs):
        bloom(run, seed=seed, dead_host="jean-zay-iam17")
    store = tmp_path / "store"
    code, _, err = run_cli(
        "fleet", "ingest", *map(str, runs + LAB + SLURM), "--store", str(store), "-j", "2"
    )
    assert code == 0, err
    fleet = load(store, engine="pandas")
    # every node of the 384-GPU runs took part (the PULSE lines' node list), under one name each
    assert sorted(len(h) for h in fleet.jobs["hosts"])[-6:] == [48] * 6
    s = summarize(fleet)
    top = s.bad_nodes[0]
    assert (top.host, top.failures, top.jobs) == ("jean-zay-iam17", 6, 6)
    assert top.gpus == {3: 6} and "GPU 3 in 6 of 6" in top.reason
    assert [b.host for b in s.bad_nodes if b.exclude] == ["jean-zay-iam17"]
    # hangs without a culprit and cancel banners blame nobody; code bugs never exclude
    assert "jean-zay-iam01" not in {b.host for b in s.bad_nodes}
    assert not any(b.exclude for b in s.bad_nodes if b.host == "localhost")
    code, out, _ = run_cli("fleet", "summary", "--store", str(store))
    assert "--exclude=jean-zay-iam17" in out and "jean-zay-iam17: 6 failures" in out, out


def test_findings_are_stored_with_their_schema(run_cli, tmp_path: Path) -> None:
    """A run that slowed down and hung on a setup that lets hangs run: its findings are rows."""
    from logscope.fleet import FINDINGS

    from .generators.bloom_run import generate as generate_bloom

    logs = tmp_path / "run"
    generate_bloom(logs, slowdown=(3, 1100, 0.05))
    store = tmp_path / "store"
    code, _, err = run_cli("analyze", str(logs), "--store", str(store))
    assert code == 1, err
    (f,) = (store / "findings").glob("date=*/*.parquet")
    stored = pq.read_schema(f)
    assert stored.names == [n for n in FINDINGS.names if n != "date"]
    rows = pq.read_table(f).to_pylist()
    assert sorted(r["kind"] for r in rows) == ["hang_exposure", "slowdown"]
    slow = next(r for r in rows if r["kind"] == "slowdown")
    assert (slow["attempt"], slow["start_iteration"]) == (2, 1100) and slow["lost_gpu_hours"] > 0
