"""`sits health` (pytest_sits/commands/health.py): the node health check, its verdict, and draining and resuming
the node through Slurm: with a recording stand-in for scontrol, and on the local three-node cluster of
tools/slurm/local-cluster.sh (tests/slurm_cluster.py; without it those tests skip)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_sits.cli import main

from helpers import run_sits
from slurm_cluster import SLURM_DIR, START, node_state, sinfo


def fake_scontrol(tmp_path: Path, state: str = "IDLE+DRAIN", reason: str = "sits health: DEP-XID FAIL") -> Path:
    """An scontrol that records its arguments (every call, in scontrol.log; the last update in scontrol.args) and
    answers `show node` with the given state and reason."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "scontrol"
    show = f"NodeName=x Arch=x86_64 State={state} Partitions=sits Reason={reason} [root@2026-06-01T00:00:00]"
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(tmp_path / 'scontrol.log')!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                      "if sys.argv[1:2] == ['show']:\n"
                      f"    print({show!r})\n"
                      "else:\n"
                      f"    open({str(tmp_path / 'scontrol.args')!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


def updates(tmp_path: Path) -> list:
    log = tmp_path / "scontrol.log"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [c for c in calls if c[:1] == ["update"]]


@pytest.mark.slow
def test_health_healthy_and_unhealthy_with_drain(tmp_path, monkeypatch, capsys):
    bindir = fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu3")
    assert main(["health", "--platform", "sim:h100", "--drain"]) == 0
    assert "gpu3: healthy" in capsys.readouterr().out
    assert not (tmp_path / "scontrol.args").exists()
    assert main(["health", "--platform", "sim:h100+switch", "--drain"]) == 10  # NON_CONFORMANT: a FAIL
    text = capsys.readouterr().out
    assert "gpu3: unhealthy" in text and "TOPO-PCIE-DIRECT FAIL" in text
    args = json.loads((tmp_path / "scontrol.args").read_text())
    assert args[:3] == ["update", "nodename=gpu3", "state=drain"]
    assert args[3].startswith("reason=sits health: TOPO-PCIE-DIRECT FAIL")


@pytest.mark.slow
def test_health_without_drain_changes_nothing(tmp_path, monkeypatch, capsys):
    bindir = fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "--platform", "sim:h100+missing-device", "--node", "x1",
                 "--report-dir", str(tmp_path / "r")]) == 10  # NON_CONFORMANT: a FAIL
    assert not (tmp_path / "scontrol.args").exists()
    assert (tmp_path / "r" / "sits-report.json").is_file()
    assert "x1: unhealthy" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("fault, req", [("ecc-uncorrectable", "DEP-ECC"), ("xid-79", "DEP-XID")])
def test_health_fail_drains_with_the_requirement(fault, req, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", f"--platform=sim:h100+{fault}", "--drain", "--node=gpu3"]) == 10  # NON_CONFORMANT: a FAIL
    [call] = updates(tmp_path)
    assert call[:3] == ["update", "nodename=gpu3", "state=drain"]
    assert call[3].startswith(f"reason=sits health: {req} FAIL (0000:"), call


@pytest.mark.slow
def test_health_hung_probe_reports_and_never_drains(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "--platform=sim:h100+probe-hang", "--drain", "--node=gpu3", "--watchdog=3",
                 f"--report-dir={tmp_path / 'r'}"]) == 13  # NOT_TESTED: could not check
    text = capsys.readouterr().out
    assert "could not check" in text and "hung (watchdog: 3.0 s)" in text and "not drained" in text
    assert updates(tmp_path) == []
    rep = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    assert not rep["run"]["completed"] and rep["run"]["exit_status"] == 2
    # the whole run bounded too: a run that outlives --timeout is killed, reported, and acts on nothing
    assert main(["health", "--platform=sim:h100+probe-hang", "--drain", "--node=gpu3", "--watchdog=600",
                 "--timeout=4"]) == 13  # NOT_TESTED: could not check
    assert "did not finish within 4 s" in capsys.readouterr().out and updates(tmp_path) == []


