"""Hostile and careless profiles.

Every file, however broken, gives `sits profile validate` exit 0 or 4 with a message naming the file and the
fix, never a traceback; a value the rules forbid is never accepted silently; every profile that validates runs
on the simulated platform without an internal error.  Property-based (hypothesis, derandomised: the same
examples on every run), then one regression test per finding of the "untrusted input" issue.  Time and memory
per file are measured by ``python benchmarks/fuzz.py``, not here.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from pytest_sits.catalogue import CATALOGUE
from pytest_sits.cli import main
from pytest_sits.profiles import (MAX_DEPTH, PROFILE_MAX_BYTES, ProfileError, profile_schema, resolve)

FUZZ = settings(derandomize=True, deadline=None, database=None, max_examples=60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.filter_too_much])

CHILD = {"name": "lab", "extends": "h100", "identity": {"count": 4},
         "thresholds": {"MEM-CAPACITY": {"min_gb_per_card": 60}, "TOPO-PCIE-LINK": {"samples": 3}},
         "waivers": [{"id": "TOPO-PCIE-DIRECT", "reason": "the baseboard carries a PCIe switch by design"}]}

#: A 454-byte alias bomb ("billion laughs"): 9^9 strings once expanded.
ALIAS_BOMB = ('name: bomb\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
              'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n'
              'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n'
              'f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n'
              'h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n')

Files = Dict[str, Union[str, bytes]]


def validate(files: Files, top: str = "p.yaml") -> Tuple[int, str]:
    """Write ``files`` into a new folder and run `sits profile validate` on ``top``: (exit code, stderr).

    Whatever the files hold, the command returns 0 or 4 and says why (never a traceback, never a message that
    repeats a whole file)."""
    folder = Path(tempfile.mkdtemp(prefix="sits-fuzz-"))
    try:
        for name, data in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["profile", "validate", str(folder / top)])
        msg = err.getvalue()
        assert rc in (0, 4), (rc, msg)
        assert "Traceback" not in msg
        assert len(msg) < 3000, f"message of {len(msg)} characters"
        if rc == 4:
            assert "fix:" in msg and str(folder) in msg, msg
        else:
            assert "ok (profile" in out.getvalue()
        return rc, msg
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)


# --------------------------------------------------------------------------
# What the schema says: leaves (paths to scalar values) and their bounds


def _schema_leaves(schema: Dict[str, Any], path: Tuple = ()) -> List[Tuple[Tuple, Dict[str, Any]]]:
    if "properties" in schema:
        out = []
        for key, sub in schema["properties"].items():
            out.extend(_schema_leaves(sub, path + (key,)))
        return out
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    return [(path, schema)] if {"number", "integer", "boolean", "string"} & set(types) else []


LEAVES = _schema_leaves(profile_schema())
NUMERIC = [(p, s) for p, s in LEAVES if {"number", "integer"} & set(s["type"] if isinstance(s["type"], list)
                                                                      else [s["type"]]) and "enum" not in s]


def _set(data: Dict[str, Any], path: Tuple, value: Any) -> Dict[str, Any]:
    """A copy of ``data`` with ``value`` at ``path`` (creating the mappings on the way)."""
    out = copy.deepcopy(data)
    cur = out
    for key in path[:-1]:
        if not isinstance(cur.get(key), dict):
            cur[key] = {}
        cur = cur[key]
    cur[path[-1]] = value
    return out


def test_every_number_in_the_profile_schema_has_an_upper_bound():
    """No profile the schema accepts can ask for 10^12 samples or a week-long window: every number a profile may
    set is bounded (catalogue.py: COUNT, SECONDS, TIMEOUT_S, BYTES, or the general types' ceiling)."""
    unbounded = ["/".join(map(str, p)) for p, s in NUMERIC if "maximum" not in s and "exclusiveMaximum" not in s]
    assert not unbounded, f"give these an upper bound in catalogue.py or profiles.py: {unbounded}"
    assert len(NUMERIC) > 50


# --------------------------------------------------------------------------
# Any file at all: exit 0 or 4, never a traceback

HOSTILE = [math.nan, math.inf, -math.inf, 1e300, -1e300, 10 ** 30, -(10 ** 30), 2 ** 63, 5.0, -1, 0, 0.5, "",
           "x" * 5000, [], {}, None, True, "1e999", "\u202e\u0000", [1] * 50, {"a": {"b": {"c": 1}}}, "10DE-2330",
           ["10de:2330", "10de:2330"]]
TAGS = ["!!float ", "!!int ", "!!bool ", "!!str ", "!!binary ", "!!timestamp ", "!!set ", "!!omap ",
        "!!python/object/apply:os.system ", "!foo ", "! ", "!<tag:yaml.org,2002:python/none> ", "!!map ", "!!seq "]


@st.composite
def mutated_profile(draw) -> Files:
    """A valid profile, then one to three careless or hostile edits, as data or as text."""
    data: Dict[str, Any] = yaml.safe_load(dump(CHILD))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "value", "unknown-key", "drop"]))
        if kind == "value":
            path = draw(st.sampled_from([p for p, _ in LEAVES]))
            data = _set(data, path, draw(st.sampled_from(HOSTILE) | st.floats() | st.integers()
                                         | st.text(max_size=30)))
        elif kind == "unknown-key":
            path = draw(st.sampled_from([p for p, _ in LEAVES]))[:-1] + (draw(st.text(min_size=1, max_size=20)),)
            data = _set(data, path, 1)
        else:
            data.pop(draw(st.sampled_from(sorted(data))), None)
    text = dump(data)
    edit = draw(st.sampled_from(["none", "tag", "truncate", "byte", "nest", "bomb", "extends", "documents",
                                 "duplicate", "crlf", "bom"]))
    lines = text.splitlines(keepends=True)
    raw: Union[str, bytes] = text
    if edit == "tag":
        i = draw(st.integers(0, len(lines) - 1))
        head, sep, tail = lines[i].partition(": ")
        lines[i] = head + sep + draw(st.sampled_from(TAGS)) + tail if sep else draw(st.sampled_from(TAGS)) + lines[i]
        raw = "".join(lines)
    elif edit == "truncate":
        raw = text[:draw(st.integers(0, len(text)))]
    elif edit == "byte":
        b = bytearray(text.encode())
        b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        raw = bytes(b)
    elif edit == "nest":
        n = draw(st.integers(MAX_DEPTH - 2, 1200))
        block = draw(st.booleans())
        deep = "".join("  " * k + "k:\n" for k in range(n)) + "  " * n + "k: 1\n" if block else \
            "deep: " + "[" * n + "]" * n + "\n"
        raw = text + ("description:\n" + "".join("  " + ln + "\n" for ln in deep.splitlines()) if block else deep)
    elif edit == "bomb":
        raw = ALIAS_BOMB.replace("name: bomb\n", text)
    elif edit == "extends":
        raw = text.replace("extends: h100", "extends: " + draw(st.sampled_from(
            ["/etc/shadow", "/dev/zero", "../" * 40 + "etc/passwd", "a" * 5000, "p.yaml", ".", "", "x\x00.yaml",
             "sub/../p.yaml", "~/.ssh/id_rsa", "h100.yml", "'h100'", "[h100]"])))
    elif edit == "documents":
        raw = text + "---\n" + text
    elif edit == "duplicate":
        raw = text + lines[0]
    elif edit == "crlf":
        raw = text.replace("\n", "\r\n")
    elif edit == "bom":
        raw = "\ufeff" + text
    return {"p.yaml": raw}


