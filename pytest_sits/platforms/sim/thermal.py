"""The simulated thermal plant: a first-order model in simulated time, seen as sensor + load + clock.

A 20-minute calibration replays in milliseconds; the faults ``thermal-hot``,
``thermal-drift`` and ``sensor-na`` change the plant.
"""

from __future__ import annotations

import math
import random
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

#: The faults this module implements, with what each does (``faults.FAULTS`` gathers every module's).
FAULTS = {
    "thermal-hot": "cooling too weak: even idle, the simulated temperature settles above the band",
    "thermal-drift": "inlet temperature keeps rising: the simulated temperature never settles",
    "sensor-na": "the simulated temperature sensors return N/A after 100 s",
}



class ThermalPlant:
    """First-order thermal model in simulated time, with a quantised, noisy sensor.

    T_ss(duty) = ambient + r * (p_idle + duty * (p_max - p_idle)); dT/dt = (T_ss - T) / tau.
    """

    def __init__(self, ambient: float = 30.0, r: float = 0.06, p_idle: float = 100.0, p_max: float = 700.0,
                 tau: float = 40.0, step: float = 1.0, noise: float = 0.15, drift_c_per_s: float = 0.0,
                 fail_after_s: Optional[float] = None, seed: int = 7, t0: float = 0.0):
        self.ambient, self.r, self.p_idle, self.p_max, self.tau = ambient, r, p_idle, p_max, tau
        self.step, self.noise, self.drift = step, noise, drift_c_per_s
        self.fail_after = fail_after_s
        self.rng = random.Random(seed)
        self.now = t0
        self.t_start = t0
        self.duty = 0.0
        self.temp = ambient + r * p_idle

    def steady_temp(self, duty: float) -> float:
        return self.ambient + self.r * (self.p_idle + duty * (self.p_max - self.p_idle))

    def advance(self, dt: float) -> None:
        self.ambient += self.drift * dt
        target = self.steady_temp(self.duty)
        self.temp = target + (self.temp - target) * math.exp(-dt / self.tau)
        self.now += dt

    def read(self) -> Dict[str, Any]:
        if self.fail_after is not None and self.now - self.t_start >= self.fail_after:
            return {"t": self.now, "value_c": None, "error": "simulated: sensor returned N/A"}
        raw = self.temp + self.rng.gauss(0.0, self.noise)
        value = round(raw / self.step) * self.step if self.step else raw
        return {"t": self.now, "value_c": round(value, 6), "error": None}


class PlantRig:
    """A plant seen as sensor + load + clock, in simulated time (sleep advances the plant)."""

    simulated = True

    def __init__(self, plant: ThermalPlant, sid: str, kind: str):
        self.plant = plant
        self.subject = sid
        self.sensor_info = {"id": sid, "kind": kind, "source": "simulated first-order thermal plant",
                            "resolution_c": plant.step, "label": sid}

    def read(self) -> Dict[str, Any]:
        return self.plant.read()

    def set_duty(self, duty: float) -> None:
        self.plant.duty = duty

    def clock(self) -> float:
        return self.plant.now

    def sleep(self, dt: float) -> None:
        self.plant.advance(dt)

    def evidence(self) -> Dict[str, Any]:
        return {"kind": "simulated", "duty_final": self.plant.duty}

    @contextmanager
    def load(self) -> Iterator[PlantRig]:
        yield self


def sim_rigs(kind: str, acc: Optional[Dict[str, Any]], faults: List[str], profile: Any) -> List[PlantRig]:
    common: Dict[str, Any] = {}
    if "thermal-hot" in faults:
        common["ambient"] = 72.0  # idle already settles at 78 °C (GPU) / 76 °C (CPU)
    if "thermal-drift" in faults:  # the inlet warms 6 °C every 2 minutes, past what the load can offset
        common["drift_c_per_s"] = 0.05
        common["ambient"] = 64.0
    if "sensor-na" in faults:
        common["fail_after_s"] = 100.0
    if kind == "gpu":
        tdp = float(profile.hardware.get("tdp_w", 700))
        plant = ThermalPlant(p_idle=tdp * 0.1, p_max=tdp, r=60.0 / tdp, step=1.0, noise=0.2,
                             seed=int(acc["bdf"].split(":")[1], 16) if acc else 1, **common)
        return [PlantRig(plant, f"gpu {acc['bdf'] if acc else '?'} (simulated NVML)", "gpu")]
    rigs = []
    for sock in range(2):
        plant = ThermalPlant(p_idle=60.0, p_max=350.0, r=0.11, tau=25.0, step=0.125, noise=0.05, seed=100 + sock,
                             **{k: v for k, v in common.items() if k != "ambient"},
                             ambient=common.get("ambient", 28.0 + sock))
        rigs.append(PlantRig(plant, f"cpu package {sock} (simulated k10temp)", "cpu"))
    return rigs
