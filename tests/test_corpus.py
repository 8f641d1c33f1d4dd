"""The real-log corpus (../shared/corpus): logs users posted publicly, scored by its own score.py.

The figures asserted here are floors, so that a change that reads real logs worse fails. The
corpus lives beside the clone (in CI too); outside CI, without it, the test skips saying why.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import skip_or_fail

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
SCORE = CORPUS / "score.py"

# Floors, as fractions of the scored cases. Culprit: two of the 15 ranks the labels name come from
# outside the log (a README's process count, a py-spy session in the thread), see CHANGELOG.
FLOORS = {"category": 0.95, "culprit": 0.80, "line": 0.90, "outcome": 0.85}
MAX_FAILING_WITHOUT_INCIDENT = 2  # two silent hangs whose logs carry no time at all
_SUMMARY = re.compile(r"^corpus: (.*)$", re.M)
_FIGURE = re.compile(r"(\w+) (\d+)/(\d+)")
_COUNTS = re.compile(
    r"failing logs with no incident (\d+), healthy logs with one (\d+), errors (\d+)"
)


@pytest.fixture(scope="module")
def summary() -> str:
    if not SCORE.is_file():
        skip_or_fail(f"no real-log corpus at {CORPUS} (it lies beside the clone in CI)")
    run = subprocess.run(
        [sys.executable, str(SCORE), "--logscope", f"{sys.executable} -m logscope"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    found = _SUMMARY.search(run.stdout)
    assert found, f"no summary line\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    return run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(FLOORS))
def test_corpus_figure(summary: str, key: str) -> None:
    line = _SUMMARY.findall(summary)[-1]
    figures = {k: (int(h), int(n)) for k, h, n in _FIGURE.findall(line)}
    hit, total = figures[key]
    assert total and hit / total >= FLOORS[key], f"{key} {hit}/{total}\n{summary}"


@pytest.mark.slow
def test_corpus_healthy_and_failing_logs(summary: str) -> None:
    m = _COUNTS.search(summary)
    assert m, summary
    missed, false_alarms, errors = map(int, m.groups())
    assert errors == 0, summary
    assert false_alarms == 0, summary
    assert missed <= MAX_FAILING_WITHOUT_INCIDENT, summary
