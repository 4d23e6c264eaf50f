"""NVIDIA's ``nvbandwidth`` (v0.2 to v0.8 text): the devices, the driver and CUDA versions, and each test case's
bandwidth matrix (GB/s), with its ``SUM`` line.

The layout::

    nvbandwidth Version: v0.4
    CUDA Runtime Version: 12020
    CUDA Driver Version: 12080
    Driver Version: 570.133.20

    Device 0: NVIDIA H100 80GB HBM3
    ...
    Running device_to_device_memcpy_read_ce.
    memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
              0         1
    0       N/A    370.90
    1    370.90       N/A

    SUM device_to_device_memcpy_read_ce 741.80

What it decides: CRG-EDGE from the device-to-device copy-engine cases (each pair, each direction: the figure
nvbandwidth printed), DEP-DRIVER from its driver and CUDA driver versions; the host<->device cases are kept (the
link each crossed is not in the text: TOPO-PCIE-BW needs the link from ``lspci -vv`` or ``nvidia-smi -q``).
Devices are matched to the other texts' GPUs by their index in bus order when the counts agree (the CUDA order
nvbandwidth prints is bus order unless ``CUDA_DEVICE_ORDER`` was changed); otherwise they are named ``GPU<index>``.
Excerpts (``[...]``) are read as far as they go, and the cut is listed.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional

from .base import Detection, Entry, Machine, Reader
from .text import TextEvidenceError, check_device_count, text_lines

#: After the devices, topology and links.
NVBANDWIDTH_STEP = 47
MAX_TESTS = 200

_VERSION = re.compile(r"^nvbandwidth Version:\s*(\S{1,40})\s*$")
_GIT = re.compile(r"^Built from Git version:\s*(\S{1,60})\s*$")
_CUDA_RT = re.compile(r"^CUDA Runtime Version:\s*(\d{1,6})\s*$")
_CUDA_DRV = re.compile(r"^CUDA Driver Version:\s*(\d{1,6})\s*$")
_DRIVER = re.compile(r"^Driver Version:\s*(\d{2,4}(?:\.\d{1,4}){1,3})\s*$")
_DEVICE = re.compile(r"^Device (\d{1,3}): (.{1,120}?)\s*$")
_RUNNING = re.compile(r"^Running ([A-Za-z0-9_]{1,80})\.\s*$")
_LABEL = re.compile(r"^(memcpy|memory) (CE|SM) (.{1,80}?) bandwidth \(GB/s\)\s*$")
_HEADER = re.compile(r"^\s*(?:\d{1,3}\s+){0,63}\d{1,3}\s*$")
_ROW = re.compile(r"^\s*(\d{1,3})((?:\s+(?:N/A|\d{1,6}(?:\.\d{1,4})?)){1,64})\s*$")
_SUM = re.compile(r"^SUM ([A-Za-z0-9_]{1,80}) (\d{1,9}(?:\.\d{1,4})?)\s*$")
_ELIDED = re.compile(r"^\s*(?:\[\.\.\.\]|\.\.\.|…)\s*$")
_SKIP = re.compile(r"^(?:NOTE:|Additional system-specific|WARNING|Waived|ERROR: Test case)", re.I)


def cuda_version(code: Optional[str]) -> Optional[str]:
    """CUDA's integer version (12080) as ``12.8``."""
    if not code:
        return None
    n = int(code)
    return f"{n // 1000}.{(n % 1000) // 10}"


