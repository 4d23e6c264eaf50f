"""Real captures against the facts a careful reader takes from them: ``sits audit`` on every file of a folder laid
out like ``realdata/`` (kind folders and a ``MANIFEST.yaml``), one file at a time, as a user would run it (a PTDaemon
``spl.txt`` with the detail log of its run beside it, as a submission's run folder holds them).

    python benchmarks/realdata.py DIR                 # every file of DIR/MANIFEST.yaml
    python benchmarks/realdata.py DIR --only topo/    # the files whose name starts so
    python benchmarks/realdata.py DIR -v              # every fact, not only those that disagree

For each file the command prints the run's result and each MANIFEST fact with the verdicts it was compared to:
``agree``, ``DISAGREE`` (and why) or ``unchecked`` (a fact no rule here reads: context, formatting notes).  A
file agrees when it ran without a traceback, wrote its report, and every checked fact agrees.  The total is the
figure of the "every real capture read right" issue.  Exit 0 when every file agrees.

The rules are the reading of each fact a hardware engineer would make (``persistence_mode: Disabled (all)`` ->
DEP-PERSIST FAILs on every GPU; ``pcie: Current 1 of Max 4 ... at idle`` -> TOPO-PCIE-LINK is neither a PASS nor
a FAIL (the speed), but ``Width Current 8x of Max 16x`` FAILs it, idle or not (idle lowers the speed, not the
width); ``SW Power Cap : Active`` -> DEP-THROTTLE names it and does not pass; ``gpu_pairs: all 28 pairs NV18``
-> LINK-NVLINK-MESH passes 28/28; ...); each is a function below.  The MANIFEST is read with YAML's base loader
(every value a string: a bus ID like ``18:00.0`` is not turned into a number).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

Result = Tuple[str, str]  # ("agree" | "DISAGREE" | "unchecked", detail)
REASON_BITS = {"idle": "gpu_idle", "applications clocks": "applications_clocks_setting", "sw power cap": "sw_power_cap",
               "hw slowdown": "hw_slowdown", "hw thermal": "hw_thermal_slowdown",
               "hw power brake": "hw_power_brake_slowdown", "sync boost": "sync_boost",
               "sw thermal": "sw_thermal_slowdown", "gpu_idle": "gpu_idle"}
FAULTS = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"}


# ---- helpers -------------------------------------------------------------------------------------------------

def norm_bdf(text: str) -> str:
    """'18:00.0', '00000000:18:00.0', '0000:18:00.0' -> '0000:18:00.0'.  A bus ID a YAML writer turned into a
    base-60 number on the way ('18:00.0' -> 1080.0, '00:04.0' -> 4.0) is turned back."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+\.\d", t) and ":" not in t:
        x = float(t)
        t = f"{int(x // 60):02d}:{x - 60 * int(x // 60):04.1f}"
    parts = t.split(":")
    if len(parts) == 2:
        return f"0000:{t}"
    return f"{parts[-3][-4:]}:{parts[-2]}:{parts[-1]}"


BUS = re.compile(r"\b([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b")


class Run:
    """One file's audit: the report and the verdicts by requirement and subject."""

    def __init__(self, report: Optional[Dict[str, Any]], rc: int, out: str):
        self.report, self.rc, self.out = report, rc, out
        self.verdicts = (report or {}).get("verdicts") or []
        inv = (report or {}).get("inventory") or {}
        self.accs = inv.get("accelerators") or []
        self.sub = inv.get("submitted") or {}

    def of(self, req: str) -> List[Dict[str, Any]]:
        return [v for v in self.verdicts if v["requirement"] == req]

    def subject(self, req: str, bdf: str) -> Optional[Dict[str, Any]]:
        return next((v for v in self.of(req) if v["subject"] == bdf), None)

    def by_bus(self, req: str, bus: str) -> List[Dict[str, Any]]:
        """Verdicts of ``req`` whose subject is on bus ``bus`` ('4F', or '4F:00.0')."""
        bus = bus.lower()
        out = []
        for v in self.of(req):
            s = str(v["subject"]).lower()
            if (":" in bus and s.endswith(bus)) or (":" not in bus and s.split(":")[1:2] == [bus]):
                out.append(v)
        return out


def unavailable(v: Dict[str, Any]) -> bool:
    return v["status"] == "SKIP" and isinstance(v.get("evidence"), dict) and bool(v["evidence"].get("unavailable"))


def statuses(vs: List[Dict[str, Any]]) -> str:
    counts: Dict[str, int] = {}
    for v in vs:
        counts[v["status"]] = counts.get(v["status"], 0) + 1
    return ", ".join(f"{n} × {s}" for s, n in sorted(counts.items())) or "no verdict"


def _all(vs: List[Dict[str, Any]], ok: Callable[[Dict[str, Any]], bool], what: str, req: str) -> Result:
    if not vs:
        return "DISAGREE", f"no {req} verdict"
    bad = [v for v in vs if not ok(v)]
    if bad:
        return "DISAGREE", f"{req} {what} expected; {bad[0]['subject']}: {bad[0]['status']} {bad[0]['reason'][:140]}"
    return "agree", f"{req}: {statuses(vs)}"


def not_shown(text: str) -> bool:
    """The fact says the value is not in the text (only in the document it came from, or not shown at all)."""
    low = text.strip().lower()
    return low.startswith("not shown") or "not in this text" in low or "(document header)" in low


#: A GPU as nvidia-smi's per-GPU tools head it: "GPU 7: NVIDIA A100-SXM4-80GB (UUID: ...)".
GPU_HEADER = re.compile(r"\bGPU (\d{1,4})(?::| \(UUID)", re.I)


# ---- the rules: one per kind of fact -----------------------------------------------------------------------

