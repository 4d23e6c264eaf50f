"""Signed evidence bundles: one archive a third party can check on its own.

``sits bundle create REPORT_DIR -o BUNDLE --key KEY`` packs every file of a
report directory (the report JSON and HTML, the JUnit XML, a snapshot of the
machine's evidence) into a gzip'd tar with ``MANIFEST.json`` (SHA-256 and
size of every file) and ``MANIFEST.sig`` (Ed25519 signature of the manifest's
exact bytes).  ``sits verify BUNDLE --pubkey PUB`` checks the signature,
every hash, the report's schema, and recomputes every verdict from its stored
evidence with the same checks (``replay_report``).

A bundle is untrusted input.  Before anything is written, every member is
checked: a relative path of plain components (no absolute path, no ``..``,
no backslash or control character), a regular file (no link, device, FIFO),
no duplicate name, within the size limits (per member, in total, and number
of members).  Files are then written below the target only, with
``O_EXCL | O_NOFOLLOW``, hashed while written, and never beyond the size the
header announced.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union, cast

from ..files import UntrustedInputError, open_new, replacing, write_new
from ..report.model import summarise, validate
from ..report.replay import replay_report
from ..report.store import read_report
from .base import add, err

MANIFEST, SIGNATURE = "MANIFEST.json", "MANIFEST.sig"
SNAPSHOT = "snapshot.tar.gz"
REPORT_NAME = "sits-report.json"
BUNDLE_SCHEMA_VERSION = "1.0"
MAX_MEMBER = 512 * 1024 * 1024
MAX_TOTAL = 2 * 1024 * 1024 * 1024
MAX_MEMBERS = 50000
MAX_MANIFEST = 32 * 1024 * 1024
MAX_BUNDLE = 4 * 1024 * 1024 * 1024
INSTALL = "pip install 'pytest-sits[fleet]'  (or: pip install cryptography)"
KEY_PASSWORD_ENV = "SITS_BUNDLE_KEY_PASSWORD"
_SAFE_PART = re.compile(r"^[^\x00-\x1f\x7f/\\]+$")


class BundleError(Exception):
    """A usage problem (bad input file, missing dependency): the message names the file and the fix."""


@dataclass
class Verification:
    bundle: str
    problems: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    files: int = 0
    verdicts: int = 0
    replayed: int = 0
    signed_by: Optional[str] = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise BundleError(f"signing and verifying need the `cryptography` package; install it: {INSTALL}") from None
    return ed25519, serialization, InvalidSignature


def _fingerprint(public_key: Any) -> str:
    _, serialization, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def keygen(prefix: str) -> Tuple[Path, Path]:
    """Write PREFIX.key (Ed25519 private key, PEM PKCS#8, mode 0600) and PREFIX.pub (PEM); never overwrite."""
    ed25519, serialization, _ = _crypto()
    key_path, pub_path = Path(prefix + ".key"), Path(prefix + ".pub")
    for p in (key_path, pub_path):
        if os.path.lexists(p):
            raise BundleError(f"{p}: exists; fix: choose another prefix (keys are never overwritten)")
    key = ed25519.Ed25519PrivateKey.generate()
    password = os.environ.get(KEY_PASSWORD_ENV)
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    write_new(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc),
               0o600)
    write_new(pub_path, key.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)
    return key_path, pub_path


def _read_small(path: Path, what: str, limit: int = 64 * 1024) -> bytes:
    """A key file: a plain file (no link) of at most ``limit`` bytes."""
    from ..files import UntrustedInputError, read_file

    fix = "fix: give the PEM file `sits keygen PREFIX` wrote (PREFIX.key to sign, PREFIX.pub to verify)"
    try:
        return read_file(path, limit)
    except UntrustedInputError as exc:
        raise BundleError(f"cannot read {what}: {str(exc).split('; fix:')[0]}; {fix}") from None
    except OSError as exc:
        raise BundleError(f"{path}: cannot read {what}: {exc.strerror or exc}; {fix}") from None


