import json
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

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def conformance_args():
    """Arguments that run the bundled conformance suite from anywhere."""
    return ["--pyargs", "pytest_sits.conformance", "-p", "no:cacheprovider"]


def load_report(path: Path) -> dict:
    return json.loads((path / "sits-report" / "sits-report.json").read_text())


@pytest.fixture
def report_of():
    return load_report