def test_health_error_or_undecided_never_drains(tmp_path, monkeypatch, capsys):
    from pytest_sits.commands.health import UNCHECKED, UNDECIDED, UNHEALTHY, judge

    ok = {"run": {"completed": True}}
    v = {"requirement": "DEP-THROTTLE", "subject": "gpu0", "evidence": {}}
    assert judge(dict(ok, verdicts=[dict(v, status="ERROR")]), [])[0] == UNCHECKED  # could not test: not a FAIL
    assert judge(dict(ok, verdicts=[dict(v, status="INCONCLUSIVE")]), [])[0] == UNDECIDED
    assert judge(None, ["no report (pytest exit 3)"])[0] == UNCHECKED
    assert judge({"run": {"completed": False}, "verdicts": []}, [])[0] == UNCHECKED
    hung = dict(v, status="ERROR", evidence={"watchdog": {"hung": True, "limit_s": 5}})
    assert judge(dict(ok, verdicts=[hung]), [])[0] == UNCHECKED
    # a FAIL decided before a hang is still a FAIL
    fail = dict(v, requirement="DEP-ECC", status="FAIL")
    out, lines, _ = judge({"run": {"completed": False}, "verdicts": [fail, hung]}, [])
    assert out == UNHEALTHY and lines == ["DEP-ECC FAIL (gpu0)"]


@pytest.mark.slow
def test_health_prolog_and_healthcheck_modes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    # prolog/epilog: exit 10 on a FAIL (slurmd drains the node), never a Slurm command
    assert main(["health", "--mode=prolog", "--platform=sim:h100+xid-79", "--node=gpu3"]) == 10  # NON_CONFORMANT: a FAIL
    assert "slurmd drains gpu3: sits health: DEP-XID FAIL" in capsys.readouterr().err
    assert main(["health", "--mode=epilog", "--platform=sim:h100"]) == 0
    assert main(["health", "--mode=prolog", "--platform=sim:h100+probe-hang", "--watchdog=3"]) == 0
    assert not (tmp_path / "scontrol.log").exists()
    # HealthCheckProgram: drains itself, exits 0 (Slurm ignores the status, and may wait for a 0 at start-up)
    assert main(["health", "--mode=healthcheck", "--platform=sim:h100+ecc-uncorrectable", "--node=gpu3"]) == 0
    assert updates(tmp_path)[0][3].startswith("reason=sits health: DEP-ECC FAIL")


@pytest.mark.slow
def test_health_resume_rechecks_under_the_inference_load(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    rdir = tmp_path / "r"
    assert main(["health", "--resume", "--node=gpu3", "--platform=sim:h100", f"--report-dir={rdir}"]) == 0
    assert updates(tmp_path) == [["update", "nodename=gpu3", "state=resume"]]
    assert "resumed gpu3" in capsys.readouterr().out
    rep = json.loads((rdir / "sits-report.json").read_text())
    thr = [v for v in rep["verdicts"] if v["requirement"] == "DEP-THROTTLE"]
    assert thr and all(v["evidence"]["load"]["kind"] == "inference" and v["evidence"]["load"]["completed"]
                       for v in thr)
    assert {v["requirement"] for v in rep["verdicts"]} >= {"PLP-PPL", "PLP-LATENCY", "DEP-ECC", "DEP-XID"}
    ecc = next(v for v in rep["verdicts"] if v["requirement"] == "DEP-ECC")
    assert ecc["evidence"]["during_load"]["load"] == "inference"


@pytest.mark.slow
def test_health_resume_leaves_a_faulty_node_drained(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    # a fault the load provokes: the power brake asserted only under load
    assert main(["health", "--resume", "--node=gpu3", "--platform=sim:h100+throttle-power-brake"]) == 10  # NON_CONFORMANT: a FAIL
    assert updates(tmp_path) == [] and "stays drained" in capsys.readouterr().out
    # the inference load cannot run (a snapshot-like platform would say so): never resumed on idle checks alone
    from pytest_sits.commands.health import HEALTHY, UNDECIDED, _under_load

    report = {"verdicts": [{"requirement": "DEP-THROTTLE", "subject": "gpu0", "status": "PASS",
                            "evidence": {"load": {"kind": "suite"}, "samples": [{"under_load": True}]}}]}
    out, why = _under_load(report, HEALTHY, [])
    assert out == UNDECIDED and "idle checks alone never return a node to service" in why


def test_health_resume_only_a_node_drained_by_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path, reason='bad fan (ops)')}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "--resume", "--node=gpu3", "--platform=sim:h100"]) == 13  # NOT_TESTED: not re-checked
    assert "another reason" in capsys.readouterr().out and updates(tmp_path) == []


