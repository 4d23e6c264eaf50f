"""Hooks that pytest-sits calls, for a lab's conftest.py or plugin to implement."""

from typing import Any, Dict

import pytest


@pytest.hookspec
def pytest_sits_update_inventory(config: pytest.Config, inventory: Dict[str, Any]) -> None:
    """Add facts to the detected inventory before any test runs (asset tag, rack, BMC firmware...).

    Change ``inventory`` in place; keep values JSON-serialisable.  The report stores it as evidence.
    """
