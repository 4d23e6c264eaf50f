"""The one home of file rules: reading files other people send, and writing files safely.

Reading (snapshots, golden sets, profiles' ``extends``, reports, text logs):
every reader of such files goes through this module, which enforces:

* confinement: a path is resolved below its root and must stay there; no
  component may be a symbolic link (``O_NOFOLLOW`` on every component, checked
  with ``lstat``), no hard link (a regular file with more than one name),
  no ``..``, no absolute member names;
* plain files only: a device, FIFO or socket (``/dev/zero``) is refused;
* size limits: at most ``limit`` bytes are read, and a larger file is refused
  with its size, never read whole;
* clear errors: :class:`UntrustedInputError` names the file and the fix.

Writing (reports, fleet files, bundles, snapshots, golden sets): a file is
either replaced whole (:func:`atomic_write`: a temporary file beside it, then
``rename``, so a reader or a kill never sees half of it, and a link planted at
the destination is replaced, never written through) or created new
(:func:`write_new`, :func:`open_new`: ``O_EXCL | O_NOFOLLOW``, never over an
existing file, never through a link).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Optional, Tuple, Union

#: Default limits (bytes).
TEXT_LIMIT = 16 << 20      # a text log, a profile, a sysfs attribute
JSON_LIMIT = 256 << 20     # a snapshot's facts
REPORT_LIMIT = 256 << 20   # a stored report (sits replay, compare, fleet merge, report render/validate, verify)
ARRAY_LIMIT = 2 << 30      # one golden array


class UntrustedInputError(ValueError):
    """A file sent by someone else cannot be used; the message names the file and the fix."""


def _check_rel(rel: Union[str, Path]) -> Path:
    p = Path(rel)
    if p.is_absolute():
        raise UntrustedInputError(f"{rel}: an absolute path where a relative one is expected; fix: use a path "
                                  "relative to the snapshot/golden folder")
    if any(part == ".." for part in p.parts):
        raise UntrustedInputError(f"{rel}: '..' leads outside the folder it belongs to; fix: remove it")
    return p


def open_confined(root: Union[str, Path], rel: Union[str, Path]) -> int:
    """Open ``root/rel`` read-only, following no link in ``rel``; return the file descriptor."""
    relp = _check_rel(rel)
    root = Path(root)
    # O_NONBLOCK: a FIFO planted where a file belongs must not block the open; fstat refuses it just after.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    dflags = flags | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(root, dflags)
    except OSError as exc:
        raise UntrustedInputError(f"{root}: cannot open ({exc.strerror}); fix: give an existing folder, not a "
                                  "link") from None
    try:
        parts = relp.parts
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nfd = os.open(part, flags if last else dflags, dir_fd=fd)
            except OSError as exc:
                where = root / Path(*parts[:i + 1])
                if exc.errno in (40, 20):  # ELOOP (a link), ENOTDIR
                    raise UntrustedInputError(f"{where}: a symbolic link or not a folder; links are not followed "
                                              "in evidence sent for audit; fix: capture it again") from None
                raise
            os.close(fd)
            fd = nfd
        st = os.fstat(fd)
        if parts and not stat.S_ISREG(st.st_mode):
            raise UntrustedInputError(f"{root / relp}: not a regular file (a device, FIFO or socket); fix: "
                                      "capture it again")
        if parts and st.st_nlink > 1:
            # A hard link is another name of a file that may live anywhere on this file system (a key, another
            # user's log): refused like a symbolic one.
            raise UntrustedInputError(f"{root / relp}: a hard link ({st.st_nlink} names for one file); links are "
                                      "not followed in files sent for audit; fix: copy the file there instead "
                                      "of linking it")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_bytes(root: Union[str, Path], rel: Union[str, Path], limit: int = TEXT_LIMIT) -> bytes:
    """The bytes of ``root/rel`` (confined, no links, at most ``limit`` bytes or refused)."""
    fd = open_confined(root, rel)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UntrustedInputError(f"{Path(root) / rel}: {size} bytes, over the {limit}-byte limit for this "
                                      "kind of file; fix: check that it is the right file")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # a file that grows while read (procfs/sysfs report size 0 or 4096)
                raise UntrustedInputError(f"{Path(root) / rel}: more than {limit} bytes; fix: check that it is "
                                          "the right file")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(root: Union[str, Path], rel: Union[str, Path], limit: int = TEXT_LIMIT) -> str:
    data = read_bytes(root, rel, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UntrustedInputError(f"{Path(root) / rel}: not UTF-8 text (byte {exc.start}); fix: save it as "
                                  "UTF-8") from None


def resolve_inside(root: Union[str, Path], path: Union[str, Path]) -> str:
    """The real path of ``path`` with every link resolved; it must stay inside ``root``.

    For evidence trees whose own relative links are part of the format (a snapshot's
    ``sys/bus/pci/devices/*``): those resolve inside; a link to ``/etc/shadow`` does not."""
    real = os.path.realpath(path)
    root_real = os.path.realpath(root)
    if os.path.commonpath([root_real, real]) != root_real:
        raise UntrustedInputError(f"{path}: resolves to {real}, outside the evidence folder {root}; links out of "
                                  "evidence sent for audit are not followed; fix: capture it again")
    return real


def exists_inside(root: Union[str, Path], rel: Union[str, Path]) -> bool:
    """Whether ``root/rel`` exists as evidence: it is there (a link counts only where it resolves inside
    ``root``; a link out of an evidence folder proves nothing about the machine it came from, and its target is
    never tested)."""
    path = Path(root) / _check_rel(rel)
    if not os.path.lexists(path):
        return False
    try:
        resolve_inside(root, path)
    except UntrustedInputError:
        return False
    return True


def read_resolved(root: Union[str, Path], rel: Union[str, Path], limit: int = TEXT_LIMIT) -> Optional[bytes]:
    """The bytes of ``root/rel`` resolved inside ``root`` (see :func:`resolve_inside`): a regular file of at
    most ``limit`` bytes; None when it does not exist or cannot be read."""
    path = Path(root) / rel
    if not os.path.lexists(path):
        return None
    real = resolve_inside(root, path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedInputError(f"{path}: not a regular file (a device, FIFO or folder); fix: capture it again")
    if st.st_size > limit:
        raise UntrustedInputError(f"{path}: {st.st_size} bytes, over the {limit}-byte limit for this kind of file; "
                                  "fix: capture it again")
    try:
        with open(real, "rb") as fh:
            return fh.read(limit + 1)[:limit]
    except OSError:
        return None


def read_file(path: Union[str, Path], limit: int = TEXT_LIMIT) -> bytes:
    """A single file named by the user (a report, a log): no link as the file itself, plain file, size-bounded."""
    p = Path(path)
    if os.path.islink(p):
        raise UntrustedInputError(f"{p}: a symbolic link; files sent for audit are not read through links; fix: "
                                  f"name the file itself ({os.path.realpath(p)})")
    if os.path.isdir(p):
        raise UntrustedInputError(f"{p}: a folder, not a file; fix: name the file inside it")
    return read_bytes(p.parent if str(p.parent) else ".", p.name, limit)


#: How deep JSON sent by someone else may nest (a report of the suite nests about 12 levels; code that walks it
#: recursively must never meet Python's recursion limit).
MAX_JSON_DEPTH = 64


def nesting_depth(value: Any, stop: int = MAX_JSON_DEPTH) -> int:
    """How deep ``value`` nests (a scalar: 0), counted without recursion; stops counting past ``stop``."""
    best, stack = 0, [(value, 0)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            d += 1
            best = max(best, d)
            if best > stop:
                return best
            stack.extend((v, d) for v in (x.values() if isinstance(x, dict) else x))
    return best


def load_json(path: Union[str, Path], limit: int = JSON_LIMIT, what: str = "file",
              root: Optional[Union[str, Path]] = None) -> Any:
    """Parse a JSON file sent by someone else; NaN/Infinity are refused (strict JSON)."""
    data = read_bytes(root, path, limit) if root is not None else read_file(path, limit)
    where = Path(root) / path if root is not None else Path(path)

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=no_constants)
    except UnicodeDecodeError as exc:
        raise UntrustedInputError(f"{where}: not UTF-8 (byte {exc.start}); fix: this {what} was altered") from None
    except RecursionError:
        raise UntrustedInputError(f"{where}: nested too deeply; fix: this {what} was altered") from None
    except ValueError as exc:
        raise UntrustedInputError(f"{where}: not valid JSON ({exc}); fix: this {what} was altered or truncated "
                                  "elsewhere") from None
    if nesting_depth(value) > MAX_JSON_DEPTH:
        raise UntrustedInputError(f"{where}: nested more than {MAX_JSON_DEPTH} levels deep; fix: this {what} was "
                                  "altered")
    return value


# --------------------------------------------------------------------------------------------- writing

def umask() -> int:
    """The process umask, read without changing it (threads may be creating files meanwhile)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def unlink_quietly(path: Union[str, Path]) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _bytes(data: Union[str, bytes]) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def _new_temp(path: Path, mode: Optional[int]) -> Tuple[int, str]:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        os.fchmod(fd, (0o666 & ~umask()) if mode is None else mode)  # mkstemp makes 0600
    except BaseException:
        os.close(fd)
        unlink_quietly(tmp)
        raise
    return fd, tmp


@contextmanager
def replacing(path: Union[str, Path], mode: Optional[int] = None) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` whole when the block ends without an error: a temporary file beside
    it (same folder, so the rename is atomic), flushed to disk, then renamed over ``path``.  On an error or a
    signal the temporary file is removed and ``path`` is left as it was.  A reader never sees half a file; a
    link planted at ``path`` is replaced by the file, never written through.  Mode: ``mode``, else what a plain
    ``open()`` would give under the umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_temp(path, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise


def atomic_write(path: Union[str, Path], data: Union[str, bytes], mode: Optional[int] = None) -> None:
    """Replace ``path`` whole with ``data`` (see :func:`replacing`)."""
    with replacing(path, mode) as fh:
        fh.write(_bytes(data))


def write_temp(path: Path, data: Union[str, bytes], mode: Optional[int] = None) -> str:
    """Write ``data`` to a new temporary file beside ``path``, flushed to disk, and return its name: for callers
    that rename several files into place together (a report's JSON and HTML)."""
    fd, tmp = _new_temp(path, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_bytes(data))
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        unlink_quietly(tmp)
        raise
    return tmp


def open_new(path: Union[str, Path], mode: int = 0o644) -> BinaryIO:
    """A new file opened for binary writing: ``O_EXCL`` (never over an existing file) and ``O_NOFOLLOW``
    (never through a link)."""
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), mode)
    return os.fdopen(fd, "wb")


def write_new(path: Union[str, Path], data: Union[str, bytes], mode: int = 0o644) -> None:
    """Create ``path`` with ``data``; refused (FileExistsError) when anything, a link included, is there."""
    with open_new(path, mode) as fh:
        fh.write(_bytes(data))
