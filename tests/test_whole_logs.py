"""Whole real logs of finished jobs (tests/fixtures/whole): the labels hold to their logs, and the
verdicts on them do not fall below what logscope reaches today."""

from __future__ import annotations

import gzip
import tomllib
from pathlib import Path
from typing import Any

import pytest

from logscope import analyze, document

WHOLE = Path(__file__).parent / "fixtures" / "whole"
CASES: list[dict[str, Any]] = tomllib.loads((WHOLE / "expected.toml").read_text())["log"]
CATEGORY_FLOOR = 27
"""Categories right today, of 27; raised as the verdict learns how runs end."""
OUTCOME_FLOOR = 27
CULPRIT_FLOOR = 1
"""Culprit ranks right, of the logs whose label names one (1)."""
HEALTHY_WITH_INCIDENT_CEILING = 0
"""Healthy runs (15) that get an incident: what they outlived is noted, never an incident."""


def _lines(case: dict[str, Any]) -> list[str]:
    text = gzip.decompress((WHOLE / case["file"]).read_bytes()).decode("utf-8", "replace")
    return [line.rstrip("\r") for line in text.split("\n")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["file"].removesuffix(".log.gz"))
def test_a_label_holds_to_its_log(case: dict[str, Any]) -> None:
    assert case["licence"] == "Apache-2.0" and case["repo"] and len(case["commit"]) == 40
    healthy = case["category"] == "healthy"
    assert (case["outcome"] == "completed") == healthy or "completed" in case.get(
        "alt_outcomes", []
    )
    if healthy:
        assert case["first_fatal_line"] == ""
    else:
        assert case["first_fatal_line"] in _lines(case), case["first_fatal_line"]


@pytest.mark.slow
def test_verdicts_stay_above_their_floor() -> None:
    category = outcome = culprit = 0
    alarms = []
    for case in CASES:
        doc = document(analyze([str(WHOLE / case["file"])]))
        verdict = doc.get("verdict") or {}
        got = verdict.get("category", "healthy")
        category += got in {case["category"], *case.get("alt_categories", [])}
        outcome += doc["job"]["outcome"] in {case["outcome"], *case.get("alt_outcomes", [])}
        if case["category"] == "healthy" and doc["incidents"]:
            alarms.append(case["file"])
        if case["root_cause_rank"] >= 0 and doc["incidents"]:
            found = next(i for i in doc["incidents"] if i["id"] == verdict.get("incident"))
            culprit += (found["culprit"] or {}).get("rank") == case["root_cause_rank"]
    assert category >= CATEGORY_FLOOR, f"categories right: {category} of {len(CASES)}"
    assert outcome >= OUTCOME_FLOOR, f"outcomes right: {outcome} of {len(CASES)}"
    assert culprit >= CULPRIT_FLOOR, f"culprits right: {culprit}"
    assert len(alarms) <= HEALTHY_WITH_INCIDENT_CEILING, f"healthy runs with an incident: {alarms}"
