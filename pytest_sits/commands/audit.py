"""``sits audit-text``: verdicts from text evidence a vendor submitted (``lspci``, ``nvidia-smi``).

The texts are read as untrusted input (no link followed, size-limited) by the
parsers of :mod:`pytest_sits.probes.textimport` and
:mod:`pytest_sits.probes.nvsmi_q`; the verdicts are decided by the same
registered checks as a live run, with the profile's waivers and the
worst-status rule of the verdict layer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, List

from .base import add, err

#: Exit status by the worst verdict: 1 does not conform, 2 undecided (INCONCLUSIVE).
AUDIT_EXIT = {"ERROR": 1, "FAIL": 1, "INCONCLUSIVE": 2}

EXAMPLES = """\
  sits audit-text --lspci-tv=tree.txt --lspci-vv=vv.txt --profile=h100
  sits audit-text --nvidia-smi-topo=topo.txt --nvidia-smi-q=q.txt --profile=h200 --json=verdicts.json
  exit: 0 conforms in what the texts show, 1 FAIL or ERROR, 2 INCONCLUSIVE, 4 unreadable text or bad option
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "audit-text", "topology and health verdicts from submitted `lspci` / `nvidia-smi` text", EXAMPLES)
    p.add_argument("--lspci-tv", metavar="FILE")
    p.add_argument("--nvidia-smi-topo", metavar="FILE")
    p.add_argument("--lspci-vv", metavar="FILE", help="`lspci -vv` output: TOPO-PCIE-LINK from LnkCap/LnkSta (and "
                   "the class of each function)")
    p.add_argument("--under-load", action="store_true", help="declare that a load ran on the accelerators while "
                   "the `lspci -vv` text was captured (recorded as declared, not observed)")
    p.add_argument("--nvidia-smi-q", metavar="FILE", help="`nvidia-smi -q` output (current or older format): "
                   "link, ECC, row remapping, persistence, power limit, firmware verdicts")
    p.add_argument("--profile", default="base", help="profile whose thresholds apply (default: base)")
    p.add_argument("--json", metavar="OUT", help="also write the verdicts as JSON")
    p.set_defaults(func=run)


def pci_text_verdicts(args: argparse.Namespace, prof: Any, not_judged: list) -> list:
    """TOPO-PCIE-DIRECT, LINK-NVLINK-MESH and TOPO-PCIE-LINK verdicts of `lspci -tv`, `lspci -vv` and
    `nvidia-smi topo -m` texts (the rules: pytest_sits/probes/textimport.py)."""
    from ..checks.topology import check_pcie_direct, check_pcie_link, check_peer_mesh
    from ..files import read_file
    from ..probes import textimport as ti

    def text(path: str, parse, *a, **kw):
        try:
            return parse(read_file(path, ti.MAX_BYTES).decode("utf-8", "replace"), *a, **kw)
        except ti.TextEvidenceError as exc:
            raise ti.TextEvidenceError(f"{path}: {exc}") from None

    known = list(getattr(prof, "pci_ids", None) or [])
    verdicts = []
    funcs = text(args.lspci_vv, ti.parse_lspci_vv) if args.lspci_vv else None
    mesh = text(args.nvidia_smi_topo, ti.parse_nvidia_smi_topo) if args.nvidia_smi_topo else None
    direct = prof.check_thresholds("TOPO-PCIE-DIRECT")
    if args.lspci_tv:
        tree = text(args.lspci_tv, ti.read_lspci_tv, classes=ti.classes_by_bdf(funcs) if funcs else None,
                    known_ids=known)
        not_judged.extend(tree["unidentified"])
        for path in tree["accelerators"]:
            verdicts.append(check_pcie_direct({"path": path}, direct, path["device"]))
    elif mesh is not None:  # the matrix alone: PIX/PXB cells are the only evidence of switches
        for path in ti.topo_pcie_paths(mesh):
            verdicts.append(check_pcie_direct({"path": path}, direct, path["device"]))
    if mesh is not None:
        verdicts.append(check_peer_mesh({"mesh": mesh, "expected_devices": len(mesh["devices"])},
                                        prof.check_thresholds("LINK-NVLINK-MESH"), "accelerators"))
    if funcs is not None:
        links = ti.link_evidence_vv(funcs, under_load=args.under_load, known_ids=known)
        if not args.lspci_tv:
            not_judged.extend(links["unidentified"])
        for ev in links["links"]:
            verdicts.append(check_pcie_link(ev, prof.check_thresholds("TOPO-PCIE-LINK"), ev["device"]))
    return verdicts


