"""``sits audit PATH`` and ``sits audit-text``: verdicts from the texts a vendor or operator submitted.

Both are fronts for one path: the suite itself, run by pytest on the
``evidence`` platform (:mod:`pytest_sits.platforms.evidence`) - the same
conformance modules, checks, waivers, report, replay and bundles as any run.
``sits audit PATH`` runs it on a folder (or one file) of texts, each file's
kind told from its content; ``sits audit-text --nvidia-smi-q FILE ...`` copies
the files it is given into a private folder (read as untrusted input: no
link, size-limited) and runs the same.  The command prints what was read, the
verdicts, what the texts could not decide, and the run's result, and leaves
the JSON and HTML report (``--report-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .. import exitcodes
from .base import add, err, pytest_argv

if TYPE_CHECKING:
    from ..probes.readers import Reader


EXAMPLES = """\
  sits audit evidence/ --profile=h100
  sits audit nvidia-smi-q.xml --profile=a100-80gb-pcie --json=verdicts.json --report-dir=audit-report
  sits audit evidence/ --under-load        (the submitter declares a load ran while the texts were captured)
  exit: 0 conforms in what the texts show, 10 a FAIL, 13 an ERROR, 11 INCONCLUSIVE or nothing decided,
        4 no readable text or bad option (docs: exit statuses)
"""

EXAMPLES_TEXT = """\
  sits audit-text --lspci-tv=tree.txt --lspci-vv=vv.txt --profile=h100
  sits audit-text --nvidia-smi-topo=topo.txt --nvidia-smi-q=q.txt --profile=h200 --json=verdicts.json
  exit: 0 conforms in what the texts show, 10 a FAIL, 13 an ERROR, 11 INCONCLUSIVE or nothing decided,
        4 unreadable text or bad option (docs: exit statuses)
"""


def text_options() -> List[Tuple[str, Reader]]:
    """audit-text's options (``--nvidia-smi-q FILE``), one per reader that has one, with that reader: a file given
    so is declared as its kind (the content decides; a mismatch is noted)."""
    from ..probes.readers import READERS

    return [(r.option, r) for r in READERS if r.option is not None]


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=None, help="profile whose thresholds apply (default: picked from the PCI "
                                                   "IDs the texts give, as a pytest run does)")
    p.add_argument("--level", default=None, choices=("quick", "standard", "full"),
                   help="run depth (default quick: what texts can show; full where the texts hold an MLPerf "
                        "Inference run, whose inference requirements are of the standard and full levels; deeper "
                        "levels add requirements that are not measured on texts)")
    p.add_argument("--under-load", action="store_true", help="declare that a load ran on the accelerators while "
                   "the texts were captured (recorded as declared, not observed)")
    p.add_argument("--json", metavar="OUT", help="also write the verdicts as JSON")
    p.add_argument("--each", action="store_true", help="one line per requirement and subject (by default the "
                                                      "verdicts are grouped as the pytest summary groups them: one "
                                                      "line per requirement, identical findings on several devices "
                                                      "as one line naming them)")
    p.add_argument("--report-dir", metavar="DIR", help="write the full report (JSON and HTML) into DIR (default: "
                                                       "a temporary folder, removed afterwards)")


def add_parser(sub: Any) -> None:
    p = add(sub, "audit", "the suite's verdicts on submitted texts (nvidia-smi, lspci, rocm-smi, amd-smi, kernel logs)",
            EXAMPLES)
    p.add_argument("path", metavar="PATH", help="a folder of submitted texts (each file's kind told from its "
                                               "content), or one file")
    _common(p)
    p.set_defaults(func=run_audit)
    t = add(sub, "audit-text", "topology and health verdicts from submitted `lspci` / `nvidia-smi` text (the "
                               "files named one by one; `sits audit DIR` reads a folder)", EXAMPLES_TEXT)
    for option, r in text_options():
        t.add_argument(option, metavar="FILE", help=r.option_help)
    _common(t)
    t.set_defaults(func=run_text)


# ---- running the suite on the evidence platform ------------------------------------------------------------

def pytest_command(spec: str, profile: Optional[str], level: str, report_dir: Path, ini: Path) -> List[str]:
    """The pytest run of the conformance suite on ``spec``: only this plugin loaded, no ini or conftest of the
    current folder (the run must not depend on where the command was started)."""
    cmd = [*pytest_argv(), "--pyargs", "pytest_sits.conformance", "-p", "pytest_sits.plugin.hooks",
           "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", str(ini.parent), "-q", "--tb=line",
           f"--sits-platform={spec}", f"--sits-level={level}", f"--sits-report-dir={report_dir}"]
    if profile:
        cmd.append(f"--sits-profile={profile}")
    return cmd


def run_suite(spec: str, profile: Optional[str], level: str, report_dir: Path) -> Tuple[Optional[Dict[str, Any]], str]:
    """Run the suite; (the report, pytest's output)."""
    from ..report.store import JSON_NAME
    from .child import run_child

    with tempfile.TemporaryDirectory(prefix="sits-audit-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n", encoding="utf-8")
        env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTHONDONTWRITEBYTECODE="1")
        for name in ("SITS_PROFILE", "SITS_PLATFORM", "SITS_LEVEL", "SITS_REPORT_DIR", "PYTEST_ADDOPTS"):
            env.pop(name, None)
        proc = run_child(pytest_command(spec, profile, level, report_dir, ini), cwd=tmp, env=env)
    out = proc.output
    if proc.signals:
        out += f"\nsits audit: {proc.signals[0]} forwarded to the suite, which wrote what it had (INCOMPLETE)"
    path = report_dir / JSON_NAME
    if not path.is_file():
        return None, out
    from ..report.store import read_report

    try:
        return read_report(path), out
    except Exception as exc:  # noqa: BLE001 - the report this run wrote; say what broke
        return None, f"{out}\n{path}: {exc}"


