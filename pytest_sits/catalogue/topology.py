"""Topology: TOPO-PCIE-DIRECT, TOPO-PCIE-LINK, TOPO-NUMA-BIND, LINK-NVLINK-MESH."""

from .base import BOOL, COUNT, Cost, Threshold, bounded, declare

declare(
    "TOPO-PCIE-DIRECT", "Accelerators attach directly to a CPU root port (no PCIe switch)", "A §2.4",
    level="quick", scope="accelerator", family="topology",
    thresholds={"max_switch_ports": Threshold(bounded("integer", 0, 64), 0,
                                              'A §2.4: no "Switch"/"Downstream" on the path')},
    cost=Cost("acc", fixed=0.1), platforms=("live", "snapshot", "evidence", "sim"), faults=("switch", "switch2"))

declare(
    "TOPO-PCIE-LINK", "PCIe link under load trains at the achievable speed and width", "suite extension (topology)",
    level="quick", scope="accelerator", family="topology", extension=True,
    thresholds={"samples": Threshold(COUNT, 5, "link readings taken under load"),
                "require_load": Threshold(BOOL, True, "an idle link may sit at 2.5 GT/s")},
    # the first load imports torch (once a run); each device's load then starts in about half a second
    cost=Cost("acc", once=3.0, fixed=lambda th: 0.5 + 0.1 * th["samples"], together=True),
    platforms=("live", "snapshot", "evidence", "sim"), faults=("link-degraded",))

declare(
    "TOPO-NUMA-BIND", "Load and measurement bound to the accelerator's NUMA node", "A §2.4",
    level="quick", scope="accelerator", family="topology",
    thresholds={"require_known_node": Threshold(BOOL, True, "a device whose NUMA node reads -1 on a multi-node "
                                                            "host cannot be bound")},
    cost=Cost("acc", fixed=0.3, together=True), platforms=("live", "sim"), faults=("numa-unknown",))

declare(
    "LINK-NVLINK-MESH", "NVLink/XGMI full mesh between accelerators", "A §2.2",
    level="quick", scope="accelerator", family="topology",
    thresholds={"required": Threshold(BOOL, False, "the high-concurrency tier's profiles require it; the cost "
                                                   "tier (L40S) needs none")},
    facts=lambda p: {"link_type": p.hardware.get("peer_link", {}).get("type")},
    cost=Cost("host", fixed=0.2), platforms=("live", "snapshot", "evidence", "sim"), faults=("nvlink-partial",))
