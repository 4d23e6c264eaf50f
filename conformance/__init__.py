"""The SITS2026 conformance test modules (run with `pytest` in a checkout, or
`pytest --pyargs pytest_sits.conformance` once installed)."""
