"""Golden data: inputs and outputs recorded on a reference platform, checked by SHA-256 when read back.

Layout::

    DIR/golden.json                      format, platform, versions, and the SHA-256 of every entry.json
    DIR/entries/<op>__<dtype>/entry.json  arrays (file, sha256, dtype, shape), latency, peak memory
    DIR/entries/<op>__<dtype>/*.npy       the inputs (in the dtype under test) and the output

Entries are written by whichever process ran the test (xdist workers too);
``golden.json`` is written once at the end by the controller.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

FORMAT = "sits-golden/1"


class GoldenError(Exception):
    """Golden data that cannot be used: missing, malformed, or corrupted (SHA-256 mismatch)."""


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_json(path: Path, data: Any) -> None:
    from ..report import atomic_write

    atomic_write(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def key(op: str, dtype: str) -> str:
    return f"{op}__{dtype}"


def record_entry(root: Path, op: str, dtype: str, inputs: Dict[str, np.ndarray], output: np.ndarray,
                 meta: Dict[str, Any]) -> Path:
    d = Path(root) / "entries" / key(op, dtype)
    d.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for name, arr in list(inputs.items()) + [("__output__", output)]:
        f = d / f"{name}.npy"
        np.save(f, arr, allow_pickle=False)
        arrays[name] = {"file": f.name, "sha256": _sha(f), "dtype": str(arr.dtype), "shape": list(arr.shape)}
    entry = {"op": op, "dtype": dtype, "arrays": arrays, **meta}
    _atomic_json(d / "entry.json", entry)
    return d


def finalize(root: Path, info: Dict[str, Any]) -> Dict[str, Any]:
    root = Path(root)
    entries = {}
    for e in sorted((root / "entries").glob("*/entry.json")):
        entries[e.parent.name] = {"sha256": _sha(e)}
    manifest = {"format": FORMAT, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "entries": entries, **info}
    _atomic_json(root / "golden.json", manifest)
    return manifest


class GoldenSet:
    def __init__(self, root: Path):
        self.root = Path(root)
        path = self.root / "golden.json"
        if not path.is_file():
            raise GoldenError(f"{self.root}: no golden.json; fix: record a golden set with "
                              "--sits-golden-record DIR on the reference platform")
        try:
            self.manifest = json.loads(path.read_text())
        except ValueError as exc:
            raise GoldenError(f"{path}: not valid JSON ({exc}); the golden set is corrupted") from None
        if self.manifest.get("format") != FORMAT:
            raise GoldenError(f"{path}: format {self.manifest.get('format')!r} is not {FORMAT!r}")

    def keys(self) -> List[str]:
        return sorted(self.manifest["entries"])

    def load(self, op: str, dtype: str) -> Optional[Tuple[Dict[str, np.ndarray], np.ndarray, Dict[str, Any]]]:
        """(inputs, output, entry) for the operator, None when the set does not hold it.

        Raises GoldenError naming the file when any SHA-256 does not match: corrupted golden data."""
        k = key(op, dtype)
        if k not in self.manifest["entries"]:
            return None
        d = self.root / "entries" / k
        ej = d / "entry.json"
        if not ej.is_file():
            raise GoldenError(f"corrupted golden data: {ej} is missing")
        if _sha(ej) != self.manifest["entries"][k]["sha256"]:
            raise GoldenError(f"corrupted golden data: {ej} does not match the SHA-256 in golden.json")
        entry = json.loads(ej.read_text())
        arrays: Dict[str, np.ndarray] = {}
        for name, meta in entry["arrays"].items():
            f = d / meta["file"]
            if not f.is_file():
                raise GoldenError(f"corrupted golden data: {f} is missing")
            got = _sha(f)
            if got != meta["sha256"]:
                raise GoldenError(f"corrupted golden data: {f} has SHA-256 {got[:16]}…, the golden set recorded "
                                  f"{meta['sha256'][:16]}…")
            arrays[name] = np.load(f, allow_pickle=False)
        output = arrays.pop("__output__")
        return arrays, output, entry
