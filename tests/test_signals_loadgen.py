"""A signal during a LoadGen-driven test (the inference sweep, SVC-FRAG, SVC-SLA) stops the test cleanly: no crash,
an INCOMPLETE JSON+HTML report pair, the device lock released.  Real signals, sent to a real pytest process while
LoadGen runs (its progress line says so)."""

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from helpers import SUITE, start_pytest

pytestmark = pytest.mark.slow  # every test runs the suite in a subprocess and signals it

pytest.importorskip("torch")
pytest.importorskip("mlperf_loadgen")

PROFILE = """
name: tiny-signals
extends: host
thresholds:
  PLP-PPL:
    model: {d_model: 64, n_layers: 2, n_heads: 4, d_ff: 128, max_seq_tokens: 256, block_tokens: 16,
            pool_blocks: 512, max_batch: 16, dtype: float32, threads: 1}
    workload: {samples: 256, prompt_tokens: [8, 16], output_tokens: [1, 3]}
  PLP-LATENCY:
    point_s: 4
    sweep_fractions: [0.3, 0.6]
  SVC-FRAG:
    queries: 4000
    workload: {samples: 4000, prompt_tokens: [16, 64], output_tokens: [4, 16]}
  SVC-SLA:
    target_qps: 20
    duration_s: 30
    tenants:
      - {name: chat, share: 1.0, p99_ms: 1000, min_rps: 5}
"""


def _interrupt(tmp_path, select, level, phase, sig):
    (tmp_path / "tiny.yaml").write_text(PROFILE)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), PYTHONUNBUFFERED="1")
    proc = start_pytest(*SUITE, "-p", "no:randomly", "--sits-profile=tiny.yaml", f"--sits-level={level}", "-k",
                        select, cwd=tmp_path, env=env)
    out: list = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            out.append(line)
            if phase in line and "started" in line:
                started.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not started.wait(240):
        proc.kill()
        pytest.fail(f"{phase} never started:\n" + "".join(out))
    time.sleep(0.7)
    t_sig = time.monotonic()
    proc.send_signal(sig)
    try:
        rc = proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run did not stop within 90 s of the signal:\n" + "".join(out))
    reader.join(timeout=5)
    return rc, "".join(out), time.monotonic() - t_sig, runtime


@pytest.mark.parametrize("select, level, phase, sig", [
    ("latency_under_load", "standard", "PLP sweep, server", signal.SIGTERM),
    ("latency_under_load", "standard", "PLP sweep, offline", signal.SIGINT),
    ("kv_fragmentation", "standard", "SVC-FRAG", signal.SIGTERM),
    ("kv_fragmentation", "standard", "SVC-FRAG", signal.SIGINT),
    ("tenant_sla", "full", "SVC-SLA", signal.SIGTERM),
    ("tenant_sla", "full", "SVC-SLA", signal.SIGINT),
], ids=["sweep-sigterm", "sweep-sigint", "frag-sigterm", "frag-sigint", "sla-sigterm", "sla-sigint"])
def test_a_signal_during_loadgen_stops_the_test_cleanly(tmp_path, select, level, phase, sig):
    rc, out, _, runtime = _interrupt(tmp_path, select, level, phase, sig)
    assert rc == pytest.ExitCode.INTERRUPTED, out  # never -11 (SIGSEGV) or -6 (SIGABRT)
    assert "Fatal Python error" not in out and "Segmentation fault" not in out, out
    report_dir = tmp_path / "sits-report"
    report = json.loads((report_dir / "sits-report.json").read_text())
    assert (report_dir / "sits-report.html").stat().st_size > 0
    assert report["run"]["completed"] is False and report["run"]["exit_status_name"] == "INTERRUPTED"
    assert report["summary"]["result"] == "INCOMPLETE", report["summary"]
    assert not list(runtime.rglob("*.lock")), "a device lock was left behind"
    assert not list(report_dir.glob(".*.tmp"))