@FUZZ
@given(mutated_profile())
def test_mutated_profiles_exit_0_or_4(files):
    event(f"exit {validate(files)[0]}")


@FUZZ
@given(st.binary(max_size=3000) | st.text(alphabet="{}[]:-,&*!|>'\"#%@`?\n\t name:extends.01e+_~", max_size=500))
def test_random_bytes_exit_0_or_4(raw):
    event(f"exit {validate({'p.yaml': raw})[0]}")


# --------------------------------------------------------------------------
# Nothing forbidden is accepted silently


def _beyond(schema: Dict[str, Any], draw) -> Any:
    """A value just outside the schema node's range (above the maximum, or below the minimum)."""
    integer = "integer" in (schema["type"] if isinstance(schema["type"], list) else [schema["type"]])
    top = schema.get("maximum", schema.get("exclusiveMaximum"))
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    above = draw(st.booleans()) or low is None
    if above:
        return (int(top) + 1 if integer else top * (1 + draw(st.floats(0.01, 1e6)))) if top > 0 else top + 1
    return int(low) - 1 if integer else low - 1 - abs(low) * draw(st.floats(0, 10))


@FUZZ
@given(st.data())
def test_out_of_range_values_are_refused(data):
    path, schema = data.draw(st.sampled_from(NUMERIC))
    value = _beyond(schema, data.draw)
    rc, msg = validate({"p.yaml": dump(_set(CHILD, path, value))})
    assert rc == 4, f"{'.'.join(path)} = {value!r} accepted"
    assert "out of range" in msg or "not a finite number" in msg


