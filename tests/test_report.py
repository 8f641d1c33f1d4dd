"""The HTML postmortem and the Markdown report: content, hostile log text, offline, --force,
and a real headless Chromium load (Debian's `chromium`)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import zstandard
from typer.testing import CliRunner

from logscope.cli import app
from logscope.engine.analyze import analyze
from logscope.engine.feed import default_library
from logscope.read.sources import Tail
from logscope.render.document import document
from logscope.render.markdown import render as render_markdown
from logscope.render.report import report_name
from tests.generators.bloom_run import Truth

from .helpers import FIXTURES, analyze_doc, skip_or_fail

LAB = FIXTURES / "lab"
DATA_BLOCK = re.compile(
    r'<script type="application/json" id="logscope-analysis">(.*?)</script>', re.S
)
RunCli = Callable[..., tuple[int, str, str]]
PAYLOAD = (
    '<script>alert(1)</script> "><img src=x onerror=alert(1)> {{7*7}} '
    "</script><script>alert(2)</script> {% raw %}{% endraw %}"
)


# ---------------------------------------------------------------------------- helpers


def analyze_html(run_cli: RunCli, cwd: Path, *args: str, out: Path) -> tuple[int, Path, str]:
    """`logscope analyze ARGS --html --out OUT` run from `cwd`; (exit code, report, stderr)."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        code, _, err = run_cli("analyze", *args, "--html", "--out", str(out))
    finally:
        os.chdir(old)
    assert code in (0, 1), err
    written = re.search(r"logscope: wrote (.+)", err)
    assert written, err
    return code, Path(written.group(1).strip()), err


def analysis_doc(run_cli: RunCli, cwd: Path, *args: str) -> dict[str, Any]:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        code, out, err = run_cli("analyze", *args, "--format", "json")
    finally:
        os.chdir(old)
    assert code in (0, 1), err
    doc: dict[str, Any] = json.loads(out)
    return doc


def embedded(html: str) -> dict[str, Any]:
    blocks = DATA_BLOCK.findall(html)
    assert len(blocks) == 1
    doc: dict[str, Any] = json.loads(blocks[0])
    return doc


