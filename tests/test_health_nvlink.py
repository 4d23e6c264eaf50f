"""DEP-NVLINK-ERRORS: the check on data (growth over the health window; one reading), NVML's per-link counters,
the health window on the simulated machine with and without its fault, and `nvidia-smi nvlink -e` submitted as
text (modelled on what the tool prints: a GPU header with its UUID, three counters per active link, hand-elided
excerpts)."""

from types import SimpleNamespace

import pytest

from pytest_sits.checks.health import check_nvlink_errors
from pytest_sits.conditions.health import HealthWindows, nvlink_errors_evidence, submitted_nvlink_errors
from pytest_sits.platforms import from_spec
from pytest_sits.platforms.evidence import EvidencePlatform
from pytest_sits.platforms.sim.health import SimHealthReader
from pytest_sits.probes.nvml import nvlink_error_counts
from pytest_sits.probes.readers import classify, parse_as
from pytest_sits.probes.readers.nvidia_smi_nvlink import parse_nvlink_errors
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP

TH = resolve("h100").check_thresholds("DEP-NVLINK-ERRORS")
WINDOW = resolve("h100").condition("health_window")
ZERO = {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}


def reading(**per_link):
    links = {str(k): dict(ZERO) for k in range(4)}
    for link, counts in per_link.items():
        links[link.lstrip("l")].update(counts)
    return {"links": links, "unread": [], "source": "test"}


# ---- the check on data ---------------------------------------------------------------------------------------

def test_growth_during_the_window_fails_naming_the_link():
    v = check_nvlink_errors({"before": reading(l2={"crc_flit": 5}), "after": reading(l2={"crc_flit": 9, "replay": 4})},
                            TH, "gpu0")
    assert v.status == FAIL and "crc +4 (> 0)" in v.reason and "link 2" in v.reason and v.measured == 8
    assert v.remediation and "nvlink -e" in v.remediation


def test_counts_that_did_not_grow_pass():
    v = check_nvlink_errors({"before": reading(l1={"recovery": 3}), "after": reading(l1={"recovery": 3})}, TH, "g")
    assert v.status == PASS and v.measured == 0 and "4 active link(s)" in v.reason


def test_a_limit_set_to_null_reports_without_judging():
    th = dict(TH, max_new_crc=None)
    v = check_nvlink_errors({"before": reading(), "after": reading(l0={"crc_flit": 7})}, th, "g")
    assert v.status == PASS and "crc" not in v.threshold


def test_counters_the_driver_does_not_report_are_inconclusive():
    after = reading()
    for c in after["links"].values():
        c["recovery"] = None
    after["unread"] = ["link 0 recovery: Not Supported"]
    v = check_nvlink_errors({"before": after, "after": after}, TH, "g")
    assert v.status == INCONCLUSIVE and "recovery" in v.reason and "Not Supported" in v.reason


def test_one_reading_passes_at_zero_and_cannot_tell_growth_otherwise():
    assert check_nvlink_errors({"reading": reading(), "source": "f line 1"}, TH, "g").status == PASS
    v = check_nvlink_errors({"reading": reading(l3={"replay": 2}), "source": "f line 1"}, TH, "g")
    assert v.status == INCONCLUSIVE and "before and after" in v.reason
    cut = dict(reading(), cut=True)
    v = check_nvlink_errors({"reading": cut, "source": "f line 1"}, TH, "g")
    assert v.status == INCONCLUSIVE and "elided" in v.reason


# ---- NVML ----------------------------------------------------------------------------------------------------

def test_nvml_counters_per_active_link():
    """Links 0-2 exist (1 inactive), link 3 raises (past the last link); CRC data is not supported."""
    def state(h, link):
        if link > 2:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return link != 1

    def counter(h, link, code):
        if code == 3:
            raise RuntimeError("Not Supported")
        return {0: 2, 1: 0, 2: 11}[code] + link

    fake = SimpleNamespace(NVML_NVLINK_MAX_LINKS=18, nvmlDeviceGetNvLinkState=state,
                           nvmlDeviceGetNvLinkErrorCounter=counter)
    out = nvlink_error_counts(fake, object())
    assert out["links"] == {"0": {"replay": 2, "recovery": 0, "crc_flit": 11, "crc_data": None},
                            "2": {"replay": 4, "recovery": 2, "crc_flit": 13, "crc_data": None}}
    assert len(out["unread"]) == 2 and "Not Supported" in out["unread"][0]


def test_no_nvlink_is_absent():
    fake = SimpleNamespace(nvmlDeviceGetNvLinkState=lambda h, link: (_ for _ in ()).throw(RuntimeError("NS")))
    assert nvlink_error_counts(fake, object())["links"] == {}
    window = {"device": "d", "reader": "NVML", "nvlink_before": {"links": {}}, "nvlink_after": {"links": {}},
              "window_s": 1, "load": None}
    ev = nvlink_errors_evidence(window, {"bdf": "d", "vendor": "NVIDIA", "pci_id": "10de:2330"})
    assert check_nvlink_errors(ev, TH, "d").status == SKIP


# ---- the health window on the simulated machine ---------------------------------------------------------------

def _window(spec):
    plat = from_spec(spec)
    accs = plat.inventory()["accelerators"]
    windows = HealthWindows(plat, WINDOW, SimHealthReader)
    return [(acc, nvlink_errors_evidence(windows(acc), acc)) for acc in accs[:2]]


