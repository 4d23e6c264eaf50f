"""Earlier versions of MEM-BW-HOLD, MEM-BW-EFFICIENCY and TOPO-PCIE-BW (:mod:`pytest_sits.checks.bandwidth`),
kept for replay."""

from __future__ import annotations

from typing import Any, Dict

from ...probes.pcie import link_theoretical_gbps
from ...verdict import ERROR, FAIL, INCONCLUSIVE, PASS, WARN, Verdict
from .. import Finding, check
# Versions 2 of MEM-BW-EFFICIENCY and TOPO-PCIE-BW reuse the current decision helpers, which did not change with
# them: their rules moved in the checks' bodies, copied below as they were.
from ..bandwidth import _pct, device_bw_decision, pcie_bw_decisions
from ..interval import FAIL_, PASS_, combine, describe, undecided_text


# Frozen copies of the helpers these versions used: an edit of the current checks never changes an old verdict.

def hold_series(ev: Dict[str, Any]) -> Dict[str, Any]:
    """The hold's timeline for the report's chart: windows without a reading (the load paused while the peak was
    re-measured) stay in as gaps (``y`` None), drawn as gaps, never bridged by a line."""
    rows = ev["timeline"]
    return {"title": "host DRAM occupancy per window", "unit": "fraction of peak",
            "x": [r["t"] for r in rows], "y": [r.get("occupancy") for r in rows],
            "gap_label": "load paused: the peak was re-measured",
            "band": ev["band"], "mark_from": next((r["t"] for r in ev["timeline"] if r["phase"] == "hold"), None)}


@check("MEM-BW-HOLD", version=2, legacy=True)
def check_hold_v2(ev: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "host") -> Verdict:
    """Version 2 (reports before decisions under noise), kept so that they replay: the share of the hold's windows
    whose occupancy lay inside the band, against the threshold with no interval; INCONCLUSIVE when the reference
    (the peak the occupancy is a share of) moved by more than the band's width under the measurement."""
    lo, hi = thresholds["band_low"], thresholds["band_high"]
    need = thresholds["min_in_band_share"]
    threshold = f">= {need:.0%} of {thresholds['window_ms']:.0f} ms windows in [{lo:.2f}, {hi:.2f}] of peak"
    ev = dict(ev, series=[hold_series(ev)])
    method = (f"occupancy from {ev['source']} over a measured peak of {ev['peak_gbps']:.1f} GB/s (STREAM copy); "
              "settling windows before the body started are shown, not counted")
    if ev.get("errors"):
        return Verdict("MEM-BW-HOLD", ERROR, f"the injector broke: {'; '.join(ev['errors'])}", threshold=threshold,
                       evidence=ev, method=method)
    if not ev["windows"]:
        return Verdict("MEM-BW-HOLD", INCONCLUSIVE, "no measurement window completed during the hold",
                       threshold=threshold, evidence=ev, method=method)
    share = ev["windows_in_band"] / ev["windows"]
    occ = [r["occupancy"] for r in ev["timeline"] if r["phase"] == "hold"]
    text = (f"{ev['windows_in_band']}/{ev['windows']} windows in band ({share:.1%}); occupancy "
            f"{min(occ):.3f}..{max(occ):.3f}")
    ref = ev.get("reference")
    if ref is None:
        method += "; the peak was not re-measured after the hold"
    else:
        peaks = [ref["before_gbps"]] + [m["gbps"] for m in ref.get("during", [])] + [ref["after_gbps"]]
        shown = ", ".join(f"{g:.1f}" for g in peaks)
        method += f"; the peak re-measured during/after the hold: {shown} GB/s"
        if ref["moved"] > hi - lo:
            return Verdict("MEM-BW-HOLD", INCONCLUSIVE,
                           f"{text}; but the machine moved under the measurement: the peak was {ref['before_gbps']:.1f} "
                           f"GB/s before and {shown} GB/s when measured again ({ref['moved']:.0%} apart, more than "
                           f"the band's width of {hi - lo:.0%}), so occupancy as a share of the peak is not known",
                           measured=round(share, 4), threshold=threshold, unit="share", evidence=ev, method=method)
    if share >= need:
        return Verdict("MEM-BW-HOLD", PASS, text, measured=round(share, 4), threshold=threshold, unit="share",
                       evidence=ev, method=method)
    below = sum(1 for x in occ if x < lo)
    return Verdict("MEM-BW-HOLD", FAIL, f"{text}: {below} window(s) below, {len(occ) - ev['windows_in_band'] - below} "
                   "above the band", measured=round(share, 4), threshold=threshold, unit="share", evidence=ev,
                   method=method,
                   remediation="stop other memory-heavy work on the host during the run; give the injector the "
                               "node's CPUs (no cpuset restriction); if the peak itself is unstable (a VM with "
                               "noisy neighbours), run on bare metal")


