"""Fleet runs on Slurm, the fleet report, `sits health` (pytest_sits/commands/fleet/, pytest_sits/commands/health.py).

The tests marked by the ``cluster`` fixture run on a real Slurm: the local three-node cluster of
tools/slurm/local-cluster.sh (n1, n2, n3 on 127.0.0.1).  Without it they skip, naming the commands that
install and start it.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import re
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from pytest_sits.commands.fleet import common, merge as fleet_merge, node as fleet_node
from pytest_sits.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "tools" / "slurm" / "local-cluster.sh"
SLURM_DIR = Path(os.environ.get("SITS_SLURM_DIR", "/tmp/sits-slurm"))
START = "bash tools/slurm/install.sh && bash tools/slurm/local-cluster.sh start"
NODES = ("n1", "n2", "n3")


def run_suite(dest: Path, platform: str) -> Path:
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "-q", "-p", "no:cacheprovider",
           f"--sits-platform={platform}", f"--sits-report-dir={dest}", f"--junitxml={dest / 'junit.xml'}"]
    proc = subprocess.run(cmd, cwd=str(dest.parent), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    assert (dest / "sits-report.json").is_file(), proc.stdout[-3000:]
    return dest


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Real reports: a conforming simulated node and one with a PCIe switch in every accelerator's path."""
    base = tmp_path_factory.mktemp("reports")
    return {"pass": run_suite(base / "pass", "sim:h100"), "switch": run_suite(base / "switch", "sim:h100+switch")}


def node_dir(out: Path, node: str, src: Path = None, started: bool = True) -> Path:
    d = out / node
    d.mkdir(parents=True)
    if started:
        (d / "node.json").write_text(json.dumps({"node": node, "started_at": "2026-01-01T00:00:00Z",
                                                 "job_nodelist": None}))
    if src is not None:
        for f in src.iterdir():
            shutil.copy(f, d / f.name)
        (d / "node-exit.json").write_text(json.dumps({"node": node, "exit_code": 0}))
    return d


# ------------------------------------------------------------------------------------------ pure parts

@pytest.mark.parametrize("spec,names", [
    ("n1", ["n1"]), ("n[1-3]", ["n1", "n2", "n3"]), ("n[1-2,5],gpu7", ["n1", "n2", "n5", "gpu7"]),
    ("r[1-2]n[08-09]", ["r1n08", "r1n09", "r2n08", "r2n09"]), ("a,a", ["a"])])
def test_expand_hostlist(spec, names):
    assert common.expand_hostlist(spec) == names


@pytest.mark.parametrize("spec", ["n[1-3", "n1-3]", "n[3-1]", "n[a-b]"])
def test_bad_hostlist_names_the_fix(spec):
    with pytest.raises(common.FleetError, match="fix:"):
        common.expand_hostlist(spec)


def _nodes(values, profile="h100-sxm5"):
    return [{"node": f"n{i}", "profile": profile,
             "_sum": fleet_merge._summarise({"verdicts": [{"requirement": "MEM-BW-EFFICIENCY", "subject": "gpu0",
                                                           "unit": "GB/s", "status": "PASS", "measured": v}]})}
            for i, v in enumerate(values, 1)]


def test_outlier_rule_median_and_mad():
    values = [3000, 3010, 2990, 3005, 2995, 3000, 2400]
    got = fleet_merge.outliers(_nodes(values), k=3.5)
    assert [o["node"] for o in got["flagged"]] == ["n7"]
    o = got["flagged"][0]
    assert o["median"] == 3000 and o["mad"] == 5
    assert o["low"] == pytest.approx(3000 - 3.5 * 1.4826 * 5) and o["high"] == pytest.approx(3000 + 3.5 * 1.4826 * 5)
    assert "1.4826 x MAD" in got["rule"] and got["k"] == 3.5 and got["groups_judged"] == 1
    # a wide k accepts the same value; a node within the spread is never flagged
    assert fleet_merge.outliers(_nodes(values), k=200)["flagged"] == []
    assert fleet_merge.outliers(_nodes(values[:6] + [3012]))["flagged"] == []


def test_outlier_rule_zero_mad_small_groups_and_profiles():
    # MAD = 0: every value that differs from the median stands out
    assert [o["node"] for o in fleet_merge.outliers(_nodes([0, 0, 0, 2]))["flagged"]] == ["n4"]
    # fewer than 3 nodes: not judged
    small = fleet_merge.outliers(_nodes([1, 100]))
    assert small["flagged"] == [] and small["groups_too_small"] == 1 and small["groups_judged"] == 0
    # nodes of different profiles are never compared
    mixed = _nodes([1, 1]) + [dict(n, node=f"m{i}", profile="mi300x") for i, n in enumerate(_nodes([50, 50]))]
    assert fleet_merge.outliers(mixed)["flagged"] == []
    # booleans and strings are not measured numbers
    nodes = _nodes([True, True, False])
    assert fleet_merge.outliers(nodes)["groups_judged"] == 0


# ------------------------------------------------------------------------------------------ merge

