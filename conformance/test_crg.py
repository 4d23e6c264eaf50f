"""The compute-ready graph of document B §2.5: CRG-NODE (GEMM TFLOPS per device), CRG-EDGE (copy bandwidth of
every device pair; on submitted evidence, a submitted nvbandwidth text's), CRG-SYNC (all-reduce bus bandwidth),
CRG-JITTER (node latency jitter against the timer)."""

import pytest

from pytest_sits.checks.crg import check_edge, check_edge_nvbandwidth, check_jitter, check_node, check_sync
from pytest_sits.conditions.inventory import accelerators_absent


@pytest.mark.sits_requirement("CRG-NODE")
def test_node_gemm(sits_device, sits_thresholds, sits_trials, sits_crg, sits_at_once, sits_record):
    sits_record(check_node(sits_at_once(sits_device, lambda acc: sits_crg.node(acc, sits_thresholds, sits_trials)),
                           sits_thresholds, sits_device["bdf"]))


@pytest.mark.sits_requirement("CRG-EDGE")
def test_edge_bandwidth(sits_accelerators, sits_inventory, sits_expected, sits_thresholds, sits_trials, sits_crg,
                        sits_record):
    submitted = sits_crg.submitted_edges(sits_expected["count"])  # a submitted nvbandwidth text
    if submitted is not None:
        return sits_record(*[check_edge_nvbandwidth(ev, sits_thresholds, subject) for ev, subject in submitted])
    absent = accelerators_absent(sits_expected, sits_inventory)
    sits_record(*[check_edge(ev, sits_thresholds, subject)
                  for ev, subject in sits_crg.edges(sits_accelerators, sits_thresholds, absent, sits_trials)])


@pytest.mark.sits_requirement("CRG-SYNC")
def test_allreduce(sits_accelerators, sits_inventory, sits_expected, sits_thresholds, sits_trials, sits_crg,
                   sits_record):
    """Without accelerators in the profile, the host's processes all-reduce (gloo)."""
    absent = accelerators_absent(sits_expected, sits_inventory) if sits_expected["count"] else None
    sits_record(check_sync(sits_crg.sync(sits_accelerators, sits_expected["count"], sits_thresholds, absent,
                                         sits_trials), sits_thresholds,
                           "accelerators" if sits_expected["count"] else "host"))


@pytest.mark.sits_requirement("CRG-JITTER")
def test_node_jitter(sits_accelerator, sits_thresholds, sits_crg, sits_record):
    """Also without an accelerator: the host's timer is measured."""
    sits_record(check_jitter(sits_crg.jitter(sits_accelerator, sits_thresholds), sits_thresholds,
                             sits_accelerator["bdf"] if sits_accelerator else "host"))