@FUZZ
@given(st.sampled_from(NUMERIC), st.sampled_from([".nan", ".NaN", ".inf", "-.inf", "+.Inf", "1e400", "-1.0e+999"]))
def test_nan_and_infinities_are_refused_everywhere(leaf, token):
    path, _ = leaf
    text = dump(_set(CHILD, path, "@@@")).replace("'@@@'", token)
    rc, msg = validate({"p.yaml": text})
    assert rc == 4 and "not a finite number" in msg, msg


BANDS = [("MEM-BW-HOLD", "band_low", "band_high", 0.0, 1.0), ("THERM-GPU-STEADY", "band_low_c", "band_high_c", -40, 150),
         ("THERM-CPU-STEADY", "band_low_c", "band_high_c", -40, 150)]


@FUZZ
@given(st.sampled_from(BANDS), st.data())
def test_band_inverted_across_extends_is_refused(band, data):
    req, lo_key, hi_key, lo, hi = band
    high = data.draw(st.floats(lo, hi))
    low = data.draw(st.floats(high, hi))  # low >= high: inverted, or empty
    parent = {"name": "parent", "extends": "h100", "thresholds": {req: {hi_key: high}}}
    child = {"name": "child", "extends": "parent.yaml", "thresholds": {req: {lo_key: low}}}
    rc, msg = validate({"parent.yaml": dump(parent), "p.yaml": dump(child)})
    assert rc == 4 and f"{lo_key} ({low}) is not below {hi_key}" in msg, msg
    assert "p.yaml:" in msg and "parent.yaml:" in msg  # both files named, the child's line first


@FUZZ
@given(st.sampled_from(["THERM-GPU-STEADY", "THERM-CPU-STEADY"]), st.floats(1, 3600), st.data())
def test_window_longer_than_timeout_is_refused(req, window, data):
    timeout = data.draw(st.floats(0.001, window, exclude_max=True))
    across = data.draw(st.booleans())
    parent = {"name": "parent", "extends": "h100", "thresholds": {req: {"timeout_s": timeout}}}
    child = {"name": "child", "extends": "parent.yaml" if across else "h100",
             "thresholds": {req: {"window_s": window} if across else {"window_s": window, "timeout_s": timeout}}}
    rc, msg = validate({"parent.yaml": dump(parent), "p.yaml": dump(child)})
    assert rc == 4 and "is longer than timeout_s" in msg, msg


@FUZZ
@given(st.lists(st.from_regex(r"\A[0-9a-f]{4}:[0-9a-f]{4}\Z"), min_size=1, max_size=5), st.data())
def test_duplicate_pci_ids_are_refused(ids, data):
    ids = ids + [data.draw(st.sampled_from(ids))]
    rc, msg = validate({"p.yaml": dump(dict(CHILD, identity={"pci_ids": ids}))})
    assert rc == 4 and "same entry twice" in msg, msg


# --------------------------------------------------------------------------
# Every profile that validates runs


def _within(schema: Dict[str, Any]) -> st.SearchStrategy:
    types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "boolean" in types:
        return st.booleans()
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    if "integer" in types:
        return st.integers(int(lo) + ("exclusiveMinimum" in schema), int(hi))
    return st.floats(lo, hi, exclude_min="exclusiveMinimum" in schema, allow_nan=False)


QUICK = {r.id for r in CATALOGUE.values() if r.level == "quick"}
QUICK_LEAVES = [(p, s) for p, s in LEAVES if "string" not in (s["type"] if isinstance(s["type"], list) else [s["type"]])
                and (p[0] == "hardware" or (p[0] == "thresholds" and p[1] in QUICK))]


