"""Report files: a kill at any moment leaves a consistent JSON/HTML pair; stale temporary files are cleaned;
the umask is read, never changed."""

import os
import time

import pytest

from pytest_sits import files
from pytest_sits.report import store as rep


def _pair(d):
    return (d / "sits-report.json", d / "sits-report.html")


@pytest.mark.parametrize("crash_at", [1, 2])
def test_killed_between_renames_never_pairs_new_json_with_old_html(tmp_path, monkeypatch, crash_at):
    j, h = _pair(tmp_path)
    rep.write_pair(j, '{"run": "old"}', h, "<p>old</p>", time.time())
    calls = {"n": 0}
    real = os.replace

    def dying_replace(a, b):
        calls["n"] += 1
        if calls["n"] == crash_at:
            raise KeyboardInterrupt("killed")
        return real(a, b)

    monkeypatch.setattr(rep.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        rep.write_pair(j, '{"run": "new"}', h, "<p>new</p>", time.time())
    monkeypatch.setattr(rep.os, "replace", real)
    # Either the old JSON alone (crash before its rename) or the new JSON alone: never new JSON + old HTML.
    assert not h.exists()
    assert j.read_text() == ('{"run": "old"}' if crash_at == 1 else '{"run": "new"}')
    assert not list(tmp_path.glob(".*.tmp"))


def test_stale_temp_files_of_a_killed_run_are_removed(tmp_path):
    j, h = _pair(tmp_path)
    stale = tmp_path / ".sits-report.json.abc123.tmp"
    stale.write_text("{")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = tmp_path / ".sits-report.html.def456.tmp"  # another run writing right now: left alone
    fresh.write_text("<")
    rep.write_pair(j, "{}", h, "<p/>", time.time() - 60)
    assert not stale.exists() and fresh.exists()
    assert j.read_text() == "{}" and h.read_text() == "<p/>"


def test_umask_is_read_without_changing_it(tmp_path):
    old = os.umask(0o027)
    try:
        assert files.umask() == 0o027
        assert os.umask(0o027) == 0o027  # unchanged by the read
        files.atomic_write(tmp_path / "r.json", "{}")
        assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
