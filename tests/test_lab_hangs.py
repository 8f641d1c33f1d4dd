"""A real hung torchrun job (4 ranks, gloo, Flight Recorder on) regenerated and analyzed end to
end through the CLI: the dumps and stacks collected while it hung name the rank that desynced,
where the log alone blames the launcher's first reported failure.

Needs torch and py-spy (the `lab` extra); skipped without them, failed in CI."""

from __future__ import annotations

import sys
from pathlib import Path

from .helpers import analyze_doc, lab_marks

sys.path.insert(0, str(Path(__file__).parent / "lab"))

pytestmark = lab_marks(pyspy=True)


def test_a_live_desync_is_named_from_its_dumps(tmp_path: Path) -> None:
    from run_hangs import run_kind

    folder = run_kind("different", tmp_path, timeout_s=150)
    assert len(list((folder / "fr").iterdir())) == 4
    assert len(list((folder / "pyspy").iterdir())) == 4
    code, doc, _err = analyze_doc(str(folder))
    assert code == 1
    hang = doc["hang_dumps"]
    assert hang["culprit_rank"] == 2 and hang["kind"] == "desync_op"
    assert "all_gather" in hang["reason"] and "py-spy: rank 2 is in all_gather" in hang["reason"]
    verdict = next(i for i in doc["incidents"] if i["id"] == doc["verdict"]["incident"])
    assert verdict["culprit"]["rank"] == 2
