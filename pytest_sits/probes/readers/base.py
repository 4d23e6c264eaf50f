"""What every reader of submitted text is: how its tool's output is recognised (``detect``), read (``parse``) and
added to the machine the files describe (``merge``), and that machine as it is assembled.

A reader is a :class:`Reader`; the registry (:mod:`pytest_sits.probes.readers`) holds one instance of each, in
the order their ``detect`` is tried.  Merging runs in *steps* (:data:`NVIDIA_DEVICES` ... :data:`EVENTS`, in
increasing order): in one step, the files of every reader taking part in it are merged one by one in the
folder's order (so the first reading of a device is the one kept, whichever tool gave it), then each of those
readers finishes the step.  Most readers take part in one step; one whose facts depend on what another step
adds takes part in a later one as well.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Dict, Iterable, List, Optional, Tuple

#: (kind, why) when a text is recognised; (None, what it is) when it is recognised as a document that is refused.
Detection = Tuple[Optional[str], str]
#: One submitted file as :func:`pytest_sits.probes.submitted.read_file_entry` reads it ("name", "kind", "tool",
#: "status", "why", "facts", "cuts", "bytes").
Entry = Dict[str, Any]

# ---- the merge steps, in the order they run ------------------------------------------------------------------

#: NVIDIA GPUs and their management facts (``nvidia-smi -q``).
NVIDIA_DEVICES = 10
#: The GPU numbering that ``amd-smi`` and ``rocm-smi`` share: an index whose PCI address one file gives.
AMD_NUMBERING = 20
#: AMD GPUs and their management facts (``amd-smi``, ``rocm-smi``).
AMD_DEVICES = 21
#: Other vendors' accelerators (``npu-smi info``, ``mthreads-gmi``).
OTHER_DEVICES = 22
#: PCI functions, PCIe paths and link readings (``lspci``).
PCI = 30
#: The peer mesh, NUMA affinity and PCIe cells of ``nvidia-smi topo -m`` (GPUs matched to PCI addresses).
TOPOLOGY = 40
#: The XGMI mesh of ``rocm-smi --showtopo``, where no ``topo -m`` gave a mesh.
AMD_MESH = 41
#: Kernel-log events (and the GPUs they name when no other text lists the machine's GPUs).
EVENTS = 50

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


class EvidenceConflict(ValueError):
    """Two submitted files disagree on a fact of one machine; the message names both and the fix."""


def is_bdf(text: Optional[str]) -> bool:
    return bool(text) and BDF.match(str(text)) is not None


def cut_note(entry: Entry) -> str:
    cuts = entry.get("cuts") or []
    if not cuts:
        return ""
    lines = sorted({c.get("line") for c in cuts if c.get("line")})
    return f"; the text was cut or elided (line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines[:6]))})"


def new_accelerator(bdf: str, pci_id: Optional[str], vendor: Optional[str], name: Optional[str],
                    source: str) -> Dict[str, Any]:
    """An accelerator of the inventory, with what one text says of it."""
    return {"bdf": bdf, "pci_id": pci_id, "vendor": vendor or (VENDORS.get(str(pci_id)[:4]) if pci_id else None),
            "class": None, "numa_node": None, "driver": None, "upstream": [], "link": {}, "name": name,
            "memory_total_bytes": None, "memory_source": None, "management": None, "sources": [source],
            "display_name": None}


def missing_errors(dev: Dict[str, Any], entry: Entry) -> None:
    """Record, for every field the requirements read that the text does not show, where it is missing."""
    have = {e.get("field") for e in dev.get("errors") or []}
    errs = dev.setdefault("errors", [])
    for field, label in FIELD_NAMES.items():
        if dev.get(field) is None and field not in have:
            errs.append({"field": field, "missing": True,
                         "error": f"{label} is not in {entry['name']}{cut_note(entry)}"})


def mapped_mesh(m: Dict[str, Any], mapping: Dict[str, str]) -> Dict[str, Any]:
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


#: NVIDIA's chip codenames (GH100, GB100, AD102GL, GA100, TU104, GV100): lspci names a GPU by its chip first.
_CODENAME = re.compile(r"(?:g[a-z]|ad|tu)\d{3}[a-z]*")


def _model_numbers(name: Optional[str]) -> set:
    """The model numbers a GPU's name carries ("NVIDIA H100 80GB HBM3" -> {"h100"}; lspci's "GH100 [H100 SXM5 80GB]"
    -> {"h100"}): words of letters and digits, not a memory size or type, a form factor or a chip codename."""
    words = re.findall(r"[a-z0-9]+", str(name or "").lower())
    return {w for w in words if re.search(r"[a-z]", w) and re.search(r"\d", w) and not _CODENAME.fullmatch(w)
            and not re.fullmatch(r"\d+(?:gb|g|tb)|hbm\d*e?|gddr\d*x?|sxm\d*|pcie\d*", w)}


def same_model(a: Optional[str], b: Optional[str]) -> Optional[bool]:
    """Whether two texts' names of a GPU are one model: False only where both name model numbers and none of one
    begins the other's (H800 against H100; "h100l", pci.ids' H100 NVL, is an H100); None where either names none."""
    x, y = _model_numbers(a), _model_numbers(b)
    if not x or not y:
        return None
    return any(u.startswith(v) or v.startswith(u) for u in x for v in y)


class Machine:
    """The machine the submitted files describe, as the readers' merges assemble it.

    ``accs`` (accelerators by key: a PCI address, or a name where no text gives one) in ``order``; ``pci``
    (functions by address); ``paths``, ``path_reasons`` and ``links`` (PCIe evidence by accelerator);
    ``numa_cpus`` (NUMA node -> CPU list, None where unknown); ``nvml`` and ``amdsmi`` (the management
    libraries' facts); ``mesh`` and ``mesh_file``; ``kernel_log``; ``declared`` (device counts a text declares,
    by vendor) and ``complete`` (the files that list every GPU of a vendor); ``unidentified`` functions and
    ``notes``.  ``scratch`` holds what a reader carries from one step to a later one, under its own keys.
    """

    def __init__(self, files: List[Entry], under_load: bool, snapshot: Optional[Dict[str, Any]] = None):
        self.files = files
        self.under_load = under_load
        self.snapshot = snapshot
        self.accs: Dict[str, Dict[str, Any]] = {}
        self.order: List[str] = []
        self.notes: List[str] = []
        self.pci: Dict[str, Dict[str, Any]] = {}
        self.paths: Dict[str, Dict[str, Any]] = {}
        self.path_reasons: Dict[str, str] = {}
        self.links: Dict[str, Dict[str, Any]] = {}
        self.unidentified: List[Dict[str, Any]] = []
        self.numa_cpus: Dict[int, Optional[str]] = {}
        self.declared: Dict[str, Dict[str, Any]] = {}
        self.complete: Dict[str, List[str]] = {}
        self.nvml: Dict[str, Any] = {"available": False, "source": None, "errors": [], "files": [],
                                     "reason": "no nvidia-smi -q text among the submitted files"}
        self.amdsmi: Dict[str, Any] = {"available": False, "source": None, "errors": [], "files": [],
                                       "reason": "no amd-smi or rocm-smi text among the submitted files"}
        self.mesh: Optional[Dict[str, Any]] = None
        self.mesh_file: Optional[str] = None
        self.kernel_log: Optional[Dict[str, Any]] = None
        self.scratch: Dict[str, Any] = {}

    def add(self, key: str, acc: Dict[str, Any]) -> Dict[str, Any]:
        """Add an accelerator; one already known under ``key`` keeps its facts and gains those it lacks."""
        if key in self.accs:
            cur = self.accs[key]
            for k, v in acc.items():
                if cur.get(k) in (None, [], {}) and v not in (None, [], {}):
                    cur[k] = v
            cur["sources"] = sorted(set(cur["sources"]) | set(acc["sources"]))
            return cur
        self.accs[key] = acc
        self.order.append(key)
        return acc

    def keys_of(self, vendor: str) -> List[str]:
        """The PCI addresses of the vendor's accelerators known so far, in bus order."""
        return sorted(k for k in self.order if is_bdf(k) and self.accs[k]["vendor"] == vendor)

    def by_bus_order(self, indices: Iterable[int], vendor: str = "NVIDIA", names: Optional[Dict[int, str]] = None,
                     source: Optional[str] = None) -> Dict[int, str]:
        """A text's GPU indices onto the vendor's GPUs the other texts name, in bus order, where the counts agree
        (the order nvidia-smi, DCGM and CUDA by default number GPUs in); {} where they differ or none is known.
        ``names`` (index -> the model name the text gives): where a GPU so matched is named as another model, the
        indices are matched model by model instead (bus order within a model: CUDA's default order puts the fastest
        first); where no GPU of the text is a model the other texts show, they are of different machines (a
        conflict); where the models cannot be matched, a note and {}."""
        keys, idx = self.keys_of(vendor), sorted(set(indices))
        if not idx or len(idx) != len(keys):
            return {}
        names = names or {}
        matched = dict(zip(idx, keys))
        if all(same_model(names.get(i), self.accs[k].get("name")) is not False for i, k in matched.items()):
            return matched
        if all(same_model(names.get(i), self.accs[k].get("name")) is False for i in idx for k in keys):
            i = idx[0]
            self.conflict(f"the model of GPU {i}", self.accs[keys[0]].get("name"), names.get(i),
                          ", ".join(self.accs[keys[0]]["sources"][:2]), source)
        free, by_model = list(keys), {}
        for i in idx:
            k = next((k for k in free if same_model(names.get(i), self.accs[k].get("name")) is not False), None)
            if k is None:
                self.notes.append(f"{source}: its GPUs' models do not pair with the other texts' GPUs one to one: "
                                  "they are not matched (named GPU<index>)")
                return {}
            free.remove(k)
            by_model[i] = k
        self.notes.append(f"{source}: its GPUs are not in bus order (CUDA's default order puts the fastest first): "
                          "matched model by model, in bus order within a model")
        return by_model

    def named_gpu(self, index: int, pci_id: Optional[str], name: Optional[str], source: str, how: str) -> str:
        """An NVIDIA GPU that a text names only by its index (no text gives its PCI address): added as
        ``GPU<index>``, its note saying ``how`` it is named; its key."""
        key = f"GPU{index}"
        a = self.add(key, new_accelerator(key, pci_id, "NVIDIA", name, source))
        a["note"] = f"named by its {how}; no text gives its PCI address"
        return key

    @staticmethod
    def conflict(what: str, a: Any, b: Any, fa: Optional[str], fb: Optional[str]) -> None:
        raise EvidenceConflict(f"{fa} and {fb} disagree on {what} ({a!r} and {b!r}): they describe different machines "
                               "or different states of one; fix: submit one machine's texts per folder, captured "
                               "together")