@check("MEM-BW-EFFICIENCY", version=1, legacy=True)
def check_device_bw_v1(ev: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: the median device-copy bandwidth (no interval) as a share of
    the datasheet peak.

    thresholds: ``min_efficiency`` and ``datasheet_gbps`` (the profile's hardware.memory_bandwidth_gbps)."""
    datasheet_gbps = thresholds.get("datasheet_gbps")
    floor = thresholds.get("min_efficiency")
    if not datasheet_gbps:
        return Verdict("MEM-BW-EFFICIENCY", INCONCLUSIVE, "the profile gives no datasheet memory bandwidth "
                       "(hardware.memory_bandwidth_gbps)", subject=subject, evidence=ev or {})
    threshold = f">= {floor:.0%} of {datasheet_gbps:.0f} GB/s" if floor is not None else "none set by the profile"
    if not ev.get("verified"):
        return Verdict("MEM-BW-EFFICIENCY", FAIL, "the copy's data did not verify: device memory corrupted data",
                       threshold=threshold, subject=subject, evidence=ev,
                       remediation="run the vendor's memory diagnostics (e.g. `dcgmi diag -r 3`), check ECC "
                                   "error counters and retired pages")
    eff = ev["gbps_median"] / datasheet_gbps
    text = (f"{ev['gbps_median']:.0f} GB/s median ({ev['gbps_min']:.0f}..{ev['gbps_max']:.0f}) = {eff:.1%} of the "
            f"datasheet {datasheet_gbps:.0f} GB/s")
    if floor is None:
        return Verdict("MEM-BW-EFFICIENCY", WARN, text + "; the profile sets no floor", measured=round(eff, 4),
                       threshold=threshold, unit="of datasheet", subject=subject, evidence=ev, method=ev["method"])
    if eff < floor:
        return Verdict("MEM-BW-EFFICIENCY", FAIL, text + f", below the floor {floor:.0%}", measured=round(eff, 4),
                       threshold=threshold, unit="of datasheet", subject=subject, evidence=ev, method=ev["method"],
                       remediation="check clocks and throttling reasons (power, thermal), memory clock locks and "
                                   "MIG/partitioning; compare with the vendor's bandwidth test")
    return Verdict("MEM-BW-EFFICIENCY", PASS, text, measured=round(eff, 4), threshold=threshold,
                   unit="of datasheet", subject=subject, evidence=ev, method=ev["method"])


@check("TOPO-PCIE-BW", version=1, legacy=True)
def check_pcie_bw_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that older reports replay: each direction's median pinned-copy bandwidth (no interval)
    as a share of the link's theoretical rate.

    evidence: ``bandwidth`` (h2d/d2h copies, verified), ``link`` (gen, width: the link's maximum)."""
    ev, link = evidence["bandwidth"], evidence["link"]
    gen, width = link.get("gen"), link.get("width")
    floor = thresholds["min_efficiency"]
    if not gen or not width:
        return Verdict("TOPO-PCIE-BW", INCONCLUSIVE, "the link generation/width is unknown", subject=subject,
                       evidence={"bandwidth": ev, "link": link})
    theo = link_theoretical_gbps(gen, width)
    threshold = f">= {floor:.0%} of Gen{gen} x{width} = {theo:.1f} GB/s per direction"
    evid = {"bandwidth": ev, "link": link, "theoretical_gbps": theo}
    if not ev.get("verified"):
        return Verdict("TOPO-PCIE-BW", FAIL, "data copied over the link did not verify", threshold=threshold,
                       subject=subject, evidence=evid,
                       remediation="check AER errors (`dmesg | grep -i aer`, `lspci -vv` UESta/CESta) and reseat")
    effs = {d: ev[d]["gbps_median"] / theo for d in ("h2d", "d2h")}
    worst = min(effs, key=effs.get)  # type: ignore[arg-type]
    text = ", ".join(f"{d} {ev[d]['gbps_median']:.1f} GB/s ({effs[d]:.0%})" for d in ("h2d", "d2h"))
    hold = ev.get("hold")
    if hold is not None:
        text += f"; host DRAM held at {hold}"
    if effs[worst] < floor:
        return Verdict("TOPO-PCIE-BW", FAIL, f"{text}: {worst} below {floor:.0%} of the link", measured=round(effs[worst], 4),
                       threshold=threshold, unit="of link", subject=subject, evidence=evid, method=ev["method"],
                       remediation="check the link under load (TOPO-PCIE-LINK), IOMMU/ATS settings, Max Payload/Read "
                                   "Request sizes (`lspci -vv`), and the NUMA binding of the copying thread")
    return Verdict("TOPO-PCIE-BW", PASS, text, measured=round(effs[worst], 4), threshold=threshold, unit="of link",
                   subject=subject, evidence=evid, method=ev["method"])


@check("MEM-BW-EFFICIENCY", version=2, legacy=True)
def check_device_bw_v2(ev: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 2 (reports before the copies were timed behind a gate), kept so that they replay.

    MEM-BW-EFFICIENCY: the mean device-copy bandwidth over the copies measured (every look), as a share of
    the datasheet peak, with its t-interval: PASS when the low end reaches ``min_efficiency``, FAIL when the
    high end stays below, else INCONCLUSIVE; a figure that moved during its copies never FAILs.

    thresholds: ``min_efficiency`` and ``datasheet_gbps`` (the profile's hardware.memory_bandwidth_gbps)."""
    f = Finding("MEM-BW-EFFICIENCY", subject)
    datasheet_gbps = thresholds.get("datasheet_gbps")  # a profile fact, not a threshold key: None where not given
    floor = thresholds["min_efficiency"]
    if not datasheet_gbps:
        return f(INCONCLUSIVE, "the profile gives no datasheet memory bandwidth (hardware.memory_bandwidth_gbps)",
                 evidence=ev or {})
    f.set(threshold=f">= {floor:.0%} of {datasheet_gbps:.0f} GB/s" if floor is not None else "none set by the profile",
          evidence=ev)
    if not ev.get("verified"):
        return f(FAIL, "the copy's data did not verify: device memory corrupted data",
                 remediation="run the vendor's memory diagnostics (e.g. `dcgmi diag -r 3`), check ECC error counters "
                             "and retired pages")
    d = device_bw_decision(ev, thresholds)
    ev = dict(ev, decision=d)
    f.set(evidence=ev, method=ev.get("method"))
    if d["estimate"] is None or d["trials"] < 2:
        return f(INCONCLUSIVE, f"{d['trials']} copy measured: an interval needs two or more")
    mean_gbps = d["estimate"] * float(datasheet_gbps)
    text = (f"{mean_gbps:.0f} GB/s mean of {d['trials']} copies ({ev['gbps_min']:.0f}..{ev['gbps_max']:.0f}) = "
            f"{describe(d, _pct)} of the datasheet {datasheet_gbps:.0f} GB/s")
    f.set(measured=round(d["estimate"], 4), unit="of datasheet", method=f"{ev.get('method')}; decided: {d['rule']}")
    if floor is None:
        return f(WARN, text + "; the profile sets no floor")
    if d["outcome"] == FAIL_:
        return f(FAIL, text + f", below the floor {floor:.0%}",
                 remediation="check clocks and throttling reasons (power, thermal), memory clock locks and "
                             "MIG/partitioning; compare with the vendor's bandwidth test")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, _pct, 'copies')}")


@check("TOPO-PCIE-BW", version=2, legacy=True)
def check_pcie_bw_v2(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 2 (reports before copies taken while the DRAM hold was out of its band were INCONCLUSIVE), kept so
    that they replay.

    TOPO-PCIE-BW: each direction's mean pinned-copy bandwidth over the copies measured, as a share of the link's
    theoretical rate, with its t-interval: PASS when both low ends reach ``min_efficiency``, FAIL when a high end
    stays below, else INCONCLUSIVE; a figure that moved during its copies never FAILs.

    evidence: ``bandwidth`` (h2d/d2h copies, verified), ``link`` (gen, width: the link's maximum)."""
    f = Finding("TOPO-PCIE-BW", subject)
    ev, link = evidence["bandwidth"], evidence["link"]
    gen, width = link.get("gen"), link.get("width")
    floor = thresholds["min_efficiency"]
    if not gen or not width:
        return f(INCONCLUSIVE, "the link generation/width is unknown", evidence={"bandwidth": ev, "link": link})
    theo = link_theoretical_gbps(gen, width)
    evid = {"bandwidth": ev, "link": link, "theoretical_gbps": theo}
    f.set(threshold=f">= {floor:.0%} of Gen{gen} x{width} = {theo:.1f} GB/s per direction", evidence=evid)
    if not ev.get("verified"):
        return f(FAIL, "data copied over the link did not verify",
                 remediation="check AER errors (`dmesg | grep -i aer`, `lspci -vv` UESta/CESta) and reseat")
    ds = pcie_bw_decisions(evidence, thresholds)
    d = combine(ds)
    evid["decisions"] = ds
    evid["decision"] = d
    if any(x["trials"] < 2 for x in ds):
        return f(INCONCLUSIVE, "fewer than two copies each way: an interval needs two or more", method=ev.get("method"))
    text = "; ".join(f"{x['copy_direction']} {x['estimate'] * theo:.1f} GB/s = {describe(x, _pct)}" for x in ds)
    hold = ev.get("hold")
    if hold is not None:
        text += f"; host DRAM held at {hold}"
    f.set(measured=round(d["estimate"], 4), unit="of link", method=f"{ev.get('method')}; decided per direction: {d['rule']}")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{text}: {d['copy_direction']} below {floor:.0%} of the link",
                 remediation="check the link under load (TOPO-PCIE-LINK), IOMMU/ATS settings, Max Payload/Read Request "
                             "sizes (`lspci -vv`), and the NUMA binding of the copying thread")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {d['copy_direction']}: {undecided_text(d, _pct, 'copies')}")