def load_private_key(path: Path) -> Any:
    ed25519, serialization, _ = _crypto()
    data = _read_small(path, "a private key")
    password = os.environ.get(KEY_PASSWORD_ENV)
    try:
        key = serialization.load_pem_private_key(data, password=password.encode() if password else None)
    except TypeError:
        raise BundleError(f"{path}: the key is encrypted; fix: put its password in ${KEY_PASSWORD_ENV}") from None
    except ValueError as exc:
        raise BundleError(f"{path}: not a PEM private key ({exc}); fix: make one with `sits keygen`") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise BundleError(f"{path}: a {type(key).__name__}, not an Ed25519 key; fix: make one with `sits keygen`")
    return key


def load_public_key(path: Path) -> Any:
    ed25519, serialization, _ = _crypto()
    data = _read_small(path, "a public key")
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise BundleError(f"{path}: not a PEM public key ({exc}); fix: give the .pub file `sits keygen` "
                          "wrote") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise BundleError(f"{path}: a {type(key).__name__}, not an Ed25519 public key; fix: give the .pub "
                          "file `sits keygen` wrote")
    return key


def unsafe_name(name: str) -> Optional[str]:
    """Why a member name may not be written below a target directory (None: it may)."""
    if not name or len(name) > 1024:
        return "empty or over 1024 characters"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if "\\" in name:
        return "backslash in the name"
    parts = name.split("/")
    if any(p == ".." for p in parts):
        return "'..' component"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' component"
    if not all(_SAFE_PART.match(p) for p in parts):
        return "control character in the name"
    return None


# --------------------------------------------------------------------------------------------- create

