"""Each real fixture: the JSON names the injected category, root-cause line, culprit, outcome.

The truth is in tests/fixtures/expected.toml, written from what was injected (not from logscope).
"""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from .helpers import FIXTURES

EXPECTED = tomllib.loads((FIXTURES / "expected.toml").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str, analyze_json) -> None:
    want = EXPECTED[name]
    code, doc = analyze_json(FIXTURES / name)
    job = doc["job"]
    assert job["outcome"] == want["outcome"], job
    assert job["world_size"] == want["world_size"], job
    if "last_iteration" in want:
        assert job["last_iteration"] == want["last_iteration"], job
    if "resumed_from_iteration" in want:
        assert doc["attempts"][-1]["resumed_from"] == want["resumed_from_iteration"], doc
    if not want["category"]:
        assert doc["verdict"] is None, doc["verdict"]
        assert code == 0
        return
    if want["root_cause_line"] == 0:
        # the log stops with no line that shows the cause: nothing may be claimed as one
        assert doc["verdict"] is None or doc["verdict"]["category"] == want["category"], doc
        if doc["verdict"] is not None:
            _check_culprit(_verdict_incident(doc), want)
        return
    assert code == 1
    inc = _verdict_incident(doc)
    assert inc["category"] == want["category"], inc
    rc = inc["root_cause"]
    assert rc["line"] == want["root_cause_line"], rc
    assert rc["text"] == want["root_cause_text"], rc
    _check_culprit(inc, want)


def _verdict_incident(doc: dict[str, Any]) -> dict[str, Any]:
    return next(i for i in doc["incidents"] if i["id"] == doc["verdict"]["incident"])


def _check_culprit(inc: dict[str, Any], want: dict[str, Any]) -> None:
    if not want.get("culprit_knowable", True):
        c = inc["culprit"]
        assert c is None or c["confidence"] < 0.5, c
    elif want["fault_rank"] >= 0:
        assert inc["culprit"] is not None, inc
        assert inc["culprit"]["rank"] == want["fault_rank"], inc["culprit"]