def test_merge_pass_fail_and_no_result(reports, tmp_path, capsys):
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    node_dir(out, "n2", reports["switch"])
    node_dir(out, "n3")                       # started, then nothing: died mid-run
    (out / "fleet-run.json").write_text(json.dumps({"run_id": "x", "mode": "srun", "requested_nodes": 4,
                                                    "expected_nodes": ["n1", "n2", "n3", "n4"]}))
    assert main(["fleet", "merge", str(out)]) == 1
    text = capsys.readouterr().out
    fl = json.loads((out / "fleet-report.json").read_text())
    assert fleet_merge.validate(fl) == []
    by = {n["node"]: n for n in fl["nodes"]}
    assert by["n1"]["result"] == "PASS" and by["n1"]["report_result"] == "SIMULATED"
    assert by["n2"]["result"] == "FAIL" and by["n2"]["counts"]["FAIL"] > 0
    assert by["n3"]["result"] == "ERROR" and by["n3"]["reason"].startswith("no result: started at")
    assert by["n4"]["result"] == "ERROR" and "never started" in by["n4"]["reason"]
    assert fl["summary"] == dict(fl["summary"], result="FAIL", nodes=4, pass_rate=0.25, simulated=True,
                                 counts={"PASS": 1, "FAIL": 1, "UNDECIDED": 0, "ERROR": 2})
    direct = next(r for r in fl["requirements"] if r["requirement"] == "TOPO-PCIE-DIRECT")
    assert direct["by_status"] == {"PASS": ["n1"], "FAIL": ["n2"], "ERROR": ["n3", "n4"]}
    assert direct["pass_rate"] == 0.25 and "no report counts as ERROR" in fl["pass_rate_rule"]
    assert "n3  ERROR      no result" in text and "SIMULATED" in text
    html = (out / "fleet-report.html").read_text()
    assert "SIMULATED" in html and "no result" in html and "1.4826" in html


def test_merged_junit_has_every_node(reports, tmp_path):
    junitparser = pytest.importorskip("junitparser", reason="pip install 'pytest-sits[fleet]'")
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    node_dir(out, "n2", reports["switch"])
    node_dir(out, "n3")
    fl = fleet_merge.merge(out)
    xml = junitparser.JUnitXml.fromfile(str(out / "fleet-junit.xml"))
    suites = {s.name: s for s in xml}
    assert set(suites) == {"n1", "n2", "n3"}
    one = junitparser.JUnitXml.fromfile(str(reports["switch"] / "junit.xml"))
    assert suites["n2"].failures == sum(s.failures for s in one) > 0
    assert suites["n1"].failures == 0 and suites["n1"].tests == sum(s.tests for s in one)
    assert suites["n3"].errors == 1
    case = next(iter(suites["n3"]))
    assert case.result[0].type == "no result"
    assert all(c.classname.startswith("n2.") for c in suites["n2"])
    assert fl["junit"]["errors"] == 1 and fl["junit"]["failures"] == suites["n2"].failures


def test_merge_needs_no_junit_library(reports, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "junitparser", None)
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    fl = fleet_merge.merge(out)
    assert fl["junit"]["path"] == "fleet-junit.xml" and fl["junit"]["tests"] > 0
    from xml.etree import ElementTree

    root = ElementTree.parse(out / "fleet-junit.xml").getroot()
    assert root.tag == "testsuites" and int(root.get("tests")) == fl["junit"]["tests"]