def _collect(root: Path, prefix: str = "", skip: Tuple[str, ...] = ()) -> List[Tuple[str, Path]]:
    files: List[Tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if Path(dirpath) == Path(root):
            dirnames[:] = [d for d in dirnames if d not in skip]
        for d in list(dirnames):
            if os.path.islink(os.path.join(dirpath, d)):
                raise BundleError(f"{os.path.join(dirpath, d)}: a symbolic link; a bundle holds regular files only; "
                                  "fix: copy what it points to into the folder")
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if name.startswith(".") and name.endswith(".tmp"):
                continue  # an atomic write in progress or abandoned
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                raise BundleError(f"{full}: not a regular file (link, device or FIFO); a bundle holds regular files "
                                  "only; fix: remove it or copy the real file in")
            arc = prefix + rel
            why = unsafe_name(arc)
            if why or arc in (MANIFEST, SIGNATURE):
                raise BundleError(f"{full}: cannot be stored as {arc!r} ({why or 'reserved name'}); fix: rename it")
            files.append((arc, full))
    return files


def _sha256_file(path: Path) -> Tuple[str, int]:
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _pack_snapshot(src: Path, dest: Path) -> None:
    """A snapshot folder as one gzip'd tar (``snapshot.tar.gz`` in the bundle).

    A snapshot mirrors sysfs, whose structure is made of relative links; they are kept inside this inner
    archive (which ``sits verify`` hashes, then reads in a private temporary folder to compare it with the report's
    inventory: :func:`compare_snapshot`), and only when they stay inside the snapshot.
    """
    root = os.path.realpath(src)
    with tarfile.open(str(dest), mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(full)
                    resolved = os.path.normpath(os.path.join(os.path.dirname(full), target))
                    if os.path.isabs(target) or os.path.commonpath([root, resolved]) != root:
                        raise BundleError(f"{full}: a link to {target!r}, outside the snapshot; fix: capture the "
                                          "snapshot again with `sits capture DIR`")
                elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    raise BundleError(f"{full}: not a file, folder or link; fix: remove it from the snapshot")
                info = tar.gettarinfo(full, arcname=f"snapshot/{rel}")
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isfile():
                    with open(full, "rb") as fh:
                        tar.addfile(info, fh)
                else:
                    tar.addfile(info)


def create(report_dir: Path, out: Path, key_path: Optional[Path] = None, snapshot: Optional[Path] = None,
           capture: bool = False) -> Dict[str, Any]:
    """Write the bundle ``out`` from ``report_dir``; return the manifest.

    The machine's evidence snapshot comes from ``snapshot`` (a folder `sits capture` wrote), from a
    ``snapshot`` folder inside ``report_dir``, or, with ``capture``, is captured from this machine now.
    """
    report_dir = Path(report_dir)
    if not (report_dir / REPORT_NAME).is_file():
        raise BundleError(f"{report_dir}: no {REPORT_NAME}; fix: give the --sits-report-dir of a run "
                          "(default ./sits-report)")
    try:
        report = read_report(REPORT_NAME, root=report_dir)
    except (OSError, ValueError) as exc:  # ReportInputError names the file, the problem and the fix
        raise BundleError(str(exc)) from None
    key = load_private_key(Path(key_path)) if key_path else None
    inner = report_dir / "snapshot"
    inner_ok = inner.is_dir() and not inner.is_symlink()
    sources: List[Union[Path, str]] = [p for p in (snapshot, inner if inner_ok else None) if p]
    if capture:
        sources.append("capture")
    if len(sources) > 1:
        raise BundleError(f"more than one snapshot ({', '.join(map(str, sources))}); fix: give only one of "
                          "--snapshot, --capture, REPORT_DIR/snapshot")
    if snapshot is not None and not Path(snapshot).is_dir():
        raise BundleError(f"{snapshot}: not a directory; fix: give the folder `sits capture DIR` wrote")
    with tempfile.TemporaryDirectory(prefix="sits-bundle-") as work:
        packed = None
        if sources:
            src = Path(sources[0]) if sources[0] != "capture" else Path(work) / "capture"
            if sources[0] == "capture":
                from ..platforms import PlatformError
                from ..platforms.snapshot import capture as take

                try:
                    take(src)
                except PlatformError as exc:
                    raise BundleError(f"capturing this machine's evidence failed: {exc}") from None
            packed = Path(work) / SNAPSHOT
            _pack_snapshot(src, packed)
        files = _collect(report_dir, skip=("snapshot",) if inner_ok else ())
        if any(arc == SNAPSHOT for arc, _ in files):
            raise BundleError(f"{report_dir / SNAPSHOT}: reserved name; fix: rename it")
        if packed is not None:
            files.append((SNAPSHOT, packed))
        return _write_bundle(report, files, Path(out), key)


def _write_bundle(report: Dict[str, Any], files: List[Tuple[str, Path]], out: Path, key: Any) -> Dict[str, Any]:
    from .. import __version__

    if len(files) > MAX_MEMBERS:
        raise BundleError(f"{len(files)} files to bundle, over the limit of {MAX_MEMBERS}")
    entries, total = [], 0
    sizes = {}
    for arc, full in files:
        digest, size = _sha256_file(full)
        sizes[arc] = size
        if size > MAX_MEMBER:
            raise BundleError(f"{full}: {size} bytes, over the limit of {MAX_MEMBER} per file")
        total += size
        entries.append({"path": arc, "sha256": digest, "size": size})
    if total > MAX_TOTAL:
        raise BundleError(f"{total} bytes to bundle in all, over the limit of {MAX_TOTAL}")
    manifest = {
        "schema": "pytest-sits/bundle-manifest", "schema_version": BUNDLE_SCHEMA_VERSION,
        "generator": {"name": "pytest-sits", "version": __version__},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "report": REPORT_NAME, "report_result": report["summary"]["result"],
        "simulated": bool(report["platform"]["simulated"]),
        "hash": "sha256", "files": entries,
        "signature": ({"algorithm": "Ed25519", "public_key_sha256": _fingerprint(key.public_key()),
                       "file": SIGNATURE} if key else None),
    }
    manifest_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    with replacing(out, 0o644) as raw, tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, MANIFEST, manifest_bytes)
        if key is not None:
            _add_bytes(tar, SIGNATURE, (key.sign(manifest_bytes).hex() + "\n").encode("ascii"))
        for arc, full in files:
            info = tarfile.TarInfo(arc)
            info.size, info.mode, info.mtime = sizes[arc], 0o644, int(time.time())
            with open(full, "rb") as fh:
                tar.addfile(info, fh)
    return manifest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
    tar.addfile(info, io.BytesIO(data))


# --------------------------------------------------------------------------------------------- extract

def check_members(members: List[tarfile.TarInfo], max_member: int = MAX_MEMBER, max_total: int = MAX_TOTAL,
                  max_members: int = MAX_MEMBERS) -> List[str]:
    """Every reason the archive may not be extracted, one line per offending member (empty: safe)."""
    problems, seen, total = [], set(), 0
    if len(members) > max_members:
        problems.append(f"{len(members)} members, over the limit of {max_members}")
    for m in members:
        why = unsafe_name(m.name)
        if why:
            problems.append(f"{m.name!r}: refused: {why}")
            continue
        if m.issym() or m.islnk():
            problems.append(f"{m.name}: refused: a {'symbolic' if m.issym() else 'hard'} link (to {m.linkname!r})")
        elif m.isdev() or m.isfifo():
            problems.append(f"{m.name}: refused: a device file or FIFO")
        elif not m.isfile():
            problems.append(f"{m.name}: refused: not a regular file (tar type {m.type!r})")
        if m.name in seen:
            problems.append(f"{m.name}: refused: appears twice in the archive")
        seen.add(m.name)
        if m.size > max_member:
            problems.append(f"{m.name}: refused: {m.size} bytes, over the limit of {max_member} per file")
        total += max(m.size, 0)
    if total > max_total:
        problems.append(f"members hold {total} bytes in all, over the limit of {max_total}")
    # a name that is also a folder of another member ("a" and "a/b") cannot both be files
    folders = {"/".join(n.split("/")[:i]) for n in seen for i in range(1, n.count("/") + 1)}
    problems += [f"{n}: refused: also used as a folder by another member" for n in sorted(seen & folders)]
    return problems


def extract(bundle: Path, target: Path) -> Dict[str, Tuple[str, int]]:
    """Extract a bundle's members below ``target`` (created; must be empty) after checking all of them.

    Returns ``{name: (sha256, size)}`` computed while writing.  Raises BundleError, before writing anything,
    when the archive is unreadable or any member is unsafe.
    """
    bundle, target = Path(bundle), Path(target)
    try:
        if os.path.getsize(bundle) > MAX_BUNDLE:
            raise BundleError(f"{bundle}: over the limit of {MAX_BUNDLE} bytes")
        with tarfile.open(str(bundle), mode="r:*") as tar:
            members = _read_headers(tar, bundle)
            problems = check_members(members)
            if problems:
                raise BundleError(f"{bundle}: unsafe archive, nothing extracted: " + "; ".join(problems[:10]))
            target.mkdir(parents=True, exist_ok=True)
            if any(target.iterdir()):
                raise BundleError(f"{target}: not empty; fix: extract into a new folder")
            root = os.path.realpath(target)
            hashes: Dict[str, Tuple[str, int]] = {}
            for m in members:
                hashes[m.name] = _write_member(tar, m, root)
            return hashes
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError) and exc.filename == str(bundle):
            raise BundleError(f"{bundle}: no such file") from None
        raise BundleError(f"{bundle}: not a readable bundle archive ({type(exc).__name__}: {exc}); the file was "
                          "altered or truncated") from None


