"""``evidence:PATH``: the texts people submit instead of a machine, read into an inventory that the same
conformance modules judge.

PATH is a folder (every file in it, see :mod:`pytest_sits.probes.submitted`)
or one file.  Each file's kind is told from its content; the facts of all
files are merged into one machine by PCI address (NVIDIA GPUs from
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
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .base import Platform, PlatformError

BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
VENDORS = {"10de": "NVIDIA", "1002": "AMD"}
#: Fields of a device's management facts that the requirements read, and what they are called in a message.
FIELD_NAMES = {
    "persistence_mode": "Persistence Mode", "ecc_mode_current": "ECC Mode / Current",
    "ecc_volatile_uncorrected": "ECC Errors / Volatile", "remapped_rows": "Remapped Rows",
    "retired_pages_pending": "Retired Pages", "power_limit_enforced_mw": "the enforced power limit",
    "clock_event_reasons": "Clocks Event (Throttle) Reasons", "vbios_version": "VBIOS Version",
    "pcie_current_gen": "PCI / GPU Link Info", "memory_total_bytes": "FB Memory Usage / Total",
}


def is_bdf(text: Optional[str]) -> bool:
    return bool(text) and BDF.match(str(text)) is not None


def _cut_note(entry: Dict[str, Any]) -> str:
    cuts = entry.get("cuts") or []
    if not cuts:
        return ""
    lines = sorted({c.get("line") for c in cuts if c.get("line")})
    return f"; the text was cut or elided (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines[:6]))})"


class EvidenceError(PlatformError):
    """No submitted file could be read; the message lists each file and what it looks like."""


def parse_spec(body: str) -> Tuple[Path, bool]:
    """``PATH`` or ``PATH+under-load`` of ``evidence:...``."""
    under = body.endswith("+under-load") and not os.path.exists(body)
    return Path(body[: -len("+under-load")] if under else body), under


class EvidencePlatform(Platform):
    kind = "evidence"
    link_sample_interval_s = 0.0

    def __init__(self, path: Path, files: Optional[List[Tuple[str, Optional[str]]]] = None,
                 under_load: bool = False, known_ids: Any = ()):
        from ..probes.submitted import read_evidence

        path = Path(path)
        if files is None:
            if not str(path) or str(path) == ".":
                raise PlatformError("evidence: names no folder; fix: --sits-platform=evidence:DIR with the folder "
                                    "of submitted texts (nvidia-smi -q, topo -m, lspci, rocm-smi, amd-smi, kernel "
                                    "logs)")
            if os.path.islink(path):
                raise PlatformError(f"{path}: a symbolic link; submitted evidence is not read through links; fix: "
                                    f"name the folder itself ({os.path.realpath(path)})")
            if not os.path.exists(path):
                raise PlatformError(f"{path}: no such file or folder; fix: give the folder of submitted texts")
        self.path, self.under_load = path, bool(under_load)
        self.evidence = read_evidence(path, files, known_ids)
        self.snapshot: Optional[Any] = None
        for f in self.evidence["files"]:
            if f["kind"] != "snapshot":
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
                                  "-m, lspci -tv / -vv / -PP, rocm-smi, amd-smi or the kernel log")
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
        self.root = self.snapshot.root if self.snapshot is not None else None

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

    # ---- nothing here can act on the machine -------------------------------------------------------------

    def nvml(self) -> Dict[str, Any]:
        return self.inventory()["management"]["nvml"]

    def amdsmi(self) -> Dict[str, Any]:
        return self.inventory()["management"]["amdsmi"]

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        from ..conditions.loads import LoadUnavailable

        raise LoadUnavailable("submitted texts: no machine to load")

    def host_measurement_reason(self) -> Optional[str]:
        return "submitted texts hold readings, not a machine to measure"

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int, runs: int = 7) -> Dict[str, Any]:
        from ..conditions.loads import LoadUnavailable

        raise LoadUnavailable("submitted texts hold no device to measure")

    host_device_bandwidth = device_bandwidth

    def inference_rig(self, acc: Optional[Dict[str, Any]], profile: Any, options: Dict[str, Any]) -> Any:
        from ..conditions.inference import InferenceUnavailable

        raise InferenceUnavailable("submitted texts cannot run an inference workload")

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        from ..conditions.thermal import ThermalUnavailable

        raise ThermalUnavailable("submitted texts cannot run a thermal calibration", present=False)

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        yield {"node": node, "requested_cpus": sorted(cpus), "applied": None,
               "reason": "submitted texts cannot bind processes on the machine they came from"}

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

def _acc(bdf: str, pci_id: Optional[str], vendor: Optional[str], name: Optional[str], source: str) -> Dict[str, Any]:
    return {"bdf": bdf, "pci_id": pci_id, "vendor": vendor or (VENDORS.get(str(pci_id)[:4]) if pci_id else None),
            "class": None, "numa_node": None, "driver": None, "upstream": [], "link": {}, "name": name,
            "memory_total_bytes": None, "memory_source": None, "management": None, "sources": [source],
            "display_name": None}


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


def _missing_errors(dev: Dict[str, Any], entry: Dict[str, Any]) -> None:
    """Record, for every field the requirements read that the text does not show, where it is missing."""
    have = {e.get("field") for e in dev.get("errors") or []}
    errs = dev.setdefault("errors", [])
    for field, label in FIELD_NAMES.items():
        if dev.get(field) is None and field not in have:
            errs.append({"field": field, "missing": True,
                         "error": f"{label} is not in {entry['name']}{_cut_note(entry)}"})


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


def build(evidence: Dict[str, Any], label: str, under_load: bool,
          base: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The inventory of the machine the submitted files describe (``base``: the inventory of a snapshot among
    them, whose captured facts come first)."""
    from ..probes import nvsmi_q
    from ..probes.textimport import link_evidence_vv, topo_pcie_paths

    files = [f for f in evidence["files"] if f["status"] == "read"]
    accs: Dict[str, Dict[str, Any]] = {}
    order: List[str] = []
    notes: List[str] = []
    pci: Dict[str, Dict[str, Any]] = {}
    paths: Dict[str, Dict[str, Any]] = {}
    path_reasons: Dict[str, str] = {}
    links: Dict[str, Dict[str, Any]] = {}
    unidentified: List[Dict[str, Any]] = []
    numa_cpus: Dict[int, Optional[str]] = {}
    declared: Dict[str, Dict[str, Any]] = {}
    complete: Dict[str, List[str]] = {}
    nvml: Dict[str, Any] = {"available": False, "source": None, "errors": [], "files": [],
                            "reason": "no nvidia-smi -q text among the submitted files"}
    amdsmi: Dict[str, Any] = {"available": False, "source": None, "errors": [], "files": [],
                              "reason": "no amd-smi or rocm-smi text among the submitted files"}
    mesh: Optional[Dict[str, Any]] = None
    mesh_file: Optional[str] = None
    klog: Optional[Dict[str, Any]] = None

    def add(key: str, acc: Dict[str, Any]) -> Dict[str, Any]:
        if key in accs:
            cur = accs[key]
            for k, v in acc.items():
                if cur.get(k) in (None, [], {}) and v not in (None, [], {}):
                    cur[k] = v
            cur["sources"] = sorted(set(cur["sources"]) | set(acc["sources"]))
            return cur
        accs[key] = acc
        order.append(key)
        return acc

    def conflict(what: str, a: Any, b: Any, fa: str, fb: str) -> None:
        raise PlatformError(f"{fa} and {fb} disagree on {what} ({a!r} and {b!r}): they describe different machines "
                            "or different states of one; fix: submit one machine's texts per folder, captured together")

    if base is not None:  # a snapshot: its captured inventory first, the texts add to it
        snap_name = next((f["name"] for f in files if f["kind"] == "snapshot"), "snapshot")
        s_accs, s_paths, s_links = _from_snapshot(base, snap_name, under_load)
        for a in s_accs:
            add(a["bdf"], a)
        paths.update(s_paths)
        links.update(s_links)
        for d in base.get("pci") or []:
            pci[d["bdf"]] = dict(d, source=snap_name)
        for node in base.get("numa") or []:
            numa_cpus[node["node"]] = node.get("cpulist")
        for lib, target in (("nvml", nvml), ("amdsmi", amdsmi)):
            facts = (base.get("management") or {}).get(lib) or {}
            if facts.get("available"):
                target.update({k: v for k, v in facts.items() if k != "devices"}, files=[snap_name],
                              source=f"the snapshot {snap_name} ({lib})")
        for vendor in {str(a.get("vendor") or "").lower() for a in s_accs} - {""}:
            complete.setdefault(vendor, []).append(f"{snap_name} (a snapshot lists every PCI function)")

    # NVIDIA: nvidia-smi -q (text or XML)
    for f in (f for f in files if f["kind"] in ("nvidia-smi-q", "nvidia-smi-q-xml")):
        facts = f["facts"]
        for key in ("driver_version", "cuda_driver_version"):
            if facts.get(key):
                if nvml.get(key) and nvml[key] != facts[key]:
                    conflict(key.replace("_", " "), nvml[key], facts[key], nvml["files"][0], f["name"])
                nvml[key] = facts[key]
        nvml.update(available=True, source=f"submitted {f['tool']}", reason=None)
        nvml["files"].append(f["name"])
        nvml["errors"].extend(e for e in facts.get("errors") or [] if e.get("field") not in ("attached_gpus",))
        if facts.get("attached_gpus") is not None:
            declared["nvidia"] = {"count": facts["attached_gpus"],
                                  "source": f"'Attached GPUs : {facts['attached_gpus']}' in {f['name']}"}
        if facts.get("complete"):
            complete.setdefault("nvidia", []).append(f"{f['name']} (nvidia-smi -q: every GPU it declares)")
        for i, dev in enumerate(facts["devices"]):
            bdf = dev.get("pci_bus_id") or f"GPU section {i + 1} of {f['name']} (no PCI address)"
            _missing_errors(dev, f)
            dev["source"] = f"submitted {f['tool']} ({f['name']})"
            dev["load"] = nvsmi_q.load_of(dev)
            a = _acc(bdf, dev.get("pci_id"), "NVIDIA", dev.get("name"), f["name"])
            a["memory_total_bytes"] = dev.get("memory_total_bytes")
            a["memory_source"] = "nvml" if dev.get("memory_total_bytes") is not None else None
            if bdf in accs and accs[bdf].get("management"):
                old = accs[bdf]["management"]
                if base is not None and "source" not in old:
                    notes.append(f"{bdf}: the snapshot's NVML facts are kept; {f['name']} is not used for it")
                    continue
                for k in ("uuid", "serial"):
                    if old.get(k) and dev.get(k) and old[k] != dev[k]:
                        conflict(f"the {k} of {bdf}", old[k], dev[k], old.get("source"), f["name"])
                notes.append(f"{bdf} is in {f['name']} and in an earlier file: the first reading is kept")
                continue
            a["management"] = dev
            add(bdf, a)
            pcie_seen = dev.get("pcie_current_gen") is not None or any(
                str(e.get("field", "")).startswith("pcie_") and not e.get("missing") for e in dev["errors"])
            if pcie_seen and dev.get("pci_bus_id"):
                ev = nvsmi_q.link_evidence(dev)
                ev["method_text"] = (f"PCIe link of the submitted `nvidia-smi -q` ({f['name']}): Current against "
                                     "Device Max / Host Max (or the older single Max)")
                links.setdefault(bdf, ev)
    nvml["attached_gpus"] = (declared.get("nvidia") or {}).get("count")

    # AMD: amd-smi (text / --json) and rocm-smi.  Their GPU indices are one numbering (both tools number GPUs
    # in the order the driver enumerates them): a file that gives an index its PCI address names it for all.
    amd_files = [f for f in files if f["kind"] in ("amd-smi", "rocm-smi")]
    amd_by_index: Dict[int, str] = {}
    for f in amd_files:
        for dev in f["facts"]["devices"]:
            if dev.get("index") is not None and dev.get("pci_bus_id"):
                amd_by_index.setdefault(dev["index"], dev["pci_bus_id"])
    rocm_topo: Optional[Tuple[Dict[str, Any], Dict[str, Any]]] = None
    for f in amd_files:
        facts = f["facts"]
        amdsmi.update(available=True, source=f"submitted {f['tool']}", reason=None)
        amdsmi["files"].append(f["name"])
        if facts.get("driver_version"):
            amdsmi["driver_version"] = facts["driver_version"]
        if facts.get("mesh") is not None:
            rocm_topo = (facts["mesh"], f)
        for dev in facts["devices"]:
            idx = dev.get("index")
            bdf = dev.get("pci_bus_id") or (amd_by_index.get(idx) if idx is not None else None)
            if bdf is None:
                bdf = f"GPU{idx}" if idx is not None else f"AMD GPU in {f['name']}"
            if idx is not None:
                amd_by_index.setdefault(idx, bdf)
            dev = dict(dev)
            dev["source"] = f"submitted {f['tool']} ({f['name']})"
            _missing_errors(dev, f)
            a = _acc(bdf, dev.get("pci_id"), "AMD", dev.get("name"), f["name"])
            a["numa_node"] = dev.get("numa_node")
            a["memory_total_bytes"] = dev.get("memory_total_bytes")
            a["memory_source"] = "amdsmi" if dev.get("memory_total_bytes") is not None else None
            cur = accs.get(bdf)
            if cur is not None and cur.get("management"):
                for k, v in dev.items():
                    if v is not None and cur["management"].get(k) is None:
                        cur["management"][k] = v
                cur["management"]["errors"] = [e for e in cur["management"].get("errors") or []
                                               if not (e.get("missing") and cur["management"].get(e.get("field"))
                                                       is not None)]
                add(bdf, a)
            else:
                a["management"] = dev
                add(bdf, a)
            if dev.get("numa_node") is not None:
                numa_cpus.setdefault(dev["numa_node"], None)
            if dev.get("pcie_current_width") is not None and dev.get("pcie_max_width") is not None:
                links.setdefault(bdf, _amd_link(bdf, dev, f))
        if f["kind"] == "amd-smi" and facts["devices"]:
            complete.setdefault("amd", []).append(f"{f['name']} (amd-smi lists every GPU)")
        elif facts["devices"]:
            complete.setdefault("amd", []).append(f"{f['name']} (rocm-smi lists every GPU)")
    if amdsmi["available"]:
        drivers = {(a.get("management") or {}).get("driver_version") for a in accs.values()
                   if a["vendor"] == "AMD"} - {None}
        if len(drivers) == 1 and not amdsmi.get("driver_version"):
            amdsmi["driver_version"] = drivers.pop()

    # lspci: paths (-tv, -PP), functions and link readings (-vv)
    vv_funcs: List[Dict[str, Any]] = []
    for f in (f for f in files if f["kind"] in ("lspci-tv", "lspci-pp", "lspci-vv")):
        facts = f["facts"]
        if f["kind"] == "lspci-vv":
            vv_funcs.extend(facts["functions"])
            for fn in facts["functions"]:
                pci.setdefault(fn["bdf"], {"bdf": fn["bdf"], "pci_id": None, "class": f"0x{fn['class_code']:04x}00"
                                           if fn.get("class_code") is not None else None, "name": fn["name"],
                                           "source": f["name"]})
            continue
        unidentified.extend(facts.get("unidentified") or [])
        for fn in facts.get("functions") or []:
            pci.setdefault(fn["bdf"], {"bdf": fn["bdf"], "pci_id": fn.get("pci_id"), "class": None,
                                       "name": fn.get("name"), "source": f["name"]})
        for path in facts["accelerators"]:
            bdf = path["device"]
            path = dict(path, source=f"{path.get('source')} of {f['name']}")
            paths.setdefault(bdf, path)
            pid = path.get("pci_id")
            add(bdf, _acc(bdf, pid, VENDORS.get(str(pid or "")[:4]) or _vendor_of_name(path.get("name")),
                          path.get("name"), f["name"]))
        if f["kind"] == "lspci-pp" or (f["kind"] == "lspci-tv" and not f["cuts"]):
            vendors = {VENDORS.get(str(p.get("pci_id") or "")[:4]) or _vendor_of_name(p.get("name"))
                       for p in facts["accelerators"]}
            for v in vendors - {None}:
                complete.setdefault(v.lower(), []).append(f"{f['name']} ({f['tool']}, the whole tree)"
                                                          if f["kind"] == "lspci-tv" else
                                                          f"{f['name']} ({f['tool']})")
    if vv_funcs:
        vv = link_evidence_vv(vv_funcs, under_load=under_load)
        unidentified.extend(vv["unidentified"])
        for ev in vv["links"]:
            bdf = ev["device"]
            vendor = _vendor_of_name(ev.get("name"))
            a = add(bdf, _acc(bdf, None, vendor, ev.get("name"), "lspci -vv"))
            fn = next((x for x in vv_funcs if x["bdf"] == bdf), {})
            if fn.get("numa_node") is not None and fn["numa_node"] >= 0:
                a["numa_node"] = a["numa_node"] if a["numa_node"] is not None else fn["numa_node"]
                numa_cpus.setdefault(fn["numa_node"], None)
            if bdf not in links or not any(s.get("under_load") for s in links[bdf]["samples"]):
                links[bdf] = ev  # a -vv reading knows the slot's maximum; an idle -q reading does not

    # nvidia-smi topo -m: the mesh, NUMA affinity, and the PCIe cells
    topo_files = [f for f in files if f["kind"] == "nvidia-smi-topo"]
    for f in topo_files:
        m = f["facts"]
        gpus = [d["bdf"] for d in m["devices"]]
        nv_keys = sorted(k for k in order if is_bdf(k) and accs[k]["vendor"] == "NVIDIA")
        mapping: Dict[str, str] = {}
        if len(nv_keys) == len(gpus):
            mapping = dict(zip(gpus, nv_keys))
        elif nv_keys:
            notes.append(f"{f['name']} lists {len(gpus)} GPUs, the other texts {len(nv_keys)} NVIDIA GPU(s) by PCI "
                         "address: its rows could not be matched to addresses, so its per-GPU cells are not used")
        else:
            for g in gpus:
                a = add(g, _acc(g, None, "NVIDIA", None, f["name"]))
                a["note"] = "named by its index in nvidia-smi topo -m; no text gives its PCI address or model"
            mapping = {g: g for g in gpus}
        if mesh is None:
            mesh = _mapped_mesh(m, mapping)
            mesh_file = f["name"]
        for g, key in mapping.items():
            node = (m.get("numa_affinity") or {}).get(g)
            if node is not None:
                accs[key]["numa_node"] = accs[key]["numa_node"] if accs[key]["numa_node"] is not None else node
                if numa_cpus.get(node) is None:
                    numa_cpus[node] = (m.get("cpu_affinity") or {}).get(g)
        topo_paths = {p["device"]: p for p in topo_pcie_paths(m)}
        for g, key in mapping.items():
            p = topo_paths.get(g)
            if p is None or key in paths:
                continue
            if p["note"] == "nothing in the matrix":  # no PCIe cell at all: the matrix says nothing of the path
                path_reasons.setdefault(key, f"{f['name']} (nvidia-smi topo -m) has no PCIe cell for {g}, only "
                                             "NVLink: the PCIe path is not in it; submit `lspci -tv` or `lspci -PP`")
                continue
            paths[key] = dict(p, device=key, source=f"{p['source']} of {f['name']}")
        complete.setdefault("nvidia", []).append(f"{f['name']} (nvidia-smi topo -m lists every GPU)")
    if rocm_topo is not None and mesh is None:
        rmesh, f = rocm_topo
        gpus = [d["bdf"] for d in rmesh["devices"]]
        mapping = {g: amd_by_index.get(i, g) for i, g in enumerate(gpus)}
        amd_keys = sorted(k for k in order if is_bdf(k) and accs[k]["vendor"] == "AMD")
        if all(not is_bdf(v) for v in mapping.values()) and len(amd_keys) == len(gpus):
            mapping = dict(zip(gpus, amd_keys))
        mesh = _mapped_mesh(rmesh, mapping)
        mesh_file = f["name"]
        for g, key in mapping.items():
            if key not in accs:
                a = add(key, _acc(key, None, "AMD", None, f["name"]))
                a["note"] = "named by its index in rocm-smi; no text gives its PCI address"

    if mesh is None and base is not None and ((base.get("management") or {}).get("nvml") or {}).get("p2p_nvlink"):
        from ..probes.topology import peer_mesh

        snap_accs = [a for a in base.get("accelerators") or [] if a.get("management")]
        mesh = peer_mesh(snap_accs, base["management"]["nvml"])
        mesh_file = next((f["name"] for f in files if f["kind"] == "snapshot"), "snapshot")

    # kernel logs: the events, and the GPUs they name (an Xid names an NVIDIA GPU; an AER line of the nvidia or
    # amdgpu driver with an accelerator's [vendor:device] ID names one) when no other text lists the machine
    for f in (f for f in files if f["kind"] == "kernel-log"):
        facts = f["facts"]
        if klog is None:
            klog = {"files": [], "records": 0, "xids": [], "aer": [], "spans": []}
        klog["files"].append(f["name"])
        klog["records"] += facts["records"]
        klog["xids"].extend(dict(x, file=f["name"]) for x in facts["xids"])
        klog["aer"].extend(dict(x, file=f["name"]) for x in facts["aer"])
        if facts.get("span_s"):
            klog["spans"].append({"file": f["name"], "from_s": facts["span_s"][0], "to_s": facts["span_s"][1]})
        for dev in facts.get("devices") or []:
            known = [k for k in order if k.rsplit(".", 1)[0] == dev["bdf"].rsplit(".", 1)[0]]
            if known or (dev["vendor"] == "NVIDIA" and complete.get("nvidia")) or \
                    (dev["vendor"] == "AMD" and complete.get("amd")):
                continue  # another text lists the machine's GPUs: the log adds events, not devices
            a = add(dev["bdf"], _acc(dev["bdf"], dev.get("pci_id"), dev["vendor"], None, f["name"]))
            a["note"] = f"named by the kernel log ({dev['why']}); no other text gives its facts"

    accelerators = []
    for key in order:
        a = accs[key]
        a["display_name"] = a["name"] or (f"{a['vendor']} {a['pci_id']}" if a["pci_id"] else
                                          f"{a['vendor'] or 'unknown'} GPU (model not in the texts)")
        if a.get("management") and a["management"].get("numa_node") is None and a["numa_node"] is not None:
            a["management"]["numa_node"] = a["numa_node"]
        accelerators.append(a)
    for vendor, d in declared.items():
        covered = sum(1 for a in accelerators if (a["vendor"] or "").lower() == vendor)
        d["covered"] = covered
    inv: Dict[str, Any] = {
        "collected_at": (base or {}).get("collected_at"),
        "host": (base or {}).get("host") or {"hostname": None, "kernel": None, "os": None},
        "cpu": (base or {}).get("cpu") or {"model": None, "sockets": None, "cores": None, "threads": None,
                                           "source": "not in the submitted texts"},
        "memory": (base or {}).get("memory") or {"total_bytes": None, "source": "not in the submitted texts"},
        "numa": (base or {}).get("numa") if base is not None else _nodes(numa_cpus),
        "pci": list(pci.values()),
        "accelerators": accelerators,
        "management": {"nvml": nvml, "amdsmi": amdsmi, "nvml_devices_without_sysfs": []},
        "platform": {"kind": "evidence", "label": label, "simulated": False},
        "submitted": {
            "root": evidence["root"],
            "files": [{k: f.get(k) for k in ("name", "kind", "tool", "status", "why", "cuts", "bytes",
                                              "declared_note")} for f in evidence["files"]],
            "skipped": evidence["skipped"], "paths": paths, "path_reasons": path_reasons, "links": links,
            "mesh": mesh, "mesh_file": mesh_file,
            "declared": declared, "complete": complete, "kernel_log": klog, "under_load_declared": under_load,
            "unidentified": unidentified, "notes": notes,
            "numa_source": "nvidia-smi topo -m / rocm-smi / amd-smi / lspci -vv NUMA fields" if numa_cpus else None,
        },
    }
    return inv


