"""Text from reports reaches no terminal raw: every `sits` output goes through one printable filter, and the
Markdown the commands write carries no raw HTML."""

import json

import pytest

from pytest_sits.cli import main

from helpers import run_suite

ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"  # OSC window title, BEL, clear screen, colour


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    report = run_suite(d / "r", "--sits-platform=sim:h100").report
    for v in report["verdicts"][:5]:
        v["subject"] = ESC + v["subject"]
        v["reason"] = ESC + "<script>alert(1)</script>" + v["reason"]
    report["profile"]["name"] = ESC + "<b>h100</b>"
    report["summary"]["result_reason"] = ESC + report["summary"]["result_reason"]
    path = d / "hostile.json"
    path.write_text(json.dumps(report))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("args,shown", [(["report", "render", "{r}"], True), (["report", "validate", "{r}"], False),
                                        (["replay", "{r}"], True), (["compare", "{r}", "{r}"], True)])
def test_no_escape_sequence_reaches_the_terminal(hostile_report, capsys, args, shown):
    main([a.format(r=hostile_report) for a in args])
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert ("\\x1b" in out.out + out.err) is shown  # shown as text where the command prints that string


@pytest.mark.slow
def test_compare_markdown_carries_no_raw_html(hostile_report, tmp_path, capsys):
    md = tmp_path / "m.md"
    assert main(["compare", str(hostile_report), str(hostile_report), f"--markdown={md}"]) == 0
    text = md.read_text()
    assert "<b>" not in text and "&lt;b&gt;" in text and "\x1b" not in text


@pytest.mark.slow
def test_compare_output_is_bounded_whatever_the_reports_hold(hostile_report, tmp_path, capsys):
    """Reports of tens of megabytes (made-up requirement IDs, huge names) give a matrix of the catalogue's size."""
    report = json.loads(hostile_report.read_text())
    template = report["verdicts"][0]
    report["verdicts"] += [dict(template, requirement=f"MADE-UP-{i}-" + "x" * 200, subject="s" * 500,
                                reason="r" * 1000) for i in range(6000)]
    report["profile"]["name"] = "p" * 100_000
    report["platform"]["label"] = "l" * 100_000
    big = tmp_path / "big.json"
    big.write_text(json.dumps(report))
    assert big.stat().st_size > 8 << 20
    html = tmp_path / "m.html"
    capsys.readouterr()
    assert main(["compare", str(big), str(big), str(big), f"--html={html}"]) == 0
    out = capsys.readouterr().out
    assert len(out) < 64 << 10 and html.stat().st_size < 1 << 20
    assert "6000 requirement ID(s) not in this version's catalogue left out" in out
