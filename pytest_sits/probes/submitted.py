"""Submitted evidence: the files a vendor or operator sends instead of a machine, each one's kind told from its
content, read by the parser of that kind.

Kinds (:data:`KINDS`): ``nvidia-smi -q`` text and ``-q -x`` XML, ``nvidia-smi
topo -m``, ``lspci -tv``, ``lspci -vv`` (and plain ``lspci``), ``lspci -PP``,
``rocm-smi``, ``amd-smi`` text and ``--json``, and kernel logs (``dmesg``,
``journalctl -k``, ``/var/log/kern.log``) with NVRM Xid or AER lines.  A file
whose kind cannot be told, or whose parser finds nothing it can read, is
refused with what it looks like (another tool's output, a report, a binary
file); the others are read even when cut or re-spaced, and what was cut is
listed with the file.

Files are untrusted: read through :mod:`pytest_sits.files` (confined to the
folder, no link followed, at most :data:`FILE_LIMIT` bytes each,
:data:`MAX_FILES` files, :data:`MAX_DEPTH` folders deep).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

FILE_LIMIT = 16 << 20
TOTAL_LIMIT = 256 << 20
MAX_FILES = 512
MAX_DEPTH = 4

#: kind -> the tool whose output it is (as the report names it).
KINDS = {
    "nvidia-smi-q": "nvidia-smi -q",
    "nvidia-smi-q-xml": "nvidia-smi -q -x (XML)",
    "nvidia-smi-topo": "nvidia-smi topo -m",
    "lspci-tv": "lspci -tv",
    "lspci-vv": "lspci -vv",
    "lspci-pp": "lspci -PP",
    "rocm-smi": "rocm-smi",
    "amd-smi": "amd-smi",
    "kernel-log": "kernel log (dmesg / journalctl -k)",
}

#: Outputs of other tools: recognised to say what a refused file is, not read.
OTHER_TOOLS: List[Tuple[str, "re.Pattern[str]"]] = [
    ("the nvidia-smi summary table (plain `nvidia-smi`; submit `nvidia-smi -q` instead)",
     re.compile(r"^\|\s*NVIDIA-SMI \d", re.M)),
    ("`nvidia-smi nvlink` output", re.compile(r"^\s*Link \d{1,2}: .*(?:GB/s|Inactive|<inactive>)", re.M)),
    ("`dcgmi diag` output", re.compile(r"Diagnostic\s*\|\s*Result|dcgmi", re.I)),
    ("`lscpu` output", re.compile(r"^Architecture:\s+\S+.*\n(?:.*\n){0,4}\s*CPU op-mode", re.M)),
    ("`numactl -H` output", re.compile(r"^available: \d+ nodes?", re.M)),
    ("`dmidecode` output", re.compile(r"^# dmidecode|^SMBIOS \d", re.M)),
    ("`ibstat` / `ibv_devinfo` output", re.compile(r"^CA '|^hca_id:", re.M)),
    ("a pytest-sits report (JSON): replay it with `sits replay`", re.compile(r'"schema"\s*:\s*"pytest-sits/report"')),
    ("a shell script", re.compile(r"\A#!")),
]

_NVSMI_KEYS = re.compile(r"^\s*(?:Product Name|Persistence Mode|Clocks (?:Event|Throttle) Reasons|ECC Errors|"
                         r"Remapped Rows|Retired Pages|FB Memory Usage|GPU UUID|VBIOS Version|Performance State|"
                         r"Attached GPUs)\s*(?::|$)", re.M)
#: A section of a GPU copied without its header: its title, then an indented "Key : value" line.
_NVSMI_SECTION = re.compile(r"^([ \t]*)(?:ECC Errors|Clocks (?:Event|Throttle) Reasons|Remapped Rows|Retired Pages|"
                            r"FB Memory Usage|GPU Power Readings|Power Readings|ECC Mode)[ \t]*\r?\n"
                            r"(?:\1[ \t]+[A-Za-z][^\n:]{0,60}\r?\n){0,2}\1[ \t]+"
                            r"[A-Za-z][^:\n]{0,60}?[ \t]:[ \t]", re.M)
_TOPO_ROW = re.compile(r"^\s*GPU\d{1,4}\s+(?:X|NV\d{1,3}|SYS|SOC|NODE|PHB|PXB|PIX)\s", re.M)
_TREE = re.compile(r"^[ \t|]*[-+\\]-?[-+\\]?\[[0-9a-f]{4,8}:[0-9a-f]{2}\]|-\[[0-9a-f]{2}(?:-[0-9a-f]{2})?\]-", re.M | re.I)
_PP = re.compile(r"^(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7](?:/(?:[0-9a-f]{2}:)?[0-9a-f]{2}\.[0-7])+ [^:\n]{1,80}:",
                 re.M | re.I)
_LSPCI_HEAD = re.compile(r"^(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] [^:\n]{1,80}: ", re.M | re.I)
_VV_DETAIL = re.compile(r"^\s+(?:Subsystem|Control|Capabilities|LnkCap|LnkSta|Kernel driver in use|NUMA node|"
                        r"Physical Slot|Flags|Region \d)\b", re.M)
_ROCM = re.compile(r"ROCm System Management Interface|End of ROCm SMI Log|^GPU\[\d{1,4}\]\s*:|"
                   r"between two GPUs", re.M)
_AMDSMI = re.compile(r"^GPU:\s*\d{1,4}\s*\n[ \t]+[A-Z][A-Z_]{1,40}:", re.M)
_KLOG = re.compile(r"NVRM: Xid|PCIe Bus Error|AER: (?:Multiple )?(?:Corrected|Uncorrected)|"
                   r"^\s*\[\s*\d{1,8}\.\d{3,6}\]|^\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel:|^\d{4}-\d\d-\d\dT\S+ \S+ kernel:",
                   re.M)

def classify(text: str) -> Tuple[Optional[str], str]:
    """The kind of a submitted text and why; (None, what it looks like) when it is none of :data:`KINDS`."""
    head = text[:1 << 20]
    stripped = head.lstrip("\ufeff \t\r\n")
    if "\x00" in head[:65536]:
        return None, "a binary file (it holds NUL bytes)"
    from .nvsmi_q import looks_like_xml

    if looks_like_xml(head):
        if "<nvidia_smi_log" in head:
            return "nvidia-smi-q-xml", "an <nvidia_smi_log> XML document"
        return None, "an XML document that is not `nvidia-smi -q -x` output (no <nvidia_smi_log>)"
    if stripped[:1] in "[{":
        if re.search(r'"(?:gpu|gpu_data)"\s*:', head) and re.search(r'"(?:asic|bus|vbios|limit|usage|power|pcie|'
                                                                    r'ecc|vram|bdf|numa|driver)"\s*:', head, re.I):
            return "amd-smi", "amd-smi --json (objects with a \"gpu\" key)"
    if re.search(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$", head, re.M) or \
            "NVSMI LOG" in head or len(_NVSMI_KEYS.findall(head)) >= 2 or _NVSMI_SECTION.search(head):
        return "nvidia-smi-q", "'GPU 0000:BB:DD.F' sections or nvidia-smi -q fields"
    if _AMDSMI.search(head):
        return "amd-smi", "'GPU: N' blocks with upper-case sections"
    if _ROCM.search(head):
        return "rocm-smi", "rocm-smi banners or 'GPU[i] :' lines"
    if _TOPO_ROW.search(head) and re.search(r"^\s*GPU0\b", head, re.M):
        return "nvidia-smi-topo", "a GPU0.. header and rows of X/NV#/SYS/NODE/PHB/PXB/PIX cells"
    if len(_PP.findall(head)) >= 1:
        return "lspci-pp", "'bb:dd.f/bb:dd.f Class: Name' paths"
    if _TREE.search(head):
        return "lspci-tv", "a tree of [domain:bus] and dd.f branches"
    heads = _LSPCI_HEAD.findall(head)
    if heads:
        if _VV_DETAIL.search(head):
            return "lspci-vv", "function headers with indented details"
        return "lspci-vv", "function headers ('bb:dd.f Class: Name': plain lspci)"
    if _KLOG.search(head):
        return "kernel-log", "kernel log lines"
    for what, rx in OTHER_TOOLS:
        if rx.search(head):
            return None, what
    first = next((ln.strip() for ln in head.splitlines() if ln.strip()), "")
    return None, (f"none of the tools this suite reads (first line: {first[:60]!r})" if first else "an empty file")

def looks_like(text: str) -> str:
    """What a text looks like (for a refusal message): another tool's output, or one of the kinds read here."""
    kind, why = classify(text)
    if kind is not None:
        return f"{KINDS[kind]} output ({why})"
    return why