@st.composite
def valid_profile(draw) -> str:
    data = {"name": "drawn", "extends": draw(st.sampled_from(["h100", "h100-pcie", "a100", "l40s", "host"])),
            "identity": {"count": draw(st.integers(0, 3))}}
    for _ in range(draw(st.integers(1, 12))):
        path, schema = draw(st.sampled_from(QUICK_LEAVES))
        data = _set(data, path, draw(_within(schema)))
    return dump(data)


@pytest.mark.slow
@settings(derandomize=True, deadline=None, database=None, max_examples=8,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(valid_profile())
def test_every_profile_that_validates_runs_on_sim(pytester, text):
    """A profile the rules accept builds a simulated machine and runs the quick suite: tests may pass or fail,
    never end in an internal error or a usage error."""
    path = pytester.path / f"drawn-{len(list(pytester.path.glob('drawn-*.yaml')))}.yaml"
    path.write_text(text)
    try:
        resolve(str(path))
    except ProfileError:
        assume(False)
    report = path.with_suffix(".report")
    result = pytester.runpytest("--pyargs", "pytest_sits.conformance", "-p", "no:cacheprovider", "-p", "no:randomly",
                                f"--sits-platform=sim:{path}", f"--sits-report-dir={report}")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, 10, 11), \
        f"{text}\n{result.stdout.str()[-3000:]}\n{result.stderr.str()[-3000:]}"
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    verdicts = json.loads((report / "sits-report.json").read_text())["verdicts"]
    broken = [v for v in verdicts if v["status"] == "ERROR"]
    assert not broken, f"{text}\n{broken[:3]}"
    for v in verdicts:
        if v["status"] == "FAIL":
            event(f"FAIL {v['requirement']}: {v.get('reason', '')[:80]}")
    event(f"exit {int(result.ret)}, {resolve(str(path)).expected_count} accelerator(s)")


# --------------------------------------------------------------------------
# One regression test per finding of the issue


def test_alias_bomb_is_refused_before_it_expands():
    rc, msg = validate({"p.yaml": ALIAS_BOMB})
    assert rc == 4 and "anchors (&name) are not allowed" in msg and "p.yaml:2:" in msg
    rc, msg = validate({"p.yaml": "name: x\nextends: h100\ndescription: *a\n"})  # an alias with no anchor
    assert rc == 4 and "alias" in msg


def test_extends_to_a_system_file_repeats_none_of_it(tmp_path):
    secret_lines = []
    try:
        secret_lines = [ln for ln in Path("/etc/shadow").read_text().splitlines() if ln.strip()]
    except OSError:
        pass
    rc, msg = validate({"p.yaml": "name: x\nextends: /etc/shadow\n"})
    assert rc == 4 and "absolute path" in msg
    assert not any(ln in msg for ln in secret_lines)
    for line in Path("/etc/passwd").read_text().splitlines():
        assert line not in validate({"p.yaml": "name: x\nextends: ../../../../../../../../etc/passwd\n"})[1]


def test_extends_reads_no_file_that_is_not_a_profile(tmp_path):
    """Outside the profile's folder: a YAML file that is not a profile, reached by `..` and by links."""
    canary = "hunter2-3f1c0a"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secrets.yaml").write_text(f"database:\n  password: {canary}\n{canary}: 1\n")
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "link.yaml").symlink_to(outside / "secrets.yaml")
    (lab / "dirlink").symlink_to(outside)
    for extends in ("../outside/secrets.yaml", "link.yaml", "dirlink/secrets.yaml", str(outside / "secrets.yaml")):
        (lab / "p.yaml").write_text(f"name: x\nextends: {extends}\n")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert main(["profile", "validate", str(lab / "p.yaml")]) == 4
        assert canary not in err.getvalue() and "password" not in err.getvalue(), err.getvalue()
        assert "fix:" in err.getvalue()


def test_extends_of_5000_characters_is_a_usage_error():
    rc, msg = validate({"p.yaml": "name: x\nextends: " + "a" * 5000 + ".yaml\n"})
    assert rc == 4 and "at most 1024 characters" in msg
    with pytest.raises(ProfileError, match="characters"):
        resolve("a" * 5000 + ".yaml")