def parse_nvbandwidth(text: str) -> Dict[str, Any]:
    """{version, git, cuda_runtime, cuda_driver, driver, devices: [{index, name, line}], tests: {name: {line,
    label, engine, matrix: {row: {col: GB/s or None}}, sum, sum_line}}, cuts}."""
    out: Dict[str, Any] = {"version": None, "git": None, "cuda_runtime": None, "cuda_driver": None, "driver": None,
                           "devices": [], "tests": {}, "cuts": [], "lines": {}}
    cur: Optional[Dict[str, Any]] = None
    cols: Optional[List[int]] = None
    for n, raw in enumerate(text_lines(text, "nvbandwidth"), 1):
        line = raw.rstrip()
        if not line.strip() or _SKIP.match(line.strip()):
            continue
        for rx, key in ((_VERSION, "version"), (_GIT, "git"), (_CUDA_RT, "cuda_runtime"), (_CUDA_DRV, "cuda_driver"),
                        (_DRIVER, "driver")):
            m = rx.match(line.strip())
            if m:
                out[key] = m.group(1)
                out["lines"][key] = n
                break
        else:
            m = _DEVICE.match(line.strip())
            if m:
                out["devices"].append({"index": int(m.group(1)), "name": m.group(2), "line": n})
                check_device_count(len(out["devices"]), "nvbandwidth", n)
                continue
            m = _RUNNING.match(line.strip())
            if m:
                if len(out["tests"]) >= MAX_TESTS:
                    raise TextEvidenceError(f"line {n}: more than {MAX_TESTS} test cases; fix: submit one run")
                cur = {"line": n, "label": None, "engine": None, "matrix": {}, "sum": None, "sum_line": None}
                out["tests"][m.group(1)] = cur
                cols = None
                continue
            if _ELIDED.match(line):
                out["cuts"].append({"line": n, "text": line.strip()[:40]})
                cols = None
                continue
            m = _SUM.match(line.strip())
            if m:
                t = out["tests"].get(m.group(1))
                if t is not None:
                    t["sum"], t["sum_line"] = float(m.group(2)), n
                continue
            if cur is None:
                raise TextEvidenceError(f"line {n}: {line.strip()[:60]!r} before any `Running <test>.` line; fix: "
                                        "submit nvbandwidth's output as printed")
            m = _LABEL.match(line.strip())
            if m:
                cur["label"], cur["engine"] = line.strip(), m.group(2)
                continue
            if cols is None and _HEADER.match(line):
                cols = [int(x) for x in line.split()]
                continue
            m = _ROW.match(line)
            if m and cols is not None:
                values = m.group(2).split()
                if len(values) != len(cols):
                    raise TextEvidenceError(f"line {n}: {len(values)} figures under {len(cols)} columns; fix: "
                                            "submit the matrix as nvbandwidth printed it")
                cur["matrix"][int(m.group(1))] = {c: (None if v == "N/A" else float(v)) for c, v in zip(cols, values)}
                continue
            raise TextEvidenceError(f"line {n}: {line.strip()[:60]!r} is not a line of nvbandwidth's output (a device, "
                                    "a `Running` line, a matrix header or row, a SUM); fix: submit it as printed")
    if not out["tests"] and not out["devices"]:
        raise TextEvidenceError("line 1: no `Device N:` and no `Running <test>.` line: not nvbandwidth's output")
    return out


class Nvbandwidth(Reader):
    kinds = {"nvbandwidth": "nvbandwidth"}
    steps = (NVBANDWIDTH_STEP,)
    order = 47
    option = "--nvbandwidth"
    option_help = "NVIDIA's `nvbandwidth` output (its devices, driver and every test case's GB/s matrix)"

    def detect(self, head: str) -> Optional[Detection]:
        if re.search(r"^nvbandwidth Version:", head, re.M):
            return "nvbandwidth", "the `nvbandwidth Version:` banner"
        if re.search(r"^Running [a-z_]{4,80}_(?:ce|sm)\.\s*\n\s*(?:memcpy|memory) (?:CE|SM) .{1,80} bandwidth \(GB/s\)",
                     head, re.M):
            return "nvbandwidth", "`Running <test>_ce.` with a `memcpy CE ... bandwidth (GB/s)` matrix"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_nvbandwidth(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """The devices onto the machine's GPUs (bus order, the counts agreeing), the driver and CUDA versions into
        the management facts, the matrices kept for CRG-EDGE."""
        f, facts = entry, entry["facts"]
        nv_keys = machine.keys_of("NVIDIA")
        devices = sorted(facts["devices"], key=lambda d: d["index"])
        by_index = machine.by_bus_order([d["index"] for d in devices], names={d["index"]: d["name"] for d in devices},
                                        source=f["name"])
        rule = "its CUDA index in bus order (the counts agree)" if by_index else None
        if not by_index and devices and nv_keys:
            machine.notes.append(f"{f['name']}: {len(devices)} devices, the other texts {len(nv_keys)} GPUs: its "
                                 "devices are not matched to them (named GPU<index>)")
        for d in devices:
            key = by_index.get(d["index"])
            if key is None:
                key = by_index[d["index"]] = machine.named_gpu(d["index"], None, d["name"], f["name"],
                                                               "CUDA index in nvbandwidth")
            acc = machine.accs[key]
            acc["sources"] = sorted(set(acc["sources"]) | {f["name"]})
        nvml = machine.nvml
        drv, cuda = facts.get("driver"), cuda_version(facts.get("cuda_driver"))
        for k, v in (("driver_version", drv), ("cuda_driver_version", cuda)):
            if v and nvml.get(k) and nvml[k] != v:
                machine.conflict(k.replace("_", " "), nvml[k], v, (nvml.get("files") or ["?"])[0], f["name"])
        if drv and not nvml.get("driver_version"):
            nvml.update(driver_version=drv, cuda_driver_version=cuda, available=True, reason=None,
                        source=f"submitted nvbandwidth ({f['name']} line {facts['lines'].get('driver')})")
            nvml.setdefault("files", []).append(f["name"])
        machine.scratch.setdefault("nvbandwidth", []).append({
            "file": f["name"], "version": facts.get("version"), "git": facts.get("git"),
            "index_to_key": {str(i): k for i, k in by_index.items()}, "match_rule": rule,
            "tests": facts["tests"], "cuts": facts.get("cuts") or []})


READER = Nvbandwidth()
