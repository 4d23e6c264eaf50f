"""Thermal steady state: THERM-GPU-STEADY, THERM-CPU-STEADY (A §2.4's test-environment rules)."""

from .base import CELSIUS, SECONDS, TIMEOUT_S, Cost, Threshold, bounded, declare

_TOL = bounded("number", 0, 10, exclusive_lo=True)

declare(
    "THERM-GPU-STEADY", "GPU die temperature in band and steady before measuring", "A §2.4",
    level="full", scope="accelerator", family="thermal",
    thresholds={
        "band_low_c": Threshold(CELSIUS, 68, "A §2.4"),
        "band_high_c": Threshold(CELSIUS, 72, "A §2.4"),
        "window_s": Threshold(SECONDS, 120, "A §2.4: 120 s in a row"),
        "tolerance_c": Threshold(_TOL, 0.3, "A §2.4: within ±0.3 °C"),
        "timeout_s": Threshold(TIMEOUT_S, 1200, "how long the calibration may take to settle"),
    },
    cost=Cost("acc", fixed=lambda th: 300.0 + th["window_s"], together=True,
              group="thermal"),  # settling from idle (the simulated plant: 2-7 min)
    platforms=("live", "sim"), faults=("thermal-hot", "thermal-drift"))

declare(
    "THERM-CPU-STEADY", "CPU package temperature in band and steady before measuring", "A §2.4",
    level="full", scope="host", family="thermal",
    thresholds={
        "band_low_c": Threshold(CELSIUS, 62, "A §2.4"),
        "band_high_c": Threshold(CELSIUS, 66, "A §2.4"),
        "window_s": Threshold(SECONDS, 120, "A §2.4: 120 s in a row"),
        "tolerance_c": Threshold(_TOL, 0.5, "A §2.4: within ±0.5 °C"),
        "timeout_s": Threshold(TIMEOUT_S, 1200, "how long the calibration may take to settle"),
    },
    cost=Cost("package", fixed=lambda th: 120.0 + th["window_s"], together=True,
              group="thermal"),
    platforms=("live", "sim"), faults=("thermal-hot", "thermal-drift"))
