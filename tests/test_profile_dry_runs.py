"""Every bundled profile passes its own healthy simulated hardware at level full: no FAIL, no INCONCLUSIVE (what
no library of this version reads for a vendor SKIPs naming it); tox.ini runs each of them so."""

import configparser
from pathlib import Path

import pytest

from helpers import run_suite
from pytest_sits import profiles

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted(p.stem for p in (ROOT / "profiles").glob("*.yaml") if p.stem != "base")


def test_tox_runs_every_bundled_profile_at_full_on_sim():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    for name in BUNDLED:
        section = f"testenv:sim-{name}"
        assert section in tox, f"tox.ini has no [{section}]"
        cmd = tox[section]["commands"]
        assert f"--sits-platform=sim:{name}" in cmd and "--sits-level=full" in cmd, cmd
    assert set(BUNDLED) <= {e.strip()[4:] for e in tox["tox"]["envlist"].split(",") if e.strip().startswith("sim-")}


@pytest.mark.slow
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_profile_passes_its_own_healthy_simulated_hardware(name, tmp_path):
    profiles.resolve(name)  # a bundled profile by its name
    run = run_suite(tmp_path / "r", f"--sits-platform=sim:{name}", "--sits-level=full", "-p", "no:randomly",
                    timeout=900)
    counts = run.report["summary"]["counts"]
    bad = [f"{v['requirement']} {v['subject']} {v['status']}: {v['reason'][:200]}"
           for v in run.report["verdicts"] if v["status"] in ("FAIL", "INCONCLUSIVE", "ERROR")]
    assert not bad, "\n".join(bad[:20])
    assert run.returncode == 0 and counts.get("PASS", 0) > 0, run.output[-2000:]