def test_merge_never_writes_through_a_planted_link(reports, tmp_path):
    """Every file the merge writes replaces its path whole: a link planted at fleet-junit.xml (or the JSON, the
    HTML, the Prometheus file) is replaced, and its target is untouched."""
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    victims = {}
    for name in ("fleet-junit.xml", "fleet-report.json", "fleet-report.html", "fleet.prom"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("precious")
        os.symlink(victim, out / name)
        victims[name] = victim
    pytest.importorskip("prometheus_client", reason="pip install 'pytest-sits[prometheus]'")
    fleet_merge.merge(out, prometheus=out / "fleet.prom")
    for name, victim in victims.items():
        assert victim.read_text() == "precious", name
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name
    assert "<testsuites" in (out / "fleet-junit.xml").read_text()


def test_fleet_code_writes_only_through_the_safe_writer():
    """No file of the fleet code or sits health opens a file for writing itself (files.py does it)."""
    import re

    for path in sorted((ROOT / "pytest_sits" / "commands" / "fleet").glob("*.py")) + [
            ROOT / "pytest_sits" / "commands" / "health.py", ROOT / "pytest_sits" / "commands" / "baseline.py",
            ROOT / "pytest_sits" / "report" / "prometheus.py"]:
        text = path.read_text()
        assert not re.search(r"\.write_text\(|\.write_bytes\(|open\([^)]*[\"'][wax]b?[\"']|\.write\(\s*JUnitXml", text), path


def test_outliers_in_a_merged_fleet(reports, tmp_path):
    out = tmp_path / "fleet"
    for n in ("n1", "n2", "n3"):
        node_dir(out, n, reports["pass"])
    d = node_dir(out, "n4", reports["pass"])
    rep = json.loads((d / "sits-report.json").read_text())
    v = next(v for v in rep["verdicts"] if v["requirement"] == "INV-DEVICES")
    v["measured"] = v["measured"] - 8
    (d / "sits-report.json").write_text(json.dumps(rep))
    fl = fleet_merge.merge(out, k=3.5)
    flagged = [(o["node"], o["requirement"]) for o in fl["outliers"]["flagged"]]
    assert flagged == [("n4", "INV-DEVICES")]
    assert fl["outliers"]["k"] == 3.5 and "MAD" in fl["outliers"]["rule"]


def test_untrusted_node_reports(reports, tmp_path):
    out = tmp_path / "fleet"
    node_dir(out, "n1", reports["pass"])
    (node_dir(out, "n2") / "sits-report.json").write_text("{not json")
    d = node_dir(out, "n3")
    (d / "sits-report.json").write_text(json.dumps({"schema": "pytest-sits/report"}))
    d = node_dir(out, "n4")
    os.symlink(reports["pass"] / "sits-report.json", d / "sits-report.json")
    (out / "evil").mkdir()
    os.symlink("/etc", out / "n5")             # a linked node folder is not followed
    fl = fleet_merge.merge(out)
    by = {n["node"]: n for n in fl["nodes"]}
    assert set(by) == {"n1", "n2", "n3", "n4"}
    assert by["n2"]["result"] == "ERROR" and "not valid JSON" in by["n2"]["reason"]
    assert by["n3"]["result"] == "ERROR" and "is not a valid pytest-sits report" in by["n3"]["reason"]
    assert by["n4"]["result"] == "ERROR" and "symbolic link" in by["n4"]["reason"]
    assert all(by[n]["reason"].startswith("no result") for n in ("n2", "n3", "n4"))


def test_fleet_usage_errors_exit_4(tmp_path, capsys):
    assert main(["fleet", "merge", str(tmp_path / "nowhere")]) == 4
    assert "fix:" in capsys.readouterr().err
    assert main(["fleet", "merge", str(tmp_path)]) == 4
    assert "no node folder" in capsys.readouterr().err
    assert main(["fleet", "run", "--out", str(tmp_path / "o"), "--", "-q"]) == 4
    assert "--nodes N" in capsys.readouterr().err
    assert main(["fleet", "run", "--array", "--nodelist", "n[1-2]", "--out", str(tmp_path / "o")]) == 4
    assert "drop --array" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert main(["fleet", "run", "--nodes", "2", "--out", str(tmp_path / "full")]) == 4
    assert "not empty" in capsys.readouterr().err


def test_fleet_run_without_slurm_names_the_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["fleet", "run", "--nodes", "2", "--out", str(tmp_path / "o")]) == 4
    assert "`srun` not found" in capsys.readouterr().err and "apt-get install slurm-client" in common.SLURM_INSTALL


def test_node_entry_writes_its_folder_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
    out = tmp_path / "fleet"
    assert fleet_node.node_main(["node", str(out), "--", "--sits-platform=sim:h100"]) == 0
    d = out / "gpu07"
    marker = json.loads((d / "node.json").read_text())
    assert marker["node"] == "gpu07" and marker["job_nodelist"] == "gpu[07-08]"
    # every option the suite builds is --opt=value (a value after a space can be taken for a test path, which
    # moves pytest's rootdir away from the lab's ini); the user's `--sits-platform sim:h100` is joined too
    assert "--pyargs" in marker["command"] and f"--sits-report-dir={d}" in marker["command"]
    assert f"--junitxml={d / 'junit.xml'}" in marker["command"] and "--sits-platform=sim:h100" in marker["command"]
    assert str(d) not in marker["command"] and "sim:h100" not in marker["command"]
    assert json.loads((d / "node-exit.json").read_text())["exit_code"] == 0
    assert (d / "sits-report.json").is_file() and (d / "junit.xml").is_file() and (d / "pytest.log").is_file()
    # a second task on the same node (two array elements placed together) must not overwrite the first
    before = (d / "sits-report.json").read_bytes()
    assert fleet_node.node_main(["node", str(out), "--", "--sits-platform=sim:h100+switch"]) == 3
    assert (d / "sits-report.json").read_bytes() == before
    # gpu08 was in the allocation but never wrote anything: the merge counts it
    fl = fleet_merge.merge(out)
    assert {n["node"]: n["result"] for n in fl["nodes"]} == {"gpu07": "PASS", "gpu08": "ERROR"}


# ------------------------------------------------------------------------------------------ health

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


def test_health_healthy_and_unhealthy_with_drain(tmp_path, monkeypatch, capsys):
    bindir = fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURMD_NODENAME", "gpu3")
    assert main(["health", "--platform", "sim:h100", "--drain"]) == 0
    assert "gpu3: healthy" in capsys.readouterr().out
    assert not (tmp_path / "scontrol.args").exists()
    assert main(["health", "--platform", "sim:h100+switch", "--drain"]) == 1
    text = capsys.readouterr().out
    assert "gpu3: unhealthy" in text and "TOPO-PCIE-DIRECT FAIL" in text
    args = json.loads((tmp_path / "scontrol.args").read_text())
    assert args[:3] == ["update", "nodename=gpu3", "state=drain"]
    assert args[3].startswith("reason=sits health: TOPO-PCIE-DIRECT FAIL")


def test_health_without_drain_changes_nothing(tmp_path, monkeypatch, capsys):
    bindir = fake_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "--platform", "sim:h100+missing-device", "--node", "x1",
                 "--report-dir", str(tmp_path / "r")]) == 1
    assert not (tmp_path / "scontrol.args").exists()
    assert (tmp_path / "r" / "sits-report.json").is_file()
    assert "x1: unhealthy" in capsys.readouterr().out


