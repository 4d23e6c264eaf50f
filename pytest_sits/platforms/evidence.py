"""``evidence:PATH``: the texts people submit instead of a machine, read into an inventory that the same
conformance modules judge.

PATH is a folder (every file in it, see :mod:`pytest_sits.probes.submitted`)
or one file.  Each file's kind is told from its content and read by the
reader of its tool (:mod:`pytest_sits.probes.readers`); :func:`build` has
each reader merge its files into one machine, step by step, by PCI address
(NVIDIA GPUs from
``nvidia-smi -q``, AMD GPUs from ``amd-smi``/``rocm-smi``, any accelerator from
``lspci``), and ``topo -m`` / ``rocm-smi`` GPU indices are matched to PCI
addresses in bus order (the order ``nvidia-smi`` and ``rocm-smi`` number
GPUs in) when the counts agree.  What the texts show goes into the
inventory's usual places (accelerators, their management facts, NUMA nodes);
what only text can give (PCIe paths, link readings, the peer mesh, kernel-log
events, which files were read and what was cut) goes into
``inventory["submitted"]``, where the acquire functions of
:mod:`pytest_sits.conditions` find it.  Nothing here can load, bind or
measure: those requirements are "not measured", so a run on submitted
evidence is PARTIAL at best.

``evidence:PATH+under-load`` records the submitter's declaration that a load
ran while the texts were captured (``lspci -vv`` link readings count as
loaded: declared, not observed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..probes.readers import merge_steps, reader_of
from ..probes.readers.base import EvidenceConflict, Machine
from ..probes.submitted import SNAPSHOT_KIND, TooManyFiles, read_evidence
from .base import PlatformError
from .recorded import RecordedPlatform


class EvidenceError(PlatformError):
    """No submitted file could be read; the message lists each file and what it looks like."""


def parse_spec(body: str) -> Tuple[Path, bool]:
    """``PATH`` or ``PATH+under-load`` of ``evidence:...``."""
    under = body.endswith("+under-load") and not os.path.exists(body)
    return Path(body[: -len("+under-load")] if under else body), under


class EvidencePlatform(RecordedPlatform):
    kind = "evidence"
    recorded = "submitted texts"
    no_load = "submitted texts: no machine to load"
    no_host = "submitted texts hold readings, not a machine to measure"
    no_device = "submitted texts hold no device to measure"
    no_binding = "submitted texts cannot bind processes on the machine they came from"

    def __init__(self, path: Path, files: Optional[List[Tuple[str, Optional[str]]]] = None,
                 under_load: bool = False, known_ids: Any = ()):
        path = Path(path)
        if files is None:
            if not str(path) or str(path) == ".":
                raise PlatformError("evidence: names no folder; fix: --sits-platform=evidence:DIR with the folder "
                                    "of submitted texts (nvidia-smi -q, topo -m, lspci, rocm-smi, amd-smi, kernel "
                                    "logs)")
            if os.path.islink(path):
                raise PlatformError(f"{path}: a symbolic link; submitted evidence is not read through links; fix: "
                                    "name the file or folder itself, not a link to it (its target is not shown)")
            if not os.path.exists(path):
                raise PlatformError(f"{path}: no such file or folder; fix: give the folder of submitted texts")
        self.path, self.under_load = path, bool(under_load)
        try:
            self.evidence = read_evidence(path, files, known_ids)
        except TooManyFiles as exc:
            raise EvidenceError(str(exc)) from None
        self.snapshot: Optional[Any] = None
        for f in self.evidence["files"]:
            if f["kind"] != SNAPSHOT_KIND:
                continue
            if self.snapshot is not None:
                raise PlatformError(f"{path}: two snapshots ({self.snapshot.directory} and {f['path']}): two machines "
                                    "or two states of one; fix: submit one machine's evidence per folder")
            from .snapshot import SnapshotPlatform

            try:
                snap = SnapshotPlatform(Path(f["path"]))
                snap.inventory()
            except PlatformError as exc:
                f.update(status="refused", kind=None, why=f"a snapshot that cannot be read: {exc}")
                continue
            self.snapshot = snap
        read = [f for f in self.evidence["files"] if f["status"] == "read"]
        if not read:
            lines = [f"{f['name']}: {f['why']}" for f in self.evidence["files"]]
            lines += [f"{s['name']}: {s['why']}" for s in self.evidence["skipped"]]
            where = path if files is None else "the files given"
            raise EvidenceError(f"{where}: no submitted file could be read" + (":\n  " + "\n  ".join(lines[:40])
                                                                             if lines else " (the folder is empty)")
                                + "\nfix: submit the unedited output of nvidia-smi -q (or -q -x), nvidia-smi topo "
                                  "-m, nvidia-smi nvlink -e / -s, nvbandwidth, dcgmi diag, lspci -tv / -vv / -PP, "
                                  "rocm-smi, amd-smi, npu-smi info, mthreads-gmi, the kernel log, or an MLPerf "
                                  "Inference submission's LoadGen logs, systems JSON and spl.txt")
        kinds: Dict[str, int] = {}
        for f in read:
            kinds[f["tool"]] = kinds.get(f["tool"], 0) + 1
        shown = ", ".join(f"{n} × {k}" for k, n in kinds.items())
        label = f"evidence:{path} ({len(read)} file{'s' if len(read) != 1 else ''} read: {shown}" + (
            f"; {len(self.evidence['files']) - len(read)} refused" if len(read) < len(self.evidence["files"]) else "") \
            + ("; under load as declared by the submitter" if self.under_load else "") + ")"
        super().__init__(path, label)
        # No file tree of the machine, unless a snapshot came with the texts: nothing else may be read as if it were
        # its /sys or /proc.
        self.root = self.snapshot.root if self.snapshot is not None else None  # type: ignore[assignment]

    # ---- the inventory -----------------------------------------------------------------------------------

    def inventory(self) -> Dict[str, Any]:
        if self._inventory is None:
            base = self.snapshot.inventory() if self.snapshot is not None else None
            self._inventory = build(self.evidence, self.label, self.under_load, base)
        return self._inventory

    def describe(self) -> str:
        inv = self.inventory()
        counts: Dict[str, int] = {}
        for a in inv["accelerators"]:
            counts[a["display_name"]] = counts.get(a["display_name"], 0) + 1
        acc = ", ".join(f"{n} × {name}" for name, n in counts.items()) or "no accelerator in the texts"
        return f"{self.label}: {acc}"

    # ---- the management libraries' facts are the texts' -------------------------------------------------

    def nvml(self) -> Dict[str, Any]:
        return self.inventory()["management"]["nvml"]

    def amdsmi(self) -> Dict[str, Any]:
        return self.inventory()["management"]["amdsmi"]

    def health_reader(self) -> Any:
        return SubmittedHealth


class SubmittedHealth:
    """The health window of submitted evidence: no run, no load; what the texts show (the one clock-event
    reading, the kernel log's Xid and AER lines), decided by :mod:`pytest_sits.conditions.health`."""

    submitted = True

    def __init__(self, platform: Any, acc: Dict[str, Any]):
        self.platform, self.acc = platform, acc

    def window(self) -> Dict[str, Any]:
        from ..conditions.health import submitted_window

        return submitted_window(self.platform.inventory(), self.acc)


# ---- assembling one machine from the files ----------------------------------------------------------------

def _nodes(numa_cpus: Dict[int, Optional[str]]) -> List[Dict[str, Any]]:
    from ..probes.sysfs import parse_cpulist

    out = []
    for node in sorted(numa_cpus):
        cpulist = numa_cpus[node]
        try:
            cpus = parse_cpulist(cpulist, "submitted text") if cpulist else []
        except Exception:  # an odd CPU list in a text: the node is still known
            cpus = []
        out.append({"node": node, "cpulist": cpulist, "cpus": cpus, "mem_total_bytes": None, "distance": None})
    return out


def _from_snapshot(base: Dict[str, Any], name: str, under_load: bool) -> Tuple[List[Dict[str, Any]], Dict[str, Any],
                                                                              Dict[str, Any]]:
    """The accelerators of a snapshot that came with the texts, and the paths and link readings its captured sysfs
    gives (one reading each, at capture time)."""
    from ..probes.topology import link_capability, pcie_path

    index = {d["bdf"]: d for d in base.get("pci") or []}
    accs, paths, links = [], {}, {}
    for a in base.get("accelerators") or []:
        acc = dict(a, sources=[name])
        accs.append(acc)
        dev = index.get(a["bdf"])
        if dev is None:
            continue
        paths[a["bdf"]] = dict(pcie_path(dev, index), source=f"the snapshot {name} (captured sysfs)")
        lk = dev.get("link") or {}
        links[a["bdf"]] = {
            "device": a["bdf"], "capability": link_capability(dev, index),
            "samples": [{"speed_gts": lk.get("current_speed_gts"), "width": lk.get("current_width"),
                         "under_load": bool(under_load), "source": f"the snapshot {name} (sysfs at capture)"}],
            "load": ({"kind": "declared", "declared": True, "observed": False,
                      "reason": "declared by the submitter, not observed"} if under_load else
                     {"kind": None, "reason": "one reading captured by `sits capture`, with no load declared"}),
            "method_text": f"current_link_speed/width of the snapshot {name}, against the device's and the slot's "
                           "maxima"}
    return accs, paths, links


def _merge_snapshot(machine: Machine, base: Dict[str, Any], name: str) -> None:
    """A snapshot that came with the texts: its captured inventory first, the texts add to it."""
    s_accs, s_paths, s_links = _from_snapshot(base, name, machine.under_load)
    for a in s_accs:
        machine.add(a["bdf"], a)
    machine.paths.update(s_paths)
    machine.links.update(s_links)
    for d in base.get("pci") or []:
        machine.pci[d["bdf"]] = dict(d, source=name)
    for node in base.get("numa") or []:
        machine.numa_cpus[node["node"]] = node.get("cpulist")
    for lib, target in (("nvml", machine.nvml), ("amdsmi", machine.amdsmi)):
        facts = (base.get("management") or {}).get(lib) or {}
        if facts.get("available"):
            target.update({k: v for k, v in facts.items() if k != "devices"}, files=[name],
                          source=f"the snapshot {name} ({lib})")
    for vendor in {str(a.get("vendor") or "").lower() for a in s_accs} - {""}:
        machine.complete.setdefault(vendor, []).append(f"{name} (a snapshot lists every PCI function)")


def build(evidence: Dict[str, Any], label: str, under_load: bool,
          base: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The inventory of the machine the submitted files describe (``base``: the inventory of a snapshot among
    them, whose captured facts come first): each reader merges its files, step by step
    (:class:`pytest_sits.probes.readers.Reader`)."""
    files = [f for f in evidence["files"] if f["status"] == "read"]
    machine = Machine(files, under_load, base)
    snap_name = next((f["name"] for f in files if f["kind"] == SNAPSHOT_KIND), "snapshot")
    if base is not None:
        _merge_snapshot(machine, base, snap_name)
    try:
        for step, readers in merge_steps():
            for f in files:
                r = reader_of(f["kind"])
                if r is not None and r in readers:
                    r.merge(machine, f, step)
            for r in readers:
                r.finish(machine, step)
    except EvidenceConflict as exc:
        raise PlatformError(str(exc)) from None
    if machine.mesh is None and base is not None and \
            ((base.get("management") or {}).get("nvml") or {}).get("p2p_nvlink"):
        from ..probes.topology import peer_mesh

        snap_accs = [a for a in base.get("accelerators") or [] if a.get("management")]
        machine.mesh = peer_mesh(snap_accs, base["management"]["nvml"])
        machine.mesh_file = snap_name

    accelerators = []
    for key in machine.order:
        a = machine.accs[key]
        a["display_name"] = a["name"] or (f"{a['vendor']} {a['pci_id']}" if a["pci_id"] else
                                          f"{a['vendor'] or 'unknown'} GPU (model not in the texts)")
        if a.get("management") and a["management"].get("numa_node") is None and a["numa_node"] is not None:
            a["management"]["numa_node"] = a["numa_node"]
        accelerators.append(a)
    for vendor, d in machine.declared.items():
        covered = sum(1 for a in accelerators if (a["vendor"] or "").lower() == vendor)
        d["covered"] = covered
    inv: Dict[str, Any] = {
        "collected_at": (base or {}).get("collected_at"),
        "host": (base or {}).get("host") or {"hostname": None, "kernel": None, "os": None},
        "cpu": (base or {}).get("cpu") or {"model": None, "sockets": None, "cores": None, "threads": None,
                                           "source": "not in the submitted texts"},
        "memory": (base or {}).get("memory") or {"total_bytes": None, "source": "not in the submitted texts"},
        "numa": (base or {}).get("numa") if base is not None else _nodes(machine.numa_cpus),
        "pci": list(machine.pci.values()),
        "accelerators": accelerators,
        "management": {"nvml": machine.nvml, "amdsmi": machine.amdsmi, "nvml_devices_without_sysfs": []},
        "platform": {"kind": "evidence", "label": label, "simulated": False},
        "submitted": {
            "root": evidence["root"],
            "files": [{k: f.get(k) for k in ("name", "kind", "tool", "status", "why", "cuts", "bytes",
                                              "declared_note")} for f in evidence["files"]],
            "skipped": evidence["skipped"], "paths": machine.paths, "path_reasons": machine.path_reasons,
            "links": machine.links, "mesh": machine.mesh, "mesh_file": machine.mesh_file,
            "declared": machine.declared, "complete": machine.complete, "kernel_log": machine.kernel_log,
            "mlperf": machine.scratch.get("mlperf_out"), "nvbandwidth": machine.scratch.get("nvbandwidth"),
            "dcgmi": machine.scratch.get("dcgmi"),
            "under_load_declared": under_load, "unidentified": machine.unidentified, "notes": machine.notes,
            "numa_source": ("nvidia-smi topo -m / rocm-smi / amd-smi / lspci -vv NUMA fields" if machine.numa_cpus
                            else None),
        },
    }
    return inv
