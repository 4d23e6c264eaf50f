import json
from pathlib import Path

import numpy  # noqa: F401
import pytest

# pytester's in-process runs restore sys.modules afterwards; a C extension (numpy, torch) first imported
# inside one of them would be dropped and could not be imported again ("cannot load module more than once
# per process"). Import them here, once, before any such run.
try:
    import torch  # noqa: F401
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
