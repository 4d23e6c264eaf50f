"""Submitted evidence: the files a vendor or operator sends instead of a machine, each one's kind told from its
content and read by the reader of that tool (:mod:`pytest_sits.probes.readers`).

Kinds (:data:`~pytest_sits.probes.readers.KINDS`): ``nvidia-smi -q`` text and
``-q -x`` XML, ``nvidia-smi topo -m``, ``lspci -tv``, ``lspci -vv`` (and plain
``lspci``), ``lspci -PP``, ``rocm-smi``, ``amd-smi`` text and ``--json``, and
kernel logs (``dmesg``, ``journalctl -k``, ``/var/log/kern.log``) with NVRM Xid
or AER lines, and an MLPerf Inference submission's LoadGen logs, systems JSON
and PTDaemon power log.  A file whose kind cannot be told, or whose reader finds nothing
it can read, is refused with what it looks like (another tool's output, a
report, a binary file); the others are read even when cut or re-spaced, and
what was cut is listed with the file.

Files are untrusted: read through :mod:`pytest_sits.files` (confined to the
folder, no link followed, at most :data:`FILE_LIMIT` bytes each,
:data:`MAX_FILES` files, :data:`MAX_DEPTH` folders deep).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .readers import classify, parse_as, same_tool, tool_of

FILE_LIMIT = 16 << 20
TOTAL_LIMIT = 256 << 20
MAX_FILES = 512
#: A submission tree (closed/ORG/results/SYSTEM/BENCHMARK/SCENARIO/performance/run_1) is 8 deep.
MAX_DEPTH = 10
#: Entries (files, folders, links) looked at in a submitted folder before it is refused unread.
MAX_ENTRIES = 8 * MAX_FILES


class TooManyFiles(ValueError):
    """A submitted folder holds more files than one machine's captures take: refused whole, since reading the
    first :data:`MAX_FILES` (in any order) could leave the capture that decides out."""

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
    seen = 0
    while todo:
        rel, depth = todo.pop()
        if is_snapshot(root / rel if rel else root):
            found.append(f"{rel}/" if rel else "./")
            continue
        try:
            entries = []
            with os.scandir(root / rel) if rel else os.scandir(root) as it:
                for e in it:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        raise TooManyFiles(f"{root}: more than {MAX_ENTRIES} entries; the folder was not read; fix: "
                                           "submit a folder holding only the machine's captures")
                    entries.append(e)
            entries.sort(key=lambda e: e.name)
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
                if st.st_nlink > 1:
                    skipped.append({"name": name, "why": f"a hard link ({st.st_nlink} names for one file): links "
                                                         "are not followed in submitted evidence; copy the file "
                                                         "there instead"})
                elif e.name.startswith("."):
                    skipped.append({"name": name, "why": "a hidden file"})
                else:
                    found.append(name)
            else:
                skipped.append({"name": name, "why": "not a regular file (a device, FIFO or socket)"})
    found.sort()
    if len(found) > MAX_FILES:
        raise TooManyFiles(f"{root}: {len(found)} files, more than the {MAX_FILES} one machine's captures take "
                           f"(reading only some could leave out the one that decides, e.g. {found[-1]!r}); the "
                           "folder was not read; fix: submit a folder holding only the machine's captures")
    return found, skipped

def _utf16(data: bytes) -> bool:
    """A UTF-16 text: its byte-order mark, or ASCII text with every other byte zero."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return True
    head = data[:4096]
    return len(head) >= 16 and head[1::2].count(0) > 0.9 * (len(head) // 2) and head[0::2].count(0) < len(head) // 8


def _one_machine(facts: Any, tool: str) -> None:
    """A text's devices are one machine's: more than MAX_ACCELERATORS is refused, whatever the tool (the readers
    of the largest texts refuse them before parsing them; this holds the others to the same cap)."""
    from .readers.text import MAX_ACCELERATORS

    devices = facts.get("devices") if isinstance(facts, dict) else None
    if isinstance(devices, (list, dict)) and len(devices) > MAX_ACCELERATORS:
        raise ValueError(f"{len(devices)} devices in one {tool} text, more than the {MAX_ACCELERATORS} one machine "
                         "holds; fix: submit one machine's output per file")


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
    if _utf16(data):
        entry["why"] = ("a UTF-16 text (as PowerShell's `>` writes it), not UTF-8; fix: save it as UTF-8, e.g. "
                        "`iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8`, or capture it again with `| Out-File -Encoding "
                        "utf8`")
        return entry
    text = data.decode("utf-8", "replace")
    if "\ufffd" in text[:65536] and text[:65536].count("\ufffd") > 64:
        entry["why"] = "not text (not UTF-8): a binary file"
        return entry
    kind, why = classify(text)
    if kind is None:
        entry["why"] = f"not read: it looks like {why}"
        return entry
    entry["kind"], entry["tool"] = kind, tool_of(kind)
    if declared and declared != kind and not same_tool(kind, declared):
        entry["declared_note"] = f"given as {tool_of(declared)}, but its content is {tool_of(kind)} ({why})"
    try:
        facts = parse_as(kind, text, known_ids)
        _one_machine(facts, tool_of(kind))
    except (ValueError, RecursionError) as exc:
        entry["why"] = f"nothing could be read as {tool_of(kind)}: {exc}"
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