def parse_as(kind: str, text: str, known_ids: Any = ()) -> Dict[str, Any]:
    """The facts of a text of ``kind``; raises ValueError (the parser's error, naming the line) when nothing of it
    can be read."""
    from . import amd_text, nvsmi_q, textimport as ti
    from .health import parse_aer_lines, parse_xids

    if kind in ("nvidia-smi-q", "nvidia-smi-q-xml"):
        return nvsmi_q.parse(text)
    if kind == "nvidia-smi-topo":
        return ti.parse_nvidia_smi_topo(text)
    if kind == "lspci-tv":
        return ti.read_lspci_tv(text, known_ids=known_ids)
    if kind == "lspci-pp":
        return ti.read_lspci_pp(text, known_ids=known_ids)
    if kind == "lspci-vv":
        funcs = ti.parse_lspci_vv(text)
        return {"functions": funcs}
    if kind == "rocm-smi":
        return amd_text.parse_rocm_smi(text)
    if kind == "amd-smi":
        return amd_text.parse_amd_smi(text)
    if kind == "kernel-log":
        lines = text.splitlines()[:2_000_000]
        xids = parse_xids(lines)
        aer = parse_aer_lines(lines)
        stamps = [m.group(1) for m in (re.match(r"^\s*\[\s*(\d{1,8}\.\d{3,6})\]", ln) for ln in lines) if m]
        return {"records": len(lines), "xids": xids, "aer": aer, "devices": log_devices(lines, xids),
                "span_s": [float(stamps[0]), float(stamps[-1])] if stamps else None}
    raise ValueError(f"no reader for kind {kind!r}")

