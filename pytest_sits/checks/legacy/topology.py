"""Earlier versions of the topology checks (:mod:`pytest_sits.checks.topology`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ...verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict
from ...probes.pcie import gen_of
from .. import Finding, check
from ..topology import _hop_text
from ...probes.topology import switch_ports


@check("LINK-NVLINK-MESH", version=1, legacy=True)
def check_peer_mesh_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "accelerators") -> Verdict:
    """Version 1 (reports of pytest-sits 0.1), kept so that they replay.

    Every accelerator pair has an NVLink/XGMI path with P2P (full mesh, or through NVSwitch).

    evidence: ``mesh`` (P2P matrix, devices and links, source), ``expected_devices`` (count matching the profile)."""
    mesh, n_expected_devices = evidence["mesh"], int(evidence.get("expected_devices", 0))
    required = bool(thresholds.get("required", False))
    devs = mesh.get("devices", [])
    ev = {"mesh": mesh, "required": required}
    threshold = "every pair P2P over NVLink/XGMI" + ("" if required else " (not required by the profile)")
    if n_expected_devices < 2 and len(devs) < 2:
        return Verdict("LINK-NVLINK-MESH", SKIP, f"fewer than 2 accelerators detected ({len(devs)})",
                       subject="accelerators", evidence=ev)
    if mesh.get("source") is None or mesh.get("p2p_nvlink") is None:
        status = INCONCLUSIVE if required else SKIP
        return Verdict("LINK-NVLINK-MESH", status, f"no peer-link evidence: {mesh.get('reason') or 'management library unavailable'}",
                       threshold=threshold, subject="accelerators", evidence=ev)
    matrix = mesh["p2p_nvlink"]
    names = mesh.get("index_to_bdf", {})
    n = len(matrix)
    missing = [(i, j) for i in range(n) for j in range(i + 1, n) if not (matrix[i][j] and matrix[j][i])]
    pairs = n * (n - 1) // 2
    measured = f"{pairs - len(missing)}/{pairs} pairs"
    if not missing:
        links = ", ".join(f"{d['bdf']}: {d['links_active']} links" for d in devs)
        return Verdict("LINK-NVLINK-MESH", PASS, f"all {pairs} pairs of {n} accelerators have NVLink P2P ({links})",
                       measured=measured, threshold=threshold, subject="accelerators", evidence=ev)
    text = ", ".join(f"{names.get(str(i), i)}<->{names.get(str(j), j)}" for i, j in missing[:12])
    more = f" and {len(missing) - 12} more" if len(missing) > 12 else ""
    if not required:
        return Verdict("LINK-NVLINK-MESH", WARN, f"{len(missing)} pair(s) without NVLink P2P: {text}{more} "
                       "(the profile does not require a mesh)", measured=measured, threshold=threshold,
                       subject="accelerators", evidence=ev)
    return Verdict("LINK-NVLINK-MESH", FAIL, f"{len(missing)} of {pairs} pairs lack an NVLink P2P path: {text}{more}",
                   measured=measured, threshold=threshold, subject="accelerators", evidence=ev,
                   remediation="check `nvidia-smi nvlink --status` and `nvidia-smi topo -m`; inactive links point to "
                               "a baseboard, NVSwitch or fabric-manager fault (is nvidia-fabricmanager running?)")


def _fmt_link(speed: Optional[float], width: Optional[int]) -> str:
    g = gen_of(speed)
    return f"{'Gen' + str(g) if g else (str(speed) + ' GT/s' if speed else '?')} x{width if width else '?'}"


@check("TOPO-PCIE-LINK", version=1, legacy=True)
def check_pcie_link_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1, kept so that its reports replay: the link under load reaches the achievable speed and width (min
    of device and slot maximum); an idle reading below it never FAILs (speed nor width)."""
    f = Finding("TOPO-PCIE-LINK", subject)
    cap = evidence["capability"]
    samples = evidence["samples"]
    device = evidence["device"]
    want_s, want_w = cap["achievable_speed_gts"], cap["achievable_width"]
    threshold = f">= {_fmt_link(want_s, want_w)} (device max {_fmt_link(cap['device_max_speed_gts'], cap['device_max_width'])}, " \
                f"slot max {_fmt_link(cap['slot_max_speed_gts'], cap['slot_max_width'])})"
    method = evidence.get("method_text") or (
        "max of the readings of current_link_speed/width taken while a load ran on the device"
        if any(s["under_load"] for s in samples) else "readings taken without load")
    f.set(threshold=threshold, subject=device, evidence=evidence, method=method)
    if want_s is None or want_w is None:
        return f(INCONCLUSIVE, "the device does not report its maximum link speed/width")
    valid = [s for s in samples if s["speed_gts"] and s["width"]]
    if not valid:
        why = "; ".join(str(e.get("error")) for e in evidence.get("errors") or [])
        return f(INCONCLUSIVE, "no readable link sample" + (f" ({why})" if why else ""))
    loaded = [s for s in valid if s["under_load"]]
    pool = loaded if loaded else valid
    # Text evidence may declare that a load ran (the submitter's word): the verdict says it was declared.
    under = "under declared load" if (evidence.get("load") or {}).get("kind") == "declared" else "under load"
    best_s = max(s["speed_gts"] for s in pool)
    best_w = max(s["width"] for s in pool)
    measured = _fmt_link(best_s, best_w)
    f.set(measured=measured)
    ok = best_s >= want_s and best_w >= want_w
    if ok:
        how = f"{under} ({len(loaded)} samples)" if loaded else "already at the achievable link while idle"
        return f(PASS, f"link at {measured} {how}")
    if not loaded and thresholds["require_load"]:
        return f(INCONCLUSIVE, f"link read {measured} while idle only ({evidence.get('load', {}).get('reason') or 'no load'}); "
                 "accelerators lower their link (down to 2.5 GT/s) when idle, so an idle reading cannot fail it")
    short = []
    if best_s < want_s:
        short.append(f"speed {best_s} GT/s < {want_s} GT/s")
    if best_w < want_w:
        short.append(f"width x{best_w} < x{want_w}")
    return f(FAIL, f"link trained at {measured} {under if loaded else 'idle'}, below the achievable "
             f"{_fmt_link(want_s, want_w)}: {', '.join(short)}",
             remediation="reseat the card and check its riser/retimer and cable; check the BIOS slot speed and "
                         f"bifurcation settings; compare LnkCap and LnkSta in `lspci -vv -s {device}`")


