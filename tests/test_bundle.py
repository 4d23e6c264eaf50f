"""Signed evidence bundles: create, verify, and every tamper case caught (pytest_sits/commands/bundle.py, `sits verify`)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="bundles need cryptography: pip install 'pytest-sits[fleet]'")

from pytest_sits.commands import bundle  # noqa: E402
from pytest_sits.cli import main  # noqa: E402

from helpers import run_suite  # noqa: E402


def suite_folder(dest: Path, *args: str) -> Path:
    """A real run of the bundled suite (quick level) writing its report and JUnit XML into ``dest``."""
    return run_suite(dest, *args, junit=True).report_dir


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    key, pub = bundle.keygen(str(d / "signer"))
    other_key, other_pub = bundle.keygen(str(d / "other"))
    return {"key": key, "pub": pub, "other_key": other_key, "other_pub": other_pub}


@pytest.fixture(scope="module")
def live_report(tmp_path_factory):
    return suite_folder(tmp_path_factory.mktemp("live") / "sits-report")


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory):
    return suite_folder(tmp_path_factory.mktemp("sim") / "sits-report", "--sits-platform=sim:h100")


@pytest.fixture(scope="module")
def signed(sim_report, keys, tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "sim.tar.gz"
    bundle.create(sim_report, out, keys["key"], capture=True)
    return out


def members(path: Path) -> dict:
    with tarfile.open(str(path), "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}


def repack(src: Path, dest: Path, changes: dict) -> Path:
    """Rewrite a bundle with some members replaced (bytes), removed (None) or added."""
    data = members(src)
    data.update(changes)
    with tarfile.open(str(dest), "w:gz") as tar:
        for name, content in data.items():
            if content is None:
                continue
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return dest


def rehash(manifest: bytes, name: str, content: bytes) -> bytes:
    """The manifest with one file's SHA-256 and size updated: what a forger without the key can do."""
    m = json.loads(manifest)
    for f in m["files"]:
        if f["path"] == name:
            f["sha256"], f["size"] = hashlib.sha256(content).hexdigest(), len(content)
    return (json.dumps(m, indent=2, sort_keys=True) + "\n").encode()


def sign(manifest: bytes, key_path: Path) -> bytes:
    return (bundle.load_private_key(key_path).sign(manifest).hex() + "\n").encode()


def verify(capsys, path: Path, pub: Path, *extra: str):
    rc = main(["verify", str(path), "--pubkey", str(pub), *extra])
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.slow
def test_bundle_of_a_live_run_verifies(live_report, keys, tmp_path, capsys):
    out = tmp_path / "live.tar.gz"
    assert main(["bundle", "create", str(live_report), "-o", str(out), "--key", str(keys["key"]),
                 "--capture"]) == 0
    names = set(members(out))
    assert {"MANIFEST.json", "MANIFEST.sig", "sits-report.json", "sits-report.html", "junit.xml",
            "snapshot.tar.gz"} <= names
    manifest = json.loads(members(out)["MANIFEST.json"])
    assert {f["path"] for f in manifest["files"]} == names - {"MANIFEST.json", "MANIFEST.sig"}
    capsys.readouterr()
    rc, text = verify(capsys, out, keys["pub"], "--extract", str(tmp_path / "x"))
    assert rc == 0, text
    assert "verified" in text and "NOT" not in text
    report = json.loads((tmp_path / "x" / "sits-report.json").read_text())
    assert f"of {len(report['verdicts'])} verdicts replayed" in text


@pytest.mark.slow
@pytest.mark.parametrize("name", ["MANIFEST.json", "MANIFEST.sig", "sits-report.json", "sits-report.html",
                                  "junit.xml", "snapshot.tar.gz"])