def nvidia_smi_q_verdicts(path: Path, profile: Any) -> List[Any]:
    """Verdicts of TOPO-PCIE-LINK, DEP-ECC, DEP-ROWREMAP, DEP-PERSIST, DEP-POWERCAP and SEC-FIRMWARE for every GPU
    of a submitted ``nvidia-smi -q`` text, decided by the checks that judge live NVML."""
    from ..checks.health import check_ecc, check_persistence, check_powercap, check_rowremap
    from ..checks.security import check_firmware
    from ..checks.topology import check_pcie_link
    from ..conditions.health import acquire_ecc, acquire_persistence, acquire_powercap, acquire_rowremap
    from ..conditions.security import acquire_firmware
    from ..files import read_file
    from ..probes.nvsmi_q import MAX_BYTES, inventory_view, link_evidence, parse

    facts = parse(read_file(path, MAX_BYTES).decode("utf-8", "replace"))
    inv = inventory_view(facts)
    verdicts = []
    for acc in inv["accelerators"]:
        bdf = acc["bdf"]
        verdicts.append(check_pcie_link(link_evidence(acc["management"]),
                                        profile.check_thresholds("TOPO-PCIE-LINK"), bdf))
        verdicts.append(check_ecc(acquire_ecc(inv, acc), profile.check_thresholds("DEP-ECC"), bdf))
        verdicts.append(check_rowremap(acquire_rowremap(inv, acc), profile.check_thresholds("DEP-ROWREMAP"), bdf))
        verdicts.append(check_persistence(acquire_persistence(inv, acc), profile.check_thresholds("DEP-PERSIST"),
                                          bdf))
        verdicts.append(check_powercap(acquire_powercap(inv, acc), profile.check_thresholds("DEP-POWERCAP"), bdf))
        verdicts.append(check_firmware(acquire_firmware(inv, acc, None), profile.check_thresholds("SEC-FIRMWARE"),
                                       bdf))
    return verdicts


def run(args: argparse.Namespace) -> int:
    """Verdicts from text evidence a vendor submitted."""
    from .. import profiles
    from ..probes.textimport import TextEvidenceError
    from ..verdict import apply_waiver, worst

    if not args.lspci_tv and not args.lspci_vv and not args.nvidia_smi_topo and not args.nvidia_smi_q:
        return err("give --lspci-tv FILE, --lspci-vv FILE, --nvidia-smi-topo FILE and/or --nvidia-smi-q FILE")
    if args.under_load and not args.lspci_vv:
        return err("--under-load declares that a load ran while the `lspci -vv` text was captured: give "
                   "--lspci-vv FILE with it")
    try:
        prof = profiles.resolve(args.profile)
    except profiles.ProfileError as exc:
        return err(str(exc))
    verdicts, not_judged = [], []
    try:
        verdicts.extend(pci_text_verdicts(args, prof, not_judged))
        if args.nvidia_smi_q:
            verdicts.extend(nvidia_smi_q_verdicts(Path(args.nvidia_smi_q), prof))
    except OSError as exc:
        return err(f"{exc.filename}: {exc.strerror}")
    except TextEvidenceError as exc:  # the message names the file and the line
        return err(str(exc))
    except ValueError as exc:  # NvsmiTextError, UntrustedInputError: the message names the line or the limit
        return err(f"{args.nvidia_smi_q}: {exc}")
    for n in not_judged:
        print(f"not judged: {n['device']} {n['name'] or ''} ({n['source']}): {n['why']}")
    if not verdicts:
        print("no accelerator found in the text evidence")
        return 1
    # Waivers and the worst-status rule come from the verdict layer, as in a pytest run.
    verdicts = [apply_waiver(v, prof.waiver(v.requirement)) for v in verdicts]
    for v in verdicts:
        print(f"{v.requirement:18} {v.subject:14} {v.status:12} {v.reason}")
    if args.json:
        from ..files import atomic_write

        atomic_write(args.json, json.dumps([v.to_json() for v in verdicts], indent=2, default=str))
    return AUDIT_EXIT.get(worst(v.status for v in verdicts), 0)