def _read_headers(tar: tarfile.TarFile, bundle: Path) -> List[tarfile.TarInfo]:
    members = []
    for m in tar:
        members.append(m)
        if len(members) > MAX_MEMBERS:
            raise BundleError(f"{bundle}: more than {MAX_MEMBERS} members; refused")
    return members


def _write_member(tar: tarfile.TarFile, m: tarfile.TarInfo, root: str) -> Tuple[str, int]:
    dest = os.path.join(root, *m.name.split("/"))
    parent = root
    for part in m.name.split("/")[:-1]:
        parent = os.path.join(parent, part)
        try:
            os.mkdir(parent, 0o755)
        except FileExistsError:
            if os.path.islink(parent) or not os.path.isdir(parent):
                raise BundleError(f"{m.name}: a folder on its path is not a plain folder; refused") from None
    if os.path.commonpath([root, os.path.realpath(os.path.dirname(dest))]) != root:
        raise BundleError(f"{m.name}: would be written outside {root}; refused")
    src = tar.extractfile(m)
    if src is None:
        raise BundleError(f"{m.name}: no data")
    h, size = hashlib.sha256(), 0
    with open_new(dest) as fh:
        while size < m.size:
            chunk = src.read(min(1 << 20, m.size - size))
            if not chunk:
                break
            h.update(chunk)
            fh.write(chunk)
            size += len(chunk)
    return h.hexdigest(), size