def text_of(html: str) -> str:
    """The visible text (tags dropped, entities decoded), whitespace collapsed."""

    class P(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.parts: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag in ("script", "style"):
                self.skip += 1

        def handle_endtag(self, tag: str) -> None:
            if tag in ("script", "style"):
                self.skip -= 1

        def handle_data(self, data: str) -> None:
            if not self.skip:
                self.parts.append(data)

    p = P()
    p.feed(html)
    return " ".join(" ".join(p.parts).split())


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag


def tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    p = Tags()
    p.feed(html)
    return p.tags


# ---------------------------------------------------------------------------- scenarios


@pytest.fixture(scope="module")
def bloom_report(bloom_run: tuple[Path, Truth], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bloom-report")
    old = Path.cwd()
    os.chdir(bloom_run[0])
    try:
        res = CliRunner().invoke(app, ["analyze", ".", "--mtbf", "7d", "--html", "--out", str(out)])
    finally:
        os.chdir(old)
    assert res.exit_code == 1, res.stderr
    (path,) = out.glob("*.html")
    return path


def test_bloom_report_content(bloom_report: Path, bloom_run: tuple[Path, Truth]) -> None:
    html = bloom_report.read_text(encoding="utf-8")
    text = text_of(html)
    assert bloom_report.name == "main_log-postmortem.html"
    assert "COMPLETED" in text.upper() and "Detected kill switch at" in text
    # what failed, where, when, cost, what to do: the costliest failure leads
    assert "CUDA reported `unknown error`" in text
    assert "rank 195 on jean-zay-iam25.idris.fr" in text
    assert "Training hung after iteration 1037" in text
    assert text.index("CUDA reported `unknown error`") < text.index("Training hung after")
    assert "2 failures cost 7,300.5 GPU-h" in text and "7,300.4" not in text
    assert "3,836.1 GPU-h" in text and "3,464.4 GPU-h" in text
    assert "2022-03-22 06:10:15" in text and "2022-03-23 00:38:37" in text
    assert "ETTR" in text and "66.0%" in text
    # the same figures from the generator's truth, not from a previous run of logscope
    truth = bloom_run[1]
    lost = (truth.hang_s + truth.wasted_progress_s + truth.disruption_recovery_s) * truth.gpus
    shown = [float(x.replace(",", "")) for x in re.findall(r"([\d,]+\.\d) GPU-h", text)]
    assert any(abs(x - lost / 3600) <= 0.001 * lost / 3600 for x in shown), shown
    assert f"{truth.ettr:.1%}" in text
    assert "Drain the node" in text and "logscope tail" in text
    assert "Checkpoint advice" in text and "Young" in text and "Daly" in text
    # the timeline: three lanes with how each ended
    assert "<svg" in html and "crash I1" in text and "hang I2" in text
    # relative inputs stay relative: no tmp path of the test machine in the page
    assert "main_log.txt:1669" in text and str(bloom_report.parent.parent) not in html
    # the hang's context stops where its attempt ends, and says so
    assert "attempt 2 (job 1528874) ends here" in text
    assert bloom_report.stat().st_size < 1_000_000


def test_bloom_embedded_json_is_the_document(
    bloom_run: tuple[Path, Truth], bloom_report: Path, run_cli: RunCli
) -> None:
    doc = analysis_doc(run_cli, bloom_run[0], ".", "--mtbf", "7d")
    assert embedded(bloom_report.read_text(encoding="utf-8")) == doc
    assert doc["job"]["world_size"] == 384


LAB_EXPECT = {
    "hang_rank1.log": ("crashed", "rank 1", "Gloo timed out waiting for a peer"),
    "raise_rank1.log": ("crashed", "rank 1", "ValueError: injected fault at iteration 17"),
    "segv_rank3.log": ("crashed", "rank 3", None),
    "sigkill_rank2.log": ("crashed", "rank 2", None),
    "healthy.log": ("completed", None, None),
    "hang_all_rank1.log": (None, None, None),
}


@pytest.mark.parametrize("name", sorted(LAB_EXPECT))
def test_lab_reports(name: str, run_cli: RunCli, tmp_path: Path) -> None:
    code, path, _ = analyze_html(run_cli, LAB, name, out=tmp_path)
    html = path.read_text(encoding="utf-8")
    text = text_of(html)
    doc = analysis_doc(run_cli, LAB, name)
    assert embedded(html) == doc
    outcome, culprit, title = LAB_EXPECT[name]
    assert doc["job"]["outcome"].upper() in text.upper()
    if outcome:
        assert doc["job"]["outcome"] == outcome
    if culprit:
        assert doc["incidents"][0]["culprit"]["rank"] == int(culprit.split()[1])
        # the banner's "where" figure names the culprit
        assert re.search(rf"where {culprit}\b", text), text[:400]
    if title:
        assert title in text
    if doc["verdict"]:
        assert doc["verdict"]["summary"] in text
        assert "GPU-h" in text
    else:
        assert code == 0
    if doc["ledger"]:
        assert "ETTR" in text and "Wall time" in text
    assert f"{name}" in text  # the inputs table


# ---------------------------------------------------------------------------- hostile text


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """raise_rank1 with the payload in the exception line and in an unknown error line."""
    lines = (LAB / "raise_rank1.log").read_text(encoding="utf-8").splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        if line.startswith("[default1]:[rank1]: ValueError:"):
            line = "[default1]:[rank1]: ValueError: " + PAYLOAD
        out.append(line)
        if n == 20:
            out.append("[default2]:[rank2]: ERROR: weird failure " + PAYLOAD)
    path = tmp_path / "logs" / "hostile.log"
    path.parent.mkdir()
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def test_hostile_log_text_is_escaped(hostile: Path, run_cli: RunCli, tmp_path: Path) -> None:
    _, path, _ = analyze_html(run_cli, hostile.parent, hostile.name, out=tmp_path / "r")
    html = path.read_text(encoding="utf-8")
    doc = embedded(html)
    assert PAYLOAD in doc["incidents"][0]["root_cause"]["text"]
    assert any(PAYLOAD in u["example"]["text"] for u in doc["unrecognized"])
    visible = html.split('<script type="application/json"')[0]
    # shown, as text, in the root-cause context and in the unrecognized table
    assert visible.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2
    assert "&lt;img src=x onerror=alert(1)&gt;" in visible
    assert "{{7*7}}" in visible and "49" not in text_of(visible).replace("1,049", "")
    assert "{% raw %}{% endraw %}" in visible
    assert PAYLOAD in text_of(html)
    # nothing of it became markup
    assert html.count("<script") == 1
    assert "<img" not in html
    assert [t for t, _ in tags(html)].count("script") == 1
    assert not any(t == "img" or "onerror" in a for t, a in tags(html))
    # the data block cannot be closed by the text inside it
    assert "</script><script>alert(2)" not in html


def test_hostile_markdown_is_fenced_or_escaped(hostile: Path, run_cli: RunCli) -> None:
    old = Path.cwd()
    os.chdir(hostile.parent)
    try:
        code, md, _ = run_cli("analyze", hostile.name, "--format", "md")
    finally:
        os.chdir(old)
    assert code == 1
    fence = False
    for line in md.splitlines():
        if re.fullmatch(r"`{3,}", line):
            fence = not fence
            continue
        if not fence:
            # outside a fence, log text may appear only as text: escaped, never as markup
            assert "<script" not in line and "<img" not in line, f"raw HTML: {line!r}"
    assert not fence
    assert md.count("alert(1)</script>") >= 2  # the root cause and the unrecognized line


SITE_SIGNATURE = """
[[signature]]
id = "site.shard_missing"
category = "io_error"
severity = "error"
role = "cause"
title = "A checkpoint shard is missing"
trigger = ["checkpoint shard missing"]
regex = 'checkpoint shard missing: (?P<path>\\S+)'
explanation = "The loader found no file for a shard."
remedy = ["traces go to /tmp/trace_<rank> (see `TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/x_<rank>`)"]
samples = ["[rank3]: checkpoint shard missing: /ckpt/shard_3.pt"]
"""


def site_markdown(tmp_path: Path, line: str) -> str:
    """The Markdown of a one-line log, with a site signature (`--patterns DIR`) that knows it."""
    patterns = tmp_path / "patterns"
    patterns.mkdir()
    (patterns / "site.toml").write_text(SITE_SIGNATURE, encoding="utf-8")
    log = tmp_path / "job.log"
    log.write_text(line + "\n", encoding="utf-8")
    return render_markdown(document(analyze([str(log)], default_library([patterns]))))


def test_markdown_fence_outlasts_backticks(tmp_path: Path) -> None:
    md = site_markdown(tmp_path, "[rank3]: checkpoint shard missing: /ckpt/shard_3.pt ```` b")
    lines = md.splitlines()
    at = next(i for i, line in enumerate(lines) if "````" in line and "shard_3" in line)
    assert lines[at - 1] == lines[at + 1] == "`````", lines[at - 1 : at + 2]


def test_markdown_prose_keeps_code_spans_and_escapes_the_rest(tmp_path: Path) -> None:
    md = site_markdown(tmp_path, "[rank3]: checkpoint shard missing: /ckpt/shard_3.pt")
    remedy = (
        "traces go to /tmp/trace_&lt;rank&gt; (see `TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/tmp/x_<rank>`)"
    )
    assert f"- {remedy}" in md.splitlines()


# ---------------------------------------------------------------------------- offline


def test_no_external_resource_and_strict_csp(bloom_report: Path) -> None:
    html = bloom_report.read_text(encoding="utf-8")
    found = tags(html)
    for tag, attrs in found:
        for key in ("src", "href", "srcset", "action", "data", "poster", "xlink:href"):
            value = (attrs.get(key) or "").strip().lower()
            if value:
                assert value.startswith("#"), f"<{tag} {key}={value!r}> leaves the document"
                assert not value.startswith(("http:", "https:", "//", "javascript:"))
        assert tag not in ("link", "iframe", "object", "embed", "base", "img", "audio", "video")
    assert not re.search(r"url\(|@import", html, re.I)
    csp = [
        a["content"]
        for t, a in found
        if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert len(csp) == 1 and "default-src 'none'" in (csp[0] or "")
    assert "script-src" not in (csp[0] or "")  # no script may run
    scripts = [a for t, a in found if t == "script"]
    assert scripts == [{"type": "application/json", "id": "logscope-analysis"}]


# ---------------------------------------------------------------------------- writing


def test_force_and_atomic_write(run_cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    _, path, _ = analyze_html(run_cli, LAB, "hang_rank1.log", out=out)
    path.write_text("an earlier report", encoding="utf-8")
    old = Path.cwd()
    os.chdir(LAB)
    try:
        code, _, err = run_cli("analyze", "hang_rank1.log", "--html", "--out", str(out))
        assert code == 2
        assert "exists" in err and "--force" in err
        assert path.read_text(encoding="utf-8") == "an earlier report"
        code, _, err = run_cli("analyze", "hang_rank1.log", "--html", "--out", str(out), "--force")
    finally:
        os.chdir(old)
    assert code == 1, err
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in out.iterdir()) == [path.name]  # no temp file left behind


def test_report_command_renders_the_same_page(run_cli: RunCli, tmp_path: Path) -> None:
    doc = analysis_doc(run_cli, LAB, "sigkill_rank2.log")
    saved = tmp_path / "a.json"
    saved.write_text(json.dumps(doc), encoding="utf-8")
    _, from_analyze, _ = analyze_html(run_cli, LAB, "sigkill_rank2.log", out=tmp_path / "x")
    code, _, err = run_cli("report", str(saved), "--out", str(tmp_path / "y"))
    assert code == 0, err
    from_report = tmp_path / "y" / from_analyze.name
    assert from_report.read_text(encoding="utf-8") == from_analyze.read_text(encoding="utf-8")
    code, md, _ = run_cli("report", str(saved), "--format", "md")
    assert code == 0 and md.startswith("# logscope postmortem: crashed")
    code, _, err = run_cli("report", str(saved), "--out", str(tmp_path / "y"))
    assert code == 2 and "--force" in err


# ---------------------------------------------------------------------------- chromium


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    skip_or_fail("no chromium binary (apt-get install -y chromium; .ci/run does)")


def load_in_chromium(page: Path) -> tuple[str, list[str], list[str]]:
    """(DOM after load, console lines, URLs the page itself asked the network for)."""
    browser = _chromium()
    assert browser
    with tempfile.TemporaryDirectory() as profile:
        netlog = Path(profile) / "net.json"
        proc = subprocess.run(
            [
                browser,
                "--headless=new",
                "--no-sandbox",  # root in a container
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}/profile",
                "--enable-logging=stderr",
                "--v=0",
                "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing can leave the machine
                f"--log-net-log={netlog}",
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
        console += [
            line
            for line in proc.stderr.splitlines()
            if re.search(r"Refused to|Uncaught|Content Security Policy|ERR_", line)
        ]
        events = json.loads(netlog.read_text(encoding="utf-8")).get("events", [])
    requested = sorted(
        {
            e["params"]["url"]
            for e in events
            if "url" in e.get("params", {})
            and "file://" in str(e["params"].get("network_isolation_key", ""))
            and not e["params"]["url"].startswith(("file:", "data:"))
        }
    )
    return proc.stdout, console, requested


@pytest.mark.browser
def test_chromium_detector_sees_errors_and_requests(tmp_path: Path) -> None:
    """The control: a page that breaks both rules is caught (so a pass below means something)."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="img-src http:">'
        '<p>hello</p><img src="http://logscope-test.invalid/x.png"><script>nope()</script>',
        encoding="utf-8",
    )
    dom, console, requested = load_in_chromium(bad)
    assert "hello" in dom
    assert any("Uncaught" in line for line in console), console
    assert requested == ["http://logscope-test.invalid/x.png"]


@pytest.mark.browser
def test_report_loads_in_chromium_offline_without_errors(bloom_report: Path) -> None:
    dom, console, requested = load_in_chromium(bloom_report)
    assert "Training hung after iteration 1037" in dom
    assert "rank 195 on jean-zay-iam25.idris.fr" in dom
    assert 'id="logscope-analysis"' in dom
    assert console == []
    assert requested == []


@pytest.mark.parametrize("end", ["\n", ""], ids=["newline", "no-newline"])
def test_last_line_seen_is_numbered_as_less_n_numbers_it(
    tmp_path: Path, analyze_json, end: str
) -> None:
    f = tmp_path / "job.log"
    f.write_text(
        "[rank0]: a\n[rank1]: b\n"
        "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[rank1]: c" + end
    )
    _, doc = analyze_json(f)
    assert [(s["rank"], s["line"]) for s in doc["last_seen"]] == [(0, 3), (1, 4)]


def test_last_line_seen_strip_points_at_the_silent_rank(tmp_path: Path, analyze_json) -> None:
    """lab/hang_rank1.log: rank 1 slept; its last line is the earliest of the four ranks."""
    _, doc = analyze_json(FIXTURES / "lab" / "hang_rank1.log")
    seen = {s["rank"]: s["line"] for s in doc["last_seen"]}
    assert set(seen) == {0, 1, 2, 3}
    assert min(seen, key=seen.__getitem__) == 1
    from logscope.render.html import heat_strip, render

    strip = heat_strip(doc)
    assert strip is not None and strip.first_silent == (1,)
    page = render(doc, "test")
    assert "Last line seen, per rank" in page and "here rank 1." in page


def test_report_name_never_leaves_the_report_folder() -> None:
    # a user signature may capture any text as job_id
    def doc(job_id: str) -> dict[str, Any]:
        root = {"fields": {"job_id": job_id}}
        return {"incidents": [{"root_cause": root}], "attempts": [], "inputs": []}

    assert report_name(doc("4711")) == "job-4711-postmortem.html"
    assert report_name(doc("../../etc/x y")) == "job-etc_x_y-postmortem.html"


def test_every_renderer_names_a_culprit_alike() -> None:
    from logscope.render.document import culprit_name

    assert culprit_name(3, 3, "node7") == "rank 3 on node7"
    assert culprit_name(None, 3, None) == "local rank 3"
    assert culprit_name(None, None, "node7") == "unknown rank on node7"
    for module in ("html", "markdown", "terminal"):
        source = (Path(__file__).parent.parent / "logscope" / "render" / f"{module}.py").read_text()
        assert "culprit_name(" in source, module


def test_last_line_seen_of_a_file_read_by_workers(analyze_json) -> None:
    """A worker reads the end of a file while the others scan it: the same lines as read
    after the analysis in this process."""
    _, plain = analyze_json(FIXTURES / "lab" / "hang_rank1.log")
    path = str(FIXTURES / "lab" / "hang_rank1.log")
    doc = document(
        analyze([path], jobs=2, range_min_bytes=0, parallel_min_bytes=0, chunk_bytes=2000)
    )
    got = [(s["rank"], s["line"]) for s in doc["last_seen"]]
    assert got == [(s["rank"], s["line"]) for s in plain["last_seen"]] and len(got) == 4


@pytest.mark.parametrize("how", ["gz", "zst-workers", "stdin"])
def test_last_line_seen_of_an_input_that_cannot_be_read_again(
    tmp_path: Path, how: str, analyze_json
) -> None:
    """The strip needs the end of each input: a compressed log or a pipe is not read a second
    time, so its tail is kept as it goes by. The lines found are the plain file's."""
    text = (FIXTURES / "lab" / "hang_rank1.log").read_bytes()
    _, plain = analyze_json(FIXTURES / "lab" / "hang_rank1.log")
    if how == "stdin":
        _, doc, _ = analyze_doc("-", input=text)
    else:
        packed = tmp_path / f"hang.log.{how[:3]}"
        pack = gzip.compress if how == "gz" else zstandard.ZstdCompressor().compress
        packed.write_bytes(pack(text))
        jobs = 2 if how == "zst-workers" else 1
        doc = document(analyze([str(packed)], jobs=jobs, range_min_bytes=0, chunk_bytes=2000))
    got = [(s["rank"], s["line"]) for s in doc["last_seen"]]
    assert got == [(s["rank"], s["line"]) for s in plain["last_seen"]] and len(got) == 4


def test_a_tail_keeps_the_last_bytes_and_knows_when_it_was_cut() -> None:
    tail = Tail(5)
    tail.add(b"ab")
    tail.add(b"cd")
    assert (bytes(tail.data), tail.cut) == (b"abcd", False)
    tail.add(b"ef")
    assert (bytes(tail.data), tail.cut) == (b"bcdef", True)
    whole = Tail(5)
    whole.add(b"12345")
    assert (bytes(whole.data), whole.cut) == (b"12345", False)
    skipped = Tail(5)
    skipped.add(b"345", skipped=2)
    assert skipped.cut
    longer = Tail(3)
    longer.add(b"ab")
    longer.add(b"12345")
    assert (bytes(longer.data), longer.cut) == (b"345", True)
