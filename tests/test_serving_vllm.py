"""SVC-SLA against a real inference server: vLLM's CPU build serving a tiny local model (tools/vllm/install.sh).

These tests start the server themselves, in its own process group, and stop it whatever happens; they skip,
naming the command, where the server's venv has not been built.  A healthy server decides SVC-SLA (the verdict
names the server and the model); a server killed under the run is an ERROR with what was measured kept, the run
exits NOT_TESTED, the report pair is written and no process is left behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from pytest_sits.exitcodes import NOT_TESTED, OK, UNDECIDED
from pytest_sits.inference.launch import group_members

from helpers import HOST_SERVED, pytest_running, run_pytest

pytestmark = pytest.mark.slow

STATE = Path(os.environ.get("SITS_VLLM_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
             / "pytest-sits" / "vllm")
PYTHON = STATE / "venv" / "bin" / "python"
MODEL = STATE / "model"
READY_S = 420.0
#: The options that have the suite launch this vLLM itself (--sits-serve).
SERVE_OPTIONS = (f"--sits-serve={PYTHON} -m vllm.entrypoints.openai.api_server --model={MODEL} --host=127.0.0.1 "
                 "--port={port} --dtype=float32 --max-model-len=1024 --served-model-name=tiny",
                 "--sits-serve-env=VLLM_CPU_KVCACHE_SPACE=1", "--sits-serve-env=HF_HUB_OFFLINE=1",
                 "--sits-serve-env=TRANSFORMERS_OFFLINE=1", "--sits-serve-model=tiny",
                 f"--sits-serve-timeout={READY_S:g}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Vllm:
    """vLLM's OpenAI server on 127.0.0.1 at a free port, in a process group of its own."""

    @staticmethod
    def require() -> None:
        if not (PYTHON.exists() and (MODEL / "config.json").exists()):
            why = f"vLLM's CPU server is not built in {STATE}: run tools/vllm/install.sh (or set SITS_VLLM_DIR)"
            if os.environ.get("SITS_REQUIRE_VLLM"):
                pytest.fail(why + " (SITS_REQUIRE_VLLM is set: the server must be there)")
            pytest.skip(why)

    def __init__(self, log: Path):
        self.require()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        self.log = log
        self.proc = subprocess.Popen(
            [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", f"--model={MODEL}", "--host=127.0.0.1",
             f"--port={self.port}", "--dtype=float32", "--max-model-len=1024", "--served-model-name=tiny"],
            stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"vLLM exited with status {self.proc.returncode} before it was ready:\n{tail}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2) as resp:
                    if b'"tiny"' in resp.read():
                        return
            except OSError:
                pass
            time.sleep(1.0)
        self.stop()
        pytest.fail(f"vLLM was not ready within {READY_S:g} s; its log: {log}")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
        except ProcessLookupError:
            return False
        return True


def _sla_verdicts(report_dir: Path) -> list:
    report = json.loads((report_dir / "sits-report.json").read_text())
    return [v for v in report["verdicts"] if v["requirement"] == "SVC-SLA"]


def test_a_healthy_vllm_server_passes_svc_sla_and_the_verdict_names_it(tmp_path):
    server = Vllm(tmp_path / "vllm.log")
    try:
        out = run_pytest("--sits", served_profile(tmp_path), "--sits-level=full", f"--sits-endpoint={server.url}",
                         "-k", "tenant_sla", f"--sits-report-dir={tmp_path / 'r'}", cwd=tmp_path, timeout=600)
    finally:
        server.stop()
    assert out.returncode == OK, out.stdout[-3000:]
    verdicts = _sla_verdicts(tmp_path / "r")
    assert verdicts and all(v["status"] == "PASS" for v in verdicts), verdicts
    # one deployment, judged once (not once per accelerator), each tenant's verdict naming the endpoint
    assert sorted(v["subject"] for v in verdicts) == sorted(f"endpoint {server.url} tenant {t}"
                                                            for t in ("interactive", "batch")), verdicts
    assert all(v["nodeid"].endswith("[endpoint]") for v in verdicts), [v["nodeid"] for v in verdicts]
    for v in verdicts:
        ev = v["evidence"]
        assert ev["endpoint"] == server.url and ev["model_name"] == "tiny", ev
        assert ev["tenant"]["errors"] == 0 and ev["tenant"]["completed"] > 1000, ev["tenant"]
        # tokens counted by the server (its usage), not guessed by the client
        assert "usage" in (ev.get("token_source") or ""), ev.get("token_source")


def test_a_vllm_server_killed_under_the_run_is_an_error_not_a_fail(tmp_path):
    server = Vllm(tmp_path / "vllm.log")
    try:
        with pytest_running("--sits", served_profile(tmp_path), "--sits-level=full", f"--sits-endpoint={server.url}",
                            "-k", "tenant_sla", f"--sits-report-dir={tmp_path / 'r'}", cwd=tmp_path) as run:
            # 10 s into the load (the pre-flight comes first, in well under a second)
            deadline = time.monotonic() + 120
            started = None
            while time.monotonic() < deadline and run.poll() is None:
                if started is None and (tmp_path / "r").exists() and any((tmp_path / "r").rglob("mlperf_log_*")):
                    started = time.monotonic()
                if started is not None and time.monotonic() - started >= 10:
                    break
                time.sleep(0.2)
            assert started is not None, "the SLA run never started"
            server.kill()
            stdout, _ = run.communicate(timeout=300)
    finally:
        server.stop()
    assert run.returncode == NOT_TESTED, stdout[-3000:]
    assert (tmp_path / "r" / "sits-report.html").is_file()
    verdicts = _sla_verdicts(tmp_path / "r")
    assert verdicts and all(v["status"] == "ERROR" for v in verdicts), verdicts
    for v in verdicts:
        assert "stopped answering" in v["reason"], v["reason"]
        tenants = v["evidence"].get("tenants") or []
        assert sum(t["completed"] for t in tenants) > 100, tenants  # the answers before the kill are kept
    assert not server.group_alive()
    assert "stopped using the system under test" in stdout


def test_a_vllm_server_launched_by_the_suite_is_measured_named_and_stopped(tmp_path):
    """--sits-serve: the suite starts vLLM itself, waits for it, holds it to SVC-SLA, names it in the header and the
    report, and stops its whole process group (the engine core with it) before the report is written."""
    Vllm.require()
    out = run_pytest("--sits", served_profile(tmp_path), "--sits-level=full", *SERVE_OPTIONS, "-k", "tenant_sla",
                     f"--sits-report-dir={tmp_path / 'r'}", cwd=tmp_path, timeout=900)
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    served = report["run"]["serving"]
    # Measured and decided where the interval allows: on a loaded 2-core machine a tenant's P99 can sit near its
    # target (an INCONCLUSIVE naming the queries that would decide); never an ERROR or a FAIL of a healthy server.
    assert out.returncode in (OK, UNDECIDED), out.stdout[-3000:]
    assert "server under test launched by the suite" in out.stdout and "models tiny" in out.stdout
    assert served["models"] == ["tiny"] and served["version"], served  # vLLM answers GET /version
    assert served["stopped"]["how"].startswith("SIG") and "before_the_end" not in served["stopped"], served
    verdicts = _sla_verdicts(tmp_path / "r")
    assert verdicts and all(v["status"] in ("PASS", "INCONCLUSIVE") for v in verdicts), verdicts
    assert any(v["status"] == "PASS" for v in verdicts), verdicts
    assert all(v["measured"] is not None and v["evidence"]["tenant"]["issued"] > 1000 for v in verdicts), verdicts
    assert all(v["evidence"]["server"]["models"] == ["tiny"] for v in verdicts)
    assert served["stopped"]["left"] == 0 and group_members(served["pid"]) == [], "vLLM's group outlived the run"
    assert (tmp_path / "r" / "serving" / "server.log").stat().st_size > 0


def test_vllm_launched_by_the_suite_is_swept_its_kv_pool_and_cold_start_measured(tmp_path):
    """Level standard with --sits-serve on the real vLLM: the PLP-* sweep runs against it (ρ as a share of its
    saturation), SVC-FRAG from its /metrics (vllm:kv_cache_usage_perc, vllm:cache_config_info), SVC-COLDSTART from
    three or more launches with the phases vLLM printed; every verdict names the server and nothing is left."""
    Vllm.require()
    out = run_pytest("--sits", served_profile(tmp_path), "--sits-level=standard", *SERVE_OPTIONS,
                     "-k", "peak or latency or sampled or fragmentation or cold", f"--sits-report-dir={tmp_path / 'r'}",
                     cwd=tmp_path, timeout=1500)
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    by = {}
    for v in report["verdicts"]:
        by.setdefault(v["requirement"], []).append(v)
    assert "measure the server under test" in out.stdout, out.stdout[-3000:]
    for req in ("PLP-PPL", "PLP-LATENCY", "PLP-SAMPLE", "SVC-FRAG", "SVC-COLDSTART"):
        assert len(by[req]) == 1 and by[req][0]["nodeid"].endswith("[endpoint]"), by[req]
        assert by[req][0]["status"] != "ERROR", by[req][0]["reason"]
    sweep = by["PLP-LATENCY"][0]["evidence"]
    assert sweep["served"] and sweep["server"]["models"] == ["tiny"] and sweep["runner"]["model_name"] == "tiny"
    # every point ran its planned load without an error: its queries are its rate over its duration (a Poisson
    # schedule; a fixed count would depend on the saturation this loaded host measured: 21 at 5.2 q/s for 4 s)
    assert all(p["errors"] == 0 and p["queries"] >= max(1.0, 0.4 * p["target_qps"] * p["planned_s"])
               for p in sweep["sweep"]), [{k: p.get(k) for k in ("target_qps", "planned_s", "queries", "errors")}
                                          for p in sweep["sweep"]]
    counted = sweep["prompt_tokens_counted"]  # prompt lengths as vLLM counted them, for every request it answered
    assert counted["requests"] > 100 and counted["requests_with_usage"] == counted["requests"], counted
    frag = by["SVC-FRAG"][0]
    assert frag["status"] in ("PASS", "FAIL", "INCONCLUSIVE") and frag["evidence"]["metrics"]["stack"] == "vllm"
    assert frag["evidence"]["block_tokens"] > 0 and frag["evidence"]["steps"] >= 3, frag["evidence"].get("dropped")
    cold = by["SVC-COLDSTART"][0]
    assert cold["status"] == "WARN" and len(cold["evidence"]["samples_s"]) >= 3, cold["reason"]
    printed = {p["phase"] for p in cold["evidence"]["phases"]["printed"]}
    assert "engine initialised (memory profile, KV cache allocated, warm-up)" in printed, cold["evidence"]["phases"]
    served = report["run"]["serving"]
    assert served["stopped"]["left"] == 0 and group_members(served["pid"]) == [], "vLLM's group outlived the run"
    for trial in cold["evidence"]["trials"]:
        assert trial["total_s"] > 0
    assert all(p.is_file() for p in (tmp_path / "r" / "serving").glob("coldstart-*/server.log"))


#: The tenants' targets for vLLM here: the bundled ``host`` profile's 250 ms interactive P99 is sized for the built-in
#: decoder on an idle 2-core host; vLLM's CPU build beside another test worker read 429 ms [338, 545] at the same
#: load (healthy: no errors, 23.5 of 24 req/s served). These tests ask whether a healthy server is decided and
#: named, so its targets leave that machine's load room; the offered load, and so the >1000 queries a tenant needs
#: for its error rate, stay the profile's.
VLLM_TENANTS = ("thresholds:\n  SVC-SLA:\n    tenants:\n"
                "      - {name: interactive, share: 0.6, p99_ms: 2500, min_rps: 16}\n"
                "      - {name: batch, share: 0.4, p99_ms: 5000, min_rps: 5}\n")


def served_profile(folder: Path) -> str:
    """The ``host`` profile without the test environment's DRAM hold (tests/helpers.py NO_HOLD), with the tenants'
    targets above, written there."""
    (folder / "host-served.yaml").write_text(HOST_SERVED + VLLM_TENANTS)
    return f"--sits-profile={folder / 'host-served.yaml'}"
