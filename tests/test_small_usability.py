"""The small things a new user trips over, each with its fix in the message."""

import pytest

from pytest_sits import profiles
from pytest_sits.cli import main
from pytest_sits.report.render import platform_text, state_text


def test_a_misspelt_level_gets_a_did_you_mean(pytester, monkeypatch):
    result = pytester.runpytest("--sits-level=fulll", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--sits-level: 'fulll' is not a level; did you mean 'full'? (use one of quick, "
                                 "standard, full)*"])
    monkeypatch.setenv("SITS_LEVEL", "stndard")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*unknown level 'stndard' (from env); fix: did you mean 'standard'?*"])


def test_a_percentage_where_a_fraction_is_wanted(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("name: mine\nextends: h100\nthresholds:\n  MEM-BW-EFFICIENCY:\n    min_efficiency: 75%\n")
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.resolve(str(f))
    text = str(exc.value)
    assert "mine.yaml:5" in text and "'75%'" in text and "write the fraction 0.75" in text, text


def test_audit_of_an_archive_says_to_extract_it(tmp_path, capsys):
    import tarfile

    (tmp_path / "q.txt").write_text("nvidia-smi -q\n")
    tgz = tmp_path / "evidence.tar.gz"
    with tarfile.open(tgz, "w:gz") as t:
        t.add(tmp_path / "q.txt", arcname="q.txt")
    assert main(["audit", str(tgz)]) == 4
    err = capsys.readouterr().err
    assert "is an archive (gzip)" in err and "fix: extract it" in err and "tar -xf evidence.tar.gz" in err
    named = tmp_path / "x.zip"
    named.write_text("not really a zip")
    assert main(["audit", str(named)]) == 4 and "is an archive" in capsys.readouterr().err


def test_no_benchmark_banner_and_no_benchmarks_folder_left_behind(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--sits-report-dir=none", "-p", "no:cacheprovider")
    assert result.ret == 0
    assert not any(line.startswith("benchmark:") for line in result.stdout.lines)
    assert not (pytester.path / ".benchmarks").exists()
    asked = pytester.runpytest("--sits-report-dir=none", "-p", "no:cacheprovider", "--benchmark-disable")
    assert any(line.startswith("benchmark:") for line in asked.stdout.lines)  # asked for: shown


def test_the_html_says_states_and_platforms_in_words(pytester, report_of):
    assert state_text("NOT_AT_LEVEL_STANDARD") == "above level standard"
    assert state_text("NOT_SELECTED") == "not selected"
    assert platform_text({"kind": "live", "label": "live"}) == "live"
    assert platform_text({"kind": "sim", "label": "SIMULATED sim:h100"}) == "SIMULATED sim:h100"
    assert platform_text({"kind": "snapshot", "label": "gpu07 capture"}) == "snapshot: gpu07 capture"
    pytester.makepyfile("def test_x():\n    pass\n")
    pytester.runpytest("--pyargs", "pytest_sits.conformance", "-p", "no:cacheprovider")
    html = (pytester.path / "sits-report" / "sits-report.html").read_text()
    assert "NOT_AT_LEVEL" not in html and "live: live" not in html and "above level quick" in html
