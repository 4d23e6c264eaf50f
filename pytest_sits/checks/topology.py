"""TOPO-PCIE-DIRECT, TOPO-PCIE-LINK, TOPO-NUMA-BIND, LINK-NVLINK-MESH."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..probes.pcie import gen_of
from ..probes.topology import switch_ports
from . import Finding, check
from ..verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict


def _hop_text(h: Dict[str, Any]) -> str:
    return f"{h['bdf']} ({h['port_type']})"


@check("TOPO-PCIE-DIRECT", version=2)
def check_pcie_direct(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """No switch port (upstream/downstream, or a bridge inferred as one) between device and root port.

    evidence: ``path``, the device's PCIe path (``device``, ``hops`` with port types, ``method``)."""
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
    if not path["hops"] and "device_port_type" in path and path["device_port_type"] != "rc_integrated_endpoint":
        # Seen on an H200 in a virtual machine: a PCI Express endpoint on root bus 00 with no port above it.  On
        # physical hardware an endpoint always hangs off a root port or a switch's downstream port; only a
        # root-complex integrated endpoint sits on a root bus.  The path to the CPU is the hypervisor's to know.
        what = (f"a PCI Express {path['device_port_type'].replace('_', ' ')}" if path["device_port_type"]
                else "a device whose PCI Express capability could not be read")
        return f(INCONCLUSIVE, f"{path['device']} is {what} on a root bus with no port above it: a virtual "
                               "machine's PCI tree, which hides the physical path to the CPU's root complex (a "
                               "switch on it cannot be seen); only a root-complex integrated endpoint sits on a "
                               "root bus", measured=None,
                 remediation="run the suite on the host (bare metal), or submit the host's `lspci -tv` / "
                             "`lspci -PP` (sits audit)")
    top = path["hops"][-1]["port_type"] if path["hops"] else "root bus"
    return f(PASS, f"direct attach: {chain}" + (f" ({path['note']})" if path.get("note") else ""), measured=len(found),
             evidence=dict(ev, top=top))


def _fmt_link(speed: Optional[float], width: Optional[int]) -> str:
    g = gen_of(speed)
    return f"{'Gen' + str(g) if g else (str(speed) + ' GT/s' if speed else '?')} x{width if width else '?'}"