def test_the_window_fails_on_its_sim_fault_on_that_device_only():
    (a0, ev0), (a1, ev1) = _window("sim:h100+nvlink-crc")
    v = check_nvlink_errors(ev0, TH, a0["bdf"])
    assert v.status == FAIL and "link 3" in v.reason and v.measured == 80
    assert check_nvlink_errors(ev1, TH, a1["bdf"]).status == PASS
    assert all(check_nvlink_errors(ev, TH, a["bdf"]).status == PASS for a, ev in _window("sim:h100"))


def test_devices_without_nvlink_skip():
    (acc, ev), *_ = _window("sim:l40s")
    assert check_nvlink_errors(ev, TH, acc["bdf"]).status == SKIP


# ---- nvidia-smi nvlink -e as submitted text -------------------------------------------------------------------

UUIDS = ["GPU-1a2b3c4d-0000-1111-2222-333344445555", "GPU-9f8e7d6c-0000-1111-2222-333344445555"]


def nvlink_text(counts=None, elide=False, tab=False):
    counts = counts or {}
    pad = "\t " if tab else "         "
    out = []
    for g, uuid in enumerate(UUIDS):
        out.append(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: {uuid})")
        for link in range(18):
            if elide and 1 < link < 17:
                if link == 2:
                    out.append(f"{pad}[...]")
                continue
            for name, key in (("Replay", "replay"), ("Recovery", "recovery"), ("CRC", "crc_flit")):
                out.append(f"{pad}Link {link}: {name} Errors: {counts.get((g, link, key), 0)}")
            out.append("")
    return "\n".join(out) + "\n"


def test_the_text_is_recognised_and_read():
    kind, why = classify(nvlink_text())
    assert kind == "nvidia-smi-nvlink-e", why
    facts = parse_as(kind, nvlink_text(tab=True))
    assert [g["uuid"] for g in facts["gpus"]] == UUIDS and len(facts["gpus"][0]["links"]) == 18
    assert facts["gpus"][1]["links"]["17"] == {"replay": 0, "recovery": 0, "crc_flit": 0}
    cut = parse_nvlink_errors(nvlink_text(elide=True))
    assert cut["gpus"][0]["cut"] and sorted(cut["gpus"][0]["links"], key=int) == ["0", "1", "17"]
    assert [c["line"] for c in cut["cuts"]][:1] == [10]


def test_counters_of_newer_drivers_are_kept_unjudged():
    text = nvlink_text().replace("Link 0: CRC Errors: 0\n", "Link 0: CRC Errors: 0\n         Link 0: Rx Symbol "
                                 "Errors: 7\n         Link 0: Effective BER: 1.5e-15\n", 1)
    link0 = parse_nvlink_errors(text)["gpus"][0]["links"]["0"]
    assert link0["rx_symbol"] == 7 and link0["other"] == {"Effective BER": "1.5e-15"}
    v = check_nvlink_errors({"reading": {"links": {"0": link0}, "unread": []}, "source": "t"}, TH, "g")
    assert v.status == PASS


@pytest.mark.parametrize("text, message", [
    ("GPU 0: H100 (UUID: GPU-1a2b3c4d-0000)\n   Link 0: Replay Errors: 0\n   Link 0: oops\n", "line 3"),
    ("   Link 0: Replay Errors: 0\n", "line 1: a link counter before any `GPU N: ...` header"),
    ("".join(f"GPU {i}: H100\n   Link 0: Replay Errors: 0\n" for i in range(600)), "more than 576 GPUs"),
])
def test_bad_text_is_refused_naming_the_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_nvlink_errors(text)


def _q_text():
    """Two GPUs as `nvidia-smi -q` names them: their PCI addresses and UUIDs (the fields the merge matches)."""
    body = ["==============NVSMI LOG==============", "", "Driver Version                            : 550.54.15",
            "CUDA Version                              : 12.4", "", "Attached GPUs                             : 2"]
    for bdf, uuid in zip(("00000000:19:00.0", "00000000:3B:00.0"), UUIDS):
        body += [f"GPU {bdf}", "    Product Name                          : NVIDIA H100 80GB HBM3",
                 f"    GPU UUID                              : {uuid}",
                 "    PCI", "        Bus Id                            : " + bdf,
                 "        Device Id                         : 0x233010DE"]
    return "\n".join(body) + "\n"


def test_a_submitted_folder_decides_per_gpu_matched_by_uuid(tmp_path):
    (tmp_path / "q.txt").write_text(_q_text())
    (tmp_path / "nvlink.txt").write_text(nvlink_text({(1, 4, "replay"): 3}))
    plat = EvidencePlatform(tmp_path)
    inv = plat.inventory()
    by_bdf = {a["bdf"]: a for a in inv["accelerators"]}
    first, second = by_bdf["0000:19:00.0"], by_bdf["0000:3b:00.0"]
    ev = submitted_nvlink_errors(inv, first)
    assert "matched by its UUID" in ev["source"] and check_nvlink_errors(ev, TH, first["bdf"]).status == PASS
    v = check_nvlink_errors(submitted_nvlink_errors(inv, second), TH, second["bdf"])
    assert v.status == INCONCLUSIVE and "link 4: replay 3" in v.reason


def test_a_folder_without_the_text_says_what_to_submit(tmp_path):
    (tmp_path / "q.txt").write_text(_q_text())
    inv = EvidencePlatform(tmp_path).inventory()
    ev = submitted_nvlink_errors(inv, inv["accelerators"][0])
    assert "nvidia-smi nvlink -e" in ev["unavailable"]