@check("TOPO-PCIE-DIRECT", version=1, legacy=True)
def check_pcie_direct_v1(evidence: Dict[str, Any], thresholds: Dict[str, Any], subject: str = "") -> Verdict:
    """Version 1 (reports before an endpoint with no port above it, a virtual machine's view, was INCONCLUSIVE),
    kept so that they replay.

    No switch port (upstream/downstream, or a bridge inferred as one) between device and root port.

    evidence: ``path``, the device's PCIe path (``device``, ``hops`` with port types, ``method``)."""
    f = Finding("TOPO-PCIE-DIRECT", subject)
    path = evidence["path"]
    limit = int(thresholds["max_switch_ports"])
    chain = " <- ".join([path["device"]] + [_hop_text(h) for h in path["hops"]]) or path["device"]
    found = switch_ports(path)
    method = path.get("method_text") or (
        "port types read from the PCI Express capability of each hop (exact)" if path["method"] == "exact"
        else "port types inferred from class codes and bridge count: some config space was unreadable "
             "(run as root for an exact reading)")
    ev = {"path": path}
    f.set(threshold=f"<= {limit} switch ports", unit="ports", subject=path["device"], evidence=ev, method=method)
    if len(found) > limit:
        return f(FAIL, f"{len(found)} switch port(s) between {path['device']} and its root port: {chain}",
                 measured=len(found),
                 remediation="move the accelerator to a slot wired directly to a CPU root port (see the board's block "
                             "diagram), or, where the switch is part of the baseboard by design, waive "
                             f"{f.requirement} in the profile with the reason")
    unknown = [h for h in path["hops"] if h["port_type"] == "unknown"]
    if unknown:
        return f(INCONCLUSIVE, f"cannot tell the type of {', '.join(h['bdf'] for h in unknown)} on the path {chain}")
    top = path["hops"][-1]["port_type"] if path["hops"] else "root bus"
    return f(PASS, f"direct attach: {chain}" + (f" ({path['note']})" if path.get("note") else ""), measured=len(found),
             evidence=dict(ev, top=top))
