"""Bandwidth: MEM-BW-HOLD (host DRAM held in band), MEM-BW-EFFICIENCY, TOPO-PCIE-BW."""

import time
from contextlib import contextmanager

import pytest

from pytest_sits.checks.bandwidth import check_device_bw, check_hold, check_pcie_bw
from pytest_sits.checks.inventory import expected_vs_found
from pytest_sits.hold import BandwidthHold, find_counter
from pytest_sits.probes.bandwidth import stream_peak
from pytest_sits.probes.load import LoadUnavailable
from pytest_sits.thermal import device_lock
from pytest_sits.verdict import ERROR, SKIP, Verdict


@pytest.fixture(scope="session")
def host_node(sits_inventory, sits_expected):
    """The NUMA node measurements bind to: the first expected accelerator's, else the first node."""
    nodes = sits_inventory["numa"]
    accs = [a for a in sits_inventory["accelerators"] if a["pci_id"] in sits_expected["pci_ids"]]
    node = accs[0]["numa_node"] if accs and accs[0]["numa_node"] is not None and accs[0]["numa_node"] >= 0 else None
    chosen = next((n for n in nodes if n["node"] == node), nodes[0] if nodes else None)
    return chosen


@pytest.fixture(scope="session")
def host_peak(sits_platform, host_node):
    """STREAM peak of the host, bound to the measurement node (evidence, or {"skip": reason})."""
    reason = sits_platform.host_measurement_reason()
    if reason:
        return {"skip": reason}
    cpus = host_node["cpus"] if host_node else []
    node = host_node["node"] if host_node else None
    with device_lock(f"host-dram-node{node}"):  # never measured while another xdist worker holds the node
        return stream_peak(threads=max(1, len(cpus)), cpus=cpus, node=node)


@pytest.fixture
def sits_bandwidth_hold(host_peak, host_node, sits_profile):
    """Factory: `with sits_bandwidth_hold() as hold:` keeps host DRAM occupancy in the profile's band."""
    th = sits_profile.thresholds("MEM-BW-HOLD")

    @contextmanager
    def make():
        found = find_counter()
        hold = BandwidthHold(host_peak["kernels"]["copy"]["gbps_median"], th["band_low"], th["band_high"],
                             cpus=host_node["cpus"], node=host_node["node"], window_s=th["window_ms"] / 1000,
                             counter=found["counter"], counter_reason=found["reason"])
        # One hold per node at a time: xdist workers each have this fixture, and two injectors on one
        # node would each see the other's traffic as theirs.
        with device_lock(f"host-dram-node{host_node['node']}"):
            with hold:
                yield hold
    return make


def _peak_problem(req, host_peak):
    if "skip" in host_peak:
        return Verdict(req, SKIP, host_peak["skip"])
    if "error" in host_peak or not host_peak.get("validated"):
        return Verdict(req, ERROR, f"the STREAM peak probe failed: {host_peak.get('error') or 'results did not validate'}",
                       evidence={"peak": host_peak})
    return None


@pytest.mark.sits_requirement("MEM-BW-HOLD")
def test_dram_bandwidth_hold(host_peak, sits_bandwidth_hold, sits_profile, sits_record):
    problem = _peak_problem("MEM-BW-HOLD", host_peak)
    if problem:
        return sits_record(problem)
    th = sits_profile.thresholds("MEM-BW-HOLD")
    with sits_bandwidth_hold() as hold:
        # The body a measurement would run: here it only waits, sampling nothing, for the hold's duration.
        end = time.monotonic() + th["duration_s"]
        while time.monotonic() < end:
            time.sleep(0.05)
    ev = hold.evidence()
    ev["peak"] = {k: v for k, v in host_peak.items() if k != "bindings"}
    sits_record(check_hold(ev, th))


@pytest.mark.sits_requirement("MEM-BW-EFFICIENCY")
def test_device_memory_bandwidth(sits_accelerator, sits_platform, sits_profile, sits_expected, sits_inventory,
                                 sits_record):
    th = sits_profile.thresholds("MEM-BW-EFFICIENCY")
    datasheet = sits_profile.hardware.get("memory_bandwidth_gbps")
    if sits_accelerator is None:
        return sits_record(check_device_bw(None, datasheet, th, "accelerators",
                                           absent=expected_vs_found(sits_expected, sits_inventory["accelerators"])))
    try:
        ev = sits_platform.device_bandwidth(sits_accelerator, 1 << 30)
    except LoadUnavailable as exc:
        return sits_record(check_device_bw(None, datasheet, th, sits_accelerator["bdf"], absent=str(exc)))
    sits_record(check_device_bw(ev, datasheet, th, sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("TOPO-PCIE-BW")
def test_host_device_bandwidth_under_hold(sits_accelerator, sits_platform, sits_profile, sits_expected,
                                          sits_inventory, host_peak, sits_bandwidth_hold, sits_record):
    th = sits_profile.thresholds("TOPO-PCIE-BW")
    if sits_accelerator is None:
        return sits_record(check_pcie_bw(None, {}, th, "accelerators",
                                         absent=expected_vs_found(sits_expected, sits_inventory["accelerators"])))
    link = sits_accelerator["link"]
    link_ev = {"gen": link.get("max_gen"), "width": link.get("max_width"), "source": "sysfs max_link_*"}
    try:
        if "kernels" in host_peak and host_peak.get("validated"):
            with sits_bandwidth_hold() as hold:
                ev = sits_platform.host_device_bandwidth(sits_accelerator, th["bytes"])
            h = hold.evidence()
            ev["hold"] = f"{h['windows_in_band']}/{h['windows']} windows in band"
            ev["hold_evidence"] = h
        else:
            ev = sits_platform.host_device_bandwidth(sits_accelerator, th["bytes"])
            ev["hold"] = None
            ev["hold_reason"] = host_peak.get("skip") or host_peak.get("error")
    except LoadUnavailable as exc:
        return sits_record(check_pcie_bw(None, link_ev, th, sits_accelerator["bdf"], absent=str(exc)))
    sits_record(check_pcie_bw(ev, link_ev, th, sits_accelerator["bdf"]))
