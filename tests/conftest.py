import json
from pathlib import Path

import pytest

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
