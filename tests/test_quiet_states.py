# ruff: noqa: E501  (log lines are kept whole)
"""A redrawn line that says nothing (logscope.scan.quiet_states): a progress bar no signature
reads is dropped once per state shape, and the document is the per-line path's; a state with error
words, a prefix or a signature's match keeps its line on the per-line path."""

from __future__ import annotations

from pathlib import Path

import pytest
import regex

from logscope.engine.feed import default_library
from logscope.scan.bulk_progress import Collector
from logscope.scan.quiet_states import _superset

from .test_columns import _both


def _bar(epoch: int, steps: int = 300, tail: str = "") -> str:
    """Lightning's TQDMProgressBar redrawn in a file: one state a step, `\\r` between."""
    states = []
    for i in range(1, steps + 1):
        pct = i * 100 // steps
        bar = ("█" * (pct // 10) + ("▌" if pct % 10 >= 5 else "")).ljust(10)
        states.append(
            f"Epoch {epoch}:  {pct:3d}%|{bar}| {i}/{steps} [00:{i % 60:02d}<01:40, 5.43it/s, v_num=1]"
        )
    return "\r".join(states) + tail


def test_a_bar_no_signature_reads_is_dropped_and_the_document_is_the_per_line_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "bars.log"
    log.write_text(
        "\n".join(["GPU available: True (cuda), used: True", *(_bar(e, 150) for e in range(2))])
        + "\n",
        encoding="utf-8",
    )
    bulk, one = _both([str(log)], monkeypatch)
    assert bulk == one
    collector = Collector(default_library(), "x.log", 2024)
    assert collector.take(1, _bar(0).encode())  # dropped: neither parsed in bulk nor decoded
    cols, rejected = collector.finish()
    assert not len(cols) and rejected == []


@pytest.mark.parametrize(
    "tail",
    [
        # error words in the last state, a rank's prefix, a state a signature reads (Keras's step)
        "\rRuntimeError: CUDA error: an illegal memory access was encountered",
        "\r[rank1]: Epoch 0:  100%",
        "\r260/260 [==============================] - 141s 542ms/step - loss: 457.6368",
    ],
)
def test_a_redrawn_line_that_says_something_goes_line_by_line(tail: str) -> None:
    collector = Collector(default_library(), "x.log", 2024)
    assert not collector.take(1, _bar(0, 20, tail).encode())


def test_a_superset_of_a_regex_widens_its_back_references_and_renames_its_groups() -> None:
    keras = r"^Epoch (?P<last_epoch>\d+)/(?P=last_epoch)\s*$"
    wide = regex.compile(_superset(keras))
    assert wide.search("Epoch 3/10") and not regex.search(keras, "Epoch 3/10")
    twice = r"^(?:Epoch (?P<epoch>\d+)|epoch:  (?P<epoch>\d+))\s*$"
    assert regex.compile(_superset(twice)).search("epoch:  4")