@pytest.mark.parametrize("fault, req", [("ecc-uncorrectable", "DEP-ECC"), ("xid-79", "DEP-XID")])
def test_health_fail_drains_with_the_requirement(fault, req, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", f"--platform=sim:h100+{fault}", "--drain", "--node=gpu3"]) == 1
    [call] = updates(tmp_path)
    assert call[:3] == ["update", "nodename=gpu3", "state=drain"]
    assert call[3].startswith(f"reason=sits health: {req} FAIL (0000:"), call


def test_health_hung_probe_reports_and_never_drains(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "--platform=sim:h100+probe-hang", "--drain", "--node=gpu3", "--watchdog=3",
                 f"--report-dir={tmp_path / 'r'}"]) == 3
    text = capsys.readouterr().out
    assert "could not check" in text and "hung (watchdog: 3.0 s)" in text and "not drained" in text
    assert updates(tmp_path) == []
    rep = json.loads((tmp_path / "r" / "sits-report.json").read_text())
    assert not rep["run"]["completed"] and rep["run"]["exit_status"] == 2
    # the whole run bounded too: a run that outlives --timeout is killed, reported, and acts on nothing
    assert main(["health", "--platform=sim:h100+probe-hang", "--drain", "--node=gpu3", "--watchdog=600",
                 "--timeout=4"]) == 3
    assert "did not finish within 4 s" in capsys.readouterr().out and updates(tmp_path) == []


def test_health_error_or_undecided_never_drains(tmp_path, monkeypatch, capsys):
    from pytest_sits.commands.health import UNCHECKED, UNDECIDED, UNHEALTHY, judge

    ok = {"run": {"completed": True}}
    v = {"requirement": "DEP-THROTTLE", "subject": "gpu0", "evidence": {}}
    assert judge(dict(ok, verdicts=[dict(v, status="ERROR")]), [])[0] == UNDECIDED
    assert judge(dict(ok, verdicts=[dict(v, status="INCONCLUSIVE")]), [])[0] == UNDECIDED
    assert judge(None, ["no report (pytest exit 3)"])[0] == UNCHECKED
    assert judge({"run": {"completed": False}, "verdicts": []}, [])[0] == UNCHECKED
    hung = dict(v, status="ERROR", evidence={"watchdog": {"hung": True, "limit_s": 5}})
    assert judge(dict(ok, verdicts=[hung]), [])[0] == UNCHECKED
    # a FAIL decided before a hang is still a FAIL
    fail = dict(v, requirement="DEP-ECC", status="FAIL")
    out, lines, _ = judge({"run": {"completed": False}, "verdicts": [fail, hung]}, [])
    assert out == UNHEALTHY and lines == ["DEP-ECC FAIL (gpu0)"]


def test_health_prolog_and_healthcheck_modes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    # prolog/epilog: exit 1 on a FAIL (slurmd drains the node), never a Slurm command
    assert main(["health", "--mode=prolog", "--platform=sim:h100+xid-79", "--node=gpu3"]) == 1
    assert "slurmd drains gpu3: sits health: DEP-XID FAIL" in capsys.readouterr().err
    assert main(["health", "--mode=epilog", "--platform=sim:h100"]) == 0
    assert main(["health", "--mode=prolog", "--platform=sim:h100+probe-hang", "--watchdog=3"]) == 0
    assert not (tmp_path / "scontrol.log").exists()
    # HealthCheckProgram: drains itself, exits 0 (Slurm ignores the status, and may wait for a 0 at start-up)
    assert main(["health", "--mode=healthcheck", "--platform=sim:h100+ecc-uncorrectable", "--node=gpu3"]) == 0
    assert updates(tmp_path)[0][3].startswith("reason=sits health: DEP-ECC FAIL")


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


def test_health_resume_leaves_a_faulty_node_drained(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    # a fault the load provokes: the power brake asserted only under load
    assert main(["health", "--resume", "--node=gpu3", "--platform=sim:h100+throttle-power-brake"]) == 1
    assert updates(tmp_path) == [] and "stays drained" in capsys.readouterr().out
    # the inference load cannot run (a snapshot-like platform would say so): never resumed on idle checks alone
    from pytest_sits.commands.health import HEALTHY, UNDECIDED, _under_load

    report = {"verdicts": [{"requirement": "DEP-THROTTLE", "subject": "gpu0", "status": "PASS",
                            "evidence": {"load": {"kind": "suite"}, "samples": [{"under_load": True}]}}]}
    out, why = _under_load(report, HEALTHY, [])
    assert out == UNDECIDED and "idle checks alone never return a node to service" in why


def test_health_resume_only_a_node_drained_by_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", f"{fake_scontrol(tmp_path, reason='bad fan (ops)')}{os.pathsep}{os.environ['PATH']}")
    assert main(["health", "--resume", "--node=gpu3", "--platform=sim:h100"]) == 1
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


# ------------------------------------------------------------------------------------------ real Slurm

def _sinfo(env) -> dict:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=30)
    if out.returncode:
        raise RuntimeError(out.stderr.strip())
    return dict(line.split() for line in out.stdout.splitlines() if line.strip())


