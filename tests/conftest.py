import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import jinja2  # noqa: F401
import numpy  # noqa: F401
import pytest
import yaml  # noqa: F401  (its C loader builds nodes from the yaml module it was first imported with)

# pytester's in-process runs restore sys.modules afterwards; a C extension (numpy, torch, PyYAML's libyaml
# loader) first imported inside one of them would be dropped and could not be imported again cleanly ("cannot
# load module more than once per process", or nodes of another module's classes). Import them here, once,
# before any such run.
try:
    import torch  # noqa: F401
except ImportError:
    pass
try:  # its Rust extension, too (a test may sign a bundle after an in-process pytester run)
    from cryptography.exceptions import InvalidSignature  # noqa: F401
    from cryptography.hazmat.primitives import serialization  # noqa: F401
    from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: F401
except ImportError:
    pass

from slurm_cluster import NODES, SLURM_DIR, START, all_idle, sinfo  # noqa: E402

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent

SLOW = ("slow: a real process or service (pytest or `sits` in a subprocess, Slurm, a browser, an inference server) "
        "or over about 2 s; the fast loop is `pytest -p no:sits -m 'not slow' -n auto tests`")


def pytest_configure(config):
    config.addinivalue_line("markers", SLOW)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The fast tests first, the slow ones (marked ``slow``) last, each in collection order: a failure in the fast
    loop shows within the first minutes of a full run."""
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    items[:] = fast + slow


@pytest.fixture
def conformance_args():
    """Arguments that run the bundled conformance suite from anywhere."""
    return ["--pyargs", "pytest_sits.conformance", "-p", "no:cacheprovider"]


def load_report(path: Path) -> dict:
    return json.loads((path / "sits-report" / "sits-report.json").read_text())


@pytest.fixture
def report_of():
    return load_report


@pytest.fixture(scope="module")
def slurm_env():
    """The environment that reaches the local Slurm cluster (tests/slurm_cluster.py); skips, naming the commands
    that install and start it, where there is none."""
    missing = [c for c in ("srun", "sbatch", "sinfo", "scontrol") if not shutil.which(c)]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} not on PATH); install and start the local "
                    f"cluster: {START}")
    conf = SLURM_DIR / "slurm.conf"
    if not conf.is_file():
        pytest.skip(f"no local Slurm cluster ({conf} missing); start it: {START}")
    env = dict(os.environ, SLURM_CONF=str(conf))
    try:
        states = sinfo(env)
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
        states = all_idle(slurm_env)
        if not all(states.get(n) == "idle" for n in NODES):
            pytest.skip(f"local Slurm nodes not idle ({states}); restart them: bash tools/slurm/local-cluster.sh "
                        "stop && bash tools/slurm/local-cluster.sh start")
        yield slurm_env
        all_idle(slurm_env)
