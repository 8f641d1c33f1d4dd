"""The CLI through typer's test runner: output, exit codes, errors without tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from logscope.model import CATEGORIES

from .helpers import FIXTURES

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_text_summary_names_root_cause_and_culprit(run_cli) -> None:
    code, out, _ = run_cli("analyze", str(FIXTURES / "lab" / "hang_rank1.log"))
    assert code == 1, out
    assert out.startswith("CRASHED")
    assert "hang_rank1.log:46" in out
    assert "rank 1 (confidence" in out


def test_healthy_run_exits_0(run_cli) -> None:
    code, out, _ = run_cli("analyze", str(FIXTURES / "lab" / "healthy.log"))
    assert code == 0, out
    assert out.startswith("COMPLETED")


def test_json_document_keys(analyze_json) -> None:
    _, doc = analyze_json(FIXTURES / "lab" / "raise_rank1.log")
    assert doc["schema_version"] == 1
    assert set(doc) >= {"inputs", "job", "verdict", "incidents", "unrecognized"}
    inc = doc["incidents"][0]
    assert set(inc) >= {
        "id", "category", "severity", "title", "explanation", "remedies", "root_cause",
        "culprit", "cascade", "iteration", "start", "end", "evidence",
    }  # fmt: skip
    assert set(inc["root_cause"]) >= {
        "pattern", "file", "line", "text", "rank", "local_rank", "host", "time",
    }  # fmt: skip
    assert inc["root_cause"]["time"] is None or re.match(
        r"\d{4}-\d\d-\d\dT", inc["root_cause"]["time"]
    )
    assert doc["verdict"]["incident"] == inc["id"]


def test_stdin(run_cli) -> None:
    data = (FIXTURES / "lab" / "sigkill_rank2.log").read_bytes()
    code, out, _ = run_cli("analyze", "-", "--format", "json", input=data)
    assert code == 1
    doc = json.loads(out)
    assert doc["inputs"][0]["path"] == "-"
    assert doc["incidents"][0]["culprit"]["rank"] == 2


def test_missing_file_is_exit_2_without_traceback(run_cli) -> None:
    code, out, err = run_cli("analyze", "no/such/file.log")
    assert code == 2
    assert "no/such/file.log" in err
    assert "Traceback" not in out + err


def test_bad_format_is_a_usage_error(run_cli) -> None:
    code, _, _ = run_cli("analyze", str(FIXTURES / "lab" / "healthy.log"), "--format", "xml")
    assert code == 2


def test_help_documents_exit_codes(run_cli) -> None:
    code, out, _ = run_cli("analyze", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert (
        "0 healthy run, 1 incidents found (or a completed run whose job exited non-zero)," in text
    )
    assert "2 usage or input error, 3 every input was empty" in text


def test_readme_documents_every_category_and_command() -> None:
    for cat in CATEGORIES:
        assert f"`{cat}`" in README, cat
    for command in (
        "logscope analyze",
        "logscope tail",
        "logscope patterns list",
        "logscope patterns test",
    ):
        assert command in README, command
    assert "make demo" in README and "make test" in README


def _keys(doc: object) -> set[str]:
    if isinstance(doc, dict):
        out = set(doc)
        for k, v in doc.items():
            if k not in ("fields", "badput_s"):  # open-ended maps, documented as such
                out |= _keys(v)
        return out
    if isinstance(doc, list):
        return set().union(*map(_keys, doc)) if doc else set()
    return set()


def test_readme_documents_every_json_key(tmp_path: Path, analyze_json) -> None:
    from .generators.bloom_run import generate

    generate(tmp_path)
    _, doc = analyze_json(tmp_path)
    missing = sorted(k for k in _keys(doc) if f'"{k}"' not in README)
    assert not missing, f"JSON keys not in README: {missing}"


def test_readme_documents_every_option() -> None:
    import typer.main

    from logscope.cli import app

    group = typer.main.get_command(app)
    missing = []
    for name in ("analyze", "tail"):
        command = group.commands[name]  # type: ignore[attr-defined]
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--") and opt not in ("--help",) and opt not in README:
                    missing.append(f"{name} {opt}")
    assert not missing, missing


def test_piped_text_has_no_trailing_whitespace(run_cli) -> None:
    # rich pads table cells to the width; text for a pipe or a file must not keep the padding
    code, out, _ = run_cli("analyze", str(Path(__file__).parents[1] / "examples/slurm-crash.out"))
    assert code == 1, out
    lines = out.splitlines()
    assert len(lines) > 10, out
    padded = [n for n, line in enumerate(lines, 1) if line != line.rstrip()]
    assert not padded, f"lines {padded} end in whitespace:\n{out}"


def test_analyze_starts_without_what_it_does_not_use(tmp_path: Path) -> None:
    """`analyze --format json` imports neither the HTML report's template engine, nor tail's
    modules, nor pandas, nor pydantic (typer 0.29 imports it to parse options), nor rich (the
    terminal's renderer): each is start-up time during which the workers wait."""
    log = tmp_path / "job.log"
    log.write_text("[default0]:iteration 10/ 100 | elapsed time per iteration (ms): 50.0 |\n")
    program = (
        "import sys\n"
        "from logscope.cli import app\n"
        "try:\n"
        f"    app(['analyze', {str(log)!r}, '--format', 'json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('jinja2', 'pandas', 'pydantic', 'rich', 'logscope.live.actions',\n"
        "         'logscope.live.watcher')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
