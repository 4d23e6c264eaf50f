"""The drift that fault ``drift`` puts on the simulated machine's figures."""

import os
import random
from typing import Optional


class Drift:
    """The figures of a machine that moves under the measurement (fault ``drift``): a bounded random walk of the
    relative level, one step per trial, plus a little noise of its own.  Seeded from the operating system, so
    every run moves differently; without the fault every figure is the simulated machine's own (factor 1)."""

    def __init__(self, on: bool, bound: float = 0.05, step: float = 0.015, noise: float = 0.004,
                 seed: Optional[int] = None):
        self.on, self.bound, self.step, self.noise = on, bound, step, noise
        self.rng = random.Random(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))
        self.level = 0.0

    def factor(self) -> float:
        """The machine's relative level for the next trial (1.0 without the fault)."""
        if not self.on:
            return 1.0
        self.level = max(-self.bound, min(self.bound, self.level + self.rng.gauss(0.0, self.step)))
        return 1.0 + self.level + self.rng.gauss(0.0, self.noise)
