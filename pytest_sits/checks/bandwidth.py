"""MEM-BW-HOLD, MEM-BW-EFFICIENCY and TOPO-PCIE-BW, each decided on repeated trials (:mod:`.interval`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..probes.pcie import link_theoretical_gbps
from . import Finding, check
from .interval import (AT_LEAST, FAIL_, PASS_, combine, decide, describe, level, mean_interval,
                       undecided_text)
from ..verdict import ERROR, FAIL, INCONCLUSIVE, PASS, WARN, Verdict


def hold_series(ev: Dict[str, Any]) -> Dict[str, Any]:
    """The hold's timeline for the report's chart: windows without a reading (the load paused while the peak was
    re-measured) stay in as gaps (``y`` None), drawn as gaps, never bridged by a line."""
    rows = ev["timeline"]
    return {"title": "host DRAM occupancy per window", "unit": "fraction of peak",
            "x": [r["t"] for r in rows], "y": [r.get("occupancy") for r in rows],
            "gap_label": "load paused: the peak was re-measured",
            "band": ev["band"], "mark_from": next((r["t"] for r in ev["timeline"] if r["phase"] == "hold"), None)}


# --------------------------------------------------------------------------
# Decisions under noise (MEM-BW-HOLD version 3, MEM-BW-EFFICIENCY and TOPO-PCIE-BW version 2)

#: Seconds of hold per batch: one batch's windows make one trial of the batch-means interval (100 ms windows are
#: autocorrelated: the controller's correction of one shows in the next).
BATCH_S = 2.0
MIN_BATCHES = 5
#: A STREAM measurement whose busiest thread was on a CPU for less of its wall time than this measured the
#: scheduler (other processes held the CPUs), not the DRAM: it cannot be the reference of an occupancy.
MIN_CPU_SHARE = 0.75
#: A hold window in which an injector thread waited for a CPU for more than this share of it (the kernel's
#: run-queue wait of the thread), or the window after it (the token buckets catch up), measured other processes
#: holding the CPUs, not the DRAM.
MAX_CPU_WAIT = 0.1


#: Why a low figure from copies the timing gate did not hold back is not a FAIL.
UNGATED = ("the timing gate opened before the last copy was queued (the host was slow to queue them): the time "
           "between two copies may be counted as copy time, so a low figure does not show the device slow")


#: What to look at when host<->device copies fall short of the link (measured, or a submitted nvbandwidth's).
PCIE_BW_FIX = ("check the link under load (TOPO-PCIE-LINK), IOMMU/ATS settings, Max Payload/Read Request sizes "
               "(`lspci -vv`), and the NUMA binding of the copying thread")


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _seconds_per_trial(ev: Dict[str, Any]) -> Optional[float]:
    seq = ev.get("sequential") or {}
    if seq.get("trials"):
        return float(seq.get("seconds") or 0.0) / seq["trials"] or None
    return None


def _looks(ev: Dict[str, Any]) -> int:
    return int((ev.get("sequential") or {}).get("looks") or 1)


def _counted(row: Dict[str, Any]) -> bool:
    """A hold window the verdict counts: in the hold (not settling, not paused) and measured."""
    return row.get("phase") == "hold" and row.get("in_band") is not None


def hold_batches(ev: Dict[str, Any]) -> Tuple[List[float], int]:
    """The in-band share of each full batch of counted windows (paused windows left out), and windows per batch."""
    rows = [r for r in ev["timeline"] if _counted(r)]
    # BATCH_S per batch, fewer windows in a hold too short to give MIN_BATCHES batches of them
    per = max(1, min(int(round(BATCH_S / float(ev.get("window_s") or 0.1))), len(rows) // MIN_BATCHES))
    return [sum(1.0 for r in rows[i:i + per] if r["in_band"]) / per for i in range(0, len(rows) - per + 1, per)], per


def disturbed_windows(ev: Dict[str, Any]) -> List[Optional[str]]:
    """Per counted hold window (as :func:`hold_batches` counts them): why it measured the machine moving rather
    than the DRAM being held, or None.

    * ``"busy"``: an injector thread waited for a CPU for more than MAX_CPU_WAIT of the window (the kernel's
      schedstat), or of the window before (the token buckets catch up after it).
    * ``"dip"``: the injectors ran flat out (``saturated``) and still fell below the band, in a run of such windows
      shorter than the run that makes the hold pause and re-measure the peak (``remeasure_after_windows``): the
      machine's bandwidth dipped for a moment too short to re-measure; the window after a dip (the catch-up) too.
      A longer run is judged through the re-measured peak (a peak that moved makes the verdict INCONCLUSIVE).

    All None where the windows carry neither ``cpu_wait`` nor ``saturated`` (earlier reports, hand-made evidence)."""
    rows = [r for r in ev["timeline"] if r.get("phase") in ("hold", "settle", "paused")]
    limit = int(ev.get("remeasure_after_windows") or 5)
    low = float((ev.get("band") or [0.0])[0])
    sat = [bool(r.get("saturated")) and r.get("phase") == "hold" and r.get("occupancy") is not None
           and r["occupancy"] < low for r in rows]
    dip = [False] * len(rows)
    k = 0
    while k < len(rows):
        if sat[k]:
            j = k
            while j < len(rows) and sat[j]:
                j += 1
            if j - k < limit:
                for m in range(k, min(j + 1, len(rows))):
                    dip[m] = True
            k = j
        else:
            k += 1
    out: List[Optional[str]] = []
    prev_busy = False
    for r, d in zip(rows, dip):
        busy = (r.get("cpu_wait") or 0.0) > MAX_CPU_WAIT
        if _counted(r):
            out.append("busy" if busy or prev_busy else "dip" if d else None)
        prev_busy = busy
    return out


def hold_decision(ev: Dict[str, Any], thresholds: Dict[str, Any]) -> Dict[str, Any]:
    """The share of windows in band, its interval over batch means, decided against ``min_in_band_share`` (what
    the hold's acquire function asks before extending the hold)."""
    means, per = hold_batches(ev)
    stat = mean_interval(means, level(_looks(ev)), method="t-interval over batch means")
    for k in ("low", "high"):
        if stat[k] is not None:
            stat[k] = min(1.0, max(0.0, stat[k]))
    d = decide(stat, float(thresholds["min_in_band_share"]), AT_LEAST, show=_pct,
               seconds_per_trial=per * float(ev.get("window_s") or 0.1), what="share of windows in band")
    d["batch_windows"] = per
    return d


def _shares(ev: Dict[str, Any]) -> List[Tuple[str, float]]:
    """(which measurement, CPU share of its busiest thread) of every reference measurement that recorded one."""
    out = []
    kernel = ev.get("peak_kernel", "copy")
    k = ((ev.get("peak") or {}).get("kernels") or {}).get(kernel) or {}
    if k.get("cpu_share_median") is not None:
        out.append(("the peak before the hold", float(k["cpu_share_median"])))
    ref = ev.get("reference") or {}
    for m in ref.get("during") or []:
        if m.get("cpu_share") is not None:
            out.append((f"the re-measurement at {m.get('t', 0):.0f} s", float(m["cpu_share"])))
    if ref.get("after_cpu_share") is not None:
        out.append(("the re-measurement after the hold", float(ref["after_cpu_share"])))
    return out


def reference_problem(ev: Dict[str, Any], thresholds: Dict[str, Any]) -> Optional[str]:
    """Why the reference (the peak the occupancy is a share of) is not known, or None: it moved by more than the
    band's width under the measurement, or other processes held the CPUs while it was measured."""
    lo, hi = thresholds["band_low"], thresholds["band_high"]
    ref = ev.get("reference")
    if ref is not None:
        peaks = [ref["before_gbps"]] + [m["gbps"] for m in ref.get("during", [])] + [ref["after_gbps"]]
        shown = ", ".join(f"{g:.1f}" for g in peaks)
        if ref["moved"] > hi - lo:
            return (f"the machine moved under the measurement: the peak was {ref['before_gbps']:.1f} GB/s before and "
                    f"{shown} GB/s when measured again ({ref['moved']:.0%} apart, more than the band's width of "
                    f"{hi - lo:.0%}), so occupancy as a share of the peak is not known")
    starved = [(what, s) for what, s in _shares(ev) if s < MIN_CPU_SHARE]
    if starved:
        what = ", ".join(f"{w} {s:.0%}" for w, s in starved)
        return (f"other processes held the CPUs while the peak was measured (share of its wall time the busiest "
                f"STREAM thread was on a CPU: {what}; below {MIN_CPU_SHARE:.0%} the figure measures the scheduler, "
                "not the DRAM), so the peak the occupancy is a share of is not this machine's")
    return None


@check("MEM-BW-HOLD", version=3, default_subject="host")
def check_hold(ev: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The share of the hold's windows whose occupancy lay in the band, with its interval over batch means of
    BATCH_S: PASS when the interval's low end reaches ``min_in_band_share``, FAIL when its high end stays below,
    else INCONCLUSIVE (the hold was extended while undecided).  INCONCLUSIVE, never FAIL, when the reference
    moved by more than the band's width or was measured while other processes held the CPUs."""
    lo, hi = thresholds["band_low"], thresholds["band_high"]
    need = thresholds["min_in_band_share"]
    threshold = f">= {need:.0%} of {thresholds['window_ms']:.0f} ms windows in [{lo:.2f}, {hi:.2f}] of peak"
    ev = dict(ev, series=[hold_series(ev)])
    kernel = ev.get("peak_kernel", "copy")
    method = (f"occupancy from {ev['source']} over a measured peak of {ev['peak_gbps']:.1f} GB/s (STREAM {kernel}); "
              "settling windows before the body started are shown, not counted")
    f.set(threshold=threshold, evidence=ev, method=method)
    if ev.get("errors"):
        return f(ERROR, f"the injector broke: {'; '.join(ev['errors'])}")
    if not ev["windows"]:
        return f(INCONCLUSIVE, "no measurement window completed during the hold")
    d = hold_decision(ev, thresholds)
    ev["decision"] = d
    share = ev["windows_in_band"] / ev["windows"]
    occ = [r["occupancy"] for r in ev["timeline"] if r["phase"] == "hold" and r.get("occupancy") is not None]
    text = (f"{ev['windows_in_band']}/{ev['windows']} windows in band ({share:.1%}); per {BATCH_S:g} s batch "
            f"{describe(d, _pct)}; occupancy {min(occ):.3f}..{max(occ):.3f}")
    ref = ev.get("reference")
    if ref is None:
        method += "; the peak was not re-measured after the hold"
    else:
        peaks = [ref["before_gbps"]] + [m["gbps"] for m in ref.get("during", [])] + [ref["after_gbps"]]
        method += f"; the peak re-measured during/after the hold: {', '.join(f'{g:.1f}' for g in peaks)} GB/s"
    method += f"; decided: {d['rule']}"
    f.set(measured=round(share, 4), unit="share", method=method)
    problem = reference_problem(ev, thresholds)
    if problem:
        return f(INCONCLUSIVE, f"{text}; but {problem}")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    disturbed = disturbed_windows(ev)
    if d["outcome"] == FAIL_ and any(disturbed):
        # Decided again on the windows that measured the DRAM held: a FAIL must stand without the others.
        counted = [r for r in ev["timeline"] if _counted(r)]
        quiet = [r for r, x in zip(counted, disturbed) if not x]
        out = sum(1 for r, x in zip(counted, disturbed) if x and not r["in_band"])
        parts = []
        nb, nd = disturbed.count("busy"), disturbed.count("dip")
        if nb:
            parts.append(f"other processes held the CPUs during {nb} window(s) (an injector waited for a CPU for "
                         f"more than {MAX_CPU_WAIT:.0%} of the window, or of the window before)")
        if nd:
            parts.append(f"the machine's bandwidth dipped for {nd} window(s) (the injectors ran flat out and still "
                         "fell below the band, each time for fewer windows than make the hold re-measure the peak, "
                         "and the catch-up after)")
        busy = (f"{' and '.join(parts)}: {out} of the {len(counted) - ev['windows_in_band']} windows out of band "
                f"among them")
        dq = hold_decision(dict(ev, timeline=quiet), thresholds) if len(quiet) >= MIN_BATCHES else None
        ev["decision_without_disturbed_windows"] = dq
        if dq is None or dq["outcome"] != FAIL_:
            shown = f"; the other {len(quiet)}: {describe(dq, _pct)}" if dq else ""
            return f(INCONCLUSIVE, f"{text}; but {busy}{shown}: the hold measured the machine moving, not the DRAM "
                     "held; run again on a quieter host")
        text += f"; {busy}, and the other {len(quiet)} windows fail too: {describe(dq, _pct)}"
    if d["outcome"] == FAIL_:
        below = sum(1 for x in occ if x < lo)
        above = sum(1 for x in occ if x > hi)
        return f(FAIL, f"{text}: {below} window(s) below, {above} above the band",
                 remediation="stop other memory-heavy work on the host during the run; give the injector the node's "
                             "CPUs (no cpuset restriction); if the peak itself is unstable (a VM with noisy "
                             "neighbours), run on bare metal")
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, _pct, 'batches')}")