def _all_idle(env, timeout: float = 60) -> dict:
    """Bring every node of the local cluster back to idle (restart a killed slurmd, resume a drained node)."""
    deadline = time.monotonic() + timeout
    states = {}
    while time.monotonic() < deadline:
        states = _sinfo(env)
        if all(states.get(n) == "idle" for n in NODES):
            return states
        if any(not (SLURM_DIR / "run" / f"slurmd-{n}.pid").exists() or "*" in states.get(n, "*") for n in NODES):
            subprocess.run(["bash", str(CLUSTER), "start"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=120)
        stuck = [n for n in NODES if states.get(n, "").rstrip("*~#") in ("drain", "drng", "down", "fail")]
        if stuck:
            subprocess.run(["scontrol", "update", f"nodename={','.join(stuck)}", "state=resume"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        time.sleep(1)
    return states


@pytest.fixture(scope="module")
def slurm_env():
    missing = [c for c in ("srun", "sbatch", "sinfo", "scontrol") if not shutil.which(c)]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} not on PATH); install and start the local "
                    f"cluster: {START}")
    conf = SLURM_DIR / "slurm.conf"
    if not conf.is_file():
        pytest.skip(f"no local Slurm cluster ({conf} missing); start it: {START}")
    env = dict(os.environ, SLURM_CONF=str(conf))
    try:
        states = _sinfo(env)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        pytest.skip(f"the local Slurm cluster does not answer ({exc}); start it: {START}")
    if set(states) != set(NODES):
        pytest.skip(f"the Slurm cluster at {conf} has nodes {sorted(states)}, not n1..n3; start the local one: "
                    f"{START}")
    return env


@pytest.fixture
def cluster(slurm_env):
    """The local cluster with n1..n3 idle (a node an earlier test killed or drained is brought back first), held
    by one test at a time: under xdist the tests that drain nodes, install a prolog or run fleet jobs would
    otherwise see each other's jobs and node states."""
    with open(Path(tempfile.gettempdir()) / "sits-tests-slurm.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        states = _all_idle(slurm_env)
        if not all(states.get(n) == "idle" for n in NODES):
            pytest.skip(f"local Slurm nodes not idle ({states}); restart them: bash tools/slurm/local-cluster.sh "
                        "stop && bash tools/slurm/local-cluster.sh start")
        yield slurm_env
        _all_idle(slurm_env)


HARNESS = '''
"""Test-only pytest plugin loaded on every node of a fleet run (-p sits_fleet_harness).

* SITS_HARNESS_PLATFORMS="n3=sim:h100+switch": that node runs that simulated platform (set before the
  suite's plugin reads SITS_PLATFORM), so one node of the fleet carries a fault.
* SITS_HARNESS_PREEMPT_NODE=n2: before its fifth test that node's job is cancelled (scancel: SIGTERM to
  every process of the job, as a pre-emption does).
* SITS_HARNESS_DIE_NODE=n2: that node dies before its fifth test: SIGKILL to its slurmd, to the job
  step's slurmstepd, to the fleet task and to this pytest, all at once. Nothing of the node survives to
  write a report; Slurm sees the node stop answering.
"""
import os
import signal

import subprocess
import time

NODE = os.environ.get("SLURMD_NODENAME", "")
for item in filter(None, os.environ.get("SITS_HARNESS_PLATFORMS", "").split(",")):
    name, _, spec = item.partition("=")
    if name == NODE:
        os.environ["SITS_PLATFORM"] = spec
_seen = [0]


def _comm(pid):
    with open(f"/proc/{pid}/comm") as fh:
        return fh.read().strip()


def _ppid(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def pytest_runtest_setup(item):
    _seen[0] += 1
    if NODE == os.environ.get("SITS_HARNESS_PREEMPT_NODE") and _seen[0] == 5:
        # pre-emption as Slurm does it: the job is cancelled, every process of it gets SIGTERM
        job = os.environ["SLURM_JOB_ID"]
        if os.environ.get("SLURM_ARRAY_TASK_ID"):  # an array element is named ARRAYJOB_TASK
            job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
        subprocess.run(["scancel", job])
        time.sleep(30)
    if NODE != os.environ.get("SITS_HARNESS_DIE_NODE") or _seen[0] < 5:
        return
    with open(os.environ["SITS_HARNESS_SLURMD_PIDFILE"].format(node=NODE)) as fh:
        victims = [int(fh.read().strip())]
    pid = os.getppid()                      # the fleet task, then slurmstepd
    for _ in range(3):
        victims.append(pid)
        if _comm(pid) == "slurmstepd":
            break
        pid = _ppid(pid)
    with open(os.path.join(os.environ["SITS_HARNESS_LOG"], NODE + ".died"), "w") as fh:
        fh.write(f"{_seen[0] - 1} tests run; killed {victims} and {os.getpid()}\\n")
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
'''


def _harness_env(env, tmp_path: Path, **extra) -> dict:
    hdir = tmp_path / "harness"
    hdir.mkdir(exist_ok=True)
    (hdir / "sits_fleet_harness.py").write_text(textwrap.dedent(HARNESS))
    return dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(hdir), env.get("PYTHONPATH")])),
                SITS_HARNESS_LOG=str(tmp_path), SITS_HARNESS_SLURMD_PIDFILE=str(SLURM_DIR / "run" / "slurmd-{node}.pid"),
                **extra)


