"""`pip install .` into a fresh virtual environment, then run the bundled suite from elsewhere."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("SITS_SKIP_INSTALL_TEST") == "1", reason="SITS_SKIP_INSTALL_TEST=1")
def test_installed_suite_runs_outside_the_checkout(tmp_path):
    src = tmp_path / "src"
    # links copied as links, as a clone has them (a captured snapshot among the test data holds sysfs links whose
    # targets were not captured)
    shutil.copytree(REPO, src, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", ".tox", "sits-report", "*.egg-info", "__pycache__",
                                                  "build", ".gpu", ".whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SITS_", "PYTEST_", "PYTHON"))}
    proc = subprocess.run([str(venv / "bin" / "pytest"), "--sits-profile=h100", "--pyargs",
                           "pytest_sits.conformance", "-p", "no:cacheprovider", "-rs"],
                          cwd=work, capture_output=True, text=True, env=env)
    out = proc.stdout
    assert proc.returncode == 10, out + proc.stderr  # NON_CONFORMANT: INV-DEVICES fails, this machine has no H100
    assert "sits: profile h100-sxm5 (option: --sits-profile=h100)" in out
    assert "found no NVIDIA device" in out
    assert str(venv) in out.split("sits: profile h100-sxm5")[1].splitlines()[0]  # the installed profile file
    report = json.loads((work / "sits-report" / "sits-report.json").read_text())
    assert report["profile"]["name"] == "h100-sxm5"
    assert all(str(REPO) not in v["nodeid"] for v in report["verdicts"])
    assert (venv / "bin" / "sits").exists()
    proc = subprocess.run([str(venv / "bin" / "sits"), "profile", "list"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "h100-sxm5" in proc.stdout

    # The design card's commands, in an empty folder: no --pyargs, no test path.
    def run(*args, cwd):
        return subprocess.run([str(venv / "bin" / "pytest"), *args, "-p", "no:cacheprovider"], cwd=cwd,
                              capture_output=True, text=True, env=env)

    for args in (["--sits-profile=h100-sxm5"], ["--sits-profile", "h100.yaml"], ["--sits"]):
        empty = tmp_path / ("empty-" + "-".join(a.strip("-").replace("=", "-") for a in args))
        empty.mkdir()
        (empty / "h100.yaml").write_text("name: lab-h100\nextends: h100-sxm5\n")
        proc = run(*args, cwd=empty)
        out = proc.stdout
        assert "running the bundled conformance suite" in out and str(venv) in out, out + proc.stderr
        assert proc.returncode in (0, 10), out + proc.stderr  # the host profile passes; an H100 profile FAILs here
        assert (empty / "sits-report" / "sits-report.json").is_file()
    # A folder with a lab's own test module: pytest collects it, not the bundled suite.
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "test_lab.py").write_text("def test_lab():\n    assert True\n")
    proc = run("--sits-level=quick", cwd=lab)
    assert proc.returncode == 0 and "1 passed" in proc.stdout and "bundled conformance" not in proc.stdout
