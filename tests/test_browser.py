"""The HTML pages in a real browser (Debian's Chromium, headless): no horizontal overflow at 420 px wide (a
phone), for the report, the platform comparison and the fleet report.  Skipped, naming the package, where
Chromium is not installed (.ci/run installs it)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import run_suite

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install "
                                                          "chromium); .ci/run installs it")]

FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

#: A page that loads the page under test in a frame of the given width, then writes what overflows into its body.
HARNESS = """<!DOCTYPE html><html><body><iframe id="f" src="{page}" style="width:{width}px;height:900px;border:0">
</iframe><script>
document.getElementById("f").onload = function () {{
  var d = this.contentDocument, w = this.contentWindow, wide = [];
  d.querySelectorAll("body *").forEach(function (e) {{
    var r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > w.innerWidth + 1 && wide.length < 8)
      wide.push(e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " right=" + Math.round(r.right));
  }});
  document.body.setAttribute("data-result", JSON.stringify(
    {{scrollWidth: d.documentElement.scrollWidth, innerWidth: w.innerWidth, wide: wide}}));
}};
</script></body></html>"""


def overflow(page: Path, width: int, tmp: Path) -> dict:
    """How wide ``page`` lays out in a frame ``width`` pixels wide: scrollWidth, innerWidth, the widest elements."""
    harness = page.parent / f"harness-{width}.html"
    harness.write_text(HARNESS.format(page=page.name, width=width))
    out = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--allow-file-access-from-files",
                          "--virtual-time-budget=15000", "--dump-dom", harness.as_uri()],
                         capture_output=True, text=True, timeout=120)
    marker = 'data-result="'
    assert marker in out.stdout, out.stderr[-2000:]
    raw = out.stdout.split(marker, 1)[1].split('"', 1)[0].replace("&quot;", '"').replace("&amp;", "&")
    return json.loads(raw)


def _sim_report(tmp: Path, spec: str, name: str) -> Path:
    return run_suite(tmp / name, f"--sits-platform={spec}", "--sits-level=full").report_dir


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    return {"h100": _sim_report(tmp, "sim:h100+switch,hostile-name,membw-low", "h100"),
            "a100": _sim_report(tmp, "sim:a100", "a100"), "tmp": tmp}


def _fits(page: Path, tmp: Path) -> None:
    for width in (420, 1400):
        got = overflow(page, width, tmp)
        assert got["scrollWidth"] <= got["innerWidth"], (width, got)


def test_report_page_fits_a_phone(reports):
    _fits(reports["h100"] / "sits-report.html", reports["tmp"])


def test_compare_page_fits_a_phone(reports):
    from pytest_sits.cli import main

    html = reports["tmp"] / "compare.html"
    assert main(["compare", str(reports["h100"] / "sits-report.json"), str(reports["a100"] / "sits-report.json"),
                 f"--html={html}"]) == 0
    _fits(html, reports["tmp"])


def test_fleet_page_fits_a_phone(reports):
    from pytest_sits.commands.fleet.merge import merge

    out = reports["tmp"] / "fleet"
    for node, src in (("gpu01", reports["h100"]), ("gpu02", reports["a100"])):
        (out / node).mkdir(parents=True)
        shutil.copy(src / "sits-report.json", out / node / "sits-report.json")
    merge(out)
    _fits(out / "fleet-report.html", reports["tmp"])


#: A page in a frame of the given size: its height, the screen's, where sections begin, where the first FAIL is.
LAYOUT = """<!DOCTYPE html><html><body><iframe id="f" src="{page}" style="width:{width}px;height:{height}px;border:0">
</iframe><script>
document.getElementById("f").onload = function () {{
  var d = this.contentDocument, w = this.contentWindow;
  function top(sel) {{ var e = d.querySelector(sel); return e ? Math.round(e.getBoundingClientRect().top) : null; }}
  var fail = d.querySelector("#attention ~ table td.cell-FAIL");
  var reason = fail ? fail.parentElement.querySelector("td[data-label=reason]") : null;
  document.body.setAttribute("data-result", JSON.stringify({{height: d.documentElement.scrollHeight,
    screen: w.innerHeight, verdicts: top("#verdicts"), analytics: top("#analytics"),
    reason_top: reason ? Math.round(reason.getBoundingClientRect().top) : null,
    reason_text: reason ? reason.textContent.slice(0, 80) : null}}));
}};
</script></body></html>"""


def layout(page: Path, width: int, height: int, tmp: Path) -> dict:
    harness = page.parent / f"layout-{width}.html"
    harness.write_text(LAYOUT.format(page=page.name, width=width, height=height))
    out = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--allow-file-access-from-files",
                          "--virtual-time-budget=15000", "--dump-dom", harness.as_uri()],
                         capture_output=True, text=True, timeout=120)
    marker = 'data-result="'
    assert marker in out.stdout, out.stderr[-2000:]
    raw = out.stdout.split(marker, 1)[1].split('"', 1)[0].replace("&quot;", '"').replace("&amp;", "&")
    return json.loads(raw)


def test_a_reviewer_sees_the_first_fail_reason_on_a_phone_and_verdicts_within_ten_screens(reports):
    """At 420 px the first FAIL's reason is on the first screen; on a desktop screen (1280 x 900) the verdicts of a
    sim:h100 full report end, and the folded analytics begin, within 10 screens."""
    phone = layout(reports["h100"] / "sits-report.html", 420, 800, reports["tmp"])
    assert phone["reason_text"] and phone["reason_top"] < phone["screen"], phone
    plain = _sim_report(reports["tmp"], "sim:h100", "plain")
    desk = layout(plain / "sits-report.html", 1280, 900, reports["tmp"])
    assert desk["verdicts"] < desk["analytics"] <= 10 * desk["screen"], desk
    html = (plain / "sits-report.html").read_text()
    assert '<details class="folded" id="analytics">' in html


def test_identical_findings_are_one_row_listing_their_subjects(reports):
    html = (reports["h100"] / "sits-report.html").read_text()
    # sim:h100+switch: one switch in front of each of the eight GPUs, one finding
    attention = html.split('id="attention"', 1)[1].split('id="run"', 1)[0]
    assert attention.count(">TOPO-PCIE-DIRECT</a>") == 1 and attention.count('href="#v') >= 8
    assert "the others alike, with their own addresses" in attention
