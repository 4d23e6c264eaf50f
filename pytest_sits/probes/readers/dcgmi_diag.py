"""NVIDIA DCGM's ``dcgmi diag`` (``-r 1/2/3/4``): the text table and the ``-j`` JSON.

The table (DCGM 2.x / 3.x)::

    +---------------------------+------------------------------------------------+
    | Diagnostic                | Result                                         |
    +===========================+================================================+
    |-----  Metadata  ----------+------------------------------------------------|
    | DCGM Version              | 3.3.9                                          |
    | Driver Version Detected   | 570.172.08                                     |
    | GPU Device IDs Detected   | 2bb5,2bb5                                      |
    |-----  Deployment  --------+------------------------------------------------|
    | Persistence Mode          | Pass                                           |
    +-----  Hardware  ----------+------------------------------------------------+
    | GPU Memory                | Pass - GPUs: 1, 2, 3                           |
    |                           | Fail - GPU: 0                                  |
    | Warning                   | GPU 0 Thermal violations totaling 13.3 second  |
    |                           | s started at 9.7 seconds into the test ...     |

Each test's result per GPU is kept (``Pass``/``Fail``/``Skip``/``Warn``, for ``All`` GPUs or the ones listed), with
its ``Error`` and ``Warning`` rows (a message wrapped over several rows is joined; the GPU it names is read from
it).  What the results decide (:mod:`pytest_sits.conditions.health`, checks ``.../dcgmi``): DEP-PERSIST from
"Persistence Mode", DEP-ROWREMAP from "Page Retirement/Row Remap" and an Error naming pending remaps or
retirements, DEP-ECC (a FAIL only) from "GPU Memory" and an Error naming uncorrectable memory errors, DEP-DRIVER
from "Driver Version Detected".  A ``Skip`` is "not measured", never a pass.  GPUs are DCGM's ids, matched to the
other texts' GPUs in bus order when the counts agree; "GPU Device IDs Detected" gives the model (10de:xxxx).
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, Optional

from .base import Detection, Entry, Machine, Reader
from .text import TextEvidenceError, check_device_count, text_lines

DCGMI_STEP = 48
MAX_TESTS = 200
MAX_JSON = 4 << 20

_ROW = re.compile(r"^\|([^|]{0,60})\|([^|]{0,160})\|?\s*$")
_SECTION = re.compile(r"^[|+]-{2,}\s+([A-Za-z ]{3,40}?)\s+-{2,}\+")
_RESULT = re.compile(r"^(Pass|Fail|Skip|Warn|Warning|Not Run|Running)\b(?:\s*-\s*(?:All|GPUs?:\s*([\d,\s]{1,300})))?\s*$",
                     re.I)
#: A row of one of DCGM's own tests with its result: a fragment of the table is still dcgmi diag's.
_KNOWN_ROW = re.compile(r"^\|\s*(?:Denylist|Blacklist|NVML Library|CUDA Main Library|CUDA Toolkit Libraries|Permissions and "
                        r"OS Blocks|Persistence Mode|Environment Variables|Page Retirement/Row Remap|Graphics Processes|"
                        r"Inforom|PCIe|GPU Memory|Memory Bandwidth|Diagnostic|Targeted Stress|Targeted Power|SM Stress|"
                        r"Pulse Test|Memtest|EUD Test|Context Create|Software)\s*\|\s*(?:Pass|Fail|Skip|Warn)\b", re.M)
_GPU_IN_TEXT = re.compile(r"\bGPU (\d{1,3})\b")


def _status(word: str) -> str:
    w = word.lower()
    return {"warning": "warn", "not run": "skip", "running": "skip"}.get(w, w)


def parse_dcgmi_text(text: str) -> Dict[str, Any]:
    """{version, driver, device_ids, tests: [{category, name, line, results: [{status, gpus (None: all)}]}],
    errors: [{gpu, text, line}], warnings: [...], cuts}."""
    out: Dict[str, Any] = {"version": None, "driver": None, "device_ids": [], "tests": [], "errors": [],
                           "warnings": [], "cuts": [], "lines": {}}
    category = None
    cur: Optional[Dict[str, Any]] = None  # the row being continued (a test, an Error or a Warning)
    seen_table = False
    for n, raw in enumerate(text_lines(text, "dcgmi diag"), 1):
        line = raw.strip()
        if not line or line.startswith("Successfully ran diagnostic") or re.fullmatch(r"[+=\-|]+", line.replace(" ", "")):
            continue
        sec = _SECTION.match(line)
        if sec:
            category, cur, seen_table = sec.group(1).strip(), None, True
            continue
        m = _ROW.match(line)
        if not m:
            raise TextEvidenceError(f"line {n}: {line[:60]!r} is not a row of dcgmi diag's table (`| name | result |`); "
                                    "fix: submit the output of `dcgmi diag -r N` (or `-j`) as printed")
        seen_table = True
        name, raw_value = m.group(1).strip(), m.group(2).rstrip()
        value = raw_value.strip()
        if not line.endswith("|"):
            out["cuts"].append({"line": n, "text": "a row without its closing border (cut)"})
        if name in ("Diagnostic",) and value in ("Result",):
            continue
        if name == "" and cur is not None:  # a continued row
            if cur["kind"] == "test":
                r = _RESULT.match(value)
                if r:
                    cur["item"]["results"].append(_result(r))
                continue
            if value:  # wrapped at a space: the cell's text begins with one after the padding; else mid-word
                sep = " " if raw_value.startswith("  ") else ""
                cur["item"]["text"] = cur["item"]["text"] + sep + value
            continue
        if category == "Metadata" or name in ("DCGM Version", "Driver Version Detected", "GPU Device IDs Detected"):
            if name == "DCGM Version":
                out["version"], out["lines"]["version"] = value, n
            elif name == "Driver Version Detected":
                out["driver"], out["lines"]["driver"] = value, n
            elif name == "GPU Device IDs Detected":
                out["device_ids"] = [x.strip().lower() for x in value.split(",") if re.fullmatch(r"[0-9a-fA-F]{4}",
                                                                                                   x.strip())]
                out["lines"]["device_ids"] = n
                check_device_count(len(out["device_ids"]), "dcgmi diag", n)
            continue
        if name in ("Error", "Warning"):
            item = {"text": value, "line": n, "category": category}
            (out["errors"] if name == "Error" else out["warnings"]).append(item)
            cur = {"kind": "message", "item": item}
            continue
        r = _RESULT.match(value)
        test = {"category": category, "name": name, "line": n, "results": [_result(r)] if r else [],
                "raw": value[:120]}
        if len(out["tests"]) >= MAX_TESTS:
            raise TextEvidenceError(f"line {n}: more than {MAX_TESTS} test rows; fix: submit one run's table")
        out["tests"].append(test)
        cur = {"kind": "test", "item": test}
    if not seen_table:
        raise TextEvidenceError("line 1: no row of dcgmi diag's table")
    for item in out["errors"] + out["warnings"]:
        g = _GPU_IN_TEXT.search(item["text"])
        item["gpu"] = int(g.group(1)) if g else None
    return out


def _result(m: re.Match[str]) -> Dict[str, Any]:
    gpus = m.group(2)
    return {"status": _status(m.group(1)), "gpus": [int(x) for x in re.findall(r"\d{1,3}", gpus)] if gpus else None}


def parse_dcgmi_json(text: str) -> Dict[str, Any]:
    """``dcgmi diag -j``: the same facts from ``"DCGM GPU Diagnostic" > test_categories``."""
    if len(text) > MAX_JSON:
        raise TextEvidenceError(f"over {MAX_JSON >> 20} MiB for a dcgmi diag JSON; fix: submit one run")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TextEvidenceError(f"line {getattr(exc, 'lineno', 1)}: not JSON ({exc})") from None
    diag = data.get("DCGM GPU Diagnostic") if isinstance(data, dict) else None
    if not isinstance(diag, dict) or not isinstance(diag.get("test_categories"), list):
        raise TextEvidenceError("line 1: no \"DCGM GPU Diagnostic\" > \"test_categories\": not dcgmi diag -j output")
    out: Dict[str, Any] = {"version": diag.get("version") if isinstance(diag.get("version"), str) else None,
                           "driver": (data.get("Driver Version Detected") or diag.get("Driver Version Detected")
                                      if isinstance(data.get("Driver Version Detected") or
                                                    diag.get("Driver Version Detected"), str) else None),
                           "device_ids": [], "tests": [], "errors": [], "warnings": [], "cuts": [], "lines": {}}
    lines = text.splitlines()
    for cat in diag["test_categories"][:MAX_TESTS]:
        if not isinstance(cat, dict):
            continue
        for t in (cat.get("tests") or [])[:MAX_TESTS]:
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                continue
            name = t["name"][:80]
            ln = next((i for i, s in enumerate(lines, 1) if f'"{name}"' in s), None)
            results = []
            for r in (t.get("results") or [])[:64]:
                if not isinstance(r, dict) or not isinstance(r.get("status"), str):
                    continue
                ids = r.get("gpu_ids", r.get("gpu_id"))
                gpus = ([int(x) for x in re.findall(r"\d{1,3}", str(ids))] if ids is not None else None)
                results.append({"status": _status(r["status"]), "gpus": gpus, "info": str(r.get("info") or "")[:300]})
                warn = r.get("warnings") or r.get("warning")
                if warn:
                    out["warnings"].append({"text": str(warn)[:300], "line": ln, "category": cat.get("category"),
                                            "gpu": gpus[0] if gpus else None})
                err = r.get("error") or r.get("errors")
                if err:
                    out["errors"].append({"text": str(err)[:300], "line": ln, "category": cat.get("category"),
                                          "gpu": gpus[0] if gpus else None})
            out["tests"].append({"category": str(cat.get("category") or "")[:40], "name": name, "line": ln,
                                 "results": results})
    return out


class DcgmiDiag(Reader):
    kinds = {"dcgmi-diag": "dcgmi diag", "dcgmi-diag-json": "dcgmi diag -j"}
    steps = (DCGMI_STEP,)
    order = 48
    option = "--dcgmi-diag"
    option_help = "NVIDIA DCGM's `dcgmi diag -r N` output (the table, or `-j` JSON)"

    def detect_document(self, head: str) -> Optional[Detection]:
        if head.lstrip().startswith("{") and '"DCGM GPU Diagnostic"' in head[:4096]:
            return "dcgmi-diag-json", "a JSON object with \"DCGM GPU Diagnostic\" (dcgmi diag -j)"
        return None

    def detect(self, head: str) -> Optional[Detection]:
        if re.search(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", head, re.M):
            return "dcgmi-diag", "the `| Diagnostic | Result |` table of dcgmi diag"
        if _KNOWN_ROW.search(head):  # a fragment pasted without the table's header
            return "dcgmi-diag", "a row of dcgmi diag's table (`| <DCGM test> | Pass/Fail/Skip ... |`)"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return parse_dcgmi_json(text) if kind == "dcgmi-diag-json" else parse_dcgmi_text(text)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        """The GPUs it names onto the machine's (bus order, the counts agreeing), new ones where no text lists
        them; the driver version into the management facts; the results kept for the health requirements."""
        f, facts = entry, entry["facts"]
        ids = set(range(len(facts["device_ids"])))
        for t in facts["tests"]:
            for r in t["results"]:
                ids |= set(r["gpus"] or [])
        ids |= {m["gpu"] for m in facts["errors"] + facts["warnings"] if m.get("gpu") is not None}
        nv_keys = machine.keys_of("NVIDIA")
        n = len(facts["device_ids"]) or (max(ids) + 1 if ids else 0)
        by_index = machine.by_bus_order(range(n))
        rule = "its DCGM id in bus order (the counts agree)" if by_index else None
        if not by_index and nv_keys and n:
            machine.notes.append(f"{f['name']}: {n} GPUs, the other texts {len(nv_keys)}: its GPUs are not matched to "
                                 "them (named GPU<id>)")
        for i in sorted(ids):
            if i in by_index:
                continue
            did = facts["device_ids"][i] if i < len(facts["device_ids"]) else None
            by_index[i] = machine.named_gpu(i, f"10de:{did}" if did else None, None, f["name"],
                                            "DCGM id in dcgmi diag")
        drv = facts.get("driver")
        nvml = machine.nvml
        if drv and nvml.get("driver_version") and nvml["driver_version"] != drv:
            machine.conflict("driver version", nvml["driver_version"], drv, (nvml.get("files") or ["?"])[0], f["name"])
        if drv and not nvml.get("driver_version") and re.fullmatch(r"\d{2,4}(?:\.\d{1,4}){1,3}", drv):
            nvml.update(driver_version=drv, available=True, reason=None,
                        source=f"submitted dcgmi diag ({f['name']} line {facts['lines'].get('driver')})")
            nvml.setdefault("files", []).append(f["name"])
        machine.scratch.setdefault("dcgmi", []).append({
            "file": f["name"], "version": facts.get("version"), "index_to_key": {str(i): k for i, k in by_index.items()},
            "match_rule": rule, "tests": facts["tests"], "errors": facts["errors"], "warnings": facts["warnings"],
            "cuts": facts.get("cuts") or [], "gpus": n})


READER = DcgmiDiag()
