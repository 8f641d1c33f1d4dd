"""Real hung torchrun jobs (tests/fixtures/hangs, made by tests/lab/run_hangs.py) through the CLI:
the log with its dumps names the rank the others waited for, and says how it knows."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURES, analyze_doc, cli

HANGS = FIXTURES / "hangs"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((HANGS / "expected.toml").read_text())


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_the_dumps_name_the_hung_rank(kind: str) -> None:
    want = EXPECTED[kind]
    folder = HANGS / kind
    _code, doc, _err = analyze_doc(str(folder))  # a folder: the log beside its dumps
    hang = doc["hang_dumps"]
    assert hang["culprit_rank"] == want["culprit"], hang["reason"]
    assert hang["kind"] == want["kind"]
    for part in want["reason"]:
        assert part in hang["reason"], (part, hang["reason"])
    assert [r["rank"] for r in hang["ranks"] if r["odd"]] == [want["culprit"]]
    assert [i["path"] for i in doc["inputs"]] == [str(folder / "run.log")]
    verdict = next(i for i in doc["incidents"] if i["id"] == doc["verdict"]["incident"])
    assert verdict["culprit"]["rank"] == want["culprit"]
    assert verdict["culprit"]["reason"].startswith(hang["reason"])
    files = {e["file"] for e in verdict["evidence"]}
    assert any("/fr/" in f or "/pyspy/" in f or "/proc/" in f for f in files)


def test_the_log_alone_names_another_rank() -> None:
    """What the dumps fix: without them, the launcher's first reported failure is blamed."""
    _code, doc, _err = analyze_doc(str(HANGS / "sizes" / "run.log"))
    verdict = next(i for i in doc["incidents"] if i["id"] == doc["verdict"]["incident"])
    assert verdict["culprit"]["rank"] != EXPECTED["sizes"]["culprit"]
    assert doc["hang_dumps"] is None
    _code, doc, _err = analyze_doc(str(HANGS / "sizes"))
    verdict = next(i for i in doc["incidents"] if i["id"] == doc["verdict"]["incident"])
    assert verdict["culprit"]["rank"] == EXPECTED["sizes"]["culprit"]
    assert "the log alone named rank" in verdict["culprit"]["reason"]


def test_terminal_markdown_and_html_show_the_table(tmp_path: Path) -> None:
    folder = HANGS / "different"
    _code, out, _err = cli("analyze", str(folder))
    assert "Hang dumps" in out and "> 2" in out and "all_gather" in out
    _code, md, _err = cli("analyze", str(folder), "--format", "md")
    assert "## Hang dumps" in md and "| **2** |" in md
    _code, _out, _err = cli("analyze", str(folder), "--html", "--out", str(tmp_path))
    html = next(tmp_path.glob("*.html")).read_text()
    assert 'class="unrec hang"' in html and 'class="odd"' in html


def test_a_truncated_and_a_missing_dump_are_warnings(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    shutil.copytree(HANGS / "skip", folder)
    dump = folder / "fr" / "nccl_trace_rank_1"
    dump.write_bytes(dump.read_bytes()[:300])
    (folder / "fr" / "nccl_trace_rank_3").unlink()
    _code, doc, err = analyze_doc(str(folder))
    hang = doc["hang_dumps"]
    assert hang["culprit_rank"] == 2
    assert any(str(dump) in w and "truncated" in w for w in hang["warnings"])
    assert str(dump) in err


def test_a_silent_log_with_dumps_is_a_hung_job(tmp_path: Path) -> None:
    """`tail --on-hang collect`'s case: the job still runs, its log stops saying anything; the
    dumps collected then are the only account of the hang."""
    folder = tmp_path / "live"
    shutil.copytree(HANGS / "skip", folder)
    log = folder / "run.log"
    lines = log.read_text().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if "hang fault" in line)
    log.write_text("".join(lines[:cut]))
    code, doc, _err = analyze_doc(str(folder))
    assert code == 1
    assert doc["job"]["outcome"] == "hung"
    verdict = next(i for i in doc["incidents"] if i["id"] == doc["verdict"]["incident"])
    assert verdict["category"] == "hang" and verdict["culprit"]["rank"] == 2
    assert verdict["root_cause"]["file"].endswith("nccl_trace_rank_2")


def test_a_py_spy_dump_pasted_into_the_log_shows_the_job_waiting(tmp_path: Path) -> None:
    """A dump pasted under the log (its header cut, as posts do): the thread inside a c10d
    collective says the job stood waiting there. Without the dump the same lines are only cut."""
    log = (HANGS / "skip" / "run.log").read_text().splitlines()
    progress = log[: next(i for i, t in enumerate(log) if "iteration        5/" in t) + 1]
    dump = (HANGS / "skip" / "pyspy" / "rank0.txt").read_text().splitlines()
    threads = dump[next(i for i, t in enumerate(dump) if t.startswith("Thread ")) :]
    (tmp_path / "pasted.log").write_text("\n".join([*progress, "", *threads]) + "\n")
    _code, doc, _err = analyze_doc(str(tmp_path / "pasted.log"))
    assert doc["job"]["outcome"] == "hung", doc["job"]
    (inc,) = doc["incidents"]
    assert (inc["category"], inc["root_cause"]["pattern"]) == ("hang", "pyspy.waits_in_collective")
    assert "waiting in all_reduce" in inc["title"]
    (tmp_path / "cut.log").write_text("\n".join(progress) + "\n")
    _code, doc, _err = analyze_doc(str(tmp_path / "cut.log"))
    assert (doc["job"]["outcome"], doc["incidents"]) == ("truncated", [])


