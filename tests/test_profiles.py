"""Profiles: bundled ones resolve; bad ones give file, line and fix (exit 4)."""

import json
from pathlib import Path

import re

import pytest

from pytest_sits import profiles
from pytest_sits.catalogue import CATALOGUE
from pytest_sits.profiles import ProfileError, resolve

REPO = Path(__file__).resolve().parent.parent

BUNDLED = ["h100-sxm5", "h100-pcie", "h200", "a100-80gb-pcie", "l40s", "h20", "mi300x", "ascend-910c", "host"]


@pytest.mark.parametrize("name", BUNDLED + ["base", "h100", "a100", "ascend"])
def test_bundled_profiles_resolve_with_every_requirement(name):
    p = resolve(name)
    assert set(p.data["thresholds"]) == set(CATALOGUE)
    assert p.chain[-1].endswith("base.yaml")


@pytest.mark.parametrize("name", BUNDLED + ["base"])
def test_bundled_profiles_meet_the_json_schema(name):
    """Bundled profiles skip the schema pass at start-up (package data): this is where they are held to it."""
    path = profiles.bundled_dir() / f"{name}.yaml"
    profiles.load_file(path, schema=True)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_profiles_cite_sources_and_ids(name):
    text = (REPO / "profiles" / f"{name}.yaml").read_text()
    assert text.startswith("#"), "each bundled profile starts with its datasheet citation"
    p = resolve(name)
    if name != "host":
        assert p.pci_ids and p.expected_count > 0 and p.hardware["memory_gb"] > 0


def test_h100_alias_and_yaml_suffix_pick_sxm5():
    assert resolve("h100").name == "h100-sxm5"
    assert resolve("h100.yaml").name == "h100-sxm5"


def test_shipped_schema_matches_catalogue():
    shipped = json.loads((REPO / "pytest_sits" / "resources" / "profile.schema.json").read_text())
    assert shipped == json.loads(json.dumps(profiles.profile_schema())), \
        "regenerate with: python -c 'from pytest_sits.profiles import write_schema as w; from pathlib import " \
        "Path; w(Path(\"pytest_sits/resources/profile.schema.json\"))'"