# --------------------------------------------------------------------------------------------- verify

def verify(bundle: Path, pubkey: Path, extract_to: Optional[Path] = None) -> Verification:
    """Check a bundle: signature, every file's hash, the report's schema, and every verdict replayed."""
    _, _, InvalidSignature = _crypto()
    public_key = load_public_key(Path(pubkey))
    res = Verification(bundle=str(bundle))
    tmp = None
    created = False
    if extract_to is None:
        tmp = tempfile.TemporaryDirectory(prefix="sits-verify-")
        target = Path(tmp.name)
    else:
        target = Path(extract_to)
        if os.path.islink(target) or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
            raise BundleError(f"{target}: exists and is not an empty folder; fix: give a new folder to --extract")
        created = not target.exists()
    if not Path(bundle).is_file():
        raise BundleError(f"{bundle}: no such file; fix: give the path of a bundle `sits bundle create` wrote")
    try:
        return _verify_into(bundle, pubkey, public_key, InvalidSignature, res, target)
    finally:
        if tmp is not None:
            tmp.cleanup()
        elif not res.ok:
            # Files that did not verify are not left behind for someone to use: the folder is as it was.
            if created:
                shutil.rmtree(target, ignore_errors=True)
            elif target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink()
            res.notes.append(f"{target}: nothing kept, since the bundle did not verify")


def _verify_into(bundle: Path, pubkey: Path, public_key: Any, InvalidSignature: Any, res: Verification,
                 target: Path) -> Verification:
    try:
        hashes = extract(Path(bundle), target)
    except BundleError as exc:
        res.problems.append(str(exc))
        return res
    res.files = len(hashes)
    if MANIFEST not in hashes:
        res.problems.append(f"{MANIFEST}: missing from the bundle")
        return res
    manifest_bytes = (target / MANIFEST).read_bytes()[:MAX_MANIFEST]
    if SIGNATURE not in hashes:
        res.problems.append(f"{SIGNATURE}: missing: the bundle is not signed, so nothing in it is attested")
    else:
        try:
            sig = bytes.fromhex((target / SIGNATURE).read_text(encoding="ascii").strip())
            public_key.verify(sig, manifest_bytes)
            res.signed_by = _fingerprint(public_key)
        except (InvalidSignature, ValueError, UnicodeDecodeError):
            res.problems.append(f"{MANIFEST}: the signature in {SIGNATURE} does not verify with {pubkey}: the "
                                "manifest or the signature was altered, or another key signed it")
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"))
        files = manifest["files"]
        listed = {f["path"]: f for f in files}
        if len(listed) != len(files):
            raise ValueError("a path is listed twice")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        res.problems.append(f"{MANIFEST}: not a valid manifest ({exc})")
        return res
    for name in sorted(listed):
        entry = listed[name]
        if name not in hashes:
            res.problems.append(f"{name}: listed in {MANIFEST} but missing from the bundle")
        elif hashes[name][0] != entry.get("sha256") or hashes[name][1] != entry.get("size"):
            res.problems.append(f"{name}: SHA-256 differs from {MANIFEST} (the file was altered): expected "
                                f"{str(entry.get('sha256'))[:16]}…, found {hashes[name][0][:16]}…")
    for name in sorted(set(hashes) - set(listed) - {MANIFEST, SIGNATURE}):
        res.problems.append(f"{name}: in the bundle but not in {MANIFEST} (added after signing)")
    report_name = manifest.get("report", REPORT_NAME)
    if report_name not in hashes:
        res.problems.append(f"{report_name}: the report is missing from the bundle")
        return res
    report = _check_report(target / report_name, report_name, res)
    if report is not None and SNAPSHOT in hashes:
        compare_snapshot(target / SNAPSHOT, report, res)
    return res