class Reader(ABC):
    """One tool's output: how it is recognised, read and merged.  A new tool is one module with a subclass of
    this and its instance as the module's ``READER``; its ``order`` places it among the others.

    Only :meth:`parse` may refuse a text, with a ``ValueError`` that names the line; every limit on size, lines
    and depth is checked there.  A merge never raises, except :class:`EvidenceConflict` when two files disagree.
    """

    #: kind -> the tool whose output it is, as the report names it.  A tool with two output forms read by one
    #: parser has two kinds (``nvidia-smi -q`` text and ``-q -x`` XML).
    kinds: ClassVar[Dict[str, str]] = {}
    #: The merge steps this reader takes part in (the step numbers above).
    steps: ClassVar[Tuple[int, ...]] = ()
    #: Where its ``detect`` is tried among the readers (lower first): an earlier reader wins a text that two
    #: would recognise.
    order: ClassVar[int] = 0
    #: The ``sits audit-text`` option that names a file of this tool (None: none), and its help.
    option: ClassVar[Optional[str]] = None
    option_help: ClassVar[Optional[str]] = None
    #: Whether the text's PCIe link readings count as taken under load by what the text itself shows ("read": a
    #: utilisation figure) or only by the submitter's ``--under-load`` ("declared"); None: no link readings.
    link_load: ClassVar[Optional[str]] = None

    @property
    def kind(self) -> str:
        """The kind a submitter names this tool's files by (its first)."""
        return next(iter(self.kinds))

    def detect_document(self, head: str) -> Optional[Detection]:
        """A structured document (XML, JSON) of this tool: (kind, why); (None, what it is) to refuse a document
        of this syntax that is not the tool's; None otherwise.  Tried for every reader before any :meth:`detect`:
        a document's syntax tells its kind before any line of it does."""
        return None

    @abstractmethod
    def detect(self, head: str) -> Optional[Detection]:
        """(kind, why) when ``head`` (the text's first MiB) is this tool's output; None when it is not."""

    @abstractmethod
    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        """The facts of a text of ``kind`` (``cuts``: what was cut or elided); raises ValueError (naming the line)
        when nothing of it can be read.  ``known_ids``: the profile's accelerator PCI IDs."""

    @abstractmethod
    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """Add what one read file (``entry["facts"]``) shows to ``machine``, in ``step``."""

    def finish(self, machine: Machine, step: int) -> None:  # noqa: B027 (optional: most readers finish nothing)
        """After every file of ``step`` is merged; called whether or not a file of this reader was read."""
