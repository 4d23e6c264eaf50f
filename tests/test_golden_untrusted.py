"""Golden sets are untrusted input: confined reads, sizes checked before allocating, shapes checked against the
operator, clear one-line errors; a record/compare round trip on one machine decides every pair."""

import hashlib
import json
import os

import numpy as np
import pytest

from pytest_sits.conditions.equivalence import acquire_precision, environment
from pytest_sits.equivalence.corpus import CORPUS
from pytest_sits.equivalence.golden import GoldenError, GoldenSet, finalize, key, record_entry, record_unsupported
from pytest_sits.equivalence.runner import prepare
from pytest_sits.platforms.live import LivePlatform

torch = pytest.importorskip("torch")
OP, DT = "softmax", "float32"
TH = {"rtol_fp16": 0.003, "risk_class": "default", "atol": {"high": 1e-4, "default": 1e-3, "low": 1e-2}}


def _sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _record(root, stored=None):
    op = CORPUS[OP]
    stored = stored if stored is not None else prepare(op, DT)[0]
    out = np.zeros((1,), dtype=np.float32)
    record_entry(root, OP, DT, stored, out, {"latency_s": 1e-3, "peak_bytes": None})
    finalize(root, {"platform": {"label": "test"}})
    return root / "entries" / key(OP, DT)


def _rehash(root):
    """What an attacker with write access does after editing: recompute the hashes so only our checks remain."""
    d = root / "entries" / key(OP, DT)
    entry = json.loads((d / "entry.json").read_text())
    for meta in entry["arrays"].values():
        f = d / meta["file"]
        if f.is_file() and not f.is_symlink():
            meta["sha256"] = _sha(f)
    (d / "entry.json").write_text(json.dumps(entry))
    man = json.loads((root / "golden.json").read_text())
    man["entries"][key(OP, DT)]["sha256"] = _sha(d / "entry.json")
    (root / "golden.json").write_text(json.dumps(man))


def test_huge_shape_in_header_is_refused_before_allocating(tmp_path):
    d = _record(tmp_path)
    f = d / "__output__.npy"
    header = {"descr": "<f4", "fortran_order": False, "shape": (4_000_000_000,)}
    with open(f, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(b"\0" * 16)
    entry = json.loads((d / "entry.json").read_text())
    entry["arrays"]["__output__"]["shape"] = [4_000_000_000]
    (d / "entry.json").write_text(json.dumps(entry))
    _rehash(tmp_path)
    with pytest.raises(GoldenError, match="header claims 16000000000 bytes"):
        GoldenSet(tmp_path).load(OP, DT)


@pytest.mark.parametrize("name", ["../../../etc/passwd", "/etc/passwd", "sub/x.npy"])
def test_array_file_outside_the_entry_is_refused(tmp_path, name):
    d = _record(tmp_path)
    entry = json.loads((d / "entry.json").read_text())
    entry["arrays"]["__output__"]["file"] = name
    (d / "entry.json").write_text(json.dumps(entry))
    _rehash(tmp_path)
    with pytest.raises(GoldenError, match="names no plain file") as exc:
        GoldenSet(tmp_path).load(OP, DT)
    assert "root:" not in str(exc.value)


def test_linked_array_is_refused(tmp_path):
    d = _record(tmp_path)
    target = d / "__output__.npy"
    os.replace(target, tmp_path / "elsewhere.npy")
    target.symlink_to(tmp_path / "elsewhere.npy")
    with pytest.raises(GoldenError, match="link"):
        GoldenSet(tmp_path).load(OP, DT)


def test_wrong_shape_input_names_the_input_not_the_device(tmp_path):
    op = CORPUS[OP]
    stored = {k: v[..., :3].copy() for k, v in prepare(op, DT)[0].items()}
    _record(tmp_path, stored)
    env = environment(LivePlatform(), tmp_path, None)
    [(ev, subject)] = acquire_precision(env, OP, DT, TH)
    assert "error" in ev and "input" in ev["error"] and "the operator takes" in ev["error"]
    assert "does not run" not in ev["error"]


def test_unsupported_on_reference_is_skip_not_inconclusive(tmp_path):
    record_unsupported(tmp_path, OP, DT, "cpu: no kernel")
    finalize(tmp_path, {"platform": {"label": "ref"}})
    env = environment(LivePlatform(), tmp_path, None)
    [(ev, _)] = acquire_precision(env, OP, DT, TH)
    assert ev["absent"].startswith("the reference platform (ref) could not run softmax float32 either")


def test_manifest_with_nan_or_bad_entries_is_refused(tmp_path):
    (tmp_path / "golden.json").write_text('{"format": "sits-golden/1", "entries": {"../x": {}}}')
    with pytest.raises(GoldenError, match="entries"):
        GoldenSet(tmp_path)
    (tmp_path / "golden.json").write_text('{"format": "sits-golden/1", "entries": NaN}')
    with pytest.raises(GoldenError, match="not valid JSON"):
        GoldenSet(tmp_path)