def _printable(text: Any) -> str:
    from ..report.render import printable

    return printable(str(text))


def show(report: Dict[str, Any], each: bool = False) -> List[Dict[str, Any]]:
    """Print what was read, the verdicts (grouped per requirement as the pytest summary groups them, or with
    ``each`` one line per subject, then what was not measured) and the result; return the verdicts."""
    sub = (report.get("inventory") or {}).get("submitted") or {}
    print(f"platform: {_printable(report['platform']['label'])}")
    print(f"profile:  {report['profile']['name']} ({_printable(report['profile'].get('why') or '')})")
    for f in sub.get("files") or []:
        if f.get("status") == "read":
            cuts = "; ".join(_printable(c.get("what") or c.get("text") or "") + (f" (line {c['line']})"
                                                                                  if c.get("line") else "")
                             for c in (f.get("cuts") or [])[:4])
            print(f"read:     {_printable(f['name'])} ({f['tool']})" + (f"; cut: {cuts}" if cuts else ""))
            if f.get("declared_note"):
                print(f"note:     {_printable(f['name'])}: {_printable(f['declared_note'])}")
        else:
            print(f"refused:  {_printable(f['name'])}: {_printable(f.get('why'))}")
    for s in sub.get("skipped") or []:
        print(f"refused:  {_printable(s['name'])}: {_printable(s['why'])}")
    for n in sub.get("unidentified") or []:
        print(f"not judged: {_printable(n['device'])} {_printable(n.get('name') or '')} ({n['source']}): "
              f"{_printable(n['why'])}")
    for n in sub.get("notes") or []:
        print(f"note:     {_printable(n)}")
    verdicts = report.get("verdicts") or []
    if not (report.get("inventory") or {}).get("accelerators"):
        print("no accelerator in the submitted texts")
    s = report.get("summary") or {}
    if not each:
        from ..report.render import terminal_rows

        for line, _ in terminal_rows(report, shutil.get_terminal_size((120, 24)).columns - 1):
            print(line)
        print(f"result: {s.get('result')} ({_printable(s.get('result_reason'))})")
        return verdicts
    for v in verdicts:
        if v["status"] == "SKIP":
            continue
        print(f"{v['requirement']:18} {_printable(v['subject']):14} {v['status']:12} {_printable(v['reason'])}")
    for v in verdicts:
        if v["status"] == "SKIP":
            unmeasured = isinstance(v.get("evidence"), dict) and v["evidence"].get("unavailable")
            reason = str(v["reason"])
            if unmeasured and reason.startswith("not measured: "):
                reason = reason[len("not measured: "):]
            print(f"{'not measured' if unmeasured else 'not applicable'}: {v['requirement']} "
                  f"{_printable(v['subject'])}: {_printable(reason)}")
    print(f"result: {s.get('result')} ({_printable(s.get('result_reason'))})")
    return verdicts


def audit(spec: str, args: argparse.Namespace) -> int:
    """Run the suite on ``spec`` and report: the exit status by the worst verdict."""
    from .. import profiles
    from ..files import atomic_write

    if args.profile:
        if os.path.isfile(args.profile):  # the suite runs in a folder of its own: a path given here is made absolute
            args.profile = os.path.abspath(args.profile)
        try:
            profiles.resolve(args.profile)
        except profiles.ProfileError as exc:  # the whole message, with its fix, before anything runs
            return err(f"bad profile: {exc}")

    keep = args.report_dir is not None
    report_dir = Path(args.report_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="sits-audit-report-"))
    try:
        report, out = run_suite(spec, args.profile, args.level or _LEVEL["default"], report_dir)
        if report is None:
            lines = [ln for ln in out.splitlines() if ln.strip()]
            why = next((ln.split("ERROR:", 1)[1].strip() for ln in lines if "ERROR:" in ln and "sits" in ln.lower()),
                       None) or next((ln for ln in lines if "error" in ln.lower()), None) or "\n".join(lines[-12:])
            return err(f"the suite could not run on the submitted evidence: {_printable(why)}")
        verdicts = show(report, each=bool(getattr(args, "each", False)))
        if keep:
            print(f"report: {report_dir}")
        if args.json:
            atomic_write(args.json, json.dumps(verdicts, indent=2, default=str))
    finally:
        if not keep:
            shutil.rmtree(report_dir, ignore_errors=True)
    counts: Dict[str, int] = {}
    for v in verdicts:
        counts[v["status"]] = counts.get(v["status"], 0) + 1
    return exitcodes.run_status(counts, exitcodes.OK)


