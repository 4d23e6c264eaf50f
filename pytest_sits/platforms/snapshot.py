"""Snapshots: ``sits capture DIR`` copies what the probes read; :class:`SnapshotPlatform` reads the copy."""

from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from .. import __version__
from ..probes import nvml as nvml_probe
from ..probes import sysfs
from .base import Platform, PlatformError

SNAPSHOT_FORMAT = "sits-snapshot/1"


def _write(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


class SnapshotPlatform(Platform):
    kind = "snapshot"
    link_sample_interval_s = 0.0

    def __init__(self, directory: Path):
        directory = Path(directory)
        manifest_path = directory / "manifest.json"
        if not manifest_path.is_file():
            raise PlatformError(f"{directory}: not a snapshot (no manifest.json); "
                                "fix: make one with `sits capture DIR` on the machine to audit")
        try:
            self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PlatformError(f"{manifest_path}: not valid JSON ({exc}); fix: capture the snapshot again")
        if self.manifest.get("format") != SNAPSHOT_FORMAT:
            raise PlatformError(f"{manifest_path}: format {self.manifest.get('format')!r} is not "
                                f"{SNAPSHOT_FORMAT!r}; fix: capture it again with this version of pytest-sits")
        self.directory = directory
        label = f"snapshot:{directory} (captured on {self.manifest.get('hostname')} at {self.manifest.get('captured_at_iso')})"
        super().__init__(directory / "fs", label)

    def _facts(self, name: str, what: str) -> Dict[str, Any]:
        path = self.directory / name
        if not path.is_file():
            return {"available": False, "reason": f"snapshot holds no {what} facts", "devices": [], "errors": []}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise PlatformError(f"{path}: not valid JSON ({exc}); fix: capture the snapshot again")

    def nvml(self) -> Dict[str, Any]:
        return self._facts("nvml.json", "NVML")

    def amdsmi(self) -> Dict[str, Any]:
        return self._facts("amdsmi.json", "amdsmi")

    def accelerator_load(self, acc: Dict[str, Any]) -> Any:
        from ..conditions.loads import LoadUnavailable

        raise LoadUnavailable("a snapshot cannot apply load: the link readings are the captured ones")

    def host_measurement_reason(self) -> Optional[str]:
        return "a snapshot holds captured files, not a machine to measure"

    def device_bandwidth(self, acc: Dict[str, Any], nbytes: int) -> Dict[str, Any]:
        from ..conditions.loads import LoadUnavailable

        raise LoadUnavailable("a snapshot holds no device to measure")

    host_device_bandwidth = device_bandwidth

    def thermal_rigs(self, kind: str, acc: Optional[Dict[str, Any]] = None) -> List[Any]:
        from ..conditions.thermal import ThermalUnavailable

        raise ThermalUnavailable("a snapshot cannot run a thermal calibration")

    @contextmanager
    def numa_binding(self, node: int, cpus: List[int]) -> Iterator[Dict[str, Any]]:
        yield {"node": node, "requested_cpus": sorted(cpus), "applied": None,
               "reason": "a snapshot cannot bind processes on the machine it was captured on"}



def capture(dest: Path, root: Path = Path("/"), nvml: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Copy what the probes read below ``root`` into ``dest`` (a snapshot)."""
    dest = Path(dest)
    fs = dest / "fs"
    if fs.exists():
        raise PlatformError(f"{dest}: already holds a snapshot; fix: choose an empty folder")
    fs.mkdir(parents=True)
    copied, skipped = 0, []
    for pattern in sysfs.CAPTURE_GLOBS:
        for src in sorted(root.glob(pattern)):
            rel = src.relative_to(root)
            try:
                data = src.read_bytes()
            except OSError as exc:
                skipped.append({"path": "/" + str(rel), "error": exc.strerror})
                continue
            _write(fs / rel, data)
            copied += 1
    bus = root / "sys/bus/pci/devices"
    root_real = os.path.realpath(root)
    for entry in sorted(bus.iterdir()) if bus.is_dir() else []:
        real = os.path.realpath(entry)
        rel = os.path.relpath(real, root_real)
        target = fs / rel
        target.mkdir(parents=True, exist_ok=True)
        for attr in sysfs.PCI_ATTRS:
            try:
                data = (Path(real) / attr).read_bytes()
            except OSError:
                continue
            (target / attr).write_bytes(data)
            copied += 1
        try:
            drv = os.path.basename(os.readlink(os.path.join(real, "driver")))
            os.symlink(f"../../../../bus/pci/drivers/{drv}", target / "driver")
        except OSError:
            pass
        link = fs / "sys/bus/pci/devices" / entry.name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(target, link.parent), link)
    nv = nvml if nvml is not None else nvml_probe.collect()
    (dest / "nvml.json").write_text(json.dumps(nv, indent=2, sort_keys=True), encoding="utf-8")
    if nvml is None:
        from ..probes import amd

        (dest / "amdsmi.json").write_text(json.dumps(amd.collect(), indent=2, sort_keys=True, default=str),
                                          encoding="utf-8")
    now = time.time()
    manifest = {
        "format": SNAPSHOT_FORMAT, "sits_version": __version__,
        "hostname": socket.gethostname() if str(root) == "/" else sysfs.read_text(root, "proc/sys/kernel/hostname"),
        "captured_at": now, "captured_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "root": str(root), "files": copied, "unreadable": skipped,
        "euid": os.geteuid() if hasattr(os, "geteuid") else None,
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest
