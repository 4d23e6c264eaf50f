"""Checks: pure functions (evidence, expectations, thresholds) -> Verdict.

A check never touches hardware, a clock or a file, so every verdict can be
recomputed from stored evidence.
"""