def _spec(path: str, under_load: bool) -> str:
    return f"evidence:{path}" + ("+under-load" if under_load else "")


#: How archives begin (gzip, bzip2, xz, zstd, zip) and end (``tar``'s "ustar" at offset 257).
ARCHIVE_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd",
                 b"PK\x03\x04": "zip"}
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".zip", ".gz",
                    ".bz2", ".xz", ".zst")


def archive_kind(path: Path) -> Optional[str]:
    """The kind of archive ``path`` is (by its first bytes, or its name), or None.  Read without following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device is no archive (and is not read)
            return None
        head = os.pread(fd, 512, 0)
    except OSError:
        head = b""
    finally:
        os.close(fd)
    kind = next((k for magic, k in ARCHIVE_MAGIC.items() if head.startswith(magic)), None)
    if kind is None and head[257:262] == b"ustar":
        kind = "tar"
    if kind is None and str(path).lower().endswith(ARCHIVE_SUFFIXES):
        kind = "archive"
    return kind


def _precheck(path: Path, files: Optional[List[Tuple[str, Optional[str]]]] = None) -> Optional[str]:
    """Why the evidence cannot be read at all (a usage error), before the suite runs; None when it can."""
    from ..platforms import PlatformError
    from ..platforms.evidence import EvidencePlatform

    kind = archive_kind(path) if files is None and not path.is_dir() else None
    if kind is not None:
        return (f"{path} is an archive ({kind}): the suite reads the texts themselves, never an archive (nothing in "
                f"it is extracted or run); fix: extract it into a folder of its own (e.g. mkdir evidence && tar -xf "
                f"{path.name} -C evidence) and give that folder: sits audit evidence/")

    try:
        platform = EvidencePlatform(path, files=files)
        _LEVEL["default"] = "full" if any(f.get("kind", "").startswith("mlperf-") for f in platform.evidence["files"]
                                          if f.get("status") == "read" and f.get("kind")) else "quick"
    except PlatformError as exc:
        return str(exc)
    return None


#: The default level of this command's run, set by :func:`_precheck` from what the evidence holds.
_LEVEL: Dict[str, str] = {"default": "quick"}


def run_audit(args: argparse.Namespace) -> int:
    """The suite's verdicts on a folder (or one file) of submitted texts."""
    path = Path(args.path)
    problem = _precheck(path)
    if problem:
        return err(problem)
    return audit(_spec(str(path.resolve()) if not path.is_symlink() else str(path), args.under_load), args)


def run_text(args: argparse.Namespace) -> int:
    """``sits audit-text``: the files named one by one, copied into a private folder, then ``sits audit``."""
    from ..files import UntrustedInputError, read_file, write_new
    from ..probes.submitted import FILE_LIMIT

    options = text_options()
    given = [(str(getattr(args, _dest(o))), r.kind) for o, r in options if getattr(args, _dest(o), None)]
    if not given:
        names = [f"{o} FILE" for o, _ in options]
        return err(f"give {', '.join(names[:-1])} and/or {names[-1]} (or `sits audit DIR` for a folder)")
    declared = [o for o, r in options if r.link_load == "declared"]  # readings loaded only as declared
    read = [o for o, r in options if r.link_load == "read"]  # the text's own utilisation tells
    if args.under_load and not any(getattr(args, _dest(o), None) for o in declared + read):
        return err(f"--under-load declares that a load ran while the link readings were captured: give "
                   f"{' / '.join(declared)} FILE (or {' / '.join(read)} FILE) with it")
    problem = _precheck(Path("."), files=[(name, kind) for name, kind in given])
    if problem:
        return err(problem)
    with tempfile.TemporaryDirectory(prefix="sits-audit-text-") as tmp:
        used = set()
        for i, (name, kind) in enumerate(given):
            try:
                data = read_file(name, FILE_LIMIT)
            except (UntrustedInputError, OSError) as exc:
                return err(f"{name}: {getattr(exc, 'strerror', None) or exc}")
            base = Path(name).name[:120] or kind
            staged = base if base not in used and not base.startswith(".") else f"{i:02d}-{kind}-{base.lstrip('.')}"
            used.add(staged)
            write_new(Path(tmp) / staged, data)
        return audit(_spec(tmp, args.under_load), args)
