"""One screen that does not mislead: reasons wrap to the terminal's width (never cut), the value shown is the
verdicts' measured value, no stray ellipsis, and a simulated run says what it would be."""

from pytest_sits.report.model import summarise
from pytest_sits.report.render import result_line, terminal_rows

LONG = ("P99 latency per output token: 3,850 µs [3,449 µs, unbounded] (95% binomial order statistics, 29 samples) "
        "@ ρ 0.095, 11,172 µs [10,966 µs, unbounded] (95% binomial order statistics, 102 samples) @ ρ 0.302; the "
        "profile sets no latency ceiling")


def _v(subject, status="WARN", reason=LONG, measured=11172.169, **kw):
    return dict({"requirement": "PLP-LATENCY", "status": status, "reason": reason, "subject": subject,
                 "measured": measured, "unit": "µs", "threshold": "no ceiling set (ρ <= 0.7)"}, **kw)


def test_reasons_wrap_to_the_width_and_the_value_is_the_verdicts():
    report = {"verdicts": [_v(f"0000:{i}1:00.0") for i in range(1, 9)]}
    rows = terminal_rows(report, width=80)
    lines = [line for line, _ in rows]
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith("PLP-LATENCY") and "11,172 µs" in lines[0] and "3,850" not in lines[0]
    text = " ".join(line.strip() for line in lines)
    assert "the profile sets no latency ceiling" in text  # the whole reason, wrapped, not cut
    assert "…" not in text
    assert "8 subjects (0000:11:00.0, 0000:21:00.0, 0000:31:00.0 and 5 more)" in text
    assert all(line.startswith("    ") for line in lines[1:])  # the finding indented under its requirement


def test_the_same_finding_with_its_subject_inside_reads_as_one():
    report = {"verdicts": [_v(b, status="FAIL", reason=f"the link of {b} runs at Gen4 x8", measured=None,
                              remediation="reseat") for b in ("0000:11:00.0", "0000:21:00.0")]}
    lines = [line for line, _ in terminal_rows(report, width=100)]
    # one finding for every verdict and no measured value: on the requirement's line, its subject placeholder named
    assert lines == ["PLP-LATENCY  2 FAIL: the link of [subject] runs at Gen4 x8 (2 subjects (0000:11:00.0, "
                     "0000:21:00.0))"]


def test_a_very_long_reason_is_bounded_on_the_terminal():
    report = {"verdicts": [_v("gpu0", reason="word " * 2000)]}
    lines = [line for line, _ in terminal_rows(report, width=80)]
    assert len(lines) <= 11 and lines[-1].strip() == "(the rest is in the report)"


def test_a_simulated_run_says_what_it_would_be():
    fail = {"requirement": "DEP-ECC", "status": "FAIL", "subject": "gpu0", "reason": "x"}
    ok = dict(fail, status="PASS")
    s = summarise([fail, ok], True, True)
    assert s["result"] == "SIMULATED" and s["simulated_as"] == "NON_CONFORMANT"
    line = result_line({"summary": s})
    assert line.startswith("result: SIMULATED: NON_CONFORMANT (a simulated platform is never conformant; 1 FAIL")
    healthy = summarise([ok], True, True)
    assert result_line({"summary": healthy}).startswith("result: SIMULATED: PARTIAL (a simulated platform is never "
                                                        "conformant; conforms in what was decided")
    assert result_line({"summary": summarise([ok], True, False)}).startswith("result: PARTIAL (")


def test_a_memory_size_in_gib_says_its_gb_beside_it():
    """INV-DEVICES measures GiB, MEM-CAPACITY GB: neighbouring rows can be compared."""
    from pytest_sits.report.render import quantity

    assert quantity(79.65, "GiB") == "79.65 GiB = 85.52 GB" and quantity(85.47, "GB") == "85.47 GB"
    report = {"verdicts": [{"requirement": "INV-DEVICES", "status": "PASS", "reason": "ok", "subject": "accelerators",
                            "measured": 79.65, "unit": "GiB", "threshold": ">= 80 GiB - 10% = 72.0 GiB"},
                           {"requirement": "MEM-CAPACITY", "status": "PASS", "reason": "ok", "subject": "accelerators",
                            "measured": 85.47, "unit": "GB", "threshold": ">= 80.1 GB per card"}]}
    lines = [line for line, _ in terminal_rows(report, width=120)]
    assert "85.52 GB" in lines[0] and "85.47 GB" in lines[1]