def test_one_flipped_byte_in_any_member_fails_naming_it(signed, keys, tmp_path, capsys, name):
    content = bytearray(members(signed)[name])
    content[len(content) // 2] ^= 0x01
    bad = repack(signed, tmp_path / "bad.tar.gz", {name: bytes(content)})
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1
    failed = [line for line in text.splitlines() if line.startswith("FAILED:")]
    assert failed and any(name in line for line in failed), text


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True], ids=["new-folder", "empty-folder"])
def test_a_bundle_that_fails_leaves_nothing_extracted(signed, keys, tmp_path, capsys, existing):
    """`--extract DIR` keeps files only when every check held: a failed verify leaves DIR as it was."""
    content = bytearray(members(signed)["sits-report.json"])
    content[len(content) // 2] ^= 0x01
    bad = repack(signed, tmp_path / "bad.tar.gz", {"sits-report.json": bytes(content)})
    target = tmp_path / "out"
    if existing:
        target.mkdir()
    rc, text = verify(capsys, bad, keys["pub"], "--extract", str(target))
    assert rc == 1 and "nothing kept" in text
    assert (list(target.iterdir()) == []) if existing else not target.exists()


@pytest.mark.slow
def test_one_flipped_byte_in_the_archive_itself_fails(signed, keys, tmp_path, capsys):
    raw = bytearray(signed.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    bad = tmp_path / "raw.tar.gz"
    bad.write_bytes(bytes(raw))
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1 and "FAILED:" in text


def _edit_first_measured(report: dict) -> int:
    for i, v in enumerate(report["verdicts"]):
        if v["status"] == "PASS" and isinstance(v["measured"], (int, float)) and not isinstance(v["measured"], bool):
            v["measured"] = v["measured"] * 2 + 1
            return i
    raise AssertionError("no numeric PASS verdict to edit")


def _edit_first_status(report: dict) -> int:
    for i, v in enumerate(report["verdicts"]):
        if v["status"] == "PASS":
            v["status"], v["remediation"] = "WARN", None
            return i
    raise AssertionError("no PASS verdict to edit")


@pytest.mark.slow
@pytest.mark.parametrize("edit", [_edit_first_status, _edit_first_measured], ids=["status", "measured"])
def test_edited_verdict_rehashed_without_the_key_fails(signed, keys, tmp_path, capsys, edit):
    m = members(signed)
    report = json.loads(m["sits-report.json"])
    edit(report)
    content = json.dumps(report).encode()
    bad = repack(signed, tmp_path / "forged.tar.gz",
                 {"sits-report.json": content, "MANIFEST.json": rehash(m["MANIFEST.json"], "sits-report.json",
                                                                       content)})
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1
    assert "FAILED: MANIFEST.json: the signature in MANIFEST.sig does not verify" in text
    # the hashes themselves now agree: the signature is what catches it
    assert "sits-report.json: SHA-256 differs" not in text


@pytest.mark.slow
def test_edited_verdict_resigned_with_another_key_fails(signed, keys, tmp_path, capsys):
    m = members(signed)
    report = json.loads(m["sits-report.json"])
    _edit_first_status(report)
    content = json.dumps(report).encode()
    manifest = rehash(m["MANIFEST.json"], "sits-report.json", content)
    bad = repack(signed, tmp_path / "forged.tar.gz", {"sits-report.json": content, "MANIFEST.json": manifest,
                                                      "MANIFEST.sig": sign(manifest, keys["other_key"])})
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1 and "does not verify with" in text


@pytest.mark.slow
def test_wrong_public_key_fails(signed, keys, capsys):
    rc, text = verify(capsys, signed, keys["other_pub"])
    assert rc == 1
    assert f"does not verify with {keys['other_pub']}" in text
    rc, text = verify(capsys, signed, keys["pub"])
    assert rc == 0, text


@pytest.mark.slow
def test_replay_catches_a_value_the_signer_itself_edited(signed, keys, tmp_path, capsys):
    """Signature and hashes hold (the signer re-signed), but the verdict no longer follows from its evidence."""
    m = members(signed)
    report = json.loads(m["sits-report.json"])
    i = _edit_first_measured(report)
    content = json.dumps(report).encode()
    manifest = rehash(m["MANIFEST.json"], "sits-report.json", content)
    bad = repack(signed, tmp_path / "resigned.tar.gz", {"sits-report.json": content, "MANIFEST.json": manifest,
                                                        "MANIFEST.sig": sign(manifest, keys["key"])})
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1
    assert "signature" not in " ".join(line for line in text.splitlines() if line.startswith("FAILED"))
    assert f"verdict #{i} {report['verdicts'][i]['requirement']}" in text and "measured is" in text


@pytest.mark.slow
def test_a_passing_verdict_stripped_of_its_check_is_not_taken_on_trust(signed, keys, tmp_path, capsys):
    m = members(signed)
    report = json.loads(m["sits-report.json"])
    i = next(i for i, v in enumerate(report["verdicts"]) if v["status"] == "PASS")
    report["verdicts"][i]["check"] = None
    content = json.dumps(report).encode()
    manifest = rehash(m["MANIFEST.json"], "sits-report.json", content)
    bad = repack(signed, tmp_path / "nocheck.tar.gz", {"sits-report.json": content, "MANIFEST.json": manifest,
                                                       "MANIFEST.sig": sign(manifest, keys["key"])})
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1 and f"verdict #{i}" in text and "cannot be recomputed" in text


@pytest.mark.slow
def test_summary_result_must_follow_from_the_verdicts(live_report, keys, tmp_path, capsys):
    out = tmp_path / "b.tar.gz"
    bundle.create(live_report, out, keys["key"])
    m = members(out)
    report = json.loads(m["sits-report.json"])
    report["summary"]["result"] = "NON_CONFORMANT" if report["summary"]["result"] != "NON_CONFORMANT" else "CONFORMANT"
    content = json.dumps(report).encode()
    manifest = rehash(m["MANIFEST.json"], "sits-report.json", content)
    bad = repack(out, tmp_path / "summary.tar.gz", {"sits-report.json": content, "MANIFEST.json": manifest,
                                                    "MANIFEST.sig": sign(manifest, keys["key"])})
    rc, text = verify(capsys, bad, keys["pub"])
    assert rc == 1 and "summary.result is" in text


@pytest.mark.slow
def test_member_added_or_removed_after_signing_is_named(signed, keys, tmp_path, capsys):
    rc, text = verify(capsys, repack(signed, tmp_path / "extra.tar.gz", {"notes.txt": b"trust me"}), keys["pub"])
    assert rc == 1 and "notes.txt: in the bundle but not in MANIFEST.json" in text
    rc, text = verify(capsys, repack(signed, tmp_path / "less.tar.gz", {"junit.xml": None}), keys["pub"])
    assert rc == 1 and "junit.xml: listed in MANIFEST.json but missing" in text


@pytest.mark.slow
def test_unsigned_bundle_is_not_verified(sim_report, keys, tmp_path, capsys):
    out = tmp_path / "unsigned.tar.gz"
    assert main(["bundle", "create", str(sim_report), "-o", str(out)]) == 0
    assert "NOT signed" in capsys.readouterr().out
    rc, text = verify(capsys, out, keys["pub"])
    assert rc == 1 and "MANIFEST.sig: missing" in text


def _evil(path: Path, kind: str, victim: Path) -> Path:
    with tarfile.open(str(path), "w:gz") as tar:
        def add(info, data=b""):
            info.size = len(data) if info.isfile() else 0
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)

        add(tarfile.TarInfo("MANIFEST.json"), b"{}")
        if kind == "dotdot":
            add(tarfile.TarInfo("reports/../../" + victim.name), b"owned")
        elif kind == "absolute":
            add(tarfile.TarInfo(str(victim)), b"owned")
        elif kind in ("symlink", "hardlink"):
            info = tarfile.TarInfo("link")
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            info.linkname = str(victim)
            add(info)
            add(tarfile.TarInfo("link"), b"owned")  # would write through the link
        elif kind == "device":
            info = tarfile.TarInfo("dev")
            info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            add(info)
        elif kind == "fifo":
            info = tarfile.TarInfo("fifo")
            info.type = tarfile.FIFOTYPE
            add(info)
        elif kind == "duplicate":
            add(tarfile.TarInfo("sits-report.json"), b"{}")
            add(tarfile.TarInfo("sits-report.json"), b"{}")
    return path


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "hardlink", "device", "fifo", "duplicate"])
def test_unsafe_member_is_refused_and_nothing_is_written(tmp_path, keys, capsys, kind):
    victim = tmp_path / f"victim-{kind}.txt"
    evil = _evil(tmp_path / "evil.tar.gz", kind, victim)
    target = tmp_path / "target" / "inner"
    rc, text = verify(capsys, evil, keys["pub"], "--extract", str(target))
    assert rc == 1 and "refused" in text, text
    assert not os.path.lexists(victim)
    assert not target.exists() or not any(target.iterdir())
    with pytest.raises(bundle.BundleError, match="unsafe archive, nothing extracted"):
        bundle.extract(evil, tmp_path / "direct")
    assert not (tmp_path / "direct").exists()
    assert not os.path.lexists(victim)


