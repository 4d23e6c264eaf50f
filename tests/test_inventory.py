"""INV-DEVICES, MEM-CAPACITY, DEP-DRIVER on evidence: each fails on bad evidence and passes on good."""

import pytest

from pytest_sits.checks.inventory import GIB, absent_reason, check_capacity, check_devices, check_driver, workload_need
from pytest_sits.platforms import from_spec
from pytest_sits.profiles import resolve
from pytest_sits.plugin.session import SitsRun
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, Verdict


def expected_of(name):
    run = SitsRun(profile=resolve(name), platform=None, level="quick", level_how="default", report_dir=None)
    return run.expected(), run.profile


def gpus(n, pci_id="10de:2330", mem=int(79.65 * GIB)):
    return [{"bdf": f"0000:{0x10 + i:02x}:00.0", "pci_id": pci_id, "name": "NVIDIA H100 80GB HBM3",
             "display_name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": mem, "memory_source": "nvml"}
            for i in range(n)]


NVML_OK = {"available": True, "driver_version": "560.35.03", "cuda_driver_version": "12.6"}


def test_devices_pass_on_eight_h100():
    exp, prof = expected_of("h100")
    v = check_devices({"accelerators": gpus(8), "nvml": NVML_OK}, dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == PASS and v.measured == pytest.approx(79.65, abs=0.01)


def test_devices_fail_when_one_is_missing():
    exp, prof = expected_of("h100")
    v = check_devices({"accelerators": gpus(7), "nvml": NVML_OK}, dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == FAIL and "7 of 8 expected" in v.reason and v.remediation


def test_devices_fail_when_no_gpu():
    exp, prof = expected_of("h100")
    v = check_devices({"accelerators": [], "nvml": {"available": False}},
                      dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == FAIL
    assert "profile expects 8 × H100 SXM5 (10de:2330); found no NVIDIA device" in v.reason


def test_devices_fail_on_wrong_model():
    exp, prof = expected_of("h100")
    v = check_devices({"accelerators": gpus(7) + gpus(1, "10de:2331"), "nvml": NVML_OK},
                      dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == FAIL and "unexpected: 1 ×" in v.reason and "10de:2331" in v.reason


def test_devices_fail_on_small_memory():
    exp, prof = expected_of("h100")
    v = check_devices({"accelerators": gpus(8, mem=40 * GIB), "nvml": NVML_OK},
                      dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == FAIL and "less memory" in v.reason


def test_devices_inconclusive_without_memory_reading():
    exp, prof = expected_of("h100")
    v = check_devices({"accelerators": gpus(8, mem=None), "nvml": {"available": False, "reason": "NVML missing"}},
                      dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == INCONCLUSIVE and "NVML missing" in v.reason


def test_l40s_with_ecc_memory_is_within_tolerance():
    exp, prof = expected_of("l40s")
    v = check_devices({"accelerators": gpus(8, "10de:26b9", mem=46068 * 1024 ** 2), "nvml": NVML_OK},
                      dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == PASS


def test_host_profile():
    exp, prof = expected_of("host")
    assert check_devices({"accelerators": [], "nvml": NVML_OK},
                         dict(prof.thresholds("INV-DEVICES"), expected=exp)).status == PASS
    v = check_devices({"accelerators": gpus(2), "nvml": NVML_OK}, dict(prof.thresholds("INV-DEVICES"), expected=exp))
    assert v.status == FAIL and "expects no accelerator" in v.reason


def test_workload_need_llama3_70b():
    _, prof = expected_of("base")
    need = workload_need(prof.thresholds("MEM-CAPACITY")["workload"])
    assert need["weights_bytes"] == pytest.approx(141.1e9)
    # 2 × 80 layers × 8 KV heads × 128 × 4096 tokens × 2 bytes
    assert need["kv_cache_bytes"] == 2 * 80 * 8 * 128 * 4096 * 2
    assert need["per_card_bytes"] == pytest.approx((141.1e9 + 1342177280) / 2 * 1.125)
    assert need["per_card_bytes"] / 1e9 == pytest.approx(80.1, abs=0.05)  # A §2.2: "at least 80 GB per card"


def test_capacity_from_the_workload_70b_awq_on_l40s():
    """The cost tier: a 70B model in AWQ 4-bit on L40S passes; the FP16 workload on the same cards fails; half
    the memory fails the AWQ workload too."""
    _, l40s = expected_of("l40s")
    th = l40s.thresholds("MEM-CAPACITY")
    assert th["min_gb_per_card"] is None and th["workload"]["dtype_bytes"] == 0.5
    cards = gpus(8, "10de:26b9", mem=46068 * 1024 ** 2)  # what NVML reports of an L40S with ECC on
    v = check_capacity({"accelerators": cards}, th)
    assert v.status == PASS and "45.8 GB" in v.threshold and "AWQ" in v.threshold, v.threshold
    _, base = expected_of("base")
    v = check_capacity({"accelerators": cards}, base.thresholds("MEM-CAPACITY"))
    assert v.status == FAIL and "80.1 GB" in v.threshold
    assert check_capacity({"accelerators": gpus(8, "10de:26b9", mem=24 * GIB)}, th).status == FAIL


def test_capacity_floor_only_where_a_profile_sets_one():
    _, prof = expected_of("h100")
    th = dict(prof.thresholds("MEM-CAPACITY"), min_gb_per_card=90)
    v = check_capacity({"accelerators": gpus(8)}, th)
    assert v.status == FAIL and "profile's floor 90 GB" in v.threshold


def test_capacity_pass_fail_skip():
    _, prof = expected_of("h100")
    th = prof.thresholds("MEM-CAPACITY")
    assert check_capacity({"accelerators": gpus(8)}, th).status == PASS
    v = check_capacity({"accelerators": gpus(8, mem=48 * GIB)}, th)
    assert v.status == FAIL and "tensor_parallel" in v.remediation
    assert check_capacity({"absent": "profile expects 8 × H100"}, th, "accelerators").status == SKIP
    assert check_capacity({"accelerators": gpus(2, mem=None)}, th).status == INCONCLUSIVE


def test_capacity_need_can_exceed_the_floor():
    _, prof = expected_of("h200")
    th = prof.thresholds("MEM-CAPACITY")
    th["workload"]["tensor_parallel"] = 1  # the whole 70B model on one card: (141.1 + 1.3) × 1.125 = 160.2 GB
    v = check_capacity({"accelerators": gpus(8, "10de:2335", mem=int(140.4 * GIB))}, th)
    assert v.status == FAIL and "160.2 GB" in v.threshold


def test_driver_floor():
    _, prof = expected_of("h100")
    th = prof.thresholds("DEP-DRIVER")
    assert check_driver({"nvml": NVML_OK}, th).status == PASS
    old = {"available": True, "driver_version": "535.104.05", "cuda_driver_version": "12.2"}
    v = check_driver({"nvml": old}, th)
    assert v.status == FAIL and "driver 535.104.05 < 550" in v.reason and "CUDA 12.2 < 12.6" in v.reason
    assert check_driver({"nvml": {"available": False, "reason": "x"}}, th).status == INCONCLUSIVE
    assert check_driver({"absent": "no NVIDIA device: the NVIDIA driver floor does not apply"}, th).status == SKIP
    # 12.10 is newer than 12.6: versions compare as numbers, not strings
    assert check_driver({"nvml": {"available": True, "driver_version": "580.1", "cuda_driver_version": "12.10"}},
                        th).status == PASS


def test_absent_reason_names_expectation_and_finding():
    exp, _ = expected_of("h100")
    assert absent_reason(exp, []) == "profile expects 8 × H100 SXM5 (10de:2330); found no NVIDIA device"
    assert absent_reason(exp, gpus(1)) is None


def test_checks_on_simulated_evidence():
    exp, prof = expected_of("h100")
    inv = from_spec("sim:h100+small-memory").inventory()
    assert check_devices({"accelerators": inv["accelerators"], "nvml": inv["management"]["nvml"]},
                         dict(prof.thresholds("INV-DEVICES"), expected=exp)).status == FAIL
    assert check_capacity({"accelerators": inv["accelerators"]}, prof.thresholds("MEM-CAPACITY")).status == FAIL


def test_fail_verdict_needs_remediation():
    with pytest.raises(ValueError, match="remediation"):
        Verdict("INV-DEVICES", FAIL, "x")
    with pytest.raises(ValueError, match="unknown verdict status"):
        Verdict("INV-DEVICES", "OK", "x")