@check("TOPO-PCIE-LINK", version=2)
def check_pcie_link(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The link under load reaches the achievable speed and width (min of device and slot maximum).  An idle
    reading decides the width (an accelerator lowers its link speed when idle, not its width): a width below the
    achievable one FAILs idle too; a speed below it idle is INCONCLUSIVE (version 1: an idle reading never
    FAILed)."""
    cap = evidence["capability"]
    samples = evidence["samples"]
    device = evidence["device"]
    want_s, want_w = cap["achievable_speed_gts"], cap["achievable_width"]
    slot = ("no port above the device to read a slot maximum from"
            if cap.get("slot_max_speed_gts") is None and cap.get("slot_max_width") is None
            else f"slot max {_fmt_link(cap['slot_max_speed_gts'], cap['slot_max_width'])}")
    threshold = f">= {_fmt_link(want_s, want_w)} (device max {_fmt_link(cap['device_max_speed_gts'], cap['device_max_width'])}, " \
                f"{slot})"
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
    if not loaded and thresholds["require_load"] and best_w >= want_w:
        return f(INCONCLUSIVE, f"link read {measured} while idle only ({evidence.get('load', {}).get('reason') or 'no load'}); "
                 "accelerators lower their link speed (down to 2.5 GT/s) when idle, so an idle reading cannot fail "
                 "the speed; the width, which idle does not lower, is the achievable one")
    short = []
    if best_s < want_s:
        short.append(f"speed {best_s} GT/s < {want_s} GT/s")
    if best_w < want_w:
        short.append(f"width x{best_w} < x{want_w}")
    idle_note = ("" if loaded or not thresholds["require_load"] else
                 " (read idle: an idle accelerator lowers its link speed, not its width; the speed is not judged)")
    if not loaded and thresholds["require_load"]:
        short = [x for x in short if x.startswith("width")]
    return f(FAIL, f"link trained at {measured} {under if loaded else 'idle'}, below the achievable "
             f"{_fmt_link(want_s, want_w)}: {', '.join(short)}{idle_note}",
             remediation="reseat the card and check its riser/retimer and cable; check the BIOS slot speed and "
                         f"bifurcation settings; compare LnkCap and LnkSta in `lspci -vv -s {device}`")


@check("TOPO-NUMA-BIND")
def check_numa_bind(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """The accelerator's NUMA node is known, and load/measurement can be bound to it (CPU and memory).

    evidence: ``device`` (bdf, pci_id, numa_node; None for the host itself), ``host_nodes`` (node, cpulist),
    ``binding`` (what was in force, read back; None when none was attempted)."""
    device, nodes, binding = evidence.get("device"), evidence["host_nodes"], evidence.get("binding")
    subject = device["bdf"] if device else "host"
    n_nodes = len(nodes)
    node = device.get("numa_node") if device else None
    f.set(subject=subject, evidence=evidence, measured=node, threshold="a known node")
    if device is not None and (node is None or node < 0):
        if n_nodes > 1 and thresholds["require_known_node"]:
            return f(FAIL, f"{subject} reports NUMA node {node} on a {n_nodes}-node host: load cannot be bound to its "
                     "domain", remediation="enable NUMA / ACPI SRAT proximity reporting in the BIOS (e.g. NPS or SNC "
                                           "settings), then check /sys/bus/pci/devices/<bdf>/numa_node")
    if binding is None:
        return f(INCONCLUSIVE, f"{subject} reports NUMA node {node}: there is no node to bind its load to, so the "
                 "binding could not be tried (the profile accepts an unknown node)")
    target = binding.get("node")
    checked = (f"bound CPUs {binding.get('cpus_in_force')} and memory policy "
               f"{(binding.get('memory_policy_in_force') or {}).get('mode')} "
               f"{(binding.get('memory_policy_in_force') or {}).get('nodes')} read back for node {target}")
    f.set(threshold=f"bound to node {target}")
    if binding.get("applied") is None:
        return f(INCONCLUSIVE, f"binding cannot be tried here: {binding.get('reason')}")
    if not binding.get("applied"):
        return f(FAIL, f"binding to node {target} was not in force: {'; '.join(binding.get('errors') or []) or checked}",
                 remediation="run without a cpuset/cgroup that excludes the node's CPUs or memory (check `cat "
                             "/proc/self/status | grep allowed`), or with CAP_SYS_NICE")
    if device is None:
        why = f"no accelerator; the suite's own load can be bound to every node of this {n_nodes}-node host: {checked}"
    elif node is None or node < 0:
        why = (f"single-node host: {subject} reports no proximity (node {node}), every CPU and all memory are "
               f"local to it; {checked}")
    else:
        why = f"{subject} is on node {node}; {checked}"
    return f(PASS, why, measured=node if device else target,
             method="sched_setaffinity + set_mempolicy(MPOL_BIND), read back with sched_getaffinity and get_mempolicy")


@check("LINK-NVLINK-MESH", version=2, default_subject="accelerators")
def check_peer_mesh(evidence: Dict[str, Any], thresholds: Dict[str, Any], f: Finding) -> Verdict:
    """Every accelerator pair has an NVLink/XGMI path with P2P (full mesh, or through NVSwitch).  A pair read in
    neither direction is unknown: INCONCLUSIVE, never a missing link (version 2).

    evidence: ``mesh`` (P2P matrix, devices and links, source), ``expected_devices`` (count matching the profile)."""
    mesh, n_expected_devices = evidence["mesh"], int(evidence.get("expected_devices", 0))
    required = bool(thresholds["required"])
    devs = mesh.get("devices", [])
    ev = {"mesh": mesh, "required": required}
    threshold = "every pair P2P over NVLink/XGMI" + ("" if required else " (not required by the profile)")
    f.set(evidence=ev)
    if n_expected_devices < 2 and len(devs) < 2:
        return f(SKIP, f"fewer than 2 accelerators detected ({len(devs)})")
    f.set(threshold=threshold)
    if mesh.get("source") is None or mesh.get("p2p_nvlink") is None:
        status = INCONCLUSIVE if required else SKIP
        return f(status, f"no peer-link evidence: {mesh.get('reason') or 'management library unavailable'}")
    matrix = mesh["p2p_nvlink"]
    names = mesh.get("index_to_bdf", {})
    kind = mesh.get("link_name") or "NVLink"
    n = len(matrix)
    # A pair is linked when both directions say so, missing when either says not; unread both ways: unknown.
    unknown = [(i, j) for i in range(n) for j in range(i + 1, n) if matrix[i][j] is None and matrix[j][i] is None]
    missing = [(i, j) for i in range(n) for j in range(i + 1, n)
               if (i, j) not in unknown and not (matrix[i][j] is not False and matrix[j][i] is not False
                                                 and (matrix[i][j] or matrix[j][i]))]
    pairs = n * (n - 1) // 2
    f.set(measured=f"{pairs - len(missing) - len(unknown)}/{pairs} pairs")
    if not missing and unknown:
        text = ", ".join(f"{names.get(str(i), i)}<->{names.get(str(j), j)}" for i, j in unknown[:12])
        return f(INCONCLUSIVE, f"{len(unknown)} of {pairs} pairs could not be read "
                 f"({text}{' and more' if len(unknown) > 12 else ''}); the others have {kind} P2P")
    if not missing:
        links = ", ".join(f"{d['bdf']}: {d['links_active']} links" for d in devs)
        return f(PASS, f"all {pairs} pairs of {n} accelerators have {kind} P2P ({links})")
    text = ", ".join(f"{names.get(str(i), i)}<->{names.get(str(j), j)}" for i, j in missing[:12])
    more = f" and {len(missing) - 12} more" if len(missing) > 12 else ""
    if not required:
        return f(WARN, f"{len(missing)} pair(s) without {kind} P2P: {text}{more} (the profile does not require a mesh)")
    return f(FAIL, f"{len(missing)} of {pairs} pairs lack an {kind} P2P path: {text}{more}",
             remediation="check `nvidia-smi nvlink --status` and `nvidia-smi topo -m`; inactive links point to a "
                         "baseboard, NVSwitch or fabric-manager fault (is nvidia-fabricmanager running?)")