def r_persistence(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-PERSIST")
    if not_shown(text):
        return _all(vs, unavailable, "not measured", "DEP-PERSIST")
    if "disabled" in text.lower():
        return _all(vs, lambda v: v["status"] == "FAIL", "FAIL (the profile expects it on)", "DEP-PERSIST")
    return _all(vs, lambda v: v["status"] == "PASS", "PASS", "DEP-PERSIST")


def _ue_over(text: str) -> bool:
    return re.search(r"uncorrectable[^0-9;,]{0,40}?\b([1-9]\d*)", text, re.I) is not None


def r_ecc_uncorrectable(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-ECC")
    if _ue_over(text):
        return _all(vs, lambda v: v["status"] == "FAIL", "FAIL (uncorrectable errors)", "DEP-ECC")
    return _all(vs, lambda v: v["status"] not in ("FAIL", "ERROR") and "uncorrect" not in v["reason"].split(";")[0]
                or v["status"] in ("PASS", "WARN", "INCONCLUSIVE", "SKIP"), "no uncorrectable FAIL", "DEP-ECC")


def r_ecc_volatile(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-ECC")
    if _ue_over(text):
        return _all(vs, lambda v: v["status"] == "FAIL" and "volatile uncorrected" in v["reason"],
                    "FAIL naming the volatile uncorrectable count", "DEP-ECC")
    return _all(vs, lambda v: v["status"] != "FAIL", "no FAIL", "DEP-ECC")


def r_ecc_aggregate(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    m = re.search(r"uncorrectable[^0-9;,]{0,40}?\b(\d+)", text, re.I)
    vs = run.of("DEP-ECC")
    if not m:
        return "unchecked", "no uncorrectable count in the fact"
    want = int(m.group(1))
    return _all(vs, lambda v: (v.get("evidence") or {}).get("counts", {}).get("aggregate_uncorrected") == want
                and (v["status"] != "PASS" or want == 0), f"aggregate uncorrectable {want} read", "DEP-ECC")


def r_ecc(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-ECC")
    if "enabled" in text.lower():
        ok = _all(vs, lambda v: "disabled" not in v["reason"], "ECC read as enabled", "DEP-ECC")
        if ok[0] != "agree":
            return ok
    return r_ecc_uncorrectable(text, run, entry)


def r_ecc_mode(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-ECC")
    if "enabled" in text.lower():
        return _all(vs, lambda v: "ECC is disabled" not in v["reason"], "ECC read as enabled", "DEP-ECC")
    return _all(vs, lambda v: v["status"] == "FAIL", "FAIL (ECC disabled)", "DEP-ECC")


def _bus_numbers(text: str) -> List[Tuple[str, int]]:
    """('4F', 10), ('00:08.0', 4) for "4F 10, D1 10289" / "00:08.0 ... (Total 4)"."""
    out = []
    for seg in re.split(r"[,;]", text):
        m = re.search(r"\b([0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}\.[0-7])?)\b", seg)
        nums = re.findall(r"\b(\d+)\b", seg[m.end():]) if m else []
        if m and nums and not re.fullmatch(r"\d{2}", m.group(1)) or (m and nums and ":" in m.group(1)):
            out.append((m.group(1), int(nums[-1])))
    return out


def r_ecc_correctable_note(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    pairs = _bus_numbers(text)
    if not pairs:
        return "unchecked", "no per-GPU count"
    for bus, n in pairs:
        vs = run.by_bus("DEP-ECC", bus)
        if not vs:
            return "DISAGREE", f"no DEP-ECC verdict for {bus}"
        got = (vs[0].get("evidence") or {}).get("counts", {}).get("aggregate_corrected")
        if got != n:
            return "DISAGREE", f"{bus}: aggregate corrected {got} read, {n} in the fact"
    return "agree", f"aggregate corrected counts read: {', '.join(f'{b} {n}' for b, n in pairs)}"


def r_pending(text: str, run: Run, entry: Dict[str, Any], field: str) -> Result:
    vs = run.of("DEP-ROWREMAP")
    low = text.lower()
    if re.search(r"pending(?: page blacklist)?\s*:?\s*yes|pending yes", low):
        named = [v for b in BUS.findall(text) for v in run.by_bus("DEP-ROWREMAP", b)]
        return _all(named or vs, lambda v: v["status"] == "FAIL" and "pending" in v["reason"], "FAIL (pending)",
                    "DEP-ROWREMAP")
    if re.search(r"failure\s*:?\s*yes", low):
        return _all(vs, lambda v: v["status"] == "FAIL", "FAIL (remap failure)", "DEP-ROWREMAP")
    res = _all(vs, lambda v: v["status"] != "FAIL", "no FAIL", "DEP-ROWREMAP")
    if res[0] != "agree":
        return res
    if field == "remapped_rows":
        for bus, n in [(b, n) for b, n in _bus_numbers(text) if ":" in b]:
            v = run.by_bus("DEP-ROWREMAP", bus)
            got = ((v[0].get("evidence") or {}).get("remapped_rows") or {}).get("correctable") if v else None
            if got != n:
                return "DISAGREE", f"{bus}: {got} correctable remaps read, {n} in the fact"
    if field == "retired_pages":
        for bus, n in [(b, n) for b, n in _bus_numbers(text.split("Double")[0]) if ":" in b]:
            v = run.by_bus("DEP-ROWREMAP", bus)
            got = ((v[0].get("evidence") or {}).get("retired_pages") or {}).get("sbe") if v else None
            if got != n:
                return "DISAGREE", f"{bus}: {got} single-bit retired pages read, {n} in the fact"
    return res


def r_pages(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """Retired pages: pending -> FAIL; otherwise no verdict fails on page retirement."""
    vs = run.of("DEP-ROWREMAP")
    if re.search(r"pending(?: page blacklist)?\s*:?\s*yes", text, re.I):
        return _all(vs, lambda v: v["status"] == "FAIL" and "retirement is pending" in v["reason"],
                    "FAIL (page retirement pending)", "DEP-ROWREMAP")
    res = _all(vs, lambda v: not (v["status"] == "FAIL" and ("retirement" in v["reason"] or "retired pages" in
                                                            v["reason"].split("(")[0])),
               "no FAIL on retired pages", "DEP-ROWREMAP")
    if res[0] != "agree":
        return res
    for bus, n in [(b, n) for b, n in _bus_numbers(text.split("Double")[0]) if ":" in b]:
        v = run.by_bus("DEP-ROWREMAP", bus)
        got = ((v[0].get("evidence") or {}).get("retired_pages") or {}).get("sbe") if v else None
        if got != n:
            return "DISAGREE", f"{bus}: {got} single-bit retired pages read, {n} in the fact"
    return res


def _reasons_in(clause: str) -> Optional[set]:
    low = clause.lower()
    if re.search(r"\bnone\b", low) and "active" not in low.replace("none", ""):
        return set()
    found = set()
    for label, bit in REASON_BITS.items():
        for m in re.finditer(re.escape(label), low):
            after = low[m.end():m.end() + 40]
            after = re.sub(r"^[a-z_ ]*?(?:slowdown|setting|reason)?", "", after)
            if re.match(r"[\s:'\"]*not active", after):
                continue
            if re.match(r"[\s:'\"]*active", after) or label in ("idle", "gpu_idle") and re.match(
                    r"\s*(?:only|\(|active|$)", after) or re.match(r"[\s:'\"]*active", low[m.end():m.end() + 12]):
                found.add(bit)
    return found


def r_clock_reasons(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-THROTTLE")
    if not_shown(text):
        return _all(vs, unavailable, "not measured", "DEP-THROTTLE")
    if not vs:
        return "DISAGREE", "no DEP-THROTTLE verdict"
    named: Dict[str, set] = {}
    rest: Optional[set] = None
    for clause in re.split(r";|\bthe other \d+\b", text):
        buses = BUS.findall(clause)
        reasons = _reasons_in(clause.split(":", 1)[1] if buses and ":" in clause else clause)
        if buses:
            for b in buses:
                named[norm_bdf(b)] = reasons or set()
        elif reasons is not None and (reasons or rest is None):
            rest = (rest or set()) | reasons
    problems = []
    for v in vs:
        want = named.get(str(v["subject"]).lower(), rest if rest is not None else set())
        active = want - {"gpu_idle"}
        if active:
            if v["status"] in ("PASS", "SKIP"):
                problems.append(f"{v['subject']}: {v['status']} with {sorted(active)} active")
            elif not all(a in v["reason"] for a in active):
                problems.append(f"{v['subject']}: {v['status']} does not name {sorted(active)}")
            elif v["status"] == "FAIL" and not (active & FAULTS):
                problems.append(f"{v['subject']}: FAIL on {sorted(active)} (no hardware slowdown)")
        else:
            if v["status"] == "FAIL":
                problems.append(f"{v['subject']}: FAIL with only {sorted(want) or 'no reason'} active")
            if v["status"] == "PASS" and "loaded" not in v["reason"]:
                problems.append(f"{v['subject']}: PASS on a reading not taken under load")
    if problems:
        return "DISAGREE", "; ".join(problems[:3])
    return "agree", f"DEP-THROTTLE: {statuses(vs)}"


def r_power_limit(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-POWERCAP")
    if not_shown(text):
        return _all(vs, unavailable, "not measured", "DEP-POWERCAP")
    m = re.search(r"(\d+(?:\.\d+)?)\s*W\b", text)
    if not m:
        return "unchecked", "no figure"
    want = float(m.group(1))
    return _all(vs, lambda v: v["status"] not in ("ERROR", "SKIP") and v.get("measured") is not None
                and abs(float(v["measured"]) - want) < 0.6, f"enforced {want:g} W read", "DEP-POWERCAP")


def _gen_width(text: str) -> Tuple[Optional[int], Optional[int], Optional[int], Optional[int]]:
    """(current gen, achievable gen, current width, max width) of a pcie fact."""
    low = text.lower()
    cur = mx = None
    for rx in (r"current[_ a-z]*?(\d)\s*(?:,|of)\s*max[_ a-z]*?(\d)", r"gen (\d)\s*(?:of|/)\s*(\d)",
               r"current (\d), max (\d)", r"\b(\d) of (?:max )?(\d)\b"):
        m = re.search(rx, low)
        if m:
            cur, mx = int(m.group(1)), int(m.group(2))
            break
    host = re.search(r"host max (\d)", low)
    ach = min(mx, int(host.group(1))) if mx is not None and host else mx
    w = re.search(r"(\d+)x\s*(?:of|/)\s*(?:max\s*)?(\d+)x", low) or re.search(
        r"width current (\d+)x of max (\d+)x", low)
    return cur, ach, (int(w.group(1)) if w else None), (int(w.group(2)) if w else None)


def r_pcie(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("TOPO-PCIE-LINK")
    if not_shown(text):
        return _all(vs, unavailable, "not measured", "TOPO-PCIE-LINK")
    cur, ach, wcur, wmax = _gen_width(text)
    if cur is None and wcur is None:
        return "unchecked", "no reading in the fact"
    full = (cur is None or ach is None or cur >= ach) and (wcur is None or wmax is None or wcur >= wmax)
    if full:
        return _all(vs, lambda v: v["status"] == "PASS", "PASS (at the achievable link)", "TOPO-PCIE-LINK")
    if wcur is not None and wmax is not None and wcur < wmax:  # the width: idle does not lower it, a reading decides
        return _all(vs, lambda v: v["status"] == "FAIL" and f"x{wcur} < x{wmax}" in v["reason"],
                    f"FAIL (width x{wcur} of x{wmax}: an idle reading decides the width)", "TOPO-PCIE-LINK")
    return _all(vs, lambda v: v["status"] == "INCONCLUSIVE" or (v["status"] == "FAIL" and "under" in v["reason"]),
                "INCONCLUSIVE (speed below the maximum in an idle reading)", "TOPO-PCIE-LINK")


def r_gpus(text: Any, run: Run, entry: Dict[str, Any]) -> Result:
    got = {a["bdf"] for a in run.accs}
    headers = GPU_HEADER.findall(text) if isinstance(text, str) else []
    if headers:  # GPUs named by nvidia-smi's index, no PCI address in the text: read as GPU<index>
        want = {f"GPU{i}" for i in headers}
        if want != got:
            return "DISAGREE", f"GPUs read {sorted(got)}; the fact names {sorted(want)}"
        return "agree", f"{len(got)} GPU(s) by nvidia-smi index: {', '.join(sorted(want))}"
    items = text if isinstance(text, list) else [text]
    # a fact that describes its GPU around the address ("0  MTT S4000, PCIe 00000000:08:00.0, Device Type
    # Physical"): the addresses in it
    found = [m.group(0) for b in items for m in re.finditer(r"\b(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
                                                            r"\.[0-7]\b", str(b))]
    want = {norm_bdf(b) for b in (found if found and any(len(str(b).split()) > 1 for b in items) else items)}
    if want != got:
        return "DISAGREE", f"GPUs read {sorted(got)}; the fact lists {sorted(want)}"
    return "agree", f"{len(got)} GPU(s) at the listed addresses"


def r_gpu_model(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    names = [a.get("name") for a in run.accs if a.get("name")]
    low = text.lower()
    if not names:
        if "not in" in low or "uncertain" in low or "from" in low or "not stated" in low:
            return "agree", "the text names no model (as the fact says)"
        ids = {a.get("pci_id") for a in run.accs}
        m = re.search(r"0x([0-9a-f]{4})", low)
        if m and any(str(i).endswith(m.group(1)) for i in ids):
            return "agree", f"device ID {m.group(1)} read"
        return "DISAGREE", "no model read"
    bad = [n for n in names if n.lower() not in low and not low.startswith(n.lower())
           and low.split(" (")[0] not in n.lower()]
    if bad and not all(re.sub(r"\W", "", n.lower()) in re.sub(r"\W", "", low) for n in bad):
        return "DISAGREE", f"model read {bad[0]!r}; the fact says {text!r}"
    return "agree", f"{len(names)} × {names[0]}"


def r_gpu_count(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    n = int(re.match(r"\s*(\d+)", text).group(1)) if re.match(r"\s*(\d+)", text) else None
    got = len(run.accs)
    if n is not None and got != n:
        return "DISAGREE", f"{got} GPU(s) read; the fact says {n}"
    m = re.search(r"attached gpus\s*:\s*(\d+)", text, re.I)
    if m:
        dec = ((run.sub.get("declared") or {}).get("nvidia") or {}).get("count")
        if dec != int(m.group(1)):
            return "DISAGREE", f"declared count {dec} read; the fact says {m.group(1)}"
        inv = run.of("INV-DEVICES")
        if inv and int(m.group(1)) > got and not any(str(int(m.group(1)) - got) in v["reason"] for v in inv):
            return "DISAGREE", f"INV-DEVICES does not say that {int(m.group(1)) - got} declared GPU(s) are not in the text"
    return "agree", f"{got} GPU(s) in the text" + (f", {m.group(1)} declared" if m else "")


def r_driver(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("DEP-DRIVER")
    if not_shown(text) or not re.match(r"\s*\d", text):
        return _all(vs, lambda v: unavailable(v) or v["status"] == "SKIP", "not measured", "DEP-DRIVER")
    drv = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    version = drv.group(0).strip()
    cuda = re.search(r"cuda (\d+)\.(\d+)", text, re.I)
    low = int(drv.group(1)) < 550 or (cuda is not None and (int(cuda.group(1)), int(cuda.group(2))) < (12, 6))
    if low:
        return _all(vs, lambda v: v["status"] == "FAIL" and version in str(v.get("measured")),
                    f"FAIL (driver {version} under the 550 / 12.6 floor)", "DEP-DRIVER")
    if cuda is not None:
        return _all(vs, lambda v: v["status"] == "PASS" and version in str(v.get("measured")), "PASS", "DEP-DRIVER")
    return _all(vs, lambda v: v["status"] in ("PASS", "FAIL") and version in str(v.get("measured")),
                f"judged on driver {version}", "DEP-DRIVER")


def _pairs_expected(text: str, n: int) -> Optional[int]:
    """How many GPU pairs the fact says are NVLink/XGMI-linked."""
    low = text.lower()
    total = n * (n - 1) // 2
    if re.search(r"\ball\b.*\b(nv\d+|xgmi)\b|\bevery pair\b.*\b(nv\d+|xgmi)|\b(nv\d+|xgmi)\b[^;]*\bevery pair", low):
        return total
    if re.search(r"\ball\b[^;]*\b(sys|phb|node|pix|pxb)\b", low) or (
            re.search(r"\b(sys|phb|node)\b", low) and not re.search(r"nv\d|xgmi", low)):
        return 0
    linked = 0
    for _m in re.finditer(r"(?:gpu)?(\d)\s*-\s*(?:gpu)?(\d)\s+nv\d+", low):
        linked += 1
    return linked if linked or "nv" in low else None


def r_gpu_pairs(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("LINK-NVLINK-MESH")
    n = int(str(entry.get("gpu_count", "0")).split()[0]) if str(entry.get("gpu_count", "")).split() else 0
    want = _pairs_expected(text, n)
    if want is None or not n:
        return "unchecked", "pairs not countable from the fact"
    total = n * (n - 1) // 2
    shown = f"{want}/{total} pairs"
    if want == total:
        return _all(vs, lambda v: v["status"] == "PASS" and v.get("measured") == shown, f"PASS {shown}",
                    "LINK-NVLINK-MESH")
    return _all(vs, lambda v: v["status"] in ("WARN", "FAIL") and v.get("measured") == shown,
                f"not a PASS: {shown}", "LINK-NVLINK-MESH")


def r_link_type(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    return r_gpu_pairs(text, run, entry)


def r_gpu_nic(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """GPUs with PIX/PXB to a NIC sit behind a switch (TOPO-PCIE-DIRECT FAIL); the others cannot be judged from
    the matrix (never a PASS)."""
    vs = run.of("TOPO-PCIE-DIRECT")
    switched = set()
    for clause in re.split(r";", text):
        if re.search(r"\b(pix|pxb)\b", clause, re.I):
            for a, b in re.findall(r"GPU(\d)(?:\s*,\s*GPU(\d))?", clause.split(" to ")[0]):
                switched.add(int(a))
                if b:
                    switched.add(int(b))
    problems = []
    for i, acc in enumerate(run.accs):
        v = run.subject("TOPO-PCIE-DIRECT", acc["bdf"])
        if v is None:
            problems.append(f"no TOPO-PCIE-DIRECT verdict for {acc['bdf']}")
        elif i in switched and v["status"] != "FAIL":
            problems.append(f"GPU{i}: {v['status']} although it shares a switch with a NIC")
        elif i not in switched and v["status"] in ("PASS", "FAIL"):
            problems.append(f"GPU{i}: {v['status']} on a matrix that cannot show a switch serving it alone")
    if problems:
        return "DISAGREE", "; ".join(problems[:3])
    return "agree", f"TOPO-PCIE-DIRECT: {statuses(vs)}"


def r_numa(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """GPU i on NUMA node n as the fact says ('GPU0-3 NUMA 0', 'GPU0/1 NUMA 0', 'all GPUs ... NUMA 0', 'N/A')."""
    want: Dict[int, Optional[int]] = {}
    low = text
    for m in re.finditer(r"GPU(\d)(?:\s*[-/]\s*(?:GPU)?(\d))?[^;]*?(?:NUMA|Numa Node)(?: Affinity| ID)?:?\s*(\d+|N/A)",
                         low, re.I):
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        node = None if m.group(3).upper() == "N/A" else int(m.group(3))
        for i in range(a, b + 1):
            want.setdefault(i, node)
    if not want:
        m = re.search(r"(?:all|both)(?: \d+)? GPUs[^;]*?NUMA(?: Affinity)?:?\s*(\d+|N/A)", low, re.I)
        if m:
            node = None if m.group(1).upper() == "N/A" else int(m.group(1))
            want = {i: node for i in range(len(run.accs))}
    if not want:
        m = re.search(r"NUMA Affinity\s*(N/A|\d+)", low, re.I)
        if m:
            node = None if m.group(1).upper() == "N/A" else int(m.group(1))
            want = {i: node for i in range(len(run.accs))}
    if not want:
        return "unchecked", "no GPU-to-node statement"
    for i, node in want.items():
        if i >= len(run.accs):
            return "DISAGREE", f"GPU{i} not read"
        got = run.accs[i].get("numa_node")
        if got != node:
            return "DISAGREE", f"GPU{i} read on NUMA node {got}; the fact says {node}"
    binds = run.of("TOPO-NUMA-BIND")
    if any(v["status"] in ("PASS", "FAIL") for v in binds):
        return "DISAGREE", "TOPO-NUMA-BIND decided on texts that cannot bind"
    return "agree", f"NUMA nodes read as stated ({len(want)} GPUs); TOPO-NUMA-BIND: {statuses(binds)}"


def r_numa_node(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    node = int(text) if text.strip().isdigit() else None
    dev = str(entry.get("device") or "")
    m = BUS.search(dev)
    if not m:
        return "unchecked", "no device"
    acc = next((a for a in run.accs if a["bdf"] == norm_bdf(m.group(1))), None)
    if acc is None:
        return "agree" if "not a gpu" in dev.lower() else "DISAGREE", "not an accelerator"
    return ("agree", f"NUMA node {node}") if acc.get("numa_node") == node else \
        ("DISAGREE", f"NUMA node {acc.get('numa_node')} read; the fact says {node}")


def _direct(text: str, run: Run, want_fail: bool) -> Result:
    pairs = re.findall(r"([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s*\(([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\)", text, re.I)
    if not pairs:
        return "unchecked", "no device (root port) pairs"
    for dev, port in pairs:
        v = run.subject("TOPO-PCIE-DIRECT", norm_bdf(dev))
        if v is None:
            return "DISAGREE", f"no TOPO-PCIE-DIRECT verdict for {dev}"
        hops = ((v.get("evidence") or {}).get("path") or {}).get("hops") or []
        top = hops[-1]["bdf"] if hops else None
        if (v["status"] == "FAIL") != want_fail or top != norm_bdf(port):
            return "DISAGREE", f"{dev}: {v['status']} with root port {top}; the fact says {port}"
    return "agree", f"{len(pairs)} GPU(s) {'behind a switch' if want_fail else 'direct'} on the named root ports"


def r_direct(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    return _direct(text, run, want_fail=False)


def r_behind_switch(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    dev = BUS.search(text)
    if not dev:
        return "unchecked", "no device"
    v = run.subject("TOPO-PCIE-DIRECT", norm_bdf(dev.group(1)))
    if v is None or v["status"] != "FAIL":
        return "DISAGREE", f"{dev.group(1)}: {v['status'] if v else 'no verdict'}; the fact puts it behind a switch"
    ports = [norm_bdf(b) for b in BUS.findall(text)[1:]]
    hops = [h["bdf"] for h in ((v.get("evidence") or {}).get("path") or {}).get("hops") or []]
    missing = [p for p in ports if p not in hops]
    if missing:
        return "DISAGREE", f"the path read {hops} lacks {missing}"
    return "agree", f"TOPO-PCIE-DIRECT FAIL: {v['reason'][:100]}"


def r_no_switch(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    vs = run.of("TOPO-PCIE-DIRECT")
    if text.strip().lower().startswith("none"):
        return _all(vs, lambda v: v["status"] == "PASS", "PASS (no switch over the GPUs)", "TOPO-PCIE-DIRECT")
    return "unchecked", "not 'none'"


def r_depth(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    m = re.search(r"(\d+) bridges below its root port", text)
    vs = run.of("TOPO-PCIE-DIRECT")
    if not m:
        return "unchecked", "no depth"
    n = int(m.group(1))
    return _all(vs, lambda v: v["status"] == "FAIL" and v.get("measured") == n - 1 + 0 * n or
                (v["status"] == "FAIL" and len(((v.get("evidence") or {}).get("path") or {}).get("hops") or []) == n),
                f"FAIL with {n} bridges on the path", "TOPO-PCIE-DIRECT")


def r_root_ports(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    ports = {norm_bdf(b) for b in BUS.findall(text)}
    tops = set()
    for v in run.of("TOPO-PCIE-DIRECT"):
        hops = ((v.get("evidence") or {}).get("path") or {}).get("hops") or []
        if hops:
            tops.add(hops[-1]["bdf"])
    return ("agree", f"{len(tops)} root ports as listed") if tops == ports else \
        ("DISAGREE", f"root ports read {sorted(tops)}; the fact lists {sorted(ports)}")


def r_lnk(text: str, run: Run, entry: Dict[str, Any], which: str) -> Result:
    dev = BUS.search(str(entry.get("device") or ""))
    if not dev:
        return "unchecked", "no device"
    bdf = norm_bdf(dev.group(1))
    v = run.subject("TOPO-PCIE-LINK", bdf)
    if "not a gpu" in str(entry.get("device")).lower():
        funcs = [p for p in (run.report or {}).get("inventory", {}).get("pci") or [] if p.get("bdf") == bdf]
        if v is not None:
            return "DISAGREE", f"{bdf} judged as an accelerator"
        return ("agree", "not an accelerator: not judged, the function is in the inventory") if funcs else \
            ("DISAGREE", "the function was not read")
    if v is None:
        return "DISAGREE", f"no TOPO-PCIE-LINK verdict for {bdf}"
    m = re.search(r"speed ([0-9.]+)\s*gt/s[^,]*,\s*width x(\d+)", text, re.I)
    ev = v.get("evidence") or {}
    if which == "lnkcap":
        cap = ev.get("capability") or {}
        ok = m and cap.get("device_max_speed_gts") == float(m.group(1)) and cap.get("device_max_width") == int(m.group(2))
        return ("agree", f"LnkCap {m.group(1)} GT/s x{m.group(2)} read") if ok else \
            ("DISAGREE", f"capability read {cap.get('device_max_speed_gts')} GT/s x{cap.get('device_max_width')}")
    sample = (ev.get("samples") or [{}])[0]
    ok = m and sample.get("speed_gts") == float(m.group(1)) and sample.get("width") == int(m.group(2))
    if not ok:
        return "DISAGREE", f"LnkSta read {sample.get('speed_gts')} GT/s x{sample.get('width')}"
    if "downgraded" in text.lower() and v["status"] != "INCONCLUSIVE":
        return "DISAGREE", f"an idle downgraded reading judged {v['status']}"
    return "agree", f"LnkSta read; TOPO-PCIE-LINK {v['status']}"


def r_not_judged(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """NICs and storage named in the fact are not judged as accelerators."""
    judged = {str(v["subject"]) for v in run.verdicts}
    named = {norm_bdf(b) for b in BUS.findall(text)}
    wrong = sorted(named & judged)
    if wrong:
        return "DISAGREE", f"judged as accelerators: {wrong}"
    if not named:
        return "unchecked", "no PCI address named"
    return "agree", f"{len(named)} non-accelerator function(s) not judged"


def r_count_gpus(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    if GPU_HEADER.search(text):
        return r_gpus(text, run, entry)
    m = re.match(r"\s*(\d+)x \[([0-9a-f]{4}:[0-9a-f]{4})\]", text)
    if m:  # "2x [10de:2321] (H100 NVL) at 0000:e1:00.0 and 0000:c1:00.0, ..."
        want = {norm_bdf(b) for b in re.findall(r"\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b", text)}
        got = {a["bdf"] for a in run.accs if a.get("pci_id") == m.group(2)}
        if len(got) != int(m.group(1)) or (want and want != got):
            return "DISAGREE", f"{sorted(got)} read as {m.group(2)}; the fact says {text[:80]}"
        return "agree", f"{len(got)} × {m.group(2)} at {', '.join(sorted(got))}"
    n = int(text) if text.strip().isdigit() else None
    return ("agree", f"{len(run.accs)} GPUs read") if n == len(run.accs) else \
        ("DISAGREE", f"{len(run.accs)} GPUs read; the fact says {n}")


def r_xid_none(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """No Xid in the log: DEP-XID fails no GPU (and passes none whose driver never ran within the log)."""
    if not text.strip().lower().startswith("none"):
        return "unchecked", "the fact names Xid events"
    vs = run.of("DEP-XID")
    bad = [v for v in vs if v["status"] == "FAIL"]
    if bad:
        return "DISAGREE", f"DEP-XID fails {bad[0]['subject']}: {bad[0]['reason'][:100]}"
    if "driver had not loaded" in json.dumps(entry.get("facts", {})) and any(v["status"] == "PASS" for v in vs):
        return "DISAGREE", "DEP-XID passes on a log in which the driver never ran"
    return "agree", f"DEP-XID: {statuses(vs)}"


def r_aer_none(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """No AER line in the log; where the platform keeps AER from the OS (firmware-first), no PASS either."""
    if not text.strip().lower().startswith("no aer"):
        return "unchecked", "the fact names AER lines"
    vs = run.of("DEP-PCIE-ERRORS")
    if any(v["status"] == "FAIL" for v in vs):
        return "DISAGREE", "DEP-PCIE-ERRORS fails on a log without AER lines"
    if "firmware-first" in text and any(v["status"] == "PASS" for v in vs):
        return "DISAGREE", "DEP-PCIE-ERRORS passes although the platform keeps AER from the kernel"
    return "agree", f"DEP-PCIE-ERRORS: {statuses(vs)}"


def r_device_id(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    did = text.strip().lower().replace("0x", "")
    ids = {str(a.get("pci_id")) for a in run.accs}
    return ("agree", f"PCI ID 1002:{did}") if ids == {f"1002:{did}"} else ("DISAGREE", f"PCI IDs read {sorted(ids)}")


def r_pwrcap(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    return r_power_limit(text, run, entry)


def r_hops(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    m = re.match(r"\s*(\d+) for every pair", text)
    mesh = run.sub.get("mesh") or {}
    key = "hops" if entry.get("_fact") == "hops" else "weights"
    rows = mesh.get(key) or {}
    if not m or not rows:
        return ("unchecked", "no figure") if not m else ("DISAGREE", f"no {key} read")
    want = m.group(1)
    bad = [(g, c) for g, row in rows.items() for j, c in enumerate(row or []) if f"GPU{j}" != g and c != want]
    return ("agree", f"{key}: {want} for every pair") if not bad else ("DISAGREE", f"{key} {bad[0]}")


# ---- MLPerf Inference submissions (LoadGen logs, systems JSON, PTDaemon power logs) -------------------------

def _ml(run: Run, what: str = "runs") -> List[Dict[str, Any]]:
    return list(((run.sub.get("mlperf") or {}).get(what)) or [])


def _close(a: Any, b: float, rel: float = 2e-3) -> bool:
    return a is not None and abs(float(a) - b) <= rel * max(abs(b), 1e-12)


def _nums(text: str) -> List[float]:
    return [float(x) for x in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?(?:e-?\d+)?)", text.replace(",", ""))]


def r_ml_field(field: str, numeric: bool = True) -> Callable[..., Result]:
    """A run's figure as LoadGen printed it: the fact's first number (or its text) against what was read."""
    def rule(text: str, run: Run, entry: Dict[str, Any]) -> Result:
        runs = _ml(run)
        if not runs and (_ml(run, "power") or _ml(run, "systems")):
            return "unchecked", "the file holds no LoadGen run: the fact is the submission's, not this file's"
        if not runs:
            return "DISAGREE", "no MLPerf run read"
        got = runs[0].get(field)
        if numeric:
            nums = _nums(text)
            if not nums:
                return "unchecked", "the fact gives no number"
            if not _close(got, nums[0]):
                return "DISAGREE", f"{field} read {got!r}; the fact says {nums[0]:g}"
            return "agree", f"{field} {got:g}"
        want = text.strip().strip("'").split(" (")[0].strip()
        if str(got or "").strip() != want:
            return "DISAGREE", f"{field} read {got!r}; the fact says {want!r}"
        return "agree", f"{field} {got!r}"
    return rule


def r_ml_pcts(key: str) -> Callable[..., Result]:
    def rule(text: str, run: Run, entry: Dict[str, Any]) -> Result:
        runs = _ml(run)
        nums = _nums(text)
        if not runs or len(nums) < 2:
            return "DISAGREE", "no MLPerf run read" if not runs else "the fact gives no P50 / P99"
        got = runs[0].get(key) or {}
        if got.get("50.00") != int(nums[0]) or got.get("99.00") != int(nums[1]):
            return "DISAGREE", f"{key} P50/P99 read {got.get('50.00')} / {got.get('99.00')}; the fact says {text}"
        if key == "latency" and str(runs[0].get("scenario")).lower() == "server":
            sla = run.of("SVC-SLA")
            if not sla or sla[0].get("measured") is None or not _close(sla[0]["measured"], nums[1] / 1e6):
                return "DISAGREE", f"SVC-SLA does not measure the P99 {nums[1] / 1e6:g} ms: {sla[:1]}"
        return "agree", f"{key} P50 {int(nums[0])} ns, P99 {int(nums[1])} ns"
    return rule


def r_ml_result(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    runs = _ml(run)
    if not runs:
        return "DISAGREE", "no MLPerf run read"
    want = text.strip().split()[0].upper()
    r = runs[0]
    if r.get("result") != want:
        return "DISAGREE", f"result read {r.get('result')!r}; the fact says {want}"
    if str(r.get("scenario")).lower() == "server":
        sla = run.of("SVC-SLA")
        if not sla or f"LoadGen: {want}" not in sla[0]["reason"]:
            return "DISAGREE", f"SVC-SLA does not name LoadGen's {want}: {sla[0]['reason'][:120] if sla else 'none'}"
        if "overlatency" in (sla[0]["reason"] + json.dumps(sla[0].get("evidence", {}).get("decisions", ""))) and \
                sla[0]["status"] == "FAIL" and "overlatency" in sla[0]["reason"].split(" — ")[0]:
            return "DISAGREE", "SVC-SLA fails on the over-latency count"
    return "agree", f"LoadGen {want}" + (f"; SVC-SLA {run.of('SVC-SLA')[0]['status']}" if run.of("SVC-SLA") else "")


def r_ml_power_window(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    runs = _ml(run)
    if not runs:
        return "DISAGREE", "no MLPerf run read"
    m = re.match(r"\s*(\d\d-\d\d-\d{4} [\d:.]+)\s*\.\.\s*(?:\d\d-\d\d-\d{4} )?([\d:.]+)", text)
    if m is None:
        return "unchecked", "no window in the fact"
    r = runs[0]
    if r.get("power_begin") != m.group(1) or not str(r.get("power_end", "")).endswith(m.group(2)):
        return "DISAGREE", f"power window read {r.get('power_begin')} .. {r.get('power_end')}; the fact says {text}"
    return "agree", f"power window {r['power_begin']} .. {r['power_end']}"


def r_ml_zero_flags(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    runs = _ml(run)
    if not runs:
        return "DISAGREE", "no MLPerf run read"
    n = int(_nums(text)[0]) if _nums(text) else 0
    got = (runs[0].get("errors") or 0) + (runs[0].get("warnings") or 0)
    return ("agree", f"{got} error/warning lines") if got == n else (
        "DISAGREE", f"{got} error/warning lines read; the fact says {n}")


def r_ml_odd(field: str) -> Callable[..., Result]:
    """A LoadGen figure that reads oddly: kept, named as not used, and no verdict fails on it."""
    def rule(text: str, run: Run, entry: Dict[str, Any]) -> Result:
        runs = _ml(run)
        if not runs:
            return "DISAGREE", "no MLPerf run read"
        odd = " ".join(runs[0].get("odd") or [])
        if field not in odd:
            return "DISAGREE", f"{field} is not named as odd: {odd[:120]!r}"
        bad = [v for v in run.verdicts if v["status"] == "FAIL" and field in v["reason"].split(" — ")[0]]
        if bad:
            return "DISAGREE", f"{bad[0]['requirement']} fails on {field}"
        return "agree", f"{field} named as not used"
    return rule


def r_ml_oddities(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    for field in ("result_overlatency_query_count", "result_token_throughput"):
        if field in text:
            st, why = r_ml_odd(field)(text, run, entry)
            if st != "agree":
                return st, why
    return "agree", "the odd LoadGen figures are named and not used"


def r_ml_limits(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    runs = _ml(run)
    if not runs:
        return "DISAGREE", "no MLPerf run read"
    m = re.search(r"ttft[^\d]*(\d+)[^\d]+tpot[^\d]*(\d+)", text.replace("ns)", ""), re.I)
    if m is None:
        return "unchecked", "no limits in the fact"
    r = runs[0]
    if r.get("ttft_limit_ns") != float(m.group(1)) or r.get("tpot_limit_ns") != float(m.group(2)):
        return "DISAGREE", f"limits read {r.get('ttft_limit_ns')} / {r.get('tpot_limit_ns')}; the fact says {text}"
    return "agree", f"TTFT limit {m.group(1)} ns, TPOT limit {m.group(2)} ns"


def r_ml_system(field: str) -> Callable[..., Result]:
    def rule(text: str, run: Run, entry: Dict[str, Any]) -> Result:
        systems = _ml(run, "systems")
        if not systems:
            return "DISAGREE", "no MLPerf system description read"
        got = systems[0].get(field)
        if field == "accelerators_per_node":
            want = int(_nums(text)[0])
            if systems[0].get("accelerators_per_node_n") != want:
                return "DISAGREE", f"{systems[0].get('accelerators_per_node_n')} accelerators read; the fact says {want}"
            if ("string" in text.lower()) != bool(systems[0].get("accelerators_per_node_is_text")):
                return "DISAGREE", "whether the count is a JSON string is not recorded right"
            return "agree", f"{want} accelerators per node (declared)"
        want = text.strip().strip("'").strip()
        topo = systems[0].get("accelerator_interconnect_topology")
        if field == "accelerator_interconnect" and topo and want.lower() == f"{got} / {topo}".lower():
            return "agree", f"{field} {got!r}, topology {topo!r}"
        if str(got or "").strip().lower() != want.lower() and not str(got or "").lower().startswith(want.lower()):
            return "DISAGREE", f"{field} read {got!r}; the fact says {want!r}"
        return "agree", f"{field} {got!r}"
    return rule


def number(x: float) -> str:
    from pytest_sits.verdict import number as fmt

    return fmt(x)


def _power(run: Run) -> Optional[Dict[str, Any]]:
    logs = _ml(run, "power")
    return logs[0] if logs else None


def r_ml_watts(which: str) -> Callable[..., Result]:
    def rule(text: str, run: Run, entry: Dict[str, Any]) -> Result:
        p = _power(run)
        if p is None:
            return "DISAGREE", "no power log read"
        st = p.get(which)
        if not st:
            return "unchecked", "the run's window is in its detail log, not in this file (audited alone)"
        mean, mx, mn = _nums(text)[:3]
        n = re.search(r"\((\d+) samples\)", text)
        if not (_close(st["mean_w"], mean, 1e-4) and _close(st["max_w"], mx, 1e-6) and _close(st["min_w"], mn, 1e-6)):
            return "DISAGREE", f"{which}: mean {st['mean_w']}, max {st['max_w']}, min {st['min_w']}; the fact says {text}"
        if n and st["n"] != int(n.group(1)):
            return "DISAGREE", f"{which}: {st['n']} samples; the fact says {n.group(1)}"
        pw = run.of("PLP-POWER")
        if which == "whole" and not p.get("window") and (not pw or f"mean {st['mean_w']} W" not in pw[0]["reason"]):
            return "DISAGREE", f"PLP-POWER does not report the log's mean: {pw[0]['reason'][:120] if pw else 'none'}"
        if which == "window" and (not pw or f"{number(st['mean_w'])} W" not in pw[0]["reason"]):
            return "DISAGREE", f"PLP-POWER does not judge the window's mean: {pw[0]['reason'][:120] if pw else 'none'}"
        return "agree", f"{which}: mean {st['mean_w']} W, max {st['max_w']} W, min {st['min_w']} W ({st['n']} samples)"
    return rule


def r_ml_samples(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    p = _power(run)
    if p is None:
        return "DISAGREE", "no power log read"
    want = int(_nums(text)[0])
    return ("agree", f"{want} samples") if p["whole"]["n"] == want else (
        "DISAGREE", f"{p['whole']['n']} samples read; the fact says {want}")


def r_ml_span(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    p = _power(run)
    if p is None:
        return "DISAGREE", "no power log read"
    m = re.match(r"\s*(\d\d-\d\d-\d{4} [\d:.]+)\s*\.\.\s*([\d:.]+)", text)
    if m is None or p["start"] != m.group(1) or not p["end"].endswith(m.group(2)):
        return "DISAGREE", f"span read {p['start']} .. {p['end']}; the fact says {text}"
    return "agree", f"{p['start']} .. {p['end']}"


def r_ml_mark(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    p = _power(run)
    return ("agree", f"mark {p['mark']}") if p and p.get("mark") == text.strip() else (
        "DISAGREE", f"mark read {p.get('mark') if p else None!r}; the fact says {text!r}")


def r_ml_channels(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    p = _power(run)
    if p is None:
        return "DISAGREE", "no power log read"
    m = re.search(r"max ([\d.]+) / ([\d.]+) / ([\d.]+) W", text)
    if m is None:
        return "unchecked", "no channel maxima in the fact"
    got = [p["channels_max_w"].get(c) for c in ("Ch1", "Ch2", "Ch3")]
    if [float(x) for x in m.groups()] != got:
        return "DISAGREE", f"channel maxima read {got}; the fact says {text}"
    return "agree", f"channel maxima {got} W"


def r_nvb(test: str) -> Callable[..., Result]:
    """An nvbandwidth test case's matrix: its count of figures, their range and its SUM, as the fact states them."""
    def rule(text: str, run: Run, entry: Dict[str, Any]) -> Result:
        runs = run.sub.get("nvbandwidth") or []
        t = (runs[0]["tests"].get(test) if runs else None) or None
        if t is None:
            return "DISAGREE", f"no {test} matrix read"
        vals = [v for row in t["matrix"].values() for v in row.values() if v is not None]
        m = re.search(r"(\d+) pairs ([\d.]+)-([\d.]+)", text)
        r = re.match(r"\s*([\d.]+)-([\d.]+)", text)
        one = re.match(r"\s*([\d.]+) GB/s", text)
        if m and (len(vals) != int(m.group(1)) or min(vals) != float(m.group(2)) or max(vals) != float(m.group(3))):
            return "DISAGREE", f"{len(vals)} figures {min(vals)}-{max(vals)} read; the fact says {text}"
        if r and not m and (min(vals) != float(r.group(1)) or max(vals) != float(r.group(2))):
            return "DISAGREE", f"figures {min(vals)}-{max(vals)} read; the fact says {text}"
        if one and not m and not r and vals != [float(one.group(1))]:
            return "DISAGREE", f"figures {vals} read; the fact says {text}"
        sm = re.search(r"SUM ([\d.]+)", text)
        if sm and t["sum"] != float(sm.group(1)):
            return "DISAGREE", f"SUM {t['sum']} read; the fact says {sm.group(1)}"
        if "SUM not shown" in text and t["sum"] is not None:
            return "DISAGREE", f"SUM {t['sum']} read; the fact says it is not shown"
        if not (m or r or one or sm):
            return "unchecked", "no figure in the fact"
        return "agree", f"{test}: {len(vals)} figures {min(vals)}-{max(vals)} GB/s, SUM {t['sum']}"
    return rule


def _dcgmi(run: Run) -> Optional[Dict[str, Any]]:
    runs = run.sub.get("dcgmi") or []
    return runs[0] if runs else None


def r_dcgm_version(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    d = _dcgmi(run)
    return ("agree", f"DCGM {d['version']}") if d and d.get("version") == text.strip() else (
        "DISAGREE", f"DCGM version read {d.get('version') if d else None!r}; the fact says {text!r}")


def r_dcgm_ids(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    want = sorted(f"10de:{x.strip().lower()}" for x in text.split(","))
    got = sorted(str(a.get("pci_id")) for a in run.accs)
    return ("agree", f"{len(got)} × {got[0]}") if got == want else ("DISAGREE", f"PCI IDs read {got}; the fact says {want}")


def r_dcgm_gpu_fail(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """'GPU 3 FAIL ...' / 'Fail - GPU: 0 ... GPU 0 FAIL': that GPU fails a health requirement, no other GPU does."""
    m = re.search(r"GPU:? (\d+)\)?\s*(?:FAIL|'?\s*<--\s*GPU \d+ FAIL)", text) or re.search(r"GPU (\d+) FAIL", text)
    if m is None:
        return "unchecked", "no failing GPU in the fact"
    key = f"GPU{m.group(1)}"
    health = [v for v in run.verdicts if v["requirement"] in ("DEP-ECC", "DEP-ROWREMAP", "DEP-PERSIST")]
    bad = sorted({v["subject"] for v in health if v["status"] == "FAIL"})
    if bad != [key]:
        return "DISAGREE", f"health FAILs on {bad}; the fact says {key}"
    return "agree", f"{key} FAILs ({', '.join(sorted({v['requirement'] for v in health if v['status'] == 'FAIL'}))})"


def r_dcgm_not_pass(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    """Tests DCGM skipped (or a memory test that passed) never make DEP-ECC pass."""
    vs = run.of("DEP-ECC")
    if any(v["status"] == "PASS" for v in vs):
        return "DISAGREE", "DEP-ECC passes on DCGM's skipped or passed memory test"
    return "agree", f"DEP-ECC: {statuses(vs)} (not a pass)"


def r_dcgm_deployment(text: str, run: Run, entry: Dict[str, Any]) -> Result:
    if not text.strip().endswith("Pass") and "Pass (no gpu_ids)" not in text:
        return "unchecked", "the fact names other results"
    vs = run.of("DEP-PERSIST") + run.of("DEP-ROWREMAP")
    if not vs or any(v["status"] != "PASS" for v in vs):
        return "DISAGREE", f"DEP-PERSIST / DEP-ROWREMAP: {statuses(vs)}; DCGM's deployment checks passed"
    return "agree", f"DEP-PERSIST / DEP-ROWREMAP: {statuses(vs)}"


DCGMI_RULES: Dict[str, Callable[..., Result]] = {
    "dcgm_version": r_dcgm_version, "gpu_device_ids": r_dcgm_ids, "gpu": r_dcgm_gpu_fail, "gpu_memory": r_dcgm_gpu_fail,
    "integration_hardware_stress": r_dcgm_not_pass, "hardware": r_dcgm_not_pass, "deployment": r_dcgm_deployment,
}


NVB_RULES: Dict[str, Callable[..., Result]] = {
    name: r_nvb(name) for name in ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
                                   "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
                                   "host_to_device_bidirectional_memcpy_ce", "device_to_host_bidirectional_memcpy_ce")}


MLPERF_RULES: Dict[str, Callable[..., Result]] = {
    "scenario": r_ml_field("scenario", numeric=False), "sut_name": r_ml_field("sut_name", numeric=False),
    "result": r_ml_result, "result_validity": r_ml_result,
    "samples_per_second": r_ml_field("samples_per_s"), "completed_samples_per_second": r_ml_field("samples_per_s"),
    "result_completed_samples_per_sec": r_ml_field("samples_per_s"),
    "tokens_per_second": r_ml_field("tokens_per_s"), "completed_tokens_per_second": r_ml_field("tokens_per_s"),
    "scheduled_samples_per_second": r_ml_field("scheduled_samples_per_s"), "target_qps": r_ml_field("target_qps"),
    "samples_per_query": r_ml_field("samples_per_query"), "min_duration_ms": r_ml_field("min_duration_ms"),
    "min_query_count": r_ml_field("min_query_count"),
    "performance_sample_count": r_ml_field("performance_sample_count"),
    "result_query_count": r_ml_field("query_count"), "generated_query_count": r_ml_field("generated_query_count"),
    "generated_samples_per_query": r_ml_field("generated_samples_per_query"),
    "latency_ns_p50_p99": r_ml_pcts("latency"), "ttft_ns_p50_p99": r_ml_pcts("ttft"),
    "tpot_ns_p50_p99": r_ml_pcts("tpot"), "loadgen_version": r_ml_field("loadgen_version", numeric=False),
    "test_datetime": r_ml_field("test_datetime", numeric=False), "power_begin_end": r_ml_power_window,
    "power_begin": lambda t, r, e: r_ml_power_window(t + " .. " + str((_ml(r) or [{}])[0].get("power_end", "")), r, e),
    "power_end": lambda t, r, e: r_ml_field("power_end", numeric=False)(t, r, e),
    "is_warning_or_error_lines": r_ml_zero_flags,
    "result_overlatency_query_count": r_ml_odd("result_overlatency_query_count"),
    "result_token_throughput": r_ml_odd("result_token_throughput"), "oddities": r_ml_oddities,
    "limits": r_ml_limits,
    "system_name": r_ml_system("system_name"), "accelerator_model_name": r_ml_system("accelerator_model_name"),
    "accelerators_per_node": r_ml_system("accelerators_per_node"), "cooling": r_ml_system("cooling"),
    "accelerator_host_interconnect": r_ml_system("accelerator_host_interconnect"),
    "accelerator_interconnect": r_ml_system("accelerator_interconnect"), "status": r_ml_system("status"),
    "hw_notes": r_ml_system("hw_notes"),
    "watts_whole_file": r_ml_watts("whole"), "watts_in_window": r_ml_watts("window"), "samples": r_ml_samples,
    "file_span": r_ml_span, "mark": r_ml_mark, "channels": r_ml_channels,
}


RULES: Dict[str, Callable[..., Result]] = {
    "persistence_mode": r_persistence, "ecc_uncorrectable": r_ecc_uncorrectable, "ecc_volatile": r_ecc_volatile,
    "ecc_aggregate": r_ecc_aggregate, "ecc": r_ecc, "ecc_mode": r_ecc_mode, "ecc_correctable_note": r_ecc_correctable_note,
    "retired_pages": lambda t, r, e: r_pages(t, r, e),
    "remapped_rows": lambda t, r, e: r_pending(t, r, e, "remapped_rows"),
    "active_clock_event_reasons": r_clock_reasons, "active_clocks_throttle_reasons": r_clock_reasons,
    "active_clock_throttle_reasons": r_clock_reasons, "clock_reasons": r_clock_reasons, "active": r_clock_reasons,
    "power_limit": r_power_limit, "pcie": r_pcie, "all_gpus": r_gpus, "gpu": r_gpus,
    "gpu_pairs": r_gpu_pairs, "gpu_nic": r_gpu_nic, "numa": r_numa, "numa_node": r_numa_node,
    "link_type": r_link_type, "weight": r_hops, "hops": r_hops,
    "gpus_direct_on_root_port": r_direct, "gpu_behind_switch": r_behind_switch, "switches_over_gpus": r_no_switch,
    "depth": r_depth, "root_ports": r_root_ports, "lnkcap": lambda t, r, e: r_lnk(t, r, e, "lnkcap"),
    "lnksta": lambda t, r, e: r_lnk(t, r, e, "lnksta"), "nics": r_not_judged, "behind_bridges": r_not_judged,
    "gpus": r_count_gpus, "device_id": r_device_id, "pwrcap": r_pwrcap, "xid": r_xid_none, "aer": r_aer_none,
}
TOP_RULES = {"gpu_model": r_gpu_model, "gpu_count": r_gpu_count, "driver": r_driver}


# ---- running ------------------------------------------------------------------------------------------------

def _sits(*args: str, cwd: Path) -> Tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "pytest_sits.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=str(cwd))
    return proc.returncode, proc.stdout + proc.stderr


def audit(path: Path, out: Path) -> Run:
    """``sits audit`` as a user runs it: where it is refused because no bundled profile is for the model the
    texts show, the fix it names is followed (``sits profile init``, then the audit with that profile)."""
    try:
        rc, text = _sits("audit", str(path), f"--report-dir={out}", cwd=out.parent)
        if rc == 4 and "sits profile init --from=" in text:
            prof = out.parent / (out.name + "-profile.yaml")
            irc, itext = _sits("profile", "init", f"--from={path}", f"--out={prof}", cwd=out.parent)
            if irc != 0:
                return Run(None, irc, text + "\n`sits profile init` as the fix says: " + itext)
            rc, text = _sits("audit", str(path), f"--profile={prof}", f"--report-dir={out}", cwd=out.parent)
            text = "(after `sits profile init`, as the refusal says) " + text
    except subprocess.TimeoutExpired:
        return Run(None, -1, "timed out after 300 s")
    report = None
    rp = out / "sits-report.json"
    if rp.is_file():
        report = json.loads(rp.read_text(encoding="utf-8"))
    return Run(report, rc, text)


def judge(entry: Dict[str, Any], run: Run) -> List[Tuple[str, str, str]]:
    rows: List[Tuple[str, str, str]] = []
    for key in ("gpu_model", "gpu_count", "driver"):
        if key in entry:
            try:
                st, why = TOP_RULES[key](str(entry[key]), run, entry)
            except Exception as exc:  # noqa: BLE001 - a rule that breaks is a disagreement, shown
                st, why = "DISAGREE", f"rule failed: {type(exc).__name__}: {exc}"
            rows.append((key, st, why))
    facts = entry.get("facts") or {}
    name = str(entry.get("file", ""))
    table = (MLPERF_RULES if name.startswith("mlperf/") else dict(RULES, **NVB_RULES) if "nvbandwidth" in name
             else dict(RULES, **DCGMI_RULES) if "dcgmi" in name else RULES)
    for key, value in (facts.items() if isinstance(facts, dict) else []):
        rule = table.get(key)
        if rule is None:
            rows.append((key, "unchecked", "no rule reads this fact"))
            continue
        try:
            st, why = rule(value if isinstance(value, list) else str(value), run, dict(entry, _fact=key))
        except Exception as exc:  # noqa: BLE001
            st, why = "DISAGREE", f"rule failed: {type(exc).__name__}: {exc}"
        rows.append((key, st, why))
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    import yaml

    from pytest_sits.files import read_file

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="a folder with MANIFEST.yaml and the files it lists")
    ap.add_argument("--only", default="", help="only the files whose name starts with this")
    ap.add_argument("-v", "--verbose", action="store_true", help="show every fact, not only disagreements")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    base = Path(args.dir)
    manifest = yaml.load(read_file(base / "MANIFEST.yaml", 4 << 20).decode("utf-8"), Loader=yaml.BaseLoader)
    entries = [e for e in manifest.get("files") or [] if str(e.get("file", "")).startswith(args.only)]
    with tempfile.TemporaryDirectory(prefix="sits-realdata-") as tmp:
        def one(i_e: Tuple[int, Dict[str, Any]]) -> Tuple[Dict[str, Any], Run]:
            i, e = i_e
            path = (base / e["file"]).resolve()
            if path.name.endswith("-spl.txt"):  # a power log is read with its run's detail log, as a run folder has it
                detail = path.with_name(path.name[: -len("spl.txt")] + "mlperf_log_detail.txt")
                if detail.is_file():
                    folder = Path(tmp) / f"run{i}"
                    folder.mkdir()
                    for f in (path, detail):
                        (folder / f.name).write_bytes(f.read_bytes())
                    path = folder
            return e, audit(path, Path(tmp) / f"r{i}")
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(one, enumerate(entries)))
    agree_files = 0
    n_agree = n_dis = n_unchecked = tracebacks = 0
    for e, run in results:
        rows = judge(e, run) if run.report is not None else []
        tb = "Traceback (most recent call last)" in run.out or "INTERNALERROR" in run.out
        tracebacks += tb
        dis = [r for r in rows if r[1] == "DISAGREE"]
        n_agree += sum(1 for r in rows if r[1] == "agree")
        n_dis += len(dis)
        n_unchecked += sum(1 for r in rows if r[1] == "unchecked")
        ok = run.report is not None and not tb and not dis
        agree_files += ok
        summary = (run.report or {}).get("summary") or {}
        print(f"[{'agree' if ok else 'DISAGREE'}] {e['file']}: exit {run.rc}, {summary.get('result', 'no report')}"
              f" ({statuses(run.verdicts)})" + (" with the profile `sits profile init` wrote"
                                                  if run.out.startswith("(after `sits profile init`") else ""))
        if run.report is None or tb:
            print("    " + "\n    ".join(run.out.strip().splitlines()[-8:]))
        for key, st, why in rows:
            if args.verbose or st == "DISAGREE":
                print(f"    {st:9} {key:28} {why}")
    print(f"total: {agree_files}/{len(results)} files agree with their MANIFEST facts; facts: {n_agree} agree, "
          f"{n_dis} disagree, {n_unchecked} not checked (no rule); {tracebacks} traceback(s)")
    return 0 if agree_files == len(results) and not tracebacks else 1


if __name__ == "__main__":
    sys.exit(main())
