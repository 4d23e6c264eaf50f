"""The compute-ready graph of document B §2.5: CRG-NODE (GEMM TFLOPS per device), CRG-EDGE (copy bandwidth of
every device pair), CRG-SYNC (all-reduce bus bandwidth), CRG-JITTER (node latency jitter against the timer)."""

import pytest

from pytest_sits.checks.crg import check_edge, check_jitter, check_node, check_sync
from pytest_sits.conditions.inventory import absent_accelerator, accelerators_absent


@pytest.mark.sits_requirement("CRG-NODE")
def test_node_gemm(sits_accelerator, sits_inventory, sits_expected, sits_profile, sits_crg, sits_record):
    th = sits_profile.check_thresholds("CRG-NODE")
    if sits_accelerator is None:
        return sits_record(check_node(absent_accelerator(sits_expected, sits_inventory), th, "accelerators"))
    sits_record(check_node(sits_crg.node(sits_accelerator, th), th, sits_accelerator["bdf"]))


@pytest.mark.sits_requirement("CRG-EDGE")
def test_edge_bandwidth(sits_accelerators, sits_inventory, sits_expected, sits_profile, sits_crg, sits_record):
    th = sits_profile.check_thresholds("CRG-EDGE")
    absent = accelerators_absent(sits_expected, sits_inventory)
    sits_record(*[check_edge(ev, th, subject) for ev, subject in sits_crg.edges(sits_accelerators, th, absent)])


@pytest.mark.sits_requirement("CRG-SYNC")
def test_allreduce(sits_accelerators, sits_inventory, sits_expected, sits_profile, sits_crg, sits_record):
    th = sits_profile.check_thresholds("CRG-SYNC")
    absent = accelerators_absent(sits_expected, sits_inventory) if sits_expected["count"] else None
    sits_record(check_sync(sits_crg.sync(sits_accelerators, sits_expected["count"], th, absent), th,
                           "accelerators" if sits_expected["count"] else "host"))


@pytest.mark.sits_requirement("CRG-JITTER")
def test_node_jitter(sits_accelerator, sits_profile, sits_crg, sits_record):
    th = sits_profile.check_thresholds("CRG-JITTER")
    sits_record(check_jitter(sits_crg.jitter(sits_accelerator, th), th,
                             sits_accelerator["bdf"] if sits_accelerator else "host"))
