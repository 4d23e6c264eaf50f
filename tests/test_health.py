"""DEP-ECC, DEP-ROWREMAP, DEP-THROTTLE, DEP-PERSIST, DEP-POWERCAP, DEP-PCIE-ERRORS, DEP-XID: checks on data, the
probes on files, the health window on the simulated platform with each fault."""

import json

import pytest

from pytest_sits.checks.health import (check_ecc, check_pcie_errors, check_persistence, check_powercap,
                                       check_rowremap, check_throttle, check_xid)
from pytest_sits.conditions.health import (HealthReader, HealthWindows, acquire_ecc, acquire_persistence,
                                           acquire_powercap, acquire_rowremap, pcie_errors_evidence,
                                           throttle_evidence, xid_evidence)
from pytest_sits.platforms import from_spec
from pytest_sits.platforms.sim.health import SimHealthReader, aer_text, AER_UNCORRECTABLE
from pytest_sits.probes import health as hp
from pytest_sits.profiles import resolve
from pytest_sits.verdict import ERROR, FAIL, INCONCLUSIVE, PASS, SKIP, WARN

TH = {rid: resolve("h100").check_thresholds(rid) for rid in
      ("DEP-ECC", "DEP-ROWREMAP", "DEP-THROTTLE", "DEP-PERSIST", "DEP-POWERCAP", "DEP-PCIE-ERRORS", "DEP-XID")}
WINDOW = resolve("h100").condition("health_window")
D = "0000:17:00.0"

ECC_OK = {"ecc_mode_current": True, "ecc_mode_pending": True, "source": "nvml",
          "counts": {"volatile_uncorrected": 0, "aggregate_uncorrected": 0, "volatile_corrected": 5,
                     "aggregate_corrected": 40}, "errors": []}
ROWS_OK = {"remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": False, "failure": False},
           "retired_pages": None, "errors": []}
IDLE, BRAKE, CAP = 0x1, 0x8 | 0x80, 0x4


def samples(mask, n=8, loaded=True):
    return {"samples": [{"t": k * 0.25, "reasons": mask, "under_load": loaded} for k in range(n)],
            "load": {"kind": "torch-matmul"} if loaded else {"kind": None, "reason": "torch sees no CUDA device"}}


PCIE_OK = {"aer_before": {"correctable": 3, "nonfatal": 0, "fatal": 0},
           "aer_after": {"correctable": 4, "nonfatal": 0, "fatal": 0}, "replay_before": 2, "replay_after": 2,
           "window_s": 4.0}
WATCH_NONE = {"source": "NVML XID events", "events": [], "window_s": 4.0}
HIST_OK = {"readable": True, "source": "/dev/kmsg", "xids": []}
POWER_OK = {"enforced_mw": 700000, "requested_mw": 700000, "default_mw": 700000, "constraints_mw": [200000, 700000]}

