"""`logscope tail --on-hang collect` on real torchrun jobs (torch CPU wheel, 4 ranks, gloo,
Flight Recorder on, each rank serving torch's worker-server socket): one rank hangs, in a sleep
or SIGSTOPped, the others block in their all-reduce with a process-group timeout far away.

The evidence folder must hold every rank's py-spy stack (what py-spy printed), the hung rank's
stack must be the one in the fault, a stopped rank must be recorded as stopped, and the alert
must come within the stall + 30 s of the last progress line. Prints the measured latency
(`pytest -s`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import LAB_PYTHON, lab_marks

LAB_DIR = Path(__file__).resolve().parent / "lab"
REPO = LAB_DIR.parent.parent
sys.path.insert(0, str(LAB_DIR))
from run_faults import job_env, kill_tree  # noqa: E402

pytestmark = [*lab_marks(), pytest.mark.slow]

STALL_S = 10.0
BUDGET_S = 30.0
PROGRESS = re.compile(rb"\biteration\s+\d+/\s*\d+ \|")


def _job(workdir: Path, fault: str, at: int) -> subprocess.Popen[bytes]:
    env = job_env(
        workdir,
        {
            "LAB_FAULT": fault,
            "LAB_FAULT_RANK": "1",
            "LAB_FAULT_ITER": str(at),
            "LAB_ITERS": str(at) if fault == "skip" else "200",
            "LAB_SAVE_INTERVAL": "0",
            "LAB_PG_TIMEOUT": "3600",
            "TORCH_FR_BUFFER_SIZE": "2000",
            "TORCH_FR_DUMP_TEMP_FILE": str(workdir / "fr-dump-"),
            "TORCH_WORKER_SERVER_SOCKET": str(workdir / "ws-"),
        },
    )
    cmd = [LAB_PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "4", "--tee", "3",
           str(LAB_DIR / "served.py")]  # fmt: skip
    with (workdir / "run.log").open("wb") as out:
        return subprocess.Popen(
            cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def _last_progress(log: Path, stop: threading.Event, seen: list[float]) -> None:
    """Stamp each progress line with the wall time it appeared (a tight poll of the file)."""
    count = 0
    while not stop.is_set():
        with contextlib.suppress(FileNotFoundError):
            n = len(PROGRESS.findall(log.read_bytes()))
            if n > count:
                count = n
                seen.append(time.time())
        time.sleep(0.02)


def _run(tmp_path: Path, fault: str, at: int = 12) -> tuple[dict[str, Any], Path, float]:
    """Run the job and `tail --on-hang collect` on its log; (the incident, the evidence
    folder, seconds from the last progress line to the incident)."""
    log = tmp_path / "run.log"
    job = _job(tmp_path, fault, at)
    stop, seen = threading.Event(), []
    poller = threading.Thread(target=_last_progress, args=(log, stop, seen), daemon=True)
    poller.start()
    tail_env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_")}
    tail_env["PYTHONPATH"] = str(REPO)
    args = [str(log), "--on-hang", "collect", "--stall-after", f"{STALL_S:g}s", "--json"]
    args += ["--exit-on-incident", "--out", str(tmp_path / "reports"), "--max-duration", "4m"]
    try:
        tail = subprocess.Popen(
            [sys.executable, "-m", "logscope", "tail", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tail_env,
        )  # fmt: skip
        assert tail.stdout is not None
        incident, at = None, 0.0
        for line in tail.stdout:
            doc = json.loads(line)
            if doc.get("type") == "incident":
                incident, at = doc, time.time()
                break
        _, err = tail.communicate(timeout=60)
    finally:
        stop.set()
        kill_tree(job)
        job.wait()
    assert incident is not None, f"no incident; stderr:\n{err}\nlog:\n{log.read_text()[-3000:]}"
    assert seen, "no progress line was seen"
    folders = list((tmp_path / "reports").glob("hang-*"))
    assert len(folders) == 1, folders
    latency = at - seen[-1]
    print(f"\n[collect] {fault}: stall -> alert {latency:.1f} s (stall {STALL_S:g} s)\n{err}")
    return incident, folders[0], latency


def _check_common(
    incident: dict[str, Any], folder: Path, latency: float, hung_in: str = "inject_fault"
) -> dict[str, Any]:
    assert incident["kind"] == "hang", incident
    actions = {a["action"]: a for a in incident["actions"]}
    assert actions["collect"]["ok"] and str(folder) in actions["collect"]["detail"], actions
    assert latency <= STALL_S + BUDGET_S, f"alert {latency:.1f} s after the last progress"
    manifest = json.loads((folder / "collect.json").read_text())
    ranks = manifest["ranks"]
    assert [(r["rank"], r["world_size"]) for r in ranks] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    for r in ranks:
        assert r["pyspy"] == f"pyspy-{r['host']}-rank{r['rank']}.txt", r
        text = (folder / r["pyspy"]).read_text()
        assert text.startswith(f"Process {r['pid']}: "), text
        status = (folder / r["status"]).read_text()
        assert f"\nState:\t{r['state']} " in status, status
        # the hung rank's stack is where it hangs; its peers' are not
        assert (f"{hung_in} (" in text) == (r["rank"] == 1), text
    # the folder read with the log (logscope.analyze) names the hung rank in the alert
    culprit = actions.get("culprit")
    assert culprit is not None and culprit["ok"], incident["actions"]
    assert culprit["detail"].startswith("rank 1"), culprit
    return manifest


def test_a_rank_stuck_in_a_sleep(tmp_path: Path) -> None:
    incident, folder, latency = _run(tmp_path, "hang_all")
    manifest = _check_common(incident, folder, latency)
    assert manifest["stopped_ranks"] == []
    # each rank serves its Flight Recorder from a C++ thread: the sleeping one answers too
    for r in manifest["ranks"]:
        assert r["flight_recorder"] == [f"fr-{r['host']}-rank{r['rank']}.json"], r
        entries = json.loads((folder / r["flight_recorder"][0]).read_text())["entries"]
        assert any(e["profiling_name"] == "gloo:all_reduce" for e in entries)


def test_a_sigstopped_rank(tmp_path: Path) -> None:
    incident, folder, latency = _run(tmp_path, "stop")
    manifest = _check_common(incident, folder, latency)
    assert manifest["stopped_ranks"] == [1]
    stopped = manifest["ranks"][1]
    assert (stopped["state"], stopped["flight_recorder"]) == ("T", []), stopped
    assert (
        "rank 1" in incident["actions"][0]["detail"]
        and "stopped" in (incident["actions"][0]["detail"])
    )
    assert [len(r["flight_recorder"]) for r in manifest["ranks"]] == [1, 0, 1, 1]


def test_a_rank_that_skipped_a_collective(tmp_path: Path) -> None:
    """Rank 1 skips the last iteration's all-reduce and waits in the final barrier; the
    others wait in the all-reduce (on gloo a skip is a hang only where the skipping rank's next
    collective has the same size: here, the barrier)."""
    incident, folder, latency = _run(tmp_path, "skip", at=20)
    manifest = _check_common(incident, folder, latency, hung_in="barrier")
    for r in manifest["ranks"]:
        text = (folder / r["pyspy"]).read_text()
        assert ("all_reduce (" in text) == (r["rank"] != 1), text
        entries = json.loads((folder / r["flight_recorder"][0]).read_text())["entries"]
        assert entries[-1]["profiling_name"] == ("gloo:barrier" if r["rank"] == 1 else
                                                 "gloo:all_reduce"), entries[-1]  # fmt: skip


def test_a_rank_in_another_collective(tmp_path: Path) -> None:
    """Rank 1 calls all_gather where its peers call the loss all-reduce: the Flight Recorders
    show the desync at one sequence number."""
    incident, folder, latency = _run(tmp_path, "other")
    manifest = _check_common(incident, folder, latency, hung_in="all_gather")
    last = {
        r["rank"]: json.loads((folder / r["flight_recorder"][0]).read_text())["entries"][-1]
        for r in manifest["ranks"]
    }
    assert last[1]["profiling_name"] == "gloo:all_gather", last[1]
    assert {last[r]["profiling_name"] for r in (0, 2, 3)} == {"gloo:all_reduce"}, last
