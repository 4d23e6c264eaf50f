"""Snapshots: ``sits capture DIR`` copies what the probes read; :class:`SnapshotPlatform` reads the copy."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any, Dict, Optional

from .. import __version__
from ..probes import nvml as nvml_probe
from ..probes import sysfs
from ..probes.sysfs import SysfsValueError
from ..files import UntrustedInputError, load_json, write_new
from .base import PlatformError
from .recorded import RecordedPlatform

SNAPSHOT_FORMAT = "sits-snapshot/1"


def _facts_problem(facts: Any) -> Optional[str]:
    """Why management-library facts read from a snapshot cannot be used (None when their shape is right)."""
    if not isinstance(facts, dict):
        return "not a JSON object"
    devices = facts.get("devices", [])
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        return "'devices' is not a list of objects"
    if len(devices) > 4096:
        return f"{len(devices)} devices (more than 4096)"
    for i, d in enumerate(devices):
        if d.get("pci_bus_id") is not None and not isinstance(d["pci_bus_id"], str):
            return f"devices[{i}].pci_bus_id is not a string"
        if d.get("name") is not None and not isinstance(d["name"], str):
            return f"devices[{i}].name is not a string"
        mem = d.get("memory_total_bytes")
        if mem is not None and (not isinstance(mem, int) or isinstance(mem, bool) or mem < 0):
            return f"devices[{i}].memory_total_bytes is not a byte count"
    p2p = facts.get("p2p_nvlink")
    if p2p is not None and (not isinstance(p2p, list) or len(p2p) > 4096
                            or not all(isinstance(row, list) and len(row) <= 4096 for row in p2p)):
        return "'p2p_nvlink' is not a matrix"
    return None


class SnapshotPlatform(RecordedPlatform):
    kind = "snapshot"
    recorded = "a snapshot"
    no_load = "a snapshot cannot apply load: the link readings are the captured ones"
    no_host = "a snapshot holds captured files, not a machine to measure"
    no_device = "a snapshot holds no device to measure"
    no_binding = "a snapshot cannot bind processes on the machine it was captured on"

    def __init__(self, directory: Path):
        directory = Path(directory)
        if not str(directory) or str(directory) == ".":
            raise PlatformError("snapshot: names no folder; fix: --sits-platform snapshot:DIR with the folder that "
                                "`sits capture DIR` wrote")
        if os.path.islink(directory):
            raise PlatformError(f"{directory}: a symbolic link; evidence folders are read without following links; "
                                "fix: name the snapshot folder itself, not a link to it (its target is not shown)")
        if not os.path.isdir(directory):
            raise PlatformError(f"{directory}: no such folder; fix: give the folder that `sits capture DIR` wrote")
        manifest_path = directory / "manifest.json"
        if not os.path.lexists(manifest_path):
            raise PlatformError(f"{directory}: not a snapshot (no manifest.json); "
                                "fix: make one with `sits capture DIR` on the machine to audit")
        try:
            self.manifest = load_json("manifest.json", 1 << 20, what="snapshot manifest", root=directory)
        except UntrustedInputError as exc:
            raise PlatformError(f"{str(exc).split('; fix:')[0]}; fix: capture the snapshot again") from None
        if not isinstance(self.manifest, dict):
            raise PlatformError(f"{manifest_path}: not a JSON object; fix: capture the snapshot again")
        if self.manifest.get("format") != SNAPSHOT_FORMAT:
            raise PlatformError(f"{manifest_path}: format {self.manifest.get('format')!r} is not "
                                f"{SNAPSHOT_FORMAT!r}; fix: capture it again with this version of pytest-sits")
        fs = directory / "fs"
        if os.path.islink(fs) or not os.path.isdir(fs):
            raise PlatformError(f"{fs}: not a folder of the snapshot (a link or missing); the files a snapshot holds "
                                "are read only from its own fs/ folder; fix: capture the snapshot again")
        self.directory = directory
        label = (f"snapshot:{directory} (captured on {str(self.manifest.get('hostname'))[:200]} at "
                 f"{str(self.manifest.get('captured_at_iso'))[:40]})")
        super().__init__(directory / "fs", label)

    def _facts(self, name: str, what: str) -> Dict[str, Any]:
        path = self.directory / name
        if not os.path.lexists(path):
            return {"available": False, "reason": f"snapshot holds no {what} facts", "devices": [], "errors": []}
        try:
            facts = load_json(name, 64 << 20, what=f"snapshot's {what} facts", root=self.directory)
        except UntrustedInputError as exc:
            raise PlatformError(f"{str(exc).split('; fix:')[0]}; fix: capture the snapshot again") from None
        problem = _facts_problem(facts)
        if problem:
            raise PlatformError(f"{path}: {problem}; fix: capture the snapshot again")
        return facts

    def inventory(self) -> Dict[str, Any]:
        try:
            return super().inventory()
        except (UntrustedInputError, SysfsValueError) as exc:
            fix = "" if "fix:" in str(exc) else "; fix: capture the snapshot again"
            raise PlatformError(f"snapshot {self.directory}: {exc}{fix}") from None

    def nvml(self) -> Dict[str, Any]:
        return self._facts("nvml.json", "NVML")

    def amdsmi(self) -> Dict[str, Any]:
        return self._facts("amdsmi.json", "amdsmi")


def _prepare_dest(dest: Path) -> None:
    """``dest`` must be new, or an empty folder of the caller's that is not a link."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        os.makedirs(dest.parent, exist_ok=True)
        os.mkdir(dest, 0o755)
        return
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise PlatformError(f"{dest}: exists and is not a folder (a link or a file); fix: choose a new folder")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise PlatformError(f"{dest}: belongs to uid {st.st_uid}, not to you ({os.geteuid()}); a snapshot is "
                            "written only into a folder of your own; fix: choose a new folder")
    if any(os.scandir(dest)):
        raise PlatformError(f"{dest}: is not empty (already holds a snapshot or other files); fix: choose a new "
                            "folder")


