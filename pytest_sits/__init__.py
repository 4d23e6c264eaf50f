"""pytest-sits: the SITS2026 conformance suite for AI-inference servers.

Importing this package is cheap on purpose: optional hardware libraries
(pynvml, amdsmi, torch, scipy, matplotlib) are imported by the code that
needs them, never here.
"""

__version__ = "0.2.0"
REPORT_SCHEMA_VERSION = "1.0"
