"""SLURM node lists expanded; one name per node."""

from __future__ import annotations

import pytest

from logscope.fleet.blame import node_evidence
from logscope.lines.hostlist import MAX_HOSTS, expand_hostlist, node_name
from logscope.model import CATEGORIES, NODE_EVIDENCE, Culprit, Event, Incident, Line


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        (
            "jean-zay-iam[01-03,05]",
            ["jean-zay-iam01", "jean-zay-iam02", "jean-zay-iam03", "jean-zay-iam05"],
        ),
        ("node7", ["node7"]),
        ("gpu[8-10],cpu1", ["gpu8", "gpu9", "gpu10", "cpu1"]),
        ("nid[001-002]-ib", ["nid001-ib", "nid002-ib"]),
        ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
        ("node[1-x],ok", ["ok"]),  # a malformed part is skipped, the rest kept
        ("", []),
    ],
)
def test_node_lists_expand_like_slurm(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


def test_a_huge_node_list_is_not_expanded() -> None:
    assert expand_hostlist(f"n[0-{MAX_HOSTS * 10}]") == []


@pytest.mark.parametrize(
    ("host", "node"),
    [
        ("jean-zay-iam17-ib0", "jean-zay-iam17"),
        ("jean-zay-iam17.idris.fr", "jean-zay-iam17"),
        ("JEAN-ZAY-IAM17", "jean-zay-iam17"),
        ("gpu-st-p4d-24xlarge-1", "gpu-st-p4d-24xlarge-1"),  # a number that is not an interface
        ("10.148.3.12", "10.148.3.12"),
    ],
)
def test_one_name_per_node(host: str, node: str) -> None:
    assert node_name(host) == node


def test_every_category_says_what_it_implicates() -> None:
    assert set(NODE_EVIDENCE) == set(CATEGORIES)
    assert set(NODE_EVIDENCE.values()) <= {"strong", "weak", "culprit", "none"}


@pytest.mark.parametrize(
    ("category", "culprit_host", "evidence"),
    [
        ("gpu_hardware", None, "strong"),
        ("segfault", "node7", "weak"),
        ("python_exception", "node7", "none"),  # the program's fault, wherever it ran
        ("hang", "node7", "weak"),  # the silent rank's node
        ("hang", None, "none"),  # nobody named: no node to blame
        ("collective_timeout", None, "none"),
        ("cancelled", "node7", "none"),
    ],
)
def test_what_an_incident_says_about_its_node(
    category: str, culprit_host: str | None, evidence: str
) -> None:
    line = Line(raw="x", text="x", path="job.out", lineno=1)
    root = Event(kind="failure", signature="s", category=category, severity="error", role="cause",
                 line=line, seq=1, fields={})  # fmt: skip
    culprit = Culprit(rank=3, local_rank=3, host=culprit_host, confidence=0.9, reason="r")
    incident = Incident(id="I1", category=category, severity="error", title="t",
                        explanation="", remedies=(), references=(), root_cause=root,
                        culprit=culprit, cascade=(), evidence=(), iteration=None, start=None,
                        end=None)  # fmt: skip
    assert node_evidence(incident) == evidence