def sits(args, env, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "pytest_sits.cli", *args], env=env, cwd=str(cwd),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def test_fleet_run_on_slurm_faulty_node_fails_dead_node_has_no_result(cluster, tmp_path):
    env = _harness_env(cluster, tmp_path, SITS_PLATFORM="sim:h100", SITS_HARNESS_PLATFORMS="n3=sim:h100+switch",
                       SITS_HARNESS_DIE_NODE="n2")
    out = tmp_path / "fleet"
    proc = sits(["fleet", "run", "--nodelist", "n[1-3]", "--out", str(out), "--", "-p", "sits_fleet_harness"],
                env, tmp_path)
    assert proc.returncode == 1, proc.stdout
    # n2 really died mid-run (after some of its tests), killed with its slurmd and job step
    assert "tests run; killed" in (tmp_path / "n2.died").read_text()
    assert (out / "n2" / "node.json").is_file() and not (out / "n2" / "sits-report.json").exists()
    fl = json.loads((out / "fleet-report.json").read_text())
    assert fleet_merge.validate(fl) == []
    by = {n["node"]: n for n in fl["nodes"]}
    assert by["n1"]["result"] == "PASS", by["n1"]
    assert by["n3"]["result"] == "FAIL" and by["n3"]["platform"] == "SIMULATED sim:h100+switch"
    assert by["n2"]["result"] == "ERROR" and by["n2"]["reason"].startswith("no result")
    assert fl["run"]["mode"] == "srun" and fl["summary"]["counts"] == {"PASS": 1, "FAIL": 1, "UNDECIDED": 0,
                                                                        "ERROR": 1}
    direct = next(r for r in fl["requirements"] if r["requirement"] == "TOPO-PCIE-DIRECT")
    assert direct["by_status"] == {"ERROR": ["n2"], "FAIL": ["n3"], "PASS": ["n1"]}
    assert (out / "fleet-report.html").is_file()
    if fl["junit"]["path"]:
        assert fl["junit"]["errors"] >= 1 and fl["junit"]["failures"] >= 1
    assert "n2  ERROR      no result" in proc.stdout
    if importlib.util.find_spec("cryptography") is not None:
        # each node's folder of this live fleet run, signed, verifies (a FAIL is evidence as much as a PASS)
        from pytest_sits.commands import bundle

        key, pub = bundle.keygen(str(tmp_path / "lab"))
        for node in ("n1", "n3"):
            bundle.create(out / node, tmp_path / f"{node}.tar.gz", key)
            res = bundle.verify(tmp_path / f"{node}.tar.gz", pub)
            assert res.ok and res.replayed == res.verdicts > 0, res.problems


def test_fleet_run_as_a_job_array(cluster, tmp_path):
    out = tmp_path / "fleet"
    proc = sits(["fleet", "run", "--array", "--nodes", "3", "--out", str(out), "--", "--sits-platform=sim:h100"],
                cluster, tmp_path)
    assert proc.returncode == 0, proc.stdout
    fl = json.loads((out / "fleet-report.json").read_text())
    assert fl["run"]["mode"] == "array" and "--array=0-2" in fl["run"]["slurm_command"]
    assert {n["node"]: n["result"] for n in fl["nodes"]} == {"n1": "PASS", "n2": "PASS", "n3": "PASS"}
    tasks = sorted(json.loads((out / n / "node.json").read_text())["array_task_id"] for n in NODES)
    assert tasks == ["0", "1", "2"]


def test_job_array_keeps_partial_results(cluster, tmp_path):
    """A job array of 3 elements while n3 is drained: the element on n2 is pre-empted mid-run (its report says
    INCOMPLETE), one element never gets a node of its own; n1's result is kept and the fleet says what is
    missing."""
    subprocess.run(["scontrol", "update", "nodename=n3", "state=drain", "reason=test: out of service"],
                   env=cluster, timeout=30, check=True)
    try:
        env = _harness_env(cluster, tmp_path, SITS_PLATFORM="sim:h100", SITS_HARNESS_PREEMPT_NODE="n2")
        out = tmp_path / "fleet"
        proc = sits(["fleet", "run", "--array", "--nodes=3", "--pending-limit=60", f"--out={out}", "--",
                     "-p", "sits_fleet_harness"], env, tmp_path)
        assert proc.returncode == 1, proc.stdout
        fl = json.loads((out / "fleet-report.json").read_text())
        by = {n["node"]: n for n in fl["nodes"]}
        assert by["n1"]["result"] == "PASS", by["n1"]
        assert by["n2"]["result"] == "ERROR" and "did not complete" in by["n2"]["reason"], by["n2"]
        assert "stopped by SIGTERM" in by["n2"]["reason"]
        assert "n3" not in by and fl["summary"]["missing_nodes"] == 1 and fl["summary"]["nodes"] == 3
        assert fl["summary"]["result"] == "ERROR" and fl["summary"]["counts"] == {"PASS": 1, "FAIL": 0,
                                                                                "UNDECIDED": 0, "ERROR": 2}
    finally:
        subprocess.run(["scontrol", "update", "nodename=n3", "state=resume"], env=cluster, timeout=30)


def test_health_drains_its_own_node_through_scontrol(cluster, tmp_path):
    try:
        proc = subprocess.run(["srun", "--nodelist=n3", "--nodes=1", "--ntasks=1", sys.executable, "-m",
                               "pytest_sits.cli", "health", "--platform", "sim:h100+switch", "--drain"],
                              env=cluster, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300)
        assert proc.returncode == 1, proc.stdout
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
        while _sinfo(cluster)["n1"] == "comp" and time.monotonic() < deadline:  # the job completing
            time.sleep(0.5)
        assert _sinfo(cluster)["n1"] == "idle"  # a healthy node is not drained
    finally:
        subprocess.run(["scontrol", "update", "nodename=n3", "state=resume"], env=cluster, timeout=30)


