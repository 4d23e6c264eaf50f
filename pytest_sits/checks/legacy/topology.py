"""Earlier versions of the topology checks (:mod:`pytest_sits.checks.topology`), kept for replay."""

from __future__ import annotations

from typing import Any, Dict

from ...verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN, Verdict
from .. import check


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