@pytest.mark.parametrize("text,expected", [
    ("name: x\nhardware:\n  memory_gb: !!float 'x'\n", "p.yaml:3: hardware.memory_gb: 'x' cannot be read as !!float"),
    ("name: x\nhardware:\n  memory_gb: !!python/object/apply:os.system ['true']\n", "YAML tag '!!python/"),
    ("name: x\ndescription: !foo bar\n", "YAML tag '!foo' is not allowed"),
    ("name: x\nidentity:\n  count: !!bool maybe\n", "cannot be read as !!bool"),
    ("name: x\nidentity: !!seq {count: 1}\n", "a mapping tagged '!!seq'"),
])
def test_tags_are_refused_or_read_strictly(text, expected):
    rc, msg = validate({"p.yaml": text})
    assert rc == 4 and expected in msg, msg


@pytest.mark.parametrize("n", [MAX_DEPTH + 1, 500, 1000, 100_000])
def test_deep_nesting_is_refused(n):
    flow = "name: x\ndescription: " + "[" * n + "]" * n + "\n"
    rc, msg = validate({"p.yaml": flow})
    assert rc == 4 and ("nested more than" in msg or "nesting depth" in msg), msg
    if n <= 1000:
        block = "name: x\ndescription:\n" + "".join("  " * (k + 1) + "- \n" for k in range(n))
        rc, msg = validate({"p.yaml": block})
        assert rc == 4 and "nested more than 16 levels" in msg, msg


@pytest.mark.parametrize("text,expected", [
    ("name: x\nextends: h100\nhardware:\n  pcie_gen: 7\n", "hardware.pcie_gen = 7 is out of range"),
    ("name: x\nextends: h100\nhardware:\n  memory_gb: .nan\n", "hardware.memory_gb = .nan is not a finite number"),
    ("name: x\nextends: h100\nhardware:\n  tdp_w: .inf\n", "hardware.tdp_w = .inf is not a finite number"),
    ("name: x\nextends: h100\nhardware:\n  memory_gb: 1e300\n", "hardware.memory_gb = 1e+300 is out of range"),
    ("name: x\nextends: h100\nhardware:\n  memory_gb: 1.0e+400\n", "not a finite number"),
    ("name: x\nextends: h100\nhardware:\n  peer_link: {type: nvlink, links: 1e8}\n",
     "hardware.peer_link.links must be of type integer"),
    ("name: x\nextends: h100\nhardware:\n  peer_link: {type: nvlink, links: 100000000}\n", "use a value <= 64"),
    ("name: x\nthresholds:\n  TOPO-PCIE-LINK:\n    samples: 1e8\n", "samples must be of type integer, got 100000000.0"),
    ("name: x\nthresholds:\n  TOPO-PCIE-LINK:\n    samples: 100000000\n", "use a value <= 1000"),
    ("name: x\nthresholds:\n  TOPO-PCIE-LINK:\n    samples: 5.0\n", "must be of type integer, got 5.0"),
    ("name: x\nthresholds:\n  THERM-GPU-STEADY:\n    window_s: 1e12\n", "use a value <= 3600"),
    ("name: x\nthresholds:\n  THERM-GPU-STEADY:\n    timeout_s: 1e9\n", "use a value <= 14400"),
    ("name: x\nthresholds:\n  MEM-BW-HOLD:\n    duration_s: 1e12\n", "use a value <= 3600"),
    ("name: x\nthresholds:\n  TOPO-PCIE-BW:\n    bytes: 1000000000000000\n", "use a value <= 68719476736"),
    ("name: x\nidentity:\n  count: 99999999999999999999999999999\n", "beyond the signed 64-bit range"),
    ("name: x\nidentity:\n  count: " + "9" * 5000 + "\n", "cannot be read as !!int"),
    ("name: x\nthresholds:\n  THERM-GPU-STEADY:\n    window_s: 1300\n", "window_s (1300) is longer than timeout_s"),
    ("name: x\nthresholds:\n  MEM-BW-HOLD:\n    band_low: 0.9\n    band_high: 0.9\n", "is not below band_high"),
    ("name: x\nthresholds:\n  MEM-BW-HOLD:\n    duration_s: 0.5\n", "fewer than 10 windows"),
    ("name: x\nidentity:\n  pci_ids: ['10de:2330', '10de:2330']\n", "identity.pci_ids lists the same entry twice"),
    ("name: x\nthresholds:\n  EQ-PRECISION:\n    atol: {high: 0.1}\n", "atol: high (0.1) is looser than default"),
    ("name: x\nextends: h100\nthresholds:\n  TOPO-PCIE-BW:\n    bytes: 68719476736\n", "more than half the card's"),
    ("name: x\nwaivers:\n  - {id: INV-DEVICES, reason: a long enough reason}\n"
     "  - {id: INV-DEVICES, reason: another long reason}\n", "two waivers for INV-DEVICES"),
    ("name: x\n1: 2\n", "key 1 is not a string"),
    ("name: x\n? [a]\n: 1\n", "a key is a list or a mapping"),
    ("name: x\n---\nname: y\n", "more than one YAML document"),
    ("name: x\ndescription: a\x07b\n", "character #x0007 is not allowed"),
    (b"name: x\ndescription: \xff\xfe\n", "p.yaml:2: not UTF-8 text"),
    ("name: x\ndescription: " + "y" * 20_000 + "\n", "a value of 20000 characters"),
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("database: {password: hunter2}\n", "not a profile: no `name:`"),
])
def test_issue_findings_are_usage_errors(text, expected):
    rc, msg = validate({"p.yaml": text})
    assert rc == 4 and expected in msg, msg


