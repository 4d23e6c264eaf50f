"""The server under test launched by the suite (--sits-serve): options checked, a process group of its own, ready
when /v1/models lists the model, stopped (SIGTERM, then SIGKILL) whatever ends the run; its faults as tests, with
the simulated serving stack (pytest_sits.inference.simserve) standing in for vLLM."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from types import SimpleNamespace

import pytest

from pytest_sits.inference.launch import LaunchedServer, ServeError, ServeSpec, group_members, log_tail
from pytest_sits.plugin.session import SitsRun, SitsUsageError
from pytest_sits.profiles import resolve

from helpers import group_gone, pytest_running, run_pytest, served_pid

SIM = f"{sys.executable} -m pytest_sits.inference.simserve --port={{port}} --model=sim-model"


def _gone(pid: int) -> bool:
    """No live process (zombies aside: this machine's init may reap late) is left in the group ``pid`` led."""
    return group_members(pid) == []


# -- options -------------------------------------------------------------------------------------------------------


def test_the_serve_command_is_split_without_a_shell_and_given_its_port():
    spec = ServeSpec.parse("vllm serve 'my model' --port {port}", port=None, env=["A=1", "B=x=y"], model="m",
                           ready_timeout_s="60", accelerators="0, 1")
    assert spec.command[:3] == ["vllm", "serve", "my model"] and spec.command[-1] == str(spec.port)
    assert spec.env == {"A": "1", "B": "x=y"} and spec.model == "m" and spec.ready_timeout_s == 60
    assert spec.accelerators == ["0", "1"] and spec.url == f"http://127.0.0.1:{spec.port}"
    fixed = ServeSpec.parse("server --listen 8123", port="8123")
    assert fixed.port == 8123 and fixed.command == ["server", "--listen", "8123"]


@pytest.mark.parametrize("args, said", [
    (("",), "--sits-serve is empty"),
    (("vllm serve 'open",), "cannot be split"),
    (("vllm serve",), "holds no {port}"),
    (("vllm --port {port}", "http"), "--sits-serve-port='http' is not a port"),
    (("vllm --port {port}", "70000"), "is not a port"),
    (("vllm --port {port}", None, ["NOEQUALS"]), "--sits-serve-env='NOEQUALS' is not KEY=VALUE"),
    (("vllm --port {port}", None, None, None, "-5"), "--sits-serve-timeout='-5'"),
])
def test_a_bad_serve_option_is_refused_with_the_fix(args, said):
    with pytest.raises(ValueError, match="fix:") as err:
        ServeSpec.parse(*args)
    assert said in str(err.value)


def _run(level="full", kind="live", simulated=False):
    return SitsRun(profile=resolve("host"), platform=SimpleNamespace(kind=kind, simulated=simulated), level=level,
                   level_how="option", report_dir=None, platform_spec="live" if kind == "live" else f"{kind}:h100")


def test_a_serve_option_the_run_cannot_honour_is_a_usage_error():
    run = _run()
    with pytest.raises(SitsUsageError, match="--sits-serve-port, --sits-serve-model given without --sits-serve"):
        run.set_serve(None, "8000", None, "m", None, None)
    with pytest.raises(SitsUsageError, match="exclusive"):
        run.set_serve(SIM, None, None, None, None, None, endpoint="http://127.0.0.1:9")
    for run, said in ((_run(kind="sim", simulated=True), "never sends a request"),
                      (_run(level="quick"), "this run is level quick")):
        run.set_serve(SIM, None, None, None, None, None)
        with pytest.raises(SitsUsageError, match=said) as err:
            run.set_inference(run.serve.url, None)
        assert str(err.value).startswith("--sits-serve=") and "drop --sits-serve" in str(err.value) or \
            "--sits-level=standard" in str(err.value)
    run = _run()
    run.set_serve(SIM, None, None, None, None, None)
    run.set_inference(run.serve.url, None)
    assert run.endpoint == run.serve.url
    assert run.inference_options()["serve_error"] is None


def test_the_log_tail_is_bounded_printable_and_follows_no_link(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * 50000 + b"\nline one\nbad \x1b[31m byte\n")
    tail = log_tail(log, 2)
    assert tail.splitlines() == ["  | line one", "  | bad ?[31m byte"]
    (tmp_path / "link.log").symlink_to(log)
    assert log_tail(tmp_path / "link.log") == "  (no log)"


# -- the lifecycle (a real process: slow) -------------------------------------------------------------------------


@pytest.mark.slow
def test_a_launched_server_is_ready_when_it_lists_the_model_and_is_stopped_with_its_group(tmp_path):
    server = LaunchedServer(ServeSpec.parse(SIM, model="sim-model"), tmp_path)
    server.start()
    try:
        server.wait_ready()
        assert server.models == ["sim-model"] and server.version == "sim-0" and server.alive() is None
        assert os.getpgid(server.proc.pid) == server.proc.pid  # a process group of its own
    finally:
        stopped = server.stop()
    assert stopped["how"] == "SIGTERM" and stopped["left"] == 0 and _gone(server.proc.pid)
    assert "ready" in (tmp_path / "server.log").read_text()
    assert server.stop() == stopped  # idempotent


@pytest.mark.slow
def test_a_server_that_exits_before_it_is_ready_names_its_status_and_last_log_lines(tmp_path):
    server = LaunchedServer(ServeSpec.parse(SIM + " --fault=start-fails"), tmp_path)
    server.start()
    with pytest.raises(ServeError, match="exited with exit status 3 before it was ready") as err:
        server.wait_ready()
    assert "CUDA out of memory" in str(err.value) and str(tmp_path / "server.log") in str(err.value)


@pytest.mark.slow
def test_a_server_never_ready_is_stopped_at_the_deadline_naming_its_log(tmp_path):
    server = LaunchedServer(ServeSpec.parse(SIM + " --fault=never-ready", ready_timeout_s=2), tmp_path)
    server.start()
    with pytest.raises(ServeError, match=r"not ready within 2 s \(/v1/models answered HTTP 503\)") as err:
        server.wait_ready()
    assert "--sits-serve-timeout" in str(err.value) and _gone(server.proc.pid)


@pytest.mark.slow
def test_a_server_listing_another_model_is_not_ready(tmp_path):
    server = LaunchedServer(ServeSpec.parse(SIM, model="llama-70b", ready_timeout_s=2), tmp_path)
    server.start()
    with pytest.raises(ServeError, match="lists sim-model, not 'llama-70b'"):
        server.wait_ready()


def test_a_port_already_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        server = LaunchedServer(ServeSpec.parse(SIM, port=str(port)), tmp_path)
        with pytest.raises(ServeError, match=f"port {port} is already in use.*fix:"):
            server.start()
    assert server.proc is None


@pytest.mark.slow
def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    spec = ServeSpec.parse(f"{sys.executable} -c \"{code}\"", port="1")
    spec.grace_s = 0.5
    server = LaunchedServer(spec, tmp_path)
    server.start()
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "server.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.stop()["how"] == "SIGKILL after 0.5 s" and _gone(server.proc.pid)


# -- in a run ------------------------------------------------------------------------------------------------------

PROFILE = """
name: tiny-serving
extends: host
thresholds:
  SVC-SLA:
    target_qps: 100
    duration_s: {duration}
    size_to_decide: false
    tenants:
      - {{name: chat, share: 1.0, p99_ms: 1000, min_rps: 5, max_error_rate: 0.2}}
conditions:
  environment: {{dram_hold: false}}  # the serving path is tested here (tests/helpers.py NO_HOLD says why)
"""


def _suite(tmp_path, *serve, duration=8):
    (tmp_path / "tiny.yaml").write_text(PROFILE.format(duration=duration))
    out = run_pytest("--sits", "--sits-profile=tiny.yaml", "--sits-level=full", "-k", "tenant_sla",
                     "-p", "no:randomly", f"--sits-report-dir={tmp_path / 'r'}", *serve, cwd=tmp_path, timeout=300)
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    assert (tmp_path / "r" / "sits-report.html").is_file()
    return out, report, [v for v in report["verdicts"] if v["requirement"] == "SVC-SLA"]


@pytest.mark.slow
def test_a_run_launches_the_server_measures_it_names_it_and_stops_it(tmp_path):
    out, report, verdicts = _suite(tmp_path, f"--sits-serve={SIM}", "--sits-serve-model=sim-model")
    served = report["run"]["serving"]
    assert "server under test launched by the suite" in out.stdout and "models sim-model, version sim-0" in out.stdout
    assert verdicts and all(v["status"] == "PASS" for v in verdicts), [(v["status"], v["reason"]) for v in verdicts]
    assert all(v["evidence"]["server"]["models"] == ["sim-model"] for v in verdicts)
    # the deployment's power sampled with the load: a figure, or why none (this host has no sensor)
    assert all(v["evidence"]["power"].get("power_w") is not None or "no power sensor for the deployment" in
               v["evidence"]["power"]["unavailable"] for v in verdicts), [v["evidence"]["power"] for v in verdicts]
    assert served["stopped"]["how"] == "SIGTERM" and "before_the_end" not in served["stopped"]
    assert _gone(served["pid"]) and (tmp_path / "r" / "serving" / "server.log").is_file()


@pytest.mark.slow
def test_a_server_that_fails_to_start_is_an_error_quoting_its_log_and_the_report_is_written(tmp_path):
    out, report, verdicts = _suite(tmp_path, f"--sits-serve={SIM} --fault=start-fails")
    assert verdicts and all(v["status"] == "ERROR" for v in verdicts), verdicts
    assert all("exit status 3" in v["reason"] and "CUDA out of memory" in v["reason"] for v in verdicts)
    assert "NOT READY" in out.stdout and "error" in report["run"]["serving"]


@pytest.mark.slow
def test_a_server_that_dies_under_the_run_is_an_error_with_its_log_and_nothing_is_left(tmp_path):
    out, report, verdicts = _suite(tmp_path, f"--sits-serve={SIM} --fault=dies-after=3", duration=15)
    assert verdicts and all(v["status"] == "ERROR" for v in verdicts), [(v["status"], v["reason"]) for v in verdicts]
    assert all("stopped answering" in v["reason"] and "engine core died" in v["reason"] for v in verdicts)
    served = report["run"]["serving"]
    assert served["stopped"]["before_the_end"] == "the server exited with signal SIGKILL"
    assert _gone(served["pid"])


def test_the_report_keeps_the_server_env_keys_never_their_values():
    from pytest_sits.plugin.session import redact_args

    assert redact_args(["--sits-serve-env=HF_TOKEN=hf_secret", "--sits-serve-env", "K=v", "--sits-serve-env=X"]) == \
        ["--sits-serve-env=HF_TOKEN=***", "--sits-serve-env", "***", "--sits-serve-env=X"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_run_stops_the_server_and_writes_the_report(tmp_path, sig):
    (tmp_path / "tiny.yaml").write_text(PROFILE.format(duration=60))
    with pytest_running("--sits", "--sits-profile=tiny.yaml", "--sits-level=full", "-k", "tenant_sla",
                        "-p", "no:randomly", f"--sits-report-dir={tmp_path / 'r'}", f"--sits-serve={SIM}",
                        cwd=tmp_path) as run:
        pid = served_pid(tmp_path / "r" / "serving" / "server.log")
        deadline = time.monotonic() + 120
        while not any((tmp_path / "r").rglob("mlperf_log_*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2)  # into the load
        run.send_signal(sig)
        out, _ = run.communicate(timeout=180)
    report = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    assert report["run"]["completed"] is False, out[-2000:]
    assert report["run"]["serving"]["stopped"]["how"] == "SIGTERM"
    assert _gone(pid)


@pytest.mark.slow
def test_a_run_killed_outright_takes_its_server_with_it(tmp_path):
    (tmp_path / "tiny.yaml").write_text(PROFILE.format(duration=60))
    with pytest_running("--sits", "--sits-profile=tiny.yaml", "--sits-level=full", "-k", "tenant_sla",
                        "-p", "no:randomly", f"--sits-report-dir={tmp_path / 'r'}", f"--sits-serve={SIM}",
                        cwd=tmp_path) as run:
        pid = served_pid(tmp_path / "r" / "serving" / "server.log")
        run.kill()  # SIGKILL: no cleanup of the run's runs; the kernel's parent-death signal stops the server
        run.communicate(timeout=60)
    assert group_gone(pid), "the server outlived the run"


SERVING_PROFILE = """
name: with-serving
extends: host
serving:
  command: vllm serve /models/llama --port {port}
  env: {VLLM_CPU_KVCACHE_SPACE: "1", HF_TOKEN: secret}
  model: llama
  ready_timeout_s: 300
  accelerators: ["0000:17:00.0"]
"""


def test_the_profile_serving_section_runs_only_when_the_command_line_asks(tmp_path):
    (tmp_path / "p.yaml").write_text(SERVING_PROFILE)
    profile = resolve(str(tmp_path / "p.yaml"))
    run = SitsRun(profile=profile, platform=SimpleNamespace(kind="live", simulated=False), level="full",
                  level_how="option", report_dir=None)
    run.set_serve(None, None, None, None, None, None)
    assert run.serve is None  # a profile's command is never run unasked
    run.set_serve("profile", None, ["HF_TOKEN=mine"], "llama-70b", None, None)
    spec = run.serve
    assert spec.command[:3] == ["vllm", "serve", "/models/llama"] and spec.command[-1] == str(spec.port)
    assert spec.env == {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": "mine"}  # the option over the profile
    assert spec.model == "llama-70b" and spec.ready_timeout_s == 300 and spec.accelerators == ["0000:17:00.0"]
    bare = SitsRun(profile=resolve("host"), platform=None, level="full", level_how="option", report_dir=None)
    with pytest.raises(SitsUsageError, match="has no serving.command; fix:"):
        bare.set_serve("profile", None, None, None, None, None)


@pytest.mark.parametrize("section, said", [
    ("serving: {command: x, colour: red}", "colour"),
    ("serving: {command: x, port: 0}", "port"),
    ("serving: {command: x, env: {'1BAD': y}}", "1BAD"),
])
def test_a_bad_serving_section_is_refused_with_its_line(tmp_path, section, said):
    from pytest_sits.profiles import ProfileError

    (tmp_path / "p.yaml").write_text(f"name: bad-serving\nextends: host\n{section}\n")
    with pytest.raises(ProfileError, match=r"p\.yaml:3: .*serving") as err:
        resolve(str(tmp_path / "p.yaml"))
    assert said in str(err.value)