def _vendor_of_name(name: Optional[str]) -> Optional[str]:
    from ..probes.textimport import vendor_of

    vid, _ = vendor_of(str(name or ""))
    return VENDORS.get(vid or "")


def _mapped_mesh(m: Dict[str, Any], mapping: Dict[str, str]) -> Dict[str, Any]:
    """The mesh evidence of a topology text, its GPU names replaced by the PCI addresses they were matched to."""
    mesh = dict(m)
    mesh["devices"] = [dict(d, bdf=mapping.get(d["bdf"], d["bdf"]), text_name=d["bdf"]) for d in m["devices"]]
    mesh["index_to_bdf"] = {k: mapping.get(v, v) for k, v in m["index_to_bdf"].items()}
    mesh.pop("pcie_cells", None)
    mesh.pop("unknown_cells", None)
    if any(k != v for k, v in mapping.items()):
        mesh["mapping"] = {k: v for k, v in mapping.items()}
        mesh["mapping_rule"] = ("the text's GPU indices matched to PCI addresses in bus order (the order the "
                                "vendor tool numbers GPUs in), the counts being equal")
    return mesh


def _amd_link(bdf: str, dev: Dict[str, Any], f: Dict[str, Any]) -> Dict[str, Any]:
    from ..probes.pcie import gen_of

    util = dev.get("utilization_gpu_percent")
    loaded = util is not None and util >= 50
    return {"device": bdf, "capability": {"device_max_speed_gts": dev.get("pcie_max_speed_gts"),
                                          "device_max_width": dev.get("pcie_max_width"), "slot": None,
                                          "slot_max_speed_gts": None, "slot_max_width": None,
                                          "achievable_speed_gts": dev.get("pcie_max_speed_gts"),
                                          "achievable_gen": gen_of(dev.get("pcie_max_speed_gts")),
                                          "achievable_width": dev.get("pcie_max_width")},
            "samples": [{"speed_gts": dev.get("pcie_current_speed_gts"), "width": dev.get("pcie_current_width"),
                         "under_load": loaded, "source": f"submitted {f['tool']} ({f['name']})"}],
            "load": ({"kind": "submitted reading", "utilization_gpu_percent": util} if loaded else
                     {"kind": None, "reason": f"one submitted reading ({util if util is not None else '?'}% GFX "
                                              "activity; under 50% counts as idle)"}),
            "method_text": f"PCIe link of the submitted {f['tool']} ({f['name']}): PCIE WIDTH/SPEED against BUS "
                           "MAX_PCIE_WIDTH/MAX_PCIE_SPEED"}