#: (check, evidence, thresholds, expected status): every check fails on bad evidence and passes on good.
CASES = {
    "ecc-ok": (check_ecc, ECC_OK, TH["DEP-ECC"], PASS),
    "ecc-volatile-uncorrected": (check_ecc, dict(ECC_OK, counts=dict(ECC_OK["counts"], volatile_uncorrected=2)),
                                 TH["DEP-ECC"], FAIL),
    "ecc-off": (check_ecc, dict(ECC_OK, ecc_mode_current=False, ecc_mode_pending=False), TH["DEP-ECC"], FAIL),
    "ecc-lifetime-uncorrected": (check_ecc, dict(ECC_OK, counts=dict(ECC_OK["counts"], aggregate_uncorrected=1)),
                                 TH["DEP-ECC"], WARN),
    "ecc-unreadable": (check_ecc, dict(ECC_OK, ecc_mode_current=None,
                                       errors=[{"field": "ecc_mode_current", "error": "Not Supported"}]),
                       TH["DEP-ECC"], INCONCLUSIVE),
    "rows-ok": (check_rowremap, ROWS_OK, TH["DEP-ROWREMAP"], PASS),
    "rows-pending": (check_rowremap, dict(ROWS_OK, remapped_rows=dict(ROWS_OK["remapped_rows"], pending=True)),
                     TH["DEP-ROWREMAP"], FAIL),
    "rows-failure": (check_rowremap, dict(ROWS_OK, remapped_rows=dict(ROWS_OK["remapped_rows"], failure=True)),
                     TH["DEP-ROWREMAP"], FAIL),
    "pages-pending": (check_rowremap, {"remapped_rows": None, "retired_pages": {"sbe": 2, "dbe": 1,
                                                                               "pending": True}},
                      TH["DEP-ROWREMAP"], FAIL),
    "pages-over-limit": (check_rowremap, {"remapped_rows": None, "retired_pages": {"sbe": 50, "dbe": 20,
                                                                                  "pending": False}},
                         dict(TH["DEP-ROWREMAP"], max_retired_pages=60), FAIL),
    "rows-unreadable": (check_rowremap, {"remapped_rows": None, "retired_pages": None, "errors": []},
                        TH["DEP-ROWREMAP"], INCONCLUSIVE),
    "throttle-none": (check_throttle, samples(0), TH["DEP-THROTTLE"], PASS),
    "throttle-power-cap-only": (check_throttle, samples(CAP), TH["DEP-THROTTLE"], PASS),
    "throttle-brake": (check_throttle, samples(BRAKE), TH["DEP-THROTTLE"], FAIL),
    "throttle-cap-limited": (check_throttle, samples(CAP), dict(TH["DEP-THROTTLE"], max_sw_power_cap_share=0.5),
                             FAIL),
    "throttle-idle-brake-fails": (check_throttle, samples(BRAKE | IDLE, loaded=False), TH["DEP-THROTTLE"], FAIL),
    "throttle-idle-cap-never-decides": (check_throttle, samples(CAP | IDLE, loaded=False), TH["DEP-THROTTLE"],
                                        INCONCLUSIVE),
    "throttle-gpu-idle-under-load": (check_throttle, samples(IDLE), TH["DEP-THROTTLE"], INCONCLUSIVE),
    "persist-on": (check_persistence, {"persistence_mode": True}, TH["DEP-PERSIST"], PASS),
    "persist-off": (check_persistence, {"persistence_mode": False}, TH["DEP-PERSIST"], FAIL),
    "power-tdp": (check_powercap, POWER_OK, TH["DEP-POWERCAP"], PASS),
    "power-lowered": (check_powercap, dict(POWER_OK, enforced_mw=500000, requested_mw=500000), TH["DEP-POWERCAP"],
                      FAIL),
    "power-external-cap": (check_powercap, dict(POWER_OK, enforced_mw=450000), TH["DEP-POWERCAP"], FAIL),
    "power-no-tdp": (check_powercap, POWER_OK, dict(TH["DEP-POWERCAP"], tdp_w=None), WARN),
    "pcie-ok": (check_pcie_errors, PCIE_OK, TH["DEP-PCIE-ERRORS"], PASS),
    "pcie-new-fatal": (check_pcie_errors, dict(PCIE_OK, aer_after=dict(PCIE_OK["aer_after"], fatal=1)),
                       TH["DEP-PCIE-ERRORS"], FAIL),
    "pcie-new-replays": (check_pcie_errors, dict(PCIE_OK, replay_after=9), TH["DEP-PCIE-ERRORS"], FAIL),
    "pcie-fatal-since-boot": (check_pcie_errors, dict(PCIE_OK, aer_before=dict(PCIE_OK["aer_before"], fatal=1),
                                                      aer_after=dict(PCIE_OK["aer_after"], fatal=1)),
                              TH["DEP-PCIE-ERRORS"], WARN),
    "pcie-nothing-readable": (check_pcie_errors, {"aer_before": None, "aer_after": None, "aer_reason": "no AER",
                                                  "replay_before": None, "replay_after": None,
                                                  "replay_reason": "Not Supported"}, TH["DEP-PCIE-ERRORS"],
                              INCONCLUSIVE),
    "xid-none": (check_xid, {"watch": WATCH_NONE, "history": HIST_OK}, TH["DEP-XID"], PASS),
    "xid-79-during-run": (check_xid, {"watch": dict(WATCH_NONE, events=[{"xid": 79, "t": 1.0}]),
                                      "history": HIST_OK}, TH["DEP-XID"], FAIL),
    "xid-13-during-run": (check_xid, {"watch": dict(WATCH_NONE, events=[{"xid": 13, "t": 1.0}]),
                                      "history": HIST_OK}, TH["DEP-XID"], WARN),
    "xid-48-in-history": (check_xid, {"watch": WATCH_NONE, "history": dict(HIST_OK, xids=[
        {"xid": 48, "line": "NVRM: Xid (PCI:0000:17:00): 48, DBE"}])}, TH["DEP-XID"], WARN),
    "xid-history-only-passes": (check_xid, {"watch": {"source": None, "reason": "snapshot"}, "history": HIST_OK},
                                TH["DEP-XID"], PASS),
    "xid-no-source": (check_xid, {"watch": {"source": None, "reason": "snapshot"},
                                  "history": {"readable": False, "reason": "permission denied"}}, TH["DEP-XID"],
                      INCONCLUSIVE),
}


