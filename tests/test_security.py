"""SEC-FIRMWARE and SEC-TEE: allow-lists, version ranges, module signatures, the trusted-execution matrix."""

import json
from pathlib import Path

import pytest

from pytest_sits.checks.security import check_firmware, check_tee, entry_matches, version_key
from pytest_sits.conditions.security import acquire_firmware, acquire_tee
from pytest_sits.platforms import from_spec
from pytest_sits.probes import security as tee
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, WARN

VERSIONS = {"driver": "560.35.03", "vbios": "96.00.89.00.01", "inforom": "G520.0200.00.05", "gsp": "560.35.03"}
SIGNED = {"state": "signed", "reason": "sig_enforce=Y, no E taint"}
ALLOW = {"driver": [{"min": "550.54.15", "max": "560.99", "reason": "validated branch 550-560 of this lab"}],
         "vbios": [{"version": "96.00.89.00.01", "reason": "OEM release 2024-06 (ticket 4711)"}]}


def fw_th(**override):
    """SEC-FIRMWARE's thresholds as a resolved profile gives them (the base profile's), with ``override``."""
    return dict(resolve("base").thresholds("SEC-FIRMWARE"), **override)


def fw(**change):
    return dict({"versions": dict(VERSIONS), "module_signature": dict(SIGNED)}, **change)


CASES = {
    "listed": (fw(), fw_th(allowed=ALLOW), PASS),
    "driver-below-range": (fw(versions=dict(VERSIONS, driver="535.104.05")), fw_th(allowed=ALLOW), FAIL),
    "vbios-unlisted": (fw(versions=dict(VERSIONS, vbios="96.00.30.00.01")), fw_th(allowed=ALLOW), FAIL),
    "no-allow-list": (fw(), fw_th(allowed={}), WARN),
    "vbios-unread": (fw(versions=dict(VERSIONS, vbios=None)), fw_th(allowed=ALLOW), INCONCLUSIVE),
    "unsigned-module": (fw(module_signature={"state": "unsigned", "reason": "taint E"}),
                        fw_th(allowed=ALLOW, require_signed_module=True), FAIL),
    "signature-unknown": (fw(module_signature={"state": "unknown", "reason": "no sig_enforce"}),
                          fw_th(allowed=ALLOW, require_signed_module=True), INCONCLUSIVE),
}


#: The cases in the form of tests/test_replayable.py's SAMPLES (check name -> [(id, builder, status)]).
REPLAY_SAMPLES = {"SEC-FIRMWARE": [(n, (lambda ev=ev, th=th: (ev, th, "0000:17:00.0")), want)
                                   for n, (ev, th, want) in sorted(CASES.items())]}
_TEE_EV = {"cpu": [{"capability": "AMD SEV-SNP", "role": "host", "value": "yes", "source": "s", "detail": "d"},
                   {"capability": "Intel TDX", "role": "host", "value": "no", "source": "s", "detail": "d"}],
           "gpu": []}
