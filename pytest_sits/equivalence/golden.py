"""Golden data: inputs and outputs recorded on a reference platform, checked by SHA-256 when read back.

Layout::

    DIR/golden.json                      format, platform, versions, and the SHA-256 of every entry.json
    DIR/entries/<op>__<dtype>/entry.json  arrays (file, sha256, dtype, shape), latency, peak memory
    DIR/entries/<op>__<dtype>/*.npy       the inputs (in the dtype under test) and the output

Entries are written by whichever process ran the test (xdist workers too);
``golden.json`` is written once at the end by the controller.  A pair the
reference platform could not run is recorded as such (``unsupported``, with
the reason), so the platform under test is not asked for it.

A golden set is untrusted input: every file is read confined to the set's
folder (no links, no ``..``, plain files, size limits), the SHA-256 is checked
before anything is parsed, and an array's header (dtype, shape) is checked
against its entry, against its file size and against what the corpus operator
takes before any memory is allocated for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..files import ARRAY_LIMIT, UntrustedInputError, atomic_write, load_json, open_confined

FORMAT = "sits-golden/1"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DTYPES = {"float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64", "bool"}


class GoldenError(Exception):
    """Golden data that cannot be used: missing, malformed, or corrupted (SHA-256 mismatch)."""


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sha_confined(root: Path, rel: str, limit: int) -> str:
    fd = open_confined(root, rel)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise GoldenError(f"{root / rel}: {size} bytes, over the {limit}-byte limit; the golden set is corrupted")
        h = hashlib.sha256()
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                return h.hexdigest()
            h.update(block)
    finally:
        os.close(fd)


def _load_array(root: Path, rel: str, meta: Dict[str, Any]) -> np.ndarray:
    """Read one .npy confined to the set, after its header matched its entry and its file size."""
    fd = open_confined(root, rel)
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            version = np.lib.format.read_magic(fh)
            shape, fortran, dtype = (np.lib.format.read_array_header_1_0(fh) if version == (1, 0)
                                     else np.lib.format.read_array_header_2_0(fh))
        except ValueError as exc:
            raise GoldenError(f"{root / rel}: not a .npy array ({exc}); the golden set is corrupted") from None
        if dtype.hasobject or str(dtype) not in _DTYPES:
            raise GoldenError(f"{root / rel}: dtype {dtype} is not one the corpus stores")
        n = 1
        for dim in shape:
            n *= int(dim)
        need = n * dtype.itemsize
        if list(shape) != list(meta.get("shape", [])) or str(dtype) != meta.get("dtype"):
            raise GoldenError(f"{root / rel}: holds {dtype} {tuple(shape)}, its entry says {meta.get('dtype')} "
                              f"{tuple(meta.get('shape', []))}; the golden set is corrupted")
        if need > ARRAY_LIMIT or fh.tell() + need != size:
            raise GoldenError(f"{root / rel}: header claims {need} bytes of data, the file holds "
                              f"{size - fh.tell()}; the golden set is corrupted")
        data = np.fromfile(fh, dtype=dtype, count=n)
        return data.reshape(shape, order="F" if fortran else "C")


def _atomic_json(path: Path, data: Any) -> None:
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


def record_unsupported(root: Path, op: str, dtype: str, reason: str) -> Path:
    """Record that the reference platform could not run this pair (so the platform under test is not asked)."""
    d = Path(root) / "entries" / key(op, dtype)
    d.mkdir(parents=True, exist_ok=True)
    _atomic_json(d / "entry.json", {"op": op, "dtype": dtype, "arrays": {}, "unsupported": reason})
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
        if not os.path.lexists(path):
            raise GoldenError(f"{self.root}: no golden.json; fix: record a golden set with "
                              "--sits-golden-record DIR on the reference platform")
        try:
            self.manifest = load_json("golden.json", 16 << 20, what="golden set", root=self.root)
        except UntrustedInputError as exc:
            raise GoldenError(f"{exc}; the golden set is corrupted") from None
        if not isinstance(self.manifest, dict) or self.manifest.get("format") != FORMAT:
            got = self.manifest.get("format") if isinstance(self.manifest, dict) else None
            raise GoldenError(f"{path}: format {got!r} is not {FORMAT!r}; fix: record it again with this version")
        entries = self.manifest.get("entries")
        if not isinstance(entries, dict) or not all(isinstance(k, str) and _NAME.match(k) and isinstance(v, dict)
                                                    for k, v in entries.items()):
            raise GoldenError(f"{path}: 'entries' is not a map of entry names to hashes; the golden set is corrupted")

    def keys(self) -> List[str]:
        return sorted(self.manifest["entries"])

    def load(self, op: str, dtype: str) -> Optional[Tuple[Dict[str, np.ndarray], Optional[np.ndarray], Dict[str, Any]]]:
        """(inputs, output, entry) for the operator, None when the set does not hold it (no inputs and no output
        when the reference platform could not run it: the entry says why).

        Raises GoldenError naming the file when any SHA-256 does not match: corrupted golden data."""
        k = key(op, dtype)
        if k not in self.manifest["entries"]:
            return None
        rel = f"entries/{k}"
        ej = self.root / rel / "entry.json"
        try:
            if not os.path.lexists(ej):
                raise GoldenError(f"corrupted golden data: {ej} is missing")
            if _sha_confined(self.root, f"{rel}/entry.json", 16 << 20) != self.manifest["entries"][k].get("sha256"):
                raise GoldenError(f"corrupted golden data: {ej} does not match the SHA-256 in golden.json")
            entry = load_json(f"{rel}/entry.json", 16 << 20, what="golden entry", root=self.root)
            if not isinstance(entry, dict) or not isinstance(entry.get("arrays"), dict):
                raise GoldenError(f"{ej}: not a golden entry (no 'arrays' map)")
            if entry.get("unsupported"):
                return {}, None, entry
            arrays: Dict[str, np.ndarray] = {}
            for name, meta in entry["arrays"].items():
                if not isinstance(meta, dict) or not _NAME.match(str(meta.get("file", ""))) or not _NAME.match(name):
                    raise GoldenError(f"{ej}: array {str(name)[:60]!r} names no plain file in its folder; the golden "
                                      "set is corrupted")
                f = f"{rel}/{meta['file']}"
                if not os.path.lexists(self.root / f):
                    raise GoldenError(f"corrupted golden data: {self.root / f} is missing")
                got = _sha_confined(self.root, f, ARRAY_LIMIT)
                if got != meta.get("sha256"):
                    raise GoldenError(f"corrupted golden data: {self.root / f} has SHA-256 {got[:16]}…, the golden "
                                      f"set recorded {str(meta.get('sha256'))[:16]}…")
                arrays[name] = _load_array(self.root, f, meta)
        except UntrustedInputError as exc:
            raise GoldenError(f"{exc}; the golden set is corrupted") from None
        if "__output__" not in arrays:
            raise GoldenError(f"{ej}: no recorded output; the golden set is corrupted")
        output = arrays.pop("__output__")
        return arrays, output, entry