# What identifies the machine in a snapshot and in a report's inventory: compared by `sits verify`.
_ACCELERATOR_KEYS = (("bdf", "PCI address"), ("pci_id", "PCI vendor:device"))
_MANAGEMENT_KEYS = (("uuid", "UUID"), ("serial", "serial number"))


def _obj(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _machine(inventory: Dict[str, Any]) -> Dict[str, Any]:
    """The facts that tie an inventory to one machine: its host name and each accelerator's PCI address, IDs,
    UUID and serial number (those the inventory holds)."""
    host = _obj(inventory.get("host"))
    accs = [a for a in inventory.get("accelerators") or [] if isinstance(a, dict)]
    devices: Dict[str, Dict[str, Any]] = {}
    for a in accs:
        mgmt = _obj(a.get("management"))
        facts = {k: a.get(k) for k, _ in _ACCELERATOR_KEYS}
        facts.update({k: mgmt.get(k) for k, _ in _MANAGEMENT_KEYS})
        devices[str(a.get("bdf"))] = facts
    return {"hostname": host.get("hostname"), "devices": devices}


def compare_snapshot(packed: Path, report: Dict[str, Any], res: Verification) -> None:
    """The bundle's snapshot must be of the machine the report describes: read it (extracted into a private
    temporary folder with tar's data filter: no absolute path, no link out of it, no device file) as the
    ``snapshot:`` platform reads it, and compare the host name and every accelerator's PCI address, IDs, UUID
    and serial with the report's inventory.  A simulated report describes no machine: not compared, said so."""
    from ..platforms.base import PlatformError
    from ..platforms.snapshot import SnapshotPlatform

    platform = _obj(report.get("platform"))
    if platform.get("simulated"):
        res.notes.append(f"{SNAPSHOT}: not compared with the report's inventory: the report is of a simulated "
                         "platform, which describes no machine")
        return
    if not hasattr(tarfile, "data_filter"):  # pragma: no cover - Python before 3.9.17 / 3.10.12 / 3.11.4
        res.problems.append(f"{SNAPSHOT}: cannot be compared with the report's inventory on this Python (no tar "
                            "extraction filter); fix: verify with Python 3.11.4 or later")
        return
    with tempfile.TemporaryDirectory(prefix="sits-verify-snapshot-") as tmp:
        try:
            with tarfile.open(str(packed), mode="r:gz") as tar:
                members, total = [], 0
                for m in tar:
                    members.append(m)
                    total += max(m.size, 0)
                    if len(members) > MAX_MEMBERS or total > MAX_TOTAL:
                        raise BundleError(f"over {MAX_MEMBERS} members or {MAX_TOTAL} bytes")
                    if not m.name.startswith("snapshot/") or m.islnk() or not (m.isfile() or m.isdir() or m.issym()):
                        raise BundleError(f"member {m.name!r}: not a file, folder or link inside snapshot/")
                tar.extractall(tmp, members=members, filter="data")
            folder = Path(tmp) / "snapshot"
            captured = None
            if os.path.lexists(folder / "manifest.json"):  # `sits capture DIR`
                snap = SnapshotPlatform(folder)
                captured = snap.manifest.get("hostname")
                inventory = snap.inventory()
            else:  # a folder of submitted texts (the evidence platform's), which name no host
                from ..platforms.evidence import EvidencePlatform

                inventory = EvidencePlatform(folder).inventory()
        except (BundleError, PlatformError, UntrustedInputError, tarfile.TarError, EOFError, OSError,
                ValueError) as exc:
            res.problems.append(f"{SNAPSHOT}: cannot be read as a snapshot or evidence folder "
                                f"({type(exc).__name__}: {str(exc)[:300]}), so it attests nothing about the report's "
                                "machine")
            return
    claimed = _machine(_obj(report.get("inventory")))
    seen = _machine(inventory)
    host = claimed["hostname"]
    if (captured is not None and captured != host) or seen["hostname"] not in (None, host):
        res.problems.append(f"{SNAPSHOT}: captured on host {captured!r}, but the report's inventory is of host "
                            f"{host!r}: the snapshot is not of the machine the report describes")
    ours, theirs = claimed["devices"], seen["devices"]
    if set(ours) != set(theirs):
        res.problems.append(f"{SNAPSHOT}: accelerators at {sorted(theirs) or 'no PCI address'}, but the report's "
                            f"inventory lists {sorted(ours) or 'none'}: the snapshot is not of the machine the "
                            "report describes")
        return
    for bdf in sorted(ours):
        for key, what in _ACCELERATOR_KEYS + _MANAGEMENT_KEYS:
            a, b = ours[bdf].get(key), theirs[bdf].get(key)
            if a is not None and b is not None and a != b:
                res.problems.append(f"{SNAPSHOT}: accelerator {bdf}: {what} {b!r} in the snapshot, {a!r} in the "
                                    "report's inventory")


def _check_report(path: Path, name: str, res: Verification) -> Optional[Dict[str, Any]]:
    try:
        report = read_report(path, check_schema=False)
    except (OSError, ValueError) as exc:
        res.problems.append(f"{name}: {exc}")
        return None
    errors = validate(report)
    if errors:
        res.problems += [f"{name}: schema: {e}" for e in errors[:10]]
        return None
    res.verdicts = len(report["verdicts"])
    out = replay_report(report)
    res.replayed = out.get("replayed", 0)
    for d in out.get("differs", []):
        res.problems.append(f"{name}: verdict #{d.get('index')} {d.get('requirement')} {d.get('subject')}: "
                            f"{d.get('field')} is {d.get('stored')!r} in the report, but its evidence gives "
                            f"{d.get('now')!r}")
    for f in out.get("thresholds", []):
        where = f"verdict #{f['index']} {f['requirement']} {f['subject']}" if f["index"] is not None else f["field"]
        res.problems.append(f"{name}: {where}: {f['why']}")
    verdicts = report["verdicts"]
    for n in out.get("not_replayable", []):
        i = n.get("index")
        status = verdicts[i].get("status") if isinstance(i, int) and 0 <= i < len(verdicts) else None
        line = (f"{name}: verdict #{i} {n.get('requirement')} {n.get('subject')} ({status}) cannot be recomputed "
                f"from its evidence: {n.get('why')}")
        # A FAIL or ERROR that cannot be replayed claims nothing in the run's favour; any other status must be
        # reproduced, or it is only the signer's word.
        (res.notes if status in ("FAIL", "ERROR") else res.problems).append(line)
    # the same call the report was built with (pytest_sits.report.model.build)
    summary = summarise(verdicts, report["run"]["completed"], report["platform"]["simulated"],
                            report["coverage"], report["run"]["level"], report["platform"]["kind"])
    if summary["result"] != report["summary"]["result"]:
        res.problems.append(f"{name}: summary.result is {report['summary']['result']}, but its verdicts give "
                            f"{summary['result']} ({summary['result_reason']})")
    return report


# --------------------------------------------------------------------------------------------- commands

BUNDLE_EXAMPLES = """\
  sits keygen lab-key                                    lab-key.key (secret) and lab-key.pub
  sits bundle create sits-report -o node7.sits.tar.gz --key=lab-key.key --capture
  sits verify node7.sits.tar.gz --pubkey=lab-key.pub --extract=checked/
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "bundle", "pack a report folder into a signed evidence bundle", BUNDLE_EXAMPLES)
    bsub = p.add_subparsers(dest="action", required=True)
    q = bsub.add_parser("create", help="REPORT_DIR -o BUNDLE [--key KEY]")
    q.add_argument("report_dir")
    q.add_argument("-o", "--output", required=True, metavar="BUNDLE")
    q.add_argument("--key", help="Ed25519 private key (PEM, from `sits keygen`); without it the bundle is unsigned")
    q.add_argument("--snapshot", metavar="DIR", help="a snapshot of the machine (`sits capture DIR`) to include")
    q.add_argument("--capture", action="store_true", help="capture this machine's evidence now and include it")
    q.set_defaults(func=run_create)
    p = add(sub, "verify", "check a bundle's signature and hashes, and replay every verdict", BUNDLE_EXAMPLES)
    p.add_argument("bundle")
    p.add_argument("--pubkey", required=True, metavar="PUB", help="the signer's public key (PEM)")
    p.add_argument("--extract", metavar="DIR", help="also keep the verified files in DIR (new or empty)")
    p.set_defaults(func=run_verify)
    p = add(sub, "keygen", "make an Ed25519 key pair for signing bundles", BUNDLE_EXAMPLES)
    p.add_argument("prefix", nargs="?", default="sits-ed25519", help="writes PREFIX.key and PREFIX.pub")
    p.set_defaults(func=run_keygen)


def run_create(args: Any) -> int:
    if os.path.lexists(args.output):
        return err(f"{args.output}: exists; a bundle is never written over another file; fix: choose a new path "
                   "or remove the old one")
    try:
        manifest = create(Path(args.report_dir), Path(args.output), Path(args.key) if args.key else None,
                          Path(args.snapshot) if args.snapshot else None, capture=args.capture)
    except BundleError as exc:
        return err(str(exc))
    signed = (f"signed (Ed25519, key {manifest['signature']['public_key_sha256'][:16]}…)" if manifest["signature"]
              else "NOT signed (no --key): hashes only, nobody can tell who made it")
    print(f"{args.output}: {len(manifest['files'])} files, {signed}")
    if not any(f["path"] == SNAPSHOT for f in manifest["files"]):
        print("note: no snapshot of the machine's evidence in this bundle (give --snapshot DIR or --capture)")
    return 0


def run_verify(args: Any) -> int:
    """Check a bundle's signature, every hash, and replay every verdict; exit 1 naming what does not hold."""
    try:
        res = verify(Path(args.bundle), Path(args.pubkey), Path(args.extract) if args.extract else None)
    except BundleError as exc:
        return err(str(exc))
    for note in res.notes:
        print(f"note: {note}")
    for problem in res.problems:
        print(f"FAILED: {problem}")
    if res.ok:
        signed_by = cast(str, res.signed_by)  # verified: the signature checked out, so its key is known
        print(f"{args.bundle}: verified: signature (key {signed_by[:16]}…), {res.files - 2} file hashes, "
              f"{res.replayed} of {res.verdicts} verdicts replayed from their evidence and reproduced")
        return 0
    print(f"{args.bundle}: NOT verified: {len(res.problems)} problem(s)")
    return 1


def run_keygen(args: Any) -> int:
    try:
        key, pub = keygen(args.prefix)
    except BundleError as exc:
        return err(str(exc))
    print(f"private key: {key} (keep it secret; sign with `sits bundle create DIR -o B --key {key}`)")
    print(f"public key:  {pub} (give it to whoever verifies: `sits verify B --pubkey {pub}`)")
    return 0
