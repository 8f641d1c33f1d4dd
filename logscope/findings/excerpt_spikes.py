"""Spikes in a short excerpt: a loss or gradient norm that jumps by an order of magnitude against
the excerpt's own first lines, where there is too little history to measure noise.

The trailing rule (training_health) judges a value against the spread of the lines before it,
so it needs MIN_HISTORY of them. What people paste (a chronicle, an issue, a chat) is a dozen
Megatron lines around the event: grad norm from 0.24 to 960 within four iterations, lm loss from
2.2 to 5.1. A change that large needs no noise model:

- a gradient norm tenfold its baseline is an order of magnitude, whatever the model;
- an lm loss is a mean cross-entropy in nats (Megatron, DeepSpeed, HF, Lightning print the
  natural-log loss): a rise of ln 10 over its baseline is a tenfold perplexity. It must also be
  half again its baseline, so a loss that is no cross-entropy (a regression's, in the hundreds)
  is not judged by its absolute rise.

The baseline is the median of the excerpt's first lines (a third of them, 1 to 3). Only values
with fewer than MIN_HISTORY lines before them in their attempt are judged here (the trailing
rule judges the others), and only where the attempt does not begin training: until the LR
warm-up ends (the first hundreds to thousands of iterations) the loss and the gradient norm
swing by orders of magnitude as training settles, which is no spike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .changepoints import Floats

LOSS_RISE_NATS = math.log(10)
"""A loss rise this large (nats) is a tenfold perplexity."""
LOSS_RATIO = 1.5
"""...and the loss at least this many times its baseline."""
GRAD_RATIO = 10.0
"""A gradient norm this many times its baseline is an order of magnitude."""
BASELINE_LINES = 3
"""At most this many first lines make the baseline (a third of the excerpt, at least one)."""
WARMUP_ITERATIONS = 1000
"""An attempt whose first iteration is at most this is training's start (LR warm-up)."""


@dataclass(frozen=True, slots=True)
class ExcerptSpike:
    """Positions in the series given: where the spike began, its peak, and where the value was
    back near its baseline (None: not within the series)."""

    first: int
    peak: int
    back: int | None
    baseline: float


def baseline_of(y: Floats) -> tuple[float, int] | None:
    """The median of the first lines of a short series and how many lines it took."""
    k = max(1, min(BASELINE_LINES, len(y) // 3))
    if len(y) <= k:
        return None
    return float(np.median(y[:k])), k


def excerpt_spikes(
    y: Floats, history: int, first_iteration: int | None, loss: bool
) -> list[ExcerptSpike]:
    """The spikes of a series (its finite values, in order) that begin within its first
    `history` values, judged against its first lines. `loss`: the series is a loss (else a
    gradient norm). `first_iteration`: the attempt's first iteration (None: unknown, and then
    not judged: nothing says training had settled)."""
    if first_iteration is None or first_iteration <= WARMUP_ITERATIONS:
        return []
    got = baseline_of(y)
    if got is None:
        return []
    base, k = got
    if not math.isfinite(base) or base <= 0:
        return []
    with np.errstate(invalid="ignore"):
        if loss:
            high = (y - base >= LOSS_RISE_NATS) & (y >= LOSS_RATIO * base)
        else:
            high = y >= GRAD_RATIO * base
    high[:k] = False
    hits = np.flatnonzero(high)
    if len(hits) == 0 or int(hits[0]) >= history:
        return []
    first = int(hits[0])
    # the spike lasts while the value stays high (a dip of a line or two does not end it)
    last = first
    for p in hits.tolist():
        if p - last > 3:
            break
        last = p
    peak = first + int(np.argmax(y[first : last + 1]))
    level = base * (1.1 if loss else 2.0)
    back = np.flatnonzero(y[peak + 1 :] <= level)
    return [ExcerptSpike(first, peak, peak + 1 + int(back[0]) if len(back) else None, base)]