_LOG_DEVICE = re.compile(r"\b(?P<drv>nvidia|amdgpu) (?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]):.{0,80}?"
                         r"device \[(?P<vid>[0-9a-f]{4}):(?P<did>[0-9a-f]{4})\]", re.I)


def log_devices(lines: List[str], xids: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The accelerators a kernel log names: the GPU of each NVRM Xid line (its bus; function 0), and functions of
    the nvidia or amdgpu driver whose AER detail line gives an accelerator's [vendor:device] ID."""
    from .textimport import ACCEL_IDS

    out: Dict[str, Dict[str, Any]] = {}
    for x in xids:
        bdf = f"{x['bdf_prefix']}.0"
        out.setdefault(bdf, {"bdf": bdf, "vendor": "NVIDIA", "pci_id": None, "why": "an NVRM Xid line names it"})
    for line in lines:
        m = _LOG_DEVICE.search(line)
        if not m:
            continue
        pci_id = f"{m.group('vid').lower()}:{m.group('did').lower()}"
        if pci_id not in ACCEL_IDS:
            continue
        bdf = m.group("bdf").lower()
        prev = out.get(bdf) or out.get(bdf.rsplit(".", 1)[0] + ".0")
        if prev is not None and prev["bdf"].rsplit(".", 1)[0] == bdf.rsplit(".", 1)[0]:
            prev["pci_id"] = prev["pci_id"] or pci_id
            continue
        out[bdf] = {"bdf": bdf, "vendor": "NVIDIA" if pci_id.startswith("10de") else "AMD", "pci_id": pci_id,
                    "why": f"the {m.group('drv')} driver reports {ACCEL_IDS[pci_id]} ({pci_id}) at it"}
    return sorted(out.values(), key=lambda d: d["bdf"])


# ---- reading a folder -------------------------------------------------------------------------------------

SNAPSHOT_KIND = "snapshot"


def is_snapshot(folder: Path) -> bool:
    """A folder `sits capture DIR` wrote: its manifest.json names the snapshot format, and it has an fs/ tree."""
    from ..files import UntrustedInputError, load_json

    if os.path.islink(folder / "fs") or not (folder / "fs").is_dir() or not os.path.lexists(folder / "manifest.json"):
        return False
    try:
        manifest = load_json("manifest.json", 1 << 20, what="snapshot manifest", root=folder)
    except UntrustedInputError:
        return False
    return isinstance(manifest, dict) and str(manifest.get("format", "")).startswith("sits-snapshot/")


def _walk(root: Path) -> Tuple[List[str], List[Dict[str, Any]]]:
    """Regular files below ``root`` (relative names, sorted; a snapshot folder as one name ending in '/'), and
    what was not read (links, devices, too deep)."""
    found: List[str] = []
    skipped: List[Dict[str, Any]] = []
    todo: List[Tuple[str, int]] = [("", 0)]
    while todo:
        rel, depth = todo.pop()
        if is_snapshot(root / rel if rel else root):
            found.append(f"{rel}/" if rel else "./")
            continue
        try:
            entries = sorted(os.scandir(root / rel) if rel else os.scandir(root), key=lambda e: e.name)
        except OSError as exc:
            skipped.append({"name": rel or ".", "why": f"folder not readable ({exc.strerror})"})
            continue
        for e in entries:
            name = f"{rel}/{e.name}" if rel else e.name
            try:
                st = os.lstat(e.path)
            except OSError as exc:
                skipped.append({"name": name, "why": f"not readable ({exc.strerror})"})
                continue
            if stat.S_ISLNK(st.st_mode):
                skipped.append({"name": name, "why": "a symbolic link: links are not followed in submitted "
                                                     "evidence"})
            elif stat.S_ISDIR(st.st_mode):
                if depth + 1 > MAX_DEPTH:
                    skipped.append({"name": name, "why": f"more than {MAX_DEPTH} folders deep"})
                else:
                    todo.append((name, depth + 1))
            elif stat.S_ISREG(st.st_mode):
                if e.name.startswith("."):
                    skipped.append({"name": name, "why": "a hidden file"})
                else:
                    found.append(name)
            else:
                skipped.append({"name": name, "why": "not a regular file (a device, FIFO or socket)"})
    found.sort()
    if len(found) > MAX_FILES:
        skipped.extend({"name": n, "why": f"more than {MAX_FILES} files in the folder"} for n in found[MAX_FILES:])
        found = found[:MAX_FILES]
    return found, skipped

def read_file_entry(root: Path, rel: str, known_ids: Any = (),
                    declared: Optional[str] = None) -> Dict[str, Any]:
    """One submitted file: ``{"name", "kind", "tool", "status" (read|refused), "why", "facts", "cuts", "bytes"}``.

    ``declared``: the kind the submitter named (``sits audit-text --nvidia-smi-q FILE``); the content decides,
    and a different content is noted."""
    from ..files import UntrustedInputError, read_bytes

    entry: Dict[str, Any] = {"name": rel, "kind": None, "tool": None, "status": "refused", "why": None,
                             "facts": None, "cuts": [], "bytes": None, "declared": declared}
    try:
        data = read_bytes(root, rel, FILE_LIMIT)
    except UntrustedInputError as exc:
        entry["why"] = str(exc)
        return entry
    except OSError as exc:
        entry["why"] = f"{rel}: {exc.strerror or exc}"
        return entry
    entry["bytes"] = len(data)
    text = data.decode("utf-8", "replace")
    if "\ufffd" in text[:65536] and text[:65536].count("\ufffd") > 64:
        entry["why"] = "not text (not UTF-8): a binary file"
        return entry
    kind, why = classify(text)
    if kind is None:
        entry["why"] = f"not read: it looks like {why}"
        return entry
    entry["kind"], entry["tool"] = kind, KINDS[kind]
    if declared and declared != kind and not (declared.startswith("nvidia-smi-q") and kind.startswith("nvidia-smi-q")):
        entry["declared_note"] = f"given as {KINDS.get(declared, declared)}, but its content is {KINDS[kind]} ({why})"
    try:
        facts = parse_as(kind, text, known_ids)
    except (ValueError, RecursionError) as exc:
        entry["why"] = f"nothing could be read as {KINDS[kind]}: {exc}"
        entry["kind_guess"] = kind
        entry["kind"] = None
        return entry
    entry["facts"] = facts
    entry["status"] = "read"
    entry["why"] = why
    entry["cuts"] = list(facts.get("cuts") or [])
    return entry

def read_evidence(path: Path, files: Optional[List[Tuple[str, Optional[str]]]] = None,
                  known_ids: Any = ()) -> Dict[str, Any]:
    """Every submitted file below ``path`` (a folder, or one file), or the ``files`` given as (path, declared
    kind): ``{"root", "files": [entry], "skipped": [...]}``."""
    path = Path(path)
    entries: List[Dict[str, Any]] = []
    skipped: List[Dict[str, Any]] = []
    total = 0
    if files is not None:
        pairs = [(Path(f), kind) for f, kind in files]
    elif path.is_dir() and not path.is_symlink():
        names, skipped = _walk(path)
        pairs = [(Path(str(path / n.rstrip("/")) + "/") if n.endswith("/") else path / n, None) for n in names]
    else:
        pairs = [(path, None)]
    for fpath, kind in pairs:
        if str(fpath).endswith("/") or (fpath.is_dir() and not fpath.is_symlink() and is_snapshot(fpath)):
            shown = str(fpath.relative_to(path)) if files is None and path.is_dir() else str(fpath)
            entries.append({"name": shown.rstrip("/") or ".", "kind": SNAPSHOT_KIND, "tool": "sits capture snapshot",
                            "status": "read", "why": "a folder `sits capture` wrote (manifest.json, fs/)",
                            "facts": None, "cuts": [], "bytes": None, "path": str(fpath).rstrip("/") or ".",
                            "declared": kind})
            continue
        if os.path.islink(fpath):
            skipped.append({"name": str(fpath), "why": "a symbolic link: links are not followed in submitted "
                                                         "evidence; name the file itself"})
            continue
        if files is not None or not path.is_dir():
            root, rel = fpath.parent if str(fpath.parent) else Path("."), fpath.name
            shown = str(fpath)
        else:
            root, rel = path, str(fpath.relative_to(path))
            shown = rel
        entry = read_file_entry(root, rel, known_ids, declared=kind)
        entry["name"] = shown
        total += entry["bytes"] or 0
        if total > TOTAL_LIMIT:
            skipped.append({"name": shown, "why": f"the files read so far exceed {TOTAL_LIMIT >> 20} MiB"})
            break
        entries.append(entry)
    return {"root": str(path), "files": entries, "skipped": skipped}

ParseFn = Callable[[str], Dict[str, Any]]