def _mkdirs(base: Path, rel: Path) -> Path:
    """Create ``base/rel`` one component at a time, refusing a component that is a link."""
    cur = base
    for part in rel.parts:
        cur = cur / part
        try:
            os.mkdir(cur, 0o755)
        except FileExistsError:
            st = os.lstat(cur)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                raise PlatformError(f"{cur}: a link or a file where a folder belongs; fix: capture into a new "
                                    "folder") from None
    return cur


def capture(dest: Path, root: Path = Path("/"), nvml: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Copy what the probes read below ``root`` into ``dest`` (a snapshot).

    ``dest`` must be new (or an empty folder of the caller's); every file is created with O_EXCL and
    O_NOFOLLOW, so nothing planted in the folder is written through."""
    dest = Path(dest)
    _prepare_dest(dest)
    fs = _mkdirs(dest, Path("fs"))
    copied, skipped = 0, []
    for pattern in sysfs.CAPTURE_GLOBS:
        for src in sorted(root.glob(pattern)):
            rel = src.relative_to(root)
            try:
                data = src.read_bytes()
            except OSError as exc:
                skipped.append({"path": "/" + str(rel), "error": exc.strerror})
                continue
            write_new(_mkdirs(fs, rel.parent) / rel.name, data)
            copied += 1
    bus = root / "sys/bus/pci/devices"
    root_real = os.path.realpath(root)
    for entry in sorted(bus.iterdir()) if bus.is_dir() else []:
        real = os.path.realpath(entry)
        rel_real = os.path.relpath(real, root_real)
        if rel_real.startswith(".."):
            skipped.append({"path": str(entry), "error": f"resolves outside {root}"})
            continue
        target = _mkdirs(fs, Path(rel_real))
        for attr in sysfs.PCI_ATTRS:
            try:
                data = (Path(real) / attr).read_bytes()
            except OSError:
                continue
            write_new(target / attr, data)
            copied += 1
        try:
            drv = os.path.basename(os.readlink(os.path.join(real, "driver")))
            os.symlink(f"../../../../bus/pci/drivers/{drv}", target / "driver")
        except OSError:
            pass
        link_dir = _mkdirs(fs, Path("sys/bus/pci/devices"))
        os.symlink(os.path.relpath(target, link_dir), link_dir / entry.name)
    nv = nvml if nvml is not None else nvml_probe.collect()
    write_new(dest / "nvml.json", json.dumps(nv, indent=2, sort_keys=True, default=str).encode())
    if nvml is None:
        from ..probes import amd

        write_new(dest / "amdsmi.json", json.dumps(amd.collect(), indent=2, sort_keys=True, default=str).encode())
    now = time.time()
    manifest = {
        "format": SNAPSHOT_FORMAT, "sits_version": __version__,
        "hostname": socket.gethostname() if str(root) == "/" else sysfs.read_text(root, "proc/sys/kernel/hostname"),
        "captured_at": now, "captured_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "root": str(root), "files": copied, "unreadable": skipped,
        "euid": os.geteuid() if hasattr(os, "geteuid") else None,
    }
    write_new(dest / "manifest.json", json.dumps(manifest, indent=2).encode())
    return manifest
