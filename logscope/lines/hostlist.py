"""Host names as SLURM and the logs write them: node lists expanded, one name per node."""

from __future__ import annotations

import ipaddress
import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_INTERFACE = re.compile(r"-(?:ib|eth|hsn|opa|bond|en|ens|enp)\d+$", re.IGNORECASE)
"""An interface name appended to the node's (`jean-zay-iam17-ib0`: what torchrun prints when the
rendezvous host is the InfiniBand address's name)."""
MAX_HOSTS = 100_000
"""A node list claiming more nodes than this is not expanded (a malformed or hostile line)."""


def expand_hostlist(text: str) -> list[str]:
    """SLURM's hostlist syntax expanded: `jean-zay-iam[01-03,05],gpu7` → jean-zay-iam01,
    jean-zay-iam02, jean-zay-iam03, jean-zay-iam05, gpu7 (zero padding kept). Brackets may
    appear more than once in a name (`r[1-2]n[01-02]`). Malformed parts are skipped."""
    out: list[str] = []
    for term in _split_top(text.strip()):
        names = _expand_term(term)
        if len(out) + len(names) > MAX_HOSTS:
            break
        out.extend(names)
    return out


def _split_top(text: str) -> list[str]:
    """Split on the commas outside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p]


def _expand_term(term: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", term)
    if m is None:
        return [term] if re.fullmatch(r"[\w.-]+", term) else []
    head, tail = term[: m.start()], term[m.end() :]
    numbers: list[str] = []
    for piece in m.group(1).split(","):
        r = _RANGE.match(piece.strip())
        if r is None:
            return []
        lo, hi = r.group(1), r.group(2) or r.group(1)
        if int(hi) - int(lo) > MAX_HOSTS:
            return []
        width = len(lo)
        numbers += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return [name for n in numbers for name in _expand_term(head + n + tail)]


def node_name(host: str) -> str:
    """One name per node, as SLURM lists it: `jean-zay-iam17-ib0`, `jean-zay-iam17.idris.fr`
    and `JEAN-ZAY-IAM17` are all `jean-zay-iam17`. An IP address stays as it is."""
    h = host.strip().lower().rstrip(".")
    try:
        ipaddress.ip_address(h)
    except ValueError:
        h = h.split(".", 1)[0]
        return _INTERFACE.sub("", h)
    return h