def test_fleet_run_that_slurm_refuses_says_why(cluster, tmp_path):
    proc = sits(["fleet", "run", "--nodes", "1", "--partition", "nosuchpartition", "--out", str(tmp_path / "o"),
                 "--", "--sits-platform=sim:h100"], cluster, tmp_path, timeout=120)
    assert proc.returncode == 4
    assert "srun failed" in proc.stdout and "no node ran" in proc.stdout and "partition" in proc.stdout


def _state(env, node: str, settle: float = 30) -> tuple:
    """(state, reason) of a node once it has left the transient states (draining, completing)."""
    deadline = time.monotonic() + settle
    while True:
        info = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t|%E"], env=env, stdout=subprocess.PIPE,
                              text=True, timeout=30).stdout.strip()
        state, reason = info.split("|", 1)
        # a resumed node reads "idle*" (not responding) until slurmctld's next ping reaches it
        if (state.rstrip("*~#") not in ("drng", "comp", "mix", "alloc") and not state.endswith("*")) \
                or time.monotonic() > deadline:
            return state, reason
        time.sleep(0.5)


def _health_on(env, node: str, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["srun", f"--nodelist={node}", "--nodes=1", "--ntasks=1", sys.executable, "-m",
                           "pytest_sits.cli", "health", *args], env=env, cwd=str(cwd), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def test_health_on_slurm_fault_drains_hang_does_not_and_resume(cluster, tmp_path):
    """On the local cluster: n3 with an uncorrected ECC error is drained with DEP-ECC in the reason; n2 whose
    probe hangs is not drained; --resume brings a healthy n3 back after the re-check under the inference
    load, and leaves n2 (drained for XID 79, still faulty) drained."""
    try:
        bad = _health_on(cluster, "n3", "--platform=sim:h100+ecc-uncorrectable", "--drain", cwd=tmp_path)
        assert bad.returncode == 1 and "drained n3" in bad.stdout, bad.stdout
        state, reason = _state(cluster, "n3")
        assert state == "drain" and reason.startswith("sits health: DEP-ECC FAIL (0000:"), (state, reason)
        hung = _health_on(cluster, "n2", "--platform=sim:h100+probe-hang", "--drain", "--watchdog=3", cwd=tmp_path)
        assert hung.returncode == 3 and "hung (watchdog" in hung.stdout and "not drained" in hung.stdout, hung.stdout
        assert _state(cluster, "n2")[0] == "idle"
        # return to service: run on the node itself (a drained node takes no job), as an operator would
        ok = sits(["health", "--resume", "--node=n3", "--platform=sim:h100"], cluster, tmp_path)
        assert ok.returncode == 0 and "re-checked under the inference load" in ok.stdout and "resumed n3" in ok.stdout, \
            ok.stdout
        assert _state(cluster, "n3")[0] == "idle"
        xid = _health_on(cluster, "n2", "--platform=sim:h100+xid-79", "--drain", cwd=tmp_path)
        assert xid.returncode == 1 and _state(cluster, "n2")[1].startswith("sits health: DEP-XID FAIL")
        still = sits(["health", "--resume", "--node=n2", "--platform=sim:h100+xid-79"], cluster, tmp_path)
        assert still.returncode == 1 and "stays drained" in still.stdout, still.stdout
        state, reason = _state(cluster, "n2")
        assert state == "drain" and reason.startswith("sits health: DEP-XID FAIL")
    finally:
        subprocess.run(["scontrol", "update", "nodename=n2,n3", "state=resume"], env=cluster, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


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
        assert _state(cluster, "n3")[0] == "idle"
        install("sim:h100+xid-79", 100)   # a busy CI machine must not turn the FAIL into a hung test
        failed = subprocess.run(["srun", "--nodelist=n3", "--nodes=1", "--immediate=30", "true"], env=cluster,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        assert failed.returncode != 0, failed.stdout + log.read_text()
        # the failed job completes before slurmd's drain shows (over 30 s on a busy 2-CPU machine)
        state, reason = _state(cluster, "n3", settle=180)
        assert state.startswith("drain") and "prolog" in reason.lower(), (state, reason)
        assert "slurmd drains n3: sits health: DEP-XID FAIL" in log.read_text()
    finally:
        script.unlink(missing_ok=True)
        subprocess.run(["scontrol", "update", "nodename=n3", "state=resume"], env=cluster, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ------------------------------------------------------------------------------------------ headline, page, scale

def _fleet_of(reports, out: Path, kinds: dict) -> Path:
    for node, kind in kinds.items():
        if kind is None:
            node_dir(out, node)
        else:
            node_dir(out, node, reports[kind])
    return out


def test_headline_is_the_worst_node_result(reports, tmp_path):
    undecided = tmp_path / "u"
    _fleet_of(reports, undecided, {"n1": "pass", "n2": "pass"})
    rep = json.loads((undecided / "n2" / "sits-report.json").read_text())
    v = next(v for v in rep["verdicts"] if v["status"] == "PASS")
    v["status"] = "INCONCLUSIVE"
    (undecided / "n2" / "sits-report.json").write_text(json.dumps(rep))
    fl = fleet_merge.merge(undecided)
    assert fl["summary"]["result"] == "UNDECIDED" and fl["summary"]["counts"]["UNDECIDED"] == 1
    assert 'class="badge UNDECIDED"' in (undecided / "fleet-report.html").read_text()   # never a red FAIL
    err = _fleet_of(reports, tmp_path / "e", {"n1": "pass", "n2": None})
    assert fleet_merge.merge(err)["summary"]["result"] == "ERROR"
    fail = _fleet_of(reports, tmp_path / "f", {"n1": "switch", "n2": None, "n3": "pass"})
    assert fleet_merge.merge(fail)["summary"]["result"] == "FAIL"
    ok = _fleet_of(reports, tmp_path / "p", {"n1": "pass", "n2": "pass"})
    assert fleet_merge.merge(ok)["summary"]["result"] == "PASS"


def test_array_elements_that_never_started_are_counted(reports, tmp_path):
    out = _fleet_of(reports, tmp_path / "a", {"x1": "pass", "x2": "pass"})
    (out / "fleet-run.json").write_text(json.dumps({"run_id": "r", "mode": "array", "requested_nodes": 4}))
    fl = fleet_merge.merge(out)
    s = fl["summary"]
    assert s["result"] == "ERROR" and s["missing_nodes"] == 2 and s["nodes"] == 4 and s["counts"]["ERROR"] == 2
    assert s["counts"]["PASS"] == 2 and "2 never started" in s["result_reason"]
    assert {n["node"] for n in fl["nodes"]} == {"x1", "x2"}          # the results that exist are kept


def test_a_report_missing_what_the_merge_reads_is_no_result(reports, tmp_path):
    out = _fleet_of(reports, tmp_path / "v", {"n1": "pass", "n2": "pass"})
    rep = json.loads((out / "n2" / "sits-report.json").read_text())
    rep["verdicts"][0]["status"] = "GREAT"
    (out / "n2" / "sits-report.json").write_text(json.dumps(rep))
    by = {n["node"]: n for n in fleet_merge.merge(out)["nodes"]}
    assert by["n2"]["result"] == "ERROR" and "'GREAT' is not a status" in by["n2"]["reason"]
    strict = {n["node"]: n for n in fleet_merge.merge(out, strict=True)["nodes"]}
    assert strict["n2"]["result"] == "ERROR" and "is not a valid pytest-sits report" in strict["n2"]["reason"]


def test_merge_in_worker_processes_equals_in_process(reports, tmp_path, monkeypatch):
    kinds = {f"n{i:03d}": ("switch" if i % 7 == 0 else "pass") for i in range(1, 71)}
    kinds["n050"] = None
    out = _fleet_of(reports, tmp_path / "w", kinds)
    one = fleet_merge.merge(out, jobs=1)
    two = fleet_merge.merge(out, jobs=2)
    for k in ("summary", "nodes", "requirements", "outliers", "measurements", "junit"):
        assert one[k] == two[k], k


def test_fleet_page_failing_first_linked_and_bounded(reports, tmp_path):
    kinds = {f"gpu-node-{i:04d}.cluster.example": ("switch" if i in (5, 40) else "pass") for i in range(1, 61)}
    kinds["gpu-node-0007.cluster.example"] = None
    out = _fleet_of(reports, tmp_path / "h", kinds)
    fleet_merge.merge(out)
    html = (out / "fleet-report.html").read_text()
    attention = html.split('id="attention"')[1].split('id="requirements"')[0]
    assert attention.index("gpu-node-0005") < attention.index("gpu-node-0040") < attention.index("gpu-node-0007")
    assert 'href="gpu-node-0005.cluster.example/sits-report.html"' in attention
    assert 'class="st FAIL"' in attention and "gpu-node-0012" not in attention   # passing nodes are folded
    assert html.count('href="gpu-node-0012.cluster.example/sits-report.html"') == 1
    req = html.split('id="requirements"')[1].split('id="outliers"')[0]
    assert req.index("TOPO-PCIE-DIRECT") < req.index("INV-DEVICES")           # lowest pass rate first
    assert len(html) < 400_000


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_fleet_page_has_no_horizontal_overflow_at_420px(reports, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless Chromium (apt-get install chromium): the 420 px layout check needs a browser")
    kinds = {f"gpu-node-{i:04d}.a-very-long-cluster-domain.example": ("switch" if i % 9 == 0 else "pass")
             for i in range(1, 31)}
    kinds["gpu-node-0003.a-very-long-cluster-domain.example"] = None
    out = _fleet_of(reports, tmp_path / "b", kinds)
    fleet_merge.merge(out)
    page = (out / "fleet-report.html").read_text()
    probe = page.replace("</body>", "<script>document.title = 'W=' + document.documentElement.scrollWidth + "
                                     "' V=' + window.innerWidth;</script></body>")
    (out / "probe.html").write_text(probe)
    for width in (420, 1400):
        proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               f"--window-size={width},900", "--dump-dom", (out / "probe.html").as_uri()],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        m = re.search(r"<title>W=(\d+) V=(\d+)</title>", proc.stdout)
        assert m, proc.stderr[-2000:]
        scroll, view = int(m.group(1)), int(m.group(2))
        assert scroll <= view, f"{width} px: the page is {scroll} px wide in a {view} px window"
