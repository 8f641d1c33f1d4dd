"""Which node a failure implicates, and how strongly; which nodes a job ran on. A node is blamed
only on evidence that implicates it (model.NODE_EVIDENCE), at the culprit's host or the root
cause's, never at the batch host a scheduler banner names."""

from __future__ import annotations

from collections.abc import Iterable

from ..lines.hostlist import node_name
from ..model import NODE_EVIDENCE, Analysis, Incident

IMPLICATING = ("strong", "weak")


def node_evidence(incident: Incident) -> str:
    """`strong`, `weak` or `none`: how much the incident says about its node's health."""
    kind = NODE_EVIDENCE.get(incident.category, "none")
    if kind == "culprit":
        # a hang or a timeout implicates the rank that stopped answering, when one is named
        c = incident.culprit
        return "weak" if c is not None and c.host else "none"
    return kind


def incident_node(incident: Incident, job_nodes: Iterable[str] = ()) -> str | None:
    """The node the incident happened on: the culprit's, else the root-cause line's own (a rank's
    prefix), else the job's only node. An end banner's host is the batch host: never used."""
    c = incident.culprit
    if c is not None and c.host:
        return node_name(c.host)
    root = incident.root_cause
    if root.role != "end" and root.line.host:
        return node_name(root.line.host)
    nodes = sorted(set(job_nodes))
    return nodes[0] if len(nodes) == 1 else None


def job_nodes(analysis: Analysis) -> list[str]:
    """Every node the logs show took part, one name each: hosts of rank prefixes, node lists,
    srun's and torchrun's reports, culprits."""
    hosts = set(analysis.job.hosts)
    for inc in analysis.incidents:
        if inc.culprit is not None and inc.culprit.host:
            hosts.add(inc.culprit.host)
    return sorted({node_name(h) for h in hosts if h})