#: The cases in the form of tests/test_replayable.py's SAMPLES (check name -> [(id, builder, status)]).
REPLAY_SAMPLES = {}
for _name, (_fn, _ev, _th, _want) in sorted(CASES.items()):
    REPLAY_SAMPLES.setdefault({check_ecc: "DEP-ECC", check_rowremap: "DEP-ROWREMAP", check_throttle: "DEP-THROTTLE",
                               check_persistence: "DEP-PERSIST", check_powercap: "DEP-POWERCAP",
                               check_pcie_errors: "DEP-PCIE-ERRORS", check_xid: "DEP-XID"}[_fn], []).append(
        (_name, (lambda ev=_ev, th=_th: (ev, th, D)), _want))


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_decides_and_replays(name):
    fn, ev, th, want = CASES[name]
    v = fn(ev, th, D)
    assert v.status == want, v.reason
    if want == FAIL:
        assert v.remediation
    for key, value in ev.items():
        assert v.evidence[key] == value
    stored = json.loads(json.dumps(v.to_json()))
    again = fn(stored["evidence"], stored["thresholds"], stored["subject"])
    assert (again.status, again.measured, again.reason) == (v.status, v.measured, v.reason)


def test_absent_and_error_evidence():
    assert check_ecc({"absent": "profile expects 8 × H100; found no NVIDIA device"}, TH["DEP-ECC"], "a").status == SKIP
    assert check_xid({"error": "the health window failed: boom"}, TH["DEP-XID"], "a").status == ERROR


def test_pending_remap_says_reset():
    v = check_rowremap(CASES["rows-pending"][1], TH["DEP-ROWREMAP"], D)
    assert "reset the GPU" in v.remediation


def test_aer_and_xid_parsers():
    counts = hp.parse_aer(aer_text(AER_UNCORRECTABLE, "TOTAL_ERR_FATAL", {"SDES": 2}))
    assert counts["SDES"] == 2 and counts["TOTAL_ERR_FATAL"] == 2
    lines = ["4,812,912345678,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off",
             "6,1,0,-;unrelated", "NVRM: Xid (PCI:0000:3c:00): 13, Graphics Exception"]
    xids = hp.parse_xids(lines)
    assert [(x["bdf_prefix"], x["xid"]) for x in xids] == [("0000:3b:00", 79), ("0000:3c:00", 13)]
    assert xids[0]["line"].startswith("NVRM: Xid")


def test_read_aer_absent_says_why(tmp_path):
    out = hp.read_aer(tmp_path, D)
    assert not out["available"] and "no AER counters" in out["reason"]


def test_kernel_log_unreadable_says_so(tmp_path):
    out = hp.xid_history(tmp_path)
    assert out["readable"] is False and "not readable" in out["reason"]


def test_module_signature_states(tmp_path):
    assert hp.module_signature(tmp_path, "nvidia")["state"] == "unknown"
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/taint").write_text("POE\n")
    assert hp.module_signature(tmp_path, "nvidia")["state"] == "unsigned"
    (tmp_path / "sys/module/nvidia/taint").write_text("PO\n")
    assert hp.module_signature(tmp_path, "nvidia")["state"] == "unknown"  # no sig_enforce: kernel cannot tell
    (tmp_path / "sys/module/module/parameters").mkdir(parents=True)
    (tmp_path / "sys/module/module/parameters/sig_enforce").write_text("Y\n")
    assert hp.module_signature(tmp_path, "nvidia")["state"] == "signed"