def device_bw_decision(ev: Dict[str, Any], thresholds: Dict[str, Any]) -> Dict[str, Any]:
    """Efficiency (each copy's bandwidth over the datasheet's), its t-interval, against ``min_efficiency``."""
    ds = float(thresholds.get("datasheet_gbps") or 0) or 1.0
    samples = [float(g) / ds for g in ev.get("samples_gbps") or []]
    stat = mean_interval(samples, level(_looks(ev)))
    return decide(stat, thresholds["min_efficiency"], AT_LEAST, samples=samples, show=_pct,
                  seconds_per_trial=_seconds_per_trial(ev), what="share of the datasheet bandwidth")


@check("MEM-BW-EFFICIENCY", version=3)
def check_device_bw(ev: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """MEM-BW-EFFICIENCY: the mean device-copy bandwidth over the copies measured (every look), as a share of
    the datasheet peak, with its t-interval: PASS when the low end reaches ``min_efficiency``, FAIL when the
    high end stays below, else INCONCLUSIVE; a figure that moved during its copies never FAILs.

    thresholds: ``min_efficiency`` and ``datasheet_gbps`` (the profile's hardware.memory_bandwidth_gbps)."""
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
    if d["outcome"] == FAIL_ and ev.get("gated") is False:
        return f(INCONCLUSIVE, text + f", below the floor {floor:.0%}; but {UNGATED}")
    if d["outcome"] == FAIL_:
        return f(FAIL, text + f", below the floor {floor:.0%}",
                 remediation="check clocks and throttling reasons (power, thermal), memory clock locks and "
                             "MIG/partitioning; compare with the vendor's bandwidth test")
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {undecided_text(d, _pct, 'copies')}")


def pcie_bw_decisions(evidence: Dict[str, Any], thresholds: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One decision per direction (h2d, d2h): each copy's bandwidth over the link's rate, t-interval, against
    ``min_efficiency``."""
    ev, link = evidence["bandwidth"], evidence["link"]
    theo = link_theoretical_gbps(link["gen"], link["width"])
    out = []
    for direction in ("h2d", "d2h"):
        samples = [float(g) / theo for g in ev[direction].get("samples_gbps") or []]
        d = decide(mean_interval(samples, level(_looks(ev))), float(thresholds["min_efficiency"]), AT_LEAST,
                   samples=samples, show=_pct, seconds_per_trial=_seconds_per_trial(ev),
                   what=f"{direction} share of the link's rate")
        d["direction"] = AT_LEAST
        d["copy_direction"] = direction
        out.append(d)
    return out


def _hold_off_band(ev: Dict[str, Any]) -> Optional[str]:
    """Why the copies were not taken under the DRAM hold's band (MEM-BW-HOLD's ``min_in_band_share`` of the hold's
    windows in its band), or None: held, or measured without a hold (the evidence then says why)."""
    h = ev.get("hold_evidence")
    if not h:
        return None
    need = h.get("min_in_band_share")
    need = 0.95 if need is None else float(need)
    n, inb = int(h.get("windows") or 0), int(h.get("windows_in_band") or 0)
    if n == 0:
        return "no window of the host DRAM hold completed during the copies"
    if inb / n < need:
        return f"host DRAM occupancy in band in {inb / n:.0%} of {n} windows (at least {need:.0%})"
    return None


@check("TOPO-PCIE-BW", version=3)
def check_pcie_bw(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """TOPO-PCIE-BW: each direction's mean pinned-copy bandwidth over the copies measured, as a share of the link's
    theoretical rate, with its t-interval: PASS when both low ends reach ``min_efficiency``, FAIL when a high end
    stays below, else INCONCLUSIVE; a figure that moved during its copies never FAILs.

    evidence: ``bandwidth`` (h2d/d2h copies, verified), ``link`` (gen, width: the link's maximum)."""
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
    off = _hold_off_band(ev)
    if off is not None:
        word = {FAIL_: "FAIL", PASS_: "PASS"}.get(d["outcome"], "undecided")
        return f(INCONCLUSIVE, f"measured outside its condition ({off}): the figure is not one taken under the hold; "
                               f"it read: {word} {text}")
    if d["outcome"] == FAIL_ and ev.get("gated") is False:
        return f(INCONCLUSIVE, f"{text}: {d['copy_direction']} below {floor:.0%} of the link; but {UNGATED}")
    if d["outcome"] == FAIL_:
        return f(FAIL, f"{text}: {d['copy_direction']} below {floor:.0%} of the link",
                 remediation=PCIE_BW_FIX)
    if d["outcome"] == PASS_:
        return f(PASS, text)
    return f(INCONCLUSIVE, f"{text}; {d['copy_direction']}: {undecided_text(d, _pct, 'copies')}")


@check("TOPO-PCIE-BW/nvbandwidth", requirement="TOPO-PCIE-BW", version=1, default_subject="accelerators")
def check_pcie_bw_nvbandwidth(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """One device's host<->device figures of a submitted ``nvbandwidth`` text (one figure per direction, nvbandwidth's
    mean over its own iterations) as a share of the link's rate after line encoding.  The text was not taken under
    the DRAM hold TOPO-PCIE-BW is measured under; the hold only takes host memory bandwidth from the copies, so a
    figure below ``min_efficiency`` without it is below with it: FAIL.  A figure at or above it says nothing of the
    copies under the hold: INCONCLUSIVE (never PASS).  A figure above what the link carries is not a PCIe link's
    (NVLink-C2C): INCONCLUSIVE."""
    floor = float(thresholds["min_efficiency"])
    link = evidence.get("link") or {}
    gen, width = link.get("gen"), link.get("width")
    h2d, d2h = evidence.get("h2d_gbps"), evidence.get("d2h_gbps")
    where = (f"{evidence['file']} lines {evidence['lines'][0]} and {evidence['lines'][1]} "
             f"({' / '.join(evidence['tests'])}, nvbandwidth {evidence.get('version') or '?'})")
    f.set(unit="of link", evidence=evidence,
          method=f"nvbandwidth's figure of each direction ({where}), without the DRAM hold; devices matched by "
                 f"{evidence.get('match_rule') or 'their CUDA index (no text gives their PCI address)'}")
    if h2d is None or d2h is None:
        return f(INCONCLUSIVE, f"host->device {h2d} GB/s, device->host {d2h} GB/s: a direction is not in the text "
                 f"({where})")
    if not gen or not width:
        return f(INCONCLUSIVE, f"host->device {h2d:g} GB/s, device->host {d2h:g} GB/s ({where}); the link's "
                 "generation and width are not in the submitted texts: submit nvidia-smi -q or lspci -vv with it")
    theo = link_theoretical_gbps(int(gen), int(width))
    low = min(h2d, d2h)
    eff = low / theo
    f.set(threshold=f">= {floor:.0%} of Gen{gen} x{width} = {theo:.1f} GB/s per direction, under the hold",
          measured=round(eff, 4))
    text = (f"host->device {h2d:g} GB/s = {h2d / theo:.1%}, device->host {d2h:g} GB/s = {d2h / theo:.1%} of Gen{gen} "
            f"x{width} ({where})")
    if max(h2d, d2h) > theo * 1.02:
        return f(INCONCLUSIVE, f"{text}: above what a PCIe Gen{gen} x{width} link carries: the host link these copies "
                 "crossed is not that PCIe link (NVLink-C2C on a Grace system), or the link facts are another device's")
    if eff < floor:
        return f(FAIL, f"{text}: {'host->device' if h2d < d2h else 'device->host'} below {floor:.0%} of the link "
                 "without the DRAM hold, which only takes host memory bandwidth from the copies",
                 remediation=PCIE_BW_FIX)
    return f(INCONCLUSIVE, f"{text}: at or above {floor:.0%} without the DRAM hold; TOPO-PCIE-BW is decided under it "
             "(A §2.4's test environment): run the suite on the machine to decide")