def test_size_limits_are_enforced_before_extraction(tmp_path):
    big = tarfile.TarInfo("big")
    big.size = 11
    many = [tarfile.TarInfo(f"f{i}") for i in range(5)]
    assert any("over the limit of 10 per file" in p for p in bundle.check_members([big], max_member=10))
    assert any("in all, over the limit of 20" in p
               for p in bundle.check_members([big, big.replace(name="b2")], max_total=20))
    assert any("5 members, over the limit of 4" in p for p in bundle.check_members(many, max_members=4))
    assert bundle.check_members(many) == []
    nested = [tarfile.TarInfo("a"), tarfile.TarInfo("a/b")]
    assert any("also used as a folder" in p for p in bundle.check_members(nested))


@pytest.mark.parametrize("name,why", [("/etc/passwd", "absolute"), ("a/../../b", "'..'"), ("a\\b", "backslash"),
                                      ("a//b", "empty"), ("./a", "'.'"), ("a\nb", "control"), ("", "empty")])
def test_unsafe_names(name, why):
    assert why in bundle.unsafe_name(name)


@pytest.mark.slow
def test_usage_errors_name_the_file_and_exit_4(tmp_path, keys, signed, capsys, sim_report):
    assert main(["verify", str(tmp_path / "missing.tar.gz"), "--pubkey", str(keys["pub"])]) == 4
    assert "missing.tar.gz: no such file" in capsys.readouterr().err
    junk = tmp_path / "junk.pub"
    junk.write_text("not a key")
    assert main(["verify", str(signed), "--pubkey", str(junk)]) == 4
    assert "junk.pub: not a PEM public key" in capsys.readouterr().err
    assert main(["verify", str(signed), "--pubkey", str(keys["key"])]) == 4  # a private key given as public
    capsys.readouterr()
    assert main(["bundle", "create", str(tmp_path), "-o", str(tmp_path / "b.tar.gz")]) == 4
    assert "no sits-report.json" in capsys.readouterr().err
    assert main(["keygen", str(keys["key"])[:-4]]) == 4
    assert "exists" in capsys.readouterr().err
    # a report folder holding a link is refused at creation (a bundle holds regular files only)
    d = tmp_path / "withlink"
    d.mkdir()
    (d / "sits-report.json").write_bytes((sim_report / "sits-report.json").read_bytes())
    (d / "passwd").symlink_to("/etc/passwd")
    assert main(["bundle", "create", str(d), "-o", str(tmp_path / "l.tar.gz")]) == 4
    assert "passwd: not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "l.tar.gz").exists()