def test_nvml_probe_reads_health_fields_one_by_one():
    """A fake NVML: fields it lacks are None with their error, the others are read."""
    import types

    class Err(Exception):
        pass

    def unsupported(*a):
        raise Err("Not Supported")

    fake = types.SimpleNamespace(
        NVML_VOLATILE_ECC=0, NVML_AGGREGATE_ECC=1, NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS=0,
        NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR=1, NVML_INFOROM_ECC=1,
        nvmlDeviceGetEccMode=lambda h: [1, 1], nvmlDeviceGetTotalEccErrors=lambda h, t, c: 3 if t == 0 else 0,
        nvmlDeviceGetRemappedRows=lambda h: (0, 1, 1, 0), nvmlDeviceGetRetiredPages=unsupported,
        nvmlDeviceGetRetiredPagesPendingStatus=unsupported,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x81, nvmlDeviceGetPersistenceMode=lambda h: 0,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000, nvmlDeviceGetPowerManagementDefaultLimit=lambda h: 700000,
        nvmlDeviceGetPowerManagementLimitConstraints=lambda h: [200000, 700000],
        nvmlDeviceGetPcieReplayCounter=lambda h: 4, nvmlDeviceGetInforomImageVersion=lambda h: "G520.0200.00.05",
        nvmlDeviceGetInforomVersion=lambda h, o: "7.16", nvmlDeviceGetGspFirmwareVersion=lambda h: "560.35.03",
        nvmlDeviceGetGspFirmwareMode=lambda h: [1, 1])
    from pytest_sits.probes.nvml import field_reader

    errors, dev = [], {}
    hp.read_nvml_device(fake, object(), dev, field_reader(errors))
    assert dev["remapped_rows"] == {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    assert dev["clock_event_reasons"] == 0x81 and dev["persistence_mode"] is False
    assert dev["retired_pages_sbe"] is None and {e["field"] for e in errors} == {
        "retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"}
    assert dev["ecc_volatile_corrected"] == 3 and dev["ecc_volatile_uncorrected"] == 0
    assert set(hp.NVML_HEALTH_FIELDS) <= set(dev)


def _sim(spec):
    plat = from_spec(spec)
    inv = plat.inventory()
    return plat, inv, inv["accelerators"][0]


@pytest.mark.parametrize("fault, acquire, fn, rid", [
    ("ecc-uncorrectable", acquire_ecc, check_ecc, "DEP-ECC"),
    ("row-remap-pending", acquire_rowremap, check_rowremap, "DEP-ROWREMAP"),
    ("persistence-off", acquire_persistence, check_persistence, "DEP-PERSIST"),
    ("powercap-low", acquire_powercap, check_powercap, "DEP-POWERCAP"),
])
def test_static_facts_fail_on_their_sim_fault_and_pass_without(fault, acquire, fn, rid):
    for spec, want in (("sim:h100", PASS), (f"sim:h100+{fault}", FAIL)):
        _, inv, acc = _sim(spec)
        v = fn(acquire(inv, acc), TH[rid], acc["bdf"])
        assert v.status == want, (spec, v.reason)


@pytest.mark.parametrize("fault, evidence, fn, rid", [
    ("throttle-power-brake", throttle_evidence, check_throttle, "DEP-THROTTLE"),
    ("aer-fatal", pcie_errors_evidence, check_pcie_errors, "DEP-PCIE-ERRORS"),
    ("xid-79", xid_evidence, check_xid, "DEP-XID"),
])
def test_health_window_fails_on_its_sim_fault_and_passes_without(fault, evidence, fn, rid):
    for spec, want in (("sim:h100", PASS), (f"sim:h100+{fault}", FAIL)):
        plat, _, acc = _sim(spec)
        window = HealthWindows(plat, WINDOW, SimHealthReader)(acc)
        v = fn(evidence(window), TH[rid], acc["bdf"])
        assert v.status == want, (spec, v.reason)


def test_health_window_runs_once_per_device_and_idle_never_decides():
    plat, _, acc = _sim("sim:h100+link-idle")  # no load can run
    windows = HealthWindows(plat, WINDOW, SimHealthReader)
    w = windows(acc)
    assert windows(acc) is w
    v = check_throttle(throttle_evidence(w), TH["DEP-THROTTLE"], acc["bdf"])
    assert v.status == INCONCLUSIVE and "never decides" in v.reason


def test_a_broken_reader_is_an_error_with_the_cause():
    class Broken(HealthReader):
        def aer(self):
            raise RuntimeError("sysfs vanished")

    plat, _, acc = _sim("sim:h100")
    w = HealthWindows(plat, WINDOW, Broken)(acc)
    v = check_pcie_errors(pcie_errors_evidence(w), TH["DEP-PCIE-ERRORS"], acc["bdf"])
    assert v.status == ERROR and "sysfs vanished" in v.reason


def test_snapshot_reader_reads_captured_facts_without_load(tmp_path):
    """A platform that cannot load: one idle reading, AER from its files, no event watch."""
    plat, _, acc = _sim("sim:h100")

    class Frozen(HealthReader):  # what a snapshot does: the base reader on a platform without load
        def load(self):
            from pytest_sits.conditions.loads import LoadUnavailable
            raise LoadUnavailable("a snapshot cannot apply load")

    w = HealthWindows(plat, WINDOW, Frozen)(acc)
    assert len(w["samples"]) == 1 and not w["samples"][0]["under_load"]
    assert w["xid_watch"]["source"] is None and w["aer_after"]["available"]
    assert check_xid(xid_evidence(w), TH["DEP-XID"], acc["bdf"]).status == PASS  # the kernel log covers it


def test_amd_and_unknown_vendors():
    _, inv, acc = _sim("sim:mi300x")
    assert "absent" in acquire_persistence(inv, acc)
    ev = acquire_ecc(inv, acc)  # the simulated amdsmi facts decide, as NVML's do
    assert ev["source"].startswith("amdsmi") and check_ecc(ev, TH["DEP-ECC"], acc["bdf"]).status == PASS
    _, inv, acc = _sim("sim:mi300x+ecc-uncorrectable")
    assert check_ecc(acquire_ecc(inv, acc), TH["DEP-ECC"], acc["bdf"]).status == FAIL
    _, inv, acc = _sim("sim:ascend-910c")
    assert check_ecc(acquire_ecc(inv, acc), TH["DEP-ECC"], acc["bdf"]).status == SKIP
