"""Each real fixture: the JSON names the injected category, root-cause line, culprit, outcome.

The truth is in tests/fixtures/expected.toml, written from what was injected (not from logscope).
"""

from __future__ import annotations

import tomllib

import pytest

from .conftest import FIXTURES

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
    if not want["category"]:
        assert doc["verdict"] is None, doc["verdict"]
        assert code == 0
        return
    if want["root_cause_line"] == 0:
        # the log stops with no line that shows the cause: nothing may be claimed as one
        assert doc["verdict"] is None or doc["verdict"]["category"] == want["category"], doc
        return
    assert code == 1
    verdict = doc["verdict"]
    inc = next(i for i in doc["incidents"] if i["id"] == verdict["incident"])
    assert inc["category"] == want["category"], inc
    rc = inc["root_cause"]
    assert rc["line"] == want["root_cause_line"], rc
    assert rc["text"] == want["root_cause_text"], rc
    if not want.get("culprit_knowable", True):
        c = inc["culprit"]
        assert c is None or c["confidence"] < 0.5, c
    elif want["fault_rank"] >= 0:
        assert inc["culprit"] is not None, inc
        assert inc["culprit"]["rank"] == want["fault_rank"], inc["culprit"]