def test_child_overrides_and_waivers_merge(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("name: mine\nextends: h100\nidentity:\n  count: 4\nthresholds:\n  MEM-CAPACITY:\n"
                 "    min_gb_per_card: 60\nwaivers:\n  - id: TOPO-PCIE-DIRECT\n"
                 "    reason: the baseboard carries a PCIe switch by design\n")
    p = resolve(str(f))
    assert p.expected_count == 4
    assert p.thresholds("MEM-CAPACITY")["min_gb_per_card"] == 60
    assert p.thresholds("MEM-CAPACITY")["workload"]["layers"] == 80  # inherited from base
    assert p.hardware["memory_gb"] == 80  # inherited from h100-sxm5
    assert p.waiver("TOPO-PCIE-DIRECT").startswith("the baseboard")
    assert p.waiver("INV-DEVICES") is None


BAD = [
    ("unknown-key", "name: mine\nextends: h100\nidentity:\n  cuont: 3\n", 4, "did you mean 'count'"),
    ("unknown-id", "name: mine\nthresholds:\n  MEM-CAPACTY:\n    min_gb_per_card: 1\n", 3,
     "did you mean 'MEM-CAPACITY'"),
    ("wrong-type", "name: mine\nhardware:\n  memory_gb: eighty\n", 3, "must be of type number"),
    ("out-of-range", "name: mine\nthresholds:\n  MEM-BW-HOLD:\n    band_low: 1.5\n", 4, "use a value <= 1"),
    ("band-order", "name: mine\nthresholds:\n  MEM-BW-HOLD:\n    band_low: 0.9\n    band_high: 0.8\n", 4,
     "make band_low <= band_high"),
    ("bad-pci-id", "name: mine\nidentity:\n  pci_ids: ['10DE-2330']\n", 3, "'vvvv:dddd'"),
    ("waiver-unknown-id", "name: mine\nwaivers:\n  - id: TOPO-PCIE-DIRCT\n    reason: a long enough reason\n",
     3, "TOPO-PCIE-DIRECT"),
    ("waiver-no-reason", "name: mine\nwaivers:\n  - id: TOPO-PCIE-DIRECT\n", 3, "'reason' is a required"),
    ("yaml-syntax", "name: mine\n  bad: [\n", 2, "not valid YAML"),
    ("not-mapping", "- a\n- b\n", 1, "must be a YAML mapping"),
    ("missing-parent", "name: mine\nextends: nowhere.yaml\n", 2, "bundled profiles:"),
    ("duplicate-key", "name: mine\nname: again\n", 2, "appears twice"),
]


@pytest.mark.parametrize("case,text,line,fix", BAD, ids=[b[0] for b in BAD])
def test_bad_profile_names_file_line_and_fix(tmp_path, case, text, line, fix):
    f = tmp_path / f"{case}.yaml"
    f.write_text(text)
    with pytest.raises(ProfileError) as info:
        resolve(str(f))
    err = info.value
    assert err.file == str(f.resolve()) or err.file == str(f)
    assert err.line == line, str(err)
    assert fix in str(err)
    assert err.fix


def test_circular_extends(tmp_path):
    (tmp_path / "a.yaml").write_text("name: a\nextends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("name: b\nextends: a.yaml\n")
    with pytest.raises(ProfileError, match="circular `extends`: a.yaml -> b.yaml -> a.yaml") as info:
        resolve(str(tmp_path / "a.yaml"))
    assert info.value.line == 2


def test_unknown_bundled_name_lists_known():
    with pytest.raises(ProfileError) as info:
        resolve("h300")
    assert "did you mean 'h200'" in str(info.value)
    for name in ("h100", "l40s", "mi300x", "host"):
        assert name in str(info.value)


def test_missing_file():
    with pytest.raises(ProfileError, match="does not exist"):
        resolve("/nonexistent/dir/mine.yaml")


def test_auto_pick():
    assert profiles.auto_pick([]) == ("host", "no accelerator found")
    name, why = profiles.auto_pick([{"pci_id": "10de:2335"}] * 8)
    assert name == "h200" and "8 accelerator(s) with PCI ID 10de:2335" in why
    name, why = profiles.auto_pick([{"pci_id": "10de:ffff"}])
    assert name == "host" and "no bundled profile matches" in why and "10de:ffff" in why


@pytest.mark.parametrize("case,text,line,fix", BAD[:4], ids=[b[0] for b in BAD[:4]])
def test_plugin_turns_bad_profile_into_usage_error(pytester, case, text, line, fix):
    f = pytester.path / "bad.yaml"
    f.write_text(text)
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(f"--sits-profile={f}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: bad profile: {f}:{line}: *", "*fix: *"])
    assert fix in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_cli_validate(tmp_path, capsys):
    from pytest_sits.cli import main

    assert main(["profile", "validate", "h200"]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD[0][1])
    assert main(["profile", "validate", str(bad)]) == 4
    assert f"{bad}:4: unknown key 'cuont'" in capsys.readouterr().err


def test_the_bundled_base_cannot_be_shadowed(tmp_path):
    """A user's `base` (a copy missing a default, here) never replaces the bundled one."""
    import yaml

    bundled = yaml.safe_load((profiles.bundled_dir() / "base.yaml").read_text())
    del bundled["conditions"]["health_window"]["samples"]
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(bundled))
    (tmp_path / "lab.yaml").write_text("name: lab\nextends: base.yaml\n")
    for spec in (tmp_path / "lab.yaml", tmp_path / "base.yaml"):
        with pytest.raises(profiles.ProfileError) as exc:
            profiles.resolve(str(spec))
        text = str(exc.value)
        assert re.search(r"/base\.yaml:\d+: ", text) and "outside the bundled profiles" in text and "extends: base" in text
    (tmp_path / "lab2.yaml").write_text("name: lab2\nextends: base\n")  # the bundled name: fine
    assert profiles.resolve(str(tmp_path / "lab2.yaml")).condition("health_window")["samples"] > 0


@pytest.mark.parametrize("value,ok", [(-(1 << 63), True), ((1 << 63) - 1, True), (1 << 63, False),
                                      (-(1 << 63) - 1, False)])
def test_integers_at_the_edges_of_64_bits(tmp_path, value, ok):
    """-2^63 fits a signed 64-bit integer and is read (then bounded by the schema); 2^63 does not, and the
    message says the range, not a misleading "fits in 64 bits"."""
    path = tmp_path / "p.yaml"
    path.write_text(f"name: p\nextends: base\nsite:\n  card_price: {value}\n")
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.resolve(str(path))
    text = str(exc.value)
    if ok:  # read, then refused by the schema's bounds
        assert "signed 64-bit range" not in text and "site.card_price" in text and "out of range" in text
    else:
        assert "beyond the signed 64-bit range" in text and "write an integer from -9223372036854775808" in text


def test_the_health_window_is_set_in_conditions_and_its_old_place_is_refused_with_the_fix(tmp_path, capsys):
    (tmp_path / "lab.yaml").write_text("name: lab\nextends: h100\nconditions:\n  health_window:\n    samples: 30\n")
    assert profiles.resolve(str(tmp_path / "lab.yaml")).condition("health_window") == {
        "samples": 30, "interval_s": 0.25, "warmup_s": 1.0}
    (tmp_path / "old.yaml").write_text("name: old\nextends: h100\nthresholds:\n  DEP-THROTTLE:\n    samples: 30\n")
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.resolve(str(tmp_path / "old.yaml"))
    assert "old.yaml:5:" in str(exc.value) and "conditions: health_window: samples" in str(exc.value)
