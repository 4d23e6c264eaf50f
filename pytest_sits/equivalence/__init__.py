"""Cross-platform numerical equivalence: operator corpus, tolerance policy, golden data."""
