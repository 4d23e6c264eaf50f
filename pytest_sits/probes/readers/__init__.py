"""The readers of submitted text, one module per tool, and their registry.

Each module holds one :class:`~.base.Reader`: how its tool's output is recognised (``detect``), read
(``parse``) and added to the machine the files describe (``merge``, in the steps of :mod:`.base`).
:data:`READERS` lists them in the order their ``detect`` is tried (``detect_document`` of every reader first:
XML and JSON documents are told by their syntax); the first that recognises a text reads it.  A text that none
recognises is refused with what it looks like: another tool's output (:data:`OTHER_TOOLS`), a binary file, a
report.

A new tool: a module here with a subclass of :class:`~.base.Reader` (``kinds``, ``steps``, ``order``,
``detect``, ``parse``, ``merge``) and its instance as the module's ``READER``, and its tests.  The registry finds
it: every module of this package that has a ``READER`` is a reader, tried in the order of their ``order``.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

import importlib
import pkgutil

from .base import Detection, Machine, Reader

__all__ = ["KINDS", "OTHER_TOOLS", "READERS", "Machine", "Reader", "classify", "looks_like", "merge_steps",
           "parse_as", "reader_of", "same_tool", "tool_of"]



def _discover() -> Tuple[Reader, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        reader = getattr(importlib.import_module(f"{__name__}.{info.name}"), "READER", None)
        if isinstance(reader, Reader):
            found.append(reader)
    orders = [r.order for r in found]
    if len(set(orders)) != len(orders):
        raise RuntimeError(f"two readers share a detection order: {sorted(orders)}")
    return tuple(sorted(found, key=lambda r: r.order))


#: Every reader, in the order its ``detect`` is tried: an earlier one wins a text that two would recognise.
READERS: Tuple[Reader, ...] = _discover()

#: kind -> the tool whose output it is (as the report names it), of the readers above.
KINDS: Dict[str, str] = {kind: tool for r in READERS for kind, tool in r.kinds.items()}

#: Outputs of other tools: recognised to say what a refused file is, not read.
OTHER_TOOLS: List[Tuple[str, re.Pattern[str]]] = [
    ("the nvidia-smi summary table (plain `nvidia-smi`; submit `nvidia-smi -q` instead)",
     re.compile(r"^\|\s*NVIDIA-SMI \d", re.M)),
    ("`nvidia-smi nvlink` output", re.compile(r"^\s*Link \d{1,2}: .*(?:GB/s|Inactive|<inactive>)", re.M)),
    ("`lscpu` output", re.compile(r"^Architecture:\s+\S+.*\n(?:.*\n){0,4}\s*CPU op-mode", re.M)),
    ("`numactl -H` output", re.compile(r"^available: \d+ nodes?", re.M)),
    ("`dmidecode` output", re.compile(r"^# dmidecode|^SMBIOS \d", re.M)),
    ("`ibstat` / `ibv_devinfo` output", re.compile(r"^CA '|^hca_id:", re.M)),
    ("a pytest-sits report (JSON): replay it with `sits replay`", re.compile(r'"schema"\s*:\s*"pytest-sits/report"')),
    ("a shell script", re.compile(r"\A#!")),
]


def reader_of(kind: Optional[str]) -> Optional[Reader]:
    """The reader of a kind (None for a kind no reader has: a snapshot folder, a refused file)."""
    return next((r for r in READERS if kind in r.kinds), None)


def tool_of(kind: str) -> str:
    """The tool whose output a kind is, as the report names it (the kind itself when no reader has it)."""
    r = reader_of(kind)
    return r.kinds[kind] if r is not None else kind


#: Other vendors' tools made to look like nvidia-smi (same sections, `topo -m` matrices, `-q` fields): refused naming
#: the vendor before any reader looks, so their devices are never taken for NVIDIA's.  Matched on the tool's own
#: banner or an nvidia-smi-style "Product Name   :" field (an lspci listing naming the vendor is still lspci).
LOOK_ALIKES: List[Tuple[str, str, re.Pattern[str]]] = [
    ("Moore Threads", "mthreads-gmi -q", re.compile(r"^\s*Product Name\s+:\s*MTT ", re.M)),
    ("MetaX", "mx-smi", re.compile(r"\bmx-smi\b|^\s*Product Name\s+:\s*MetaX", re.M | re.I)),
    ("Iluvatar CoreX", "ixsmi", re.compile(r"\bixsmi\b|^\s*Product Name\s+:\s*Iluvatar", re.M | re.I)),
    ("Hygon DCU", "hy-smi", re.compile(r"\bhy-smi\b", re.I)),
    ("Cambricon", "cnmon", re.compile(r"\bcnmon\b|^\s*Product Name\s+:\s*MLU\d", re.M | re.I)),
    ("Enflame", "efsmi", re.compile(r"\befsmi\b", re.I)),
    ("Biren", "brsmi", re.compile(r"\bbrsmi\b", re.I)),
]


def look_alike(head: str) -> Optional[str]:
    """Why a text is another vendor's look-alike of NVIDIA's tools, or None."""
    for vendor, tool, rx in LOOK_ALIKES:
        if rx.search(head):
            return (f"`{tool}` output ({vendor}), a look-alike of NVIDIA's tools: this version does not read "
                    f"{vendor} accelerators, and does not take them for NVIDIA's")
    return None


def classify(text: str) -> Detection:
    """The kind of a submitted text and why; (None, what it looks like) when it is none of :data:`KINDS`."""
    head = text[:1 << 20]
    if "\x00" in head[:65536]:
        return None, "a binary file (it holds NUL bytes)"
    other = look_alike(head[:65536])
    if other is not None:
        return None, other
    for r in READERS:
        found = r.detect_document(head)
        if found is not None:
            return found
    for r in READERS:
        found = r.detect(head)
        if found is not None:
            return found
    for what, rx in OTHER_TOOLS:
        if rx.search(head):
            return None, what
    first = next((ln.strip() for ln in head.splitlines() if ln.strip()), "")
    return None, (f"none of the tools this suite reads (first line: {first[:60]!r})" if first else "an empty file")


def looks_like(text: str) -> str:
    """What a text looks like (for a refusal message): another tool's output, or one of the kinds read here."""
    kind, why = classify(text)
    if kind is not None:
        return f"{tool_of(kind)} output ({why})"
    return why


def parse_as(kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
    """The facts of a text of ``kind``; raises ValueError (the parser's error, naming the line) when nothing of it
    can be read."""
    r = reader_of(kind)
    if r is None:
        raise ValueError(f"no reader for kind {kind!r}")
    return r.parse(kind, text, known_ids)


def merge_steps() -> List[Tuple[int, List[Reader]]]:
    """The merge steps in the order they run, each with the readers that take part in it (in :data:`READERS`
    order)."""
    steps = sorted({s for r in READERS for s in r.steps})
    return [(s, [r for r in READERS if s in r.steps]) for s in steps]


def same_tool(kind: str, other: Optional[str]) -> bool:
    """Whether two kinds are output of one tool (``nvidia-smi -q`` text and XML are)."""
    r = reader_of(kind)
    return r is not None and r is reader_of(other)
