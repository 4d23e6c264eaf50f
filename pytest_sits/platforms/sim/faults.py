"""Every fault a simulated machine can carry (``sim:PROFILE+fault,...``), with what it does: each sim module
declares the faults it implements beside their effects (its ``FAULTS``); the platform-wide ones are here."""

from typing import Dict

from . import bandwidth, crg, environment, health, inference, thermal, tree

#: Faults the platform itself applies (sim/__init__.py), machine-wide.
PLATFORM_FAULTS: Dict[str, str] = {
    "membw-low": "device memory copies reach 40% of the datasheet bandwidth",
    "membw-slow": "device memory copies reach 80% of the datasheet bandwidth: above the bundled profiles' floors,"
                  " below the 90% of a healthy simulated node (a slow node of a fleet)",
    "pcie-bw-low": "host<->device copies reach 30% of the link's rate",
    "drift": "the simulated machine's figures move between trials (the machine, not the devices): host DRAM "
             "bandwidth wanders up to -30%/+15% during a hold, every device, link and serving figure within +-5% "
             "from trial to trial (a new random walk each run)",
}

#: Every fault, by name: what it does.
FAULTS: Dict[str, str] = {**tree.FAULTS, **PLATFORM_FAULTS, **bandwidth.FAULTS, **thermal.FAULTS, **health.FAULTS,
                          **crg.FAULTS, **inference.FAULTS, **environment.FAULTS}