def test_a_pasted_dump_of_a_zero_3_gather_shows_the_job_waiting(tmp_path: Path) -> None:
    """A dump of DeepSpeed frames alone (deepspeed 0.16.4's ZeRO-3 gather): nearly every line is
    an indented frame, so the indent is the excerpt's own layer; the gather still reads as a
    wait in a collective."""
    frames = [
        "    all_gather_coalesced (deepspeed/runtime/zero/partition_parameters.py:1261)",
        "    wrapped_fn (deepspeed/utils/nvtx.py:18)",
        "    fetch_sub_module (deepspeed/runtime/zero/partitioned_param_coordinator.py:314)",
        "    _pre_forward_module_hook (deepspeed/runtime/zero/parameter_offload.py:292)",
        "    _call_impl (torch/nn/modules/module.py:1821)",
        "    forward (model.py:120)",
        "    training_step (train.py:98)",
        "    main (train.py:140)",
    ]
    (tmp_path / "dump.log").write_text(
        'Thread 811 (active): "MainThread"\n' + "\n".join(frames) + "\n"
    )
    _code, doc, _err = analyze_doc(str(tmp_path / "dump.log"))
    assert doc["job"]["outcome"] == "hung", doc["job"]
    (inc,) = doc["incidents"]
    assert inc["root_cause"]["pattern"] == "pyspy.waits_in_deepspeed_collective", inc["root_cause"]
    assert "waiting in all_gather_coalesced" in inc["title"]


def test_a_dump_given_alone_shows_where_the_process_stood(tmp_path: Path) -> None:
    """Nobody dumps a process that runs well: dumps alone, or beside a log that does not say the
    job ended, and naming no rank, make a hang whose root is the first main thread's innermost
    frame. A log that says the job completed keeps its verdict."""
    dump = HANGS / "skip" / "pyspy" / "rank0.txt"
    code, doc, _err = analyze_doc(str(dump))
    assert (code, doc["job"]["outcome"]) == (1, "hung"), doc["job"]
    (inc,) = doc["incidents"]
    assert inc["category"] == "hang" and "in all_reduce" in inc["title"], inc
    lines = dump.read_text().splitlines()
    at = inc["root_cause"]["line"]
    assert lines[at - 2].startswith("Thread ") and "MainThread" in lines[at - 2]
    assert lines[at - 1].strip() == inc["root_cause"]["text"].strip()
    assert inc["culprit"] is None  # it waits in a collective: a victim, if anything
    # constructed (py-spy 0.3's format): a process outside communication, in torch's extension
    # build lock, beside a log that stops mid-run
    (tmp_path / "stack.txt").write_text(
        "Process 4711: /usr/bin/python -u train.py --local_rank=0\n"
        "Python v3.11.2 (/usr/bin/python3.11)\n\n"
        'Thread 4711 (idle): "MainThread"\n'
        "    wait (torch/utils/file_baton.py:42)\n"
        "    _jit_compile (torch/utils/cpp_extension.py:1522)\n"
        "    load (torch/utils/cpp_extension.py:1284)\n"
        "    main (train.py:273)\n"
    )
    (tmp_path / "run.log").write_text(
        "Using /root/.cache/torch_extensions/py311 as PyTorch extensions root...\n"
    )
    _code, doc, _err = analyze_doc(str(tmp_path))
    (inc,) = doc["incidents"]
    assert doc["job"]["outcome"] == "hung"
    assert inc["root_cause"]["text"].strip() == "wait (torch/utils/file_baton.py:42)", inc
    assert "outside communication" in inc["title"]
    # the log says the job completed: the dump is of something else
    done = (
        "INFO 2024-05-02 10:00:00,000 torch/distributed/elastic/agent/server/api.py:954] "
        "[default] worker group successfully finished. Waiting 300 seconds for other agents "
        "to finish."
    )
    (tmp_path / "run.log").write_text(done + "\n")
    _code, doc, _err = analyze_doc(str(tmp_path))
    assert (doc["job"]["outcome"], doc["incidents"]) == ("completed", []), doc["job"]


def test_a_log_that_ends_on_a_pasted_dump_of_its_main_thread_hung(tmp_path: Path) -> None:
    """A dump pasted without its header, the main thread outside communication (a DataLoader
    waiting on its workers, py-spy 0.3's format): the log ends on it, so on a hang there. With
    steps after it, the run went on and the dump says nothing."""
    dump = [
        'Thread 30512 (idle): "MainThread"',
        "    poll (multiprocessing/popen_fork.py:27)",
        "    _try_get_data (torch/utils/data/dataloader.py:1133)",
        "    __next__ (torch/utils/data/dataloader.py:631)",
        "    train_one_epoch (train.py:212)",
        'Thread 30544 (idle): "pin_memory"',
        "    get (multiprocessing/queues.py:113)",
    ]
    meg = [
        f" iteration {n:8d}/    1000 | consumed samples: {n * 8:12d} | elapsed time per "
        f"iteration (ms): 812.4 | learning rate: 1.0E-04 | global batch size:     8 | lm loss: "
        f"2.{n:06d}E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 "
        "| number of nan iterations:   0 |"
        for n in range(1, 5)
    ]
    (tmp_path / "stuck.log").write_text("\n".join([*meg, *dump]) + "\n")
    _code, doc, _err = analyze_doc(str(tmp_path / "stuck.log"))
    assert doc["job"]["outcome"] == "hung", doc["job"]
    (inc,) = doc["incidents"]
    assert inc["category"] == "hang" and inc["root_cause"]["line"] == len(meg) + 1, inc
    # the run went on after it
    (tmp_path / "went_on.log").write_text("\n".join([*meg[:1], *dump, *meg[1:]]) + "\n")
    _code, doc, _err = analyze_doc(str(tmp_path / "went_on.log"))
    assert (doc["job"]["outcome"], doc["incidents"]) == ("truncated", []), doc["job"]
