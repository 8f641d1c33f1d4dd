"""A library checked against itself: each signature's samples match it and its counter-samples
do not, each rule's samples are classified by it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .signatures import Library, Signature, classified


@dataclass(frozen=True, slots=True)
class SampleProblem:
    source: str
    signature: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.signature}: {self.message}"


def check_samples(library: Library, only: Sequence[str] | None = None) -> list[SampleProblem]:
    """Every sample must be matched by its signature (and win); no counter-sample may match it.

    Samples are full physical lines: they go through the prefix decoder first, so they also
    guard `logscope.lines.decode`.
    """
    from ..lines.decode import parse_line

    problems: list[SampleProblem] = []

    def winner(sample: str) -> list[str]:
        ids = []
        for line in parse_line(sample):
            hit = library.match(sample, line.text)
            if hit is not None:
                ids.append(hit[0].id)
        return ids

    def matches(sig: Signature, sample: str) -> bool:
        return any(sig.match(line.text) is not None for line in parse_line(sample))

    for sig in library.signatures:
        if only is not None and sig.source not in only:
            continue
        for i, sample in enumerate(sig.samples):
            if not any(t in sample for t in sig.trigger):
                problems.append(
                    SampleProblem(sig.source, sig.id, f"samples[{i}]: contains no trigger")
                )
            elif not matches(sig, sample):
                problems.append(SampleProblem(sig.source, sig.id, f"samples[{i}]: does not match"))
            elif sig.id not in winner(sample):
                won = ", ".join(winner(sample)) or "nothing"
                problems.append(
                    SampleProblem(sig.source, sig.id, f"samples[{i}]: matched, but {won} wins")
                )
        for i, sample in enumerate(sig.counter_samples):
            if any(t in sample for t in sig.trigger) and matches(sig, sample):
                problems.append(SampleProblem(sig.source, sig.id, f"counter_samples[{i}]: matches"))
    for rule in library.rules:
        if only is not None and rule.source not in only:
            continue
        for i, sample in enumerate(rule.samples):
            decided = [
                library.classify(*fields)
                for line in parse_line(sample)
                if (fields := classified(library, sample, line.text)) is not None
            ]
            if not any(d is rule for d in decided):
                got = ", ".join(sorted({d.id for d in decided if d is not None})) or "no rule"
                problems.append(
                    SampleProblem(rule.source, rule.id, f"samples[{i}]: classified by {got}")
                )
    return problems
