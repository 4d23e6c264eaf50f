"""Report files: the one reader and the one writer.

Every command that reads a stored report (``sits replay``, ``sits compare``,
``sits fleet merge``, ``sits report render/validate``, ``sits verify``) reads
it through :func:`read_report`: as untrusted input (no link followed, a
regular file, at most :data:`~pytest_sits.files.REPORT_LIMIT` bytes, strict
JSON), tagged ``"schema": "pytest-sits/report"``, and checked against the
report schema unless the caller checks it itself.  The run's report pair is
written by :func:`write_pair` only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ..files import (MAX_JSON_DEPTH, REPORT_LIMIT, UntrustedInputError, nesting_depth, read_bytes, read_file,
                     unlink_quietly, write_temp)
from .model import validate

REPORT_TAG = "pytest-sits/report"
JSON_NAME, HTML_NAME = "sits-report.json", "sits-report.html"


class ReportInputError(UntrustedInputError):
    """A stored report cannot be used; ``str()`` names the file, the problem and the fix."""

    def __init__(self, file: Union[str, Path], problem: str, fix: str):
        super().__init__(f"{file}: {problem}; fix: {fix}")


def read_report(path: Union[str, Path], *, root: Optional[Union[str, Path]] = None, limit: int = REPORT_LIMIT,
                check_schema: bool = True) -> Dict[str, Any]:
    """One stored report, read as untrusted input.  ``root``: read ``root/path`` confined below ``root``
    (a fleet folder).  ``check_schema=False``: the caller validates and reports the schema errors itself.

    Raises :class:`~pytest_sits.files.UntrustedInputError` (:class:`ReportInputError` is one) naming the file
    and the fix, or FileNotFoundError."""
    where = Path(root) / path if root is not None else Path(path)
    try:
        raw = read_bytes(root, path, limit) if root is not None else read_file(path, limit)
    except (UntrustedInputError, FileNotFoundError):  # their messages name the file and the fix
        raise
    except OSError as exc:
        raise ReportInputError(where, f"cannot be read ({exc.strerror})",
                               "check the path; a report is the sits-report.json of a run") from None

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=no_constants)
    except UnicodeDecodeError as exc:
        raise ReportInputError(where, f"is not UTF-8 text (byte {exc.start})",
                               "give the sits-report.json a run wrote") from None
    except RecursionError:
        raise ReportInputError(where, "is nested too deeply to be a report", "give the sits-report.json a run "
                               "wrote") from None
    except json.JSONDecodeError as exc:
        raise ReportInputError(where, f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                               "a report written by pytest-sits is complete JSON (atomic write); this file was "
                               "altered or truncated elsewhere: take the original") from None
    except ValueError as exc:
        raise ReportInputError(where, f"is not valid JSON ({exc})", "take the original report") from None
    if nesting_depth(data) > MAX_JSON_DEPTH:
        raise ReportInputError(where, f"is nested more than {MAX_JSON_DEPTH} levels deep, too deep to be a report",
                               "give the sits-report.json a run wrote")
    if not isinstance(data, dict) or data.get("schema") != REPORT_TAG:
        raise ReportInputError(where, f"not a pytest-sits report (no \"schema\": \"{REPORT_TAG}\")",
                               "give the sits-report.json a run wrote")
    if check_schema:
        errors = validate(data)
        if errors:
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise ReportInputError(where, "is not a valid pytest-sits report: " + "; ".join(errors[:3]) + more,
                                   "check it with `sits report validate FILE`; re-run the suite to write a new one")
    return data


def write_pair(json_path: Path, json_text: str, html_path: Path, html_text: str, started_at: float) -> None:
    """Write the JSON report and its HTML rendering so that a kill at any moment leaves a consistent pair.

    Both are written to temporary files first; then the old HTML is removed, the JSON renamed into place,
    and the HTML last.  Killed in between, the folder holds the old JSON alone or the new JSON alone
    (``sits report render`` makes its HTML), never a JSON beside another run's HTML.  Temporary files that
    a killed earlier run left behind (older than this run) are removed first."""
    folder = json_path.parent
    folder.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith((f".{json_path.name}.", f".{html_path.name}.")) and name.endswith(".tmp"):
            stale = folder / name
            try:
                if os.lstat(stale).st_mtime < started_at:
                    os.unlink(stale)
            except OSError:
                pass
    jtmp = write_temp(json_path, json_text)
    try:
        htmp = write_temp(html_path, html_text)
    except BaseException:
        unlink_quietly(jtmp)
        raise
    try:
        unlink_quietly(html_path)
        os.replace(jtmp, json_path)
        os.replace(htmp, html_path)
    except BaseException:
        unlink_quietly(jtmp)
        unlink_quietly(htmp)
        raise