REPLAY_SAMPLES["SEC-TEE"] = [
    ("report-only", lambda: (_TEE_EV, {"required": []}, "host"), PASS),
    ("tdx-required", lambda: (_TEE_EV, {"required": ["Intel TDX:host"]}, "host"), FAIL),
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_firmware_check(name):
    ev, th, want = CASES[name]
    v = check_firmware(ev, th, "0000:17:00.0")
    assert v.status == want, v.reason
    again = check_firmware(json.loads(json.dumps(v.evidence)), v.thresholds, v.subject)
    assert (again.status, again.reason) == (v.status, v.reason)


def test_warn_lists_what_was_found():
    v = check_firmware(fw(), fw_th(allowed={}), "d")
    assert "96.00.89.00.01" in v.reason and "G520.0200.00.05" in v.reason


def test_version_order_is_numeric():
    assert version_key("560.35.03") > version_key("560.4.1")
    assert version_key("96.00.89.00.01") < version_key("96.00.99.00.01")
    assert entry_matches("555.42.06", {"min": "550", "max": "560.99"})
    assert not entry_matches("570.86.10", {"min": "550", "max": "560.99"})
    assert entry_matches("G520.0200.00.05", {"min": "G520.0200.00.01"})
    assert not entry_matches("96.00.89.00.01", {"reason": "an entry with neither version nor range"})


def _sim_firmware(spec, profile_path):
    plat = from_spec(spec)
    inv = plat.inventory()
    acc = inv["accelerators"][0]
    prof = resolve(str(profile_path))
    return check_firmware(acquire_firmware(inv, acc, plat.root), prof.check_thresholds("SEC-FIRMWARE"), acc["bdf"])


def test_sim_fault_firmware_unlisted_fails_against_a_lab_allow_list(tmp_path):
    prof = tmp_path / "lab.yaml"
    prof.write_text("name: lab\nextends: h100\nthresholds:\n  SEC-FIRMWARE:\n    allowed:\n      vbios:\n"
                    "        - {version: 96.00.00.00.01, reason: the simulated board's VBIOS release}\n"
                    "      driver:\n        - {min: '550', reason: SITS2026 B 4.1 floor and lab validation}\n")
    assert _sim_firmware(f"sim:{prof}", prof).status == PASS
    v = _sim_firmware(f"sim:{prof}+firmware-unlisted", prof)
    assert v.status == FAIL and "96.00.00.00.99" in v.reason


def _tree(tmp_path, cpuinfo, files=()):
    (tmp_path / "proc").mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc/cpuinfo").write_text(cpuinfo)
    for rel, text in files:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return {(r["capability"], r["role"]): r["value"] for r in tee.cpu_matrix(tmp_path)}


AMD_HOST = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sme sev sev_es sev_snp\n"
AMD_GUEST = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu hypervisor sev sev_es sev_snp\n"
INTEL_TD = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu hypervisor tdx_guest\n"
INTEL_OLD_VM = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu hypervisor\n"


def test_tee_matrix_amd_host(tmp_path):
    m = _tree(tmp_path, AMD_HOST, [("sys/module/kvm_amd/parameters/sev_snp", "Y\n"),
                                   ("sys/module/kvm_amd/parameters/sev", "N\n")])
    assert m[("AMD SEV-SNP", "host")] == "yes" and m[("AMD SEV", "host")] == "no"
    assert m[("AMD SEV-SNP", "guest")] == "no" and m[("Intel TDX", "host")] == "no"


def test_tee_matrix_guests_and_unknowns(tmp_path):
    m = _tree(tmp_path / "a", AMD_GUEST, [("dev/sev-guest", "")])
    assert m[("AMD SEV-SNP", "guest")] == "yes" and m[("AMD SEV-SNP", "host")] == "no"
    m = _tree(tmp_path / "b", INTEL_TD)
    assert m[("Intel TDX", "guest")] == "yes"
    m = _tree(tmp_path / "c", INTEL_OLD_VM)  # a VM whose kernel may be too old to say: never "no"
    assert m[("Intel TDX", "guest")] == "unknown"
    assert all(r["value"] == "unknown" for r in tee.cpu_matrix(tmp_path / "missing"))


def test_a_device_link_out_of_a_snapshot_proves_nothing(tmp_path):
    """`dev/tdx_guest -> /etc/shadow` in a submitted snapshot: the link is not followed, so it says nothing of
    the machine (and nothing about the file outside leaks into the report)."""
    outside = tmp_path / "outside"
    outside.write_text("secret")
    m = _tree(tmp_path / "a", INTEL_OLD_VM)
    (tmp_path / "a" / "dev").mkdir()
    (tmp_path / "a" / "dev" / "tdx_guest").symlink_to(outside)
    rows = {(r["capability"], r["role"]): r for r in tee.cpu_matrix(tmp_path / "a")}
    assert rows[("Intel TDX", "guest")]["value"] == "unknown" and rows[("Intel TDX", "guest")]["source"] != "/dev/tdx_guest"
    (tmp_path / "a" / "dev" / "tdx_guest").unlink()
    (tmp_path / "a" / "dev" / "tdx_guest").write_text("")  # a device file captured as a placeholder: evidence
    assert {(r["capability"], r["role"]): r["value"] for r in tee.cpu_matrix(tmp_path / "a")}[
        ("Intel TDX", "guest")] == "yes"
    assert m[("Intel TDX", "guest")] == "unknown"


def test_tee_gpu_rows_from_nvml_facts():
    plat = from_spec("sim:h100")
    ev = acquire_tee(plat.root, plat.inventory())
    rows = {r["capability"]: r["value"] for r in ev["gpu"]}
    assert rows["GPU confidential computing capable"] == "yes" and rows["GPU confidential computing on"] == "no"
    ev = acquire_tee(from_spec("sim:h100+no-nvml").root, from_spec("sim:h100+no-nvml").inventory())
    assert [r["value"] for r in ev["gpu"]] == ["unknown"]


def test_tee_check_report_only_and_required(tmp_path):
    _tree(tmp_path, AMD_HOST, [("sys/module/kvm_amd/parameters/sev_snp", "Y\n")])
    ev = {"cpu": tee.cpu_matrix(tmp_path), "gpu": []}
    assert check_tee(ev, {"required": []}, "host").status == PASS
    assert check_tee(ev, {"required": ["AMD SEV-SNP:host"]}, "host").status == PASS
    assert check_tee(ev, {"required": ["Intel TDX:host"]}, "host").status == FAIL
    assert check_tee(ev, {"required": ["GPU confidential computing on"]}, "host").status == INCONCLUSIVE
    unknown = {"cpu": tee.cpu_matrix(tmp_path / "nothing"), "gpu": []}
    assert check_tee(unknown, {"required": ["AMD SEV-SNP:host"]}, "host").status == INCONCLUSIVE


def test_live_tee_reads_this_machine():
    ev = acquire_tee(Path("/"), {"accelerators": [], "management": {"nvml": {"available": False}}})
    assert ev["cpu"] and all(r["value"] in ("yes", "no", "unknown") for r in ev["cpu"])