def test_health_resume_of_a_node_in_service(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path, state='IDLE', reason='none')}{os.pathsep}"
                               f"{os.environ['PATH']}")
    assert main(["health", "--resume", "--node=gpu3", "--platform=sim:h100"]) == 0
    assert "not drained: nothing to resume" in capsys.readouterr().out and updates(tmp_path) == []


def test_health_builds_its_command_with_equals(tmp_path, monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def popen(cmd, **kw):
        seen["cmd"] = cmd
        raise Stop
    monkeypatch.setattr(subprocess, "Popen", popen)
    from pytest_sits.commands import health as h

    args = type("A", (), {"watchdog": None, "timeout": None, "platform": "sim:h100", "profile": "/x/h100.yaml",
                          "pytest_args": ["--", "--sits-golden", "/g"]})()
    with pytest.raises(Stop):
        h.run_suite(args, tmp_path, "check")
    cmd = seen["cmd"]
    assert "--sits-platform=sim:h100" in cmd and "--sits-profile=/x/h100.yaml" in cmd
    assert f"--sits-report-dir={tmp_path}" in cmd and "--sits-golden=/g" in cmd
    assert not any(a in ("/x/h100.yaml", str(tmp_path), "/g", "sim:h100") for a in cmd)


@pytest.mark.slow
def test_health_drains_its_own_node_through_scontrol(cluster, tmp_path):
    try:
        proc = subprocess.run(["srun", "--nodelist=n3", "--nodes=1", "--ntasks=1", sys.executable, "-m",
                               "pytest_sits.cli", "health", "--platform", "sim:h100+switch", "--drain"],
                              env=cluster, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300)
        assert proc.returncode == 10, proc.stdout
        assert "drained n3" in proc.stdout
        deadline = time.monotonic() + 30
        while True:  # "drng" (draining) while the health job itself completes, then "drain"
            info = subprocess.run(["sinfo", "-h", "-n", "n3", "-o", "%t|%E"], env=cluster, stdout=subprocess.PIPE,
                                  text=True, timeout=30).stdout.strip()
            state, reason = info.split("|", 1)
            if state != "drng" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert state == "drain" and reason.startswith("sits health: TOPO-PCIE-DIRECT FAIL"), info
        ok = subprocess.run(["srun", "--nodelist=n1", "--nodes=1", "--ntasks=1", sys.executable, "-m",
                             "pytest_sits.cli", "health", "--platform", "sim:h100", "--drain"], env=cluster,
                            cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=300)
        assert ok.returncode == 0 and "n1: healthy" in ok.stdout, ok.stdout
        deadline = time.monotonic() + 30
        while sinfo(cluster)["n1"] == "comp" and time.monotonic() < deadline:  # the job completing
            time.sleep(0.5)
        assert sinfo(cluster)["n1"] == "idle"  # a healthy node is not drained
    finally:
        subprocess.run(["scontrol", "update", "nodename=n3", "state=resume"], env=cluster, timeout=30)


def _health_on(env, node: str, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["srun", f"--nodelist={node}", "--nodes=1", "--ntasks=1", sys.executable, "-m",
                           "pytest_sits.cli", "health", *args], env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


@pytest.mark.slow
def test_health_on_slurm_fault_drains_hang_does_not_and_resume(cluster, tmp_path):
    """On the local cluster: n3 with an uncorrected ECC error is drained with DEP-ECC in the reason; n2 whose
    probe hangs is not drained; --resume brings a healthy n3 back after the re-check under the inference
    load, and leaves n2 (drained for XID 79, still faulty) drained."""
    try:
        bad = _health_on(cluster, "n3", "--platform=sim:h100+ecc-uncorrectable", "--drain", cwd=tmp_path)
        assert bad.returncode == 10 and "drained n3" in bad.stdout, bad.stdout
        state, reason = node_state(cluster, "n3")
        assert state == "drain" and reason.startswith("sits health: DEP-ECC FAIL (0000:"), (state, reason)
        hung = _health_on(cluster, "n2", "--platform=sim:h100+probe-hang", "--drain", "--watchdog=3", cwd=tmp_path)
        assert hung.returncode == 13 and "hung (watchdog" in hung.stdout and "not drained" in hung.stdout, hung.stdout
        assert node_state(cluster, "n2")[0] == "idle"
        # return to service: run on the node itself (a drained node takes no job), as an operator would
        ok = run_sits("health", "--resume", "--node=n3", "--platform=sim:h100", env=cluster, cwd=tmp_path)
        assert ok.returncode == 0 and "re-checked under the inference load" in ok.stdout and "resumed n3" in ok.stdout, \
            ok.stdout
        assert node_state(cluster, "n3")[0] == "idle"
        xid = _health_on(cluster, "n2", "--platform=sim:h100+xid-79", "--drain", cwd=tmp_path)
        assert xid.returncode == 10 and node_state(cluster, "n2")[1].startswith("sits health: DEP-XID FAIL")
        still = run_sits("health", "--resume", "--node=n2", "--platform=sim:h100+xid-79", env=cluster,
                         cwd=tmp_path)
        assert still.returncode == 10 and "stays drained" in still.stdout, still.stdout
        state, reason = node_state(cluster, "n2")
        assert state == "drain" and reason.startswith("sits health: DEP-XID FAIL")
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2,n3", "state=resume"], env=cluster, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_health_as_slurm_prolog(cluster, tmp_path):
    """As the cluster's Prolog on n3: a FAIL fails the prolog, and slurmd (not the tool) drains the node; a
    hung probe lets the job run."""
    prolog_d = SLURM_DIR / "prolog.d"
    if not (SLURM_DIR / "prolog").is_file() or not prolog_d.is_dir():
        pytest.skip(f"the local cluster has no prolog (started by an older local-cluster.sh); restart it: bash "
                    f"tools/slurm/local-cluster.sh stop && {START}")
    script = prolog_d / f"sits-test-{os.getpid()}"
    log = tmp_path / "prolog.log"

    def install(platform: str, watchdog: int) -> None:
        script.write_text(f"#!/bin/sh\n[ \"$SLURMD_NODENAME\" = n3 ] || exit 0\n"
                          f"exec {sys.executable} -m pytest_sits.cli health --mode=prolog --platform={platform} "
                          f"--watchdog={watchdog} >>{log} 2>&1\n")
        script.chmod(0o755)
    try:
        install("sim:h100+probe-hang", 3)
        ran = subprocess.run(["srun", "--nodelist=n3", "--nodes=1", "true"], env=cluster, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=120)
        assert ran.returncode == 0, ran.stdout + log.read_text()
        assert node_state(cluster, "n3")[0] == "idle"
        install("sim:h100+xid-79", 100)   # a busy CI machine must not turn the FAIL into a hung test
        failed = subprocess.run(["srun", "--nodelist=n3", "--nodes=1", "--immediate=30", "true"], env=cluster,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        assert failed.returncode != 0, failed.stdout + log.read_text()
        # the failed job completes before slurmd's drain shows (over 30 s on a busy 2-CPU machine)
        state, reason = node_state(cluster, "n3", settle=180)
        assert state.startswith("drain") and "prolog" in reason.lower(), (state, reason, failed.stdout,
                                                                          log.read_text())
        assert "slurmd drains n3: sits health: DEP-XID FAIL" in log.read_text()
    finally:
        script.unlink(missing_ok=True)
        subprocess.run(["scontrol", "update", "nodename=n3", "state=resume"], env=cluster, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
