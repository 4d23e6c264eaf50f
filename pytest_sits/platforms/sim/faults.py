"""The faults a simulated machine can carry (``sim:PROFILE+fault,...``), each with what it does."""

from typing import Dict

FAULTS: Dict[str, str] = {
    "missing-device": "one accelerator fewer than the profile expects",
    "wrong-model": "the last accelerator has another PCI device ID",
    "small-memory": "every accelerator reports half of its datasheet memory",
    "no-nvml": "NVML is not available (driver not loaded)",
    "switch": "a PCIe switch (upstream + downstream port) between each accelerator and its root port",
    "switch2": "two levels of PCIe switch between each accelerator and its root port",
    "link-degraded": "the first accelerator trained at one generation lower and half width, under load",
    "link-idle": "every accelerator link reads 2.5 GT/s (idle power saving)",
    "numa-unknown": "accelerators report NUMA node -1 on a two-node host",
    "nvlink-partial": "two accelerator pairs have no NVLink P2P path",
    "old-driver": "NVIDIA driver 535.104.05 with CUDA 12.2",
    "hostile-name": "accelerator names contain HTML (<script>) to test escaping",
    "membw-low": "device memory copies reach 40% of the datasheet bandwidth",
    "thermal-hot": "cooling too weak: even idle, the simulated temperature settles above the band",
    "thermal-drift": "inlet temperature keeps rising: the simulated temperature never settles",
    "sensor-na": "the simulated temperature sensors return N/A after 100 s",
    "pcie-bw-low": "host<->device copies reach 30% of the link's rate",
}