def test_keygen_writes_a_private_key_only_its_owner_reads(keys):
    assert oct(os.stat(keys["key"]).st_mode & 0o777) == "0o600"
    assert b"PUBLIC KEY" in Path(keys["pub"]).read_bytes()
    assert bundle.load_public_key(keys["pub"]) is not None


@pytest.mark.slow
def test_password_protected_key(sim_report, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(bundle.KEY_PASSWORD_ENV, "correct horse")
    key, pub = bundle.keygen(str(tmp_path / "locked"))
    assert b"ENCRYPTED" in Path(key).read_bytes()
    out = tmp_path / "b.tar.gz"
    bundle.create(sim_report, out, key)
    assert bundle.verify(out, pub).ok
    monkeypatch.delenv(bundle.KEY_PASSWORD_ENV)
    assert main(["bundle", "create", str(sim_report), "-o", str(tmp_path / "c.tar.gz"), "--key", str(key)]) == 4
    assert bundle.KEY_PASSWORD_ENV in capsys.readouterr().err


@pytest.mark.slow
def test_bundle_is_never_written_over_another_file(tmp_path, sim_report, capsys):
    out = tmp_path / "taken.tar.gz"
    out.write_text("someone's file")
    assert main(["bundle", "create", str(sim_report), "-o", str(out)]) == 4
    assert "exists" in capsys.readouterr().err and out.read_text() == "someone's file"


# ---- the snapshot in a bundle is the report's machine -----------------------------------------------------------

def _snapshot_of(spec: str, dest: Path, hostname: str = None) -> Path:
    from pytest_sits.platforms import from_spec
    from pytest_sits.platforms.snapshot import capture

    sim = from_spec(spec)
    capture(dest, root=sim.root, nvml=sim.nvml())
    if hostname is not None:
        manifest = json.loads((dest / "manifest.json").read_text())
        manifest["hostname"] = hostname
        (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


@pytest.fixture(scope="module")
def snapshot_run(tmp_path_factory):
    """A run of the suite on a captured snapshot of an 8-GPU machine, and that snapshot."""
    base = tmp_path_factory.mktemp("snaprun")
    snap = _snapshot_of("sim:h100", base / "snap")
    return suite_folder(base / "sits-report", f"--sits-platform=snapshot:{snap}"), snap


@pytest.mark.slow
def test_the_snapshot_of_the_reports_machine_verifies_compared(snapshot_run, keys, tmp_path, capsys):
    report_dir, snap = snapshot_run
    report = json.loads((report_dir / "sits-report.json").read_text())
    assert len(report["inventory"]["accelerators"]) == 8
    out = bundle.create(report_dir, tmp_path / "b.tar.gz", keys["key"], snapshot=snap) and tmp_path / "b.tar.gz"
    res = bundle.verify(out, keys["pub"])
    assert res.ok, res.problems
    assert not [n for n in res.notes if "snapshot" in n], res.notes  # compared, not skipped


@pytest.mark.slow
@pytest.mark.parametrize("other", ["sim:a100-80gb-pcie", "hostname"])
def test_a_snapshot_of_another_machine_fails_verify_even_signed(snapshot_run, keys, tmp_path, capsys, other):
    """The lab signs, but the snapshot it bundled is not the machine the report describes: another machine's
    accelerators, or the same hardware captured on another host."""
    report_dir, snap = snapshot_run
    if other == "hostname":
        wrong = _snapshot_of("sim:h100", tmp_path / "snap", hostname="node-that-was-not-tested")
    else:
        wrong = _snapshot_of(other, tmp_path / "snap")
    out = tmp_path / "b.tar.gz"
    bundle.create(report_dir, out, keys["key"], snapshot=wrong)
    rc, text = verify(capsys, out, keys["pub"])
    assert rc == 1, text
    failed = [line for line in text.splitlines() if line.startswith("FAILED:") and "snapshot.tar.gz" in line]
    assert failed, text
    assert ("node-that-was-not-tested" if other == "hostname" else "PCI vendor:device '10de:20b5'") in failed[0], failed


@pytest.mark.slow
def test_a_simulated_reports_snapshot_is_not_compared_and_says_so(signed, keys):
    res = bundle.verify(signed, keys["pub"])
    assert res.ok, res.problems
    assert any("simulated platform" in n and "not compared" in n for n in res.notes), res.notes