def test_ranges_that_run_backwards_are_refused():
    rc, msg = validate({"p.yaml": "name: x\nthresholds:\n  PLP-PPL:\n    workload:\n      prompt_tokens: [64, 16]\n"})
    assert rc == 4 and "runs backwards" in msg


def test_files_that_are_not_plain_profiles(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(PROFILE_MAX_BYTES + 1)
    (tmp_path / "folder.yaml").mkdir()
    for path, expected in ((fifo, "not a regular file"), (big, "over the 1048576-byte limit"),
                           (tmp_path / "folder.yaml", "not a regular file"), (Path("/dev/zero"), "not a profile"),
                           (Path("/etc/passwd"), "not a profile: a profile is a .yaml or .yml file")):
        with pytest.raises(ProfileError, match=expected):
            resolve(str(path))


def test_long_extends_chain_and_the_limit(tmp_path):
    for i in range(20):
        (tmp_path / f"p{i}.yaml").write_text(f"name: p{i}\nextends: p{i + 1}.yaml\n")
    (tmp_path / "p20.yaml").write_text("name: p20\nextends: host\n")
    with pytest.raises(ProfileError, match="chain longer than 16 files"):
        resolve(str(tmp_path / "p0.yaml"))
    assert resolve(str(tmp_path / "p10.yaml")).chain[-1].endswith("base.yaml")


def test_extends_may_go_up_a_folder_but_not_through_links(tmp_path):
    (tmp_path / "common.yaml").write_text("name: common\nextends: h100\nidentity:\n  count: 2\n")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "p.yaml").write_text("name: p\nextends: ../common.yaml\n")
    assert resolve(str(tmp_path / "lab" / "p.yaml")).expected_count == 2
    (tmp_path / "lab" / "via.yaml").symlink_to(tmp_path / "common.yaml")
    (tmp_path / "lab" / "q.yaml").write_text("name: q\nextends: via.yaml\n")
    with pytest.raises(ProfileError, match="is a symbolic link; profiles are not read through links") as info:
        resolve(str(tmp_path / "lab" / "q.yaml"))
    assert info.value.line == 2


def test_the_limits_leave_room_for_real_profiles():
    """The bundled profiles and the largest figures a lab could need all pass."""
    text = dump({"name": "big-lab", "extends": "h100",
                 "identity": {"count": 64},
                 "hardware": {"pcie_gen": 6, "memory_gb": 4096, "peer_link": {"type": "nvlink", "links": 64}},
                 "thresholds": {"TOPO-PCIE-LINK": {"samples": 1000},
                                "THERM-GPU-STEADY": {"window_s": 3600, "timeout_s": 14400},
                                "MEM-BW-HOLD": {"duration_s": 3600}, "TOPO-PCIE-BW": {"bytes": 64 << 30}},
                 "description": "d" * 2000, "sources": ["s" * 1000] * 100})
    assert validate({"p.yaml": text})[0] == 0
    assert validate({"p.yaml": "name: x\ndescription: 2024-01-01\nsources: ['1e5']\n"})[0] == 0
