"""Every requirement is declared once, whole (pytest_sits/catalogue/): a declaration missing a part is refused
naming the part, and every part that lives in another layer is held to the declaration here."""

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_sits.catalogue import CATALOGUE, CONDITIONS, LEVELS, PLATFORMS, condition_defaults, defaults
from pytest_sits.catalogue.base import Cost, DeclarationError, Threshold, declare
from pytest_sits.checks import load_all
from pytest_sits.conditions.plan import Plan
from pytest_sits.platforms.sim.faults import FAULTS
from pytest_sits.profiles import resolve

ROOT = Path(__file__).resolve().parent.parent
IMPLEMENTED = [r for r in CATALOGUE.values() if r.implemented]


def _declaration(req, **change):
    """The keyword arguments that declare ``req`` again (under a new ID), with ``change`` applied."""
    kw = dict(level=req.level, scope=req.scope, family=req.family, thresholds=dict(req.threshold_keys),
              cost=req.cost, platforms=tuple(req.platforms), faults=req.faults, no_fault=req.no_fault,
              trials=req.trials, facts=req.facts, note=req.note, extension=req.extension)
    kw.update(change)
    return kw


MISSING = {
    "title": ({"title": ""}, "title"),
    "source": ({"source": ""}, "source"),
    "level": ({"level": "fulll"}, "level"),
    "scope": ({"scope": "rack"}, "scope"),
    "family": ({"family": ""}, "family"),
    "threshold help": ({"thresholds": {"expected": Threshold({"type": "boolean"}, True)}}, "threshold expected"),
    "threshold type": ({"thresholds": {"expected": {"type": "boolean"}}}, "threshold expected"),
    "cost": ({"cost": Cost("rack", fixed=0.1)}, "cost"),
    "platforms": ({"platforms": ()}, "platforms"),
    "faults": ({"faults": (), "no_fault": None}, "faults"),
    "fault thresholds": ({"fault_thresholds": {"nothing": 1}}, "fault_thresholds"),
}


@pytest.mark.parametrize("part", sorted(MISSING))
def test_a_declaration_missing_a_part_is_refused_naming_it(part):
    change, named = MISSING[part]
    req = CATALOGUE["DEP-PERSIST"]
    title = change.pop("title", req.title)
    source = change.pop("source", req.source)
    with pytest.raises(DeclarationError, match=rf"requirement X-TEST: {re.escape(named)}:"):
        declare("X-TEST", title, source, **_declaration(req, **change))
    assert "X-TEST" not in CATALOGUE


def test_an_id_is_declared_once():
    req = CATALOGUE["DEP-PERSIST"]
    with pytest.raises(DeclarationError, match="DEP-PERSIST: id: declared twice"):
        declare("DEP-PERSIST", req.title, req.source, **_declaration(req))


def test_the_base_profile_is_the_declared_defaults():
    """profiles/base.yaml is generated from the declarations (tools/docs_reference.py --check holds the text);
    resolved, it carries every declared key of every requirement and nothing else."""
    base = resolve("base")
    for rid, want in defaults().items():
        assert base.thresholds(rid) == want, rid
    for name, want in condition_defaults().items():
        assert base.condition(name) == want, name


def test_the_health_window_has_its_own_settings():
    """The window that DEP-ECC, DEP-THROTTLE, DEP-PCIE-ERRORS and DEP-XID are judged over is sized by its own
    settings (``conditions: health_window``), not by one of the requirements' thresholds."""
    base = resolve("base")
    assert set(base.condition("health_window")) == {"samples", "interval_s", "warmup_s"}
    assert not set(base.thresholds("DEP-THROTTLE")) & {"samples", "interval_s", "warmup_s"}
    assert {"DEP-ECC", "DEP-THROTTLE", "DEP-PCIE-ERRORS", "DEP-XID"} <= set(CONDITIONS["health_window"].serves)


@pytest.mark.parametrize("rid", [r.id for r in IMPLEMENTED])
def test_every_requirement_has_its_parts_in_every_layer(rid):
    """The check registered for it, its conformance test naming it in the marker, its family's files."""
    req = CATALOGUE[rid]
    current = [c for c in load_all().values() if c.requirement == rid]
    assert current, f"{rid}: no check registered for it (pytest_sits/checks/{req.family}.py, @check)"
    conformance = ROOT / "conformance" / f"test_{req.family}.py"
    assert conformance.is_file(), f"{rid}: no conformance module {conformance.name} for family {req.family}"
    markers = re.findall(r'sits_requirement\("([A-Z0-9-]+)"\)', conformance.read_text(encoding="utf-8"))
    assert rid in markers, f"{rid}: no test in {conformance.name} carries @pytest.mark.sits_requirement({rid!r})"
    for layer in ("checks", "conditions"):
        stem = ROOT / "pytest_sits" / layer / req.family
        assert stem.with_suffix(".py").is_file() or (stem / "__init__.py").is_file(), \
            f"{rid}: no pytest_sits/{layer}/{req.family}(.py) for family {req.family}"


@pytest.mark.parametrize("rid", [r.id for r in IMPLEMENTED])
def test_every_requirement_names_faults_that_exist_or_says_why_none(rid):
    req = CATALOGUE[rid]
    assert [f for f in req.faults if f not in FAULTS] == [], f"{rid}: declares faults the sim platform lacks"
    assert req.faults or (req.no_fault and len(req.no_fault) > 20), f"{rid}: no fault and no reason"
    assert set(req.platforms) <= set(PLATFORMS) and req.level in LEVELS


def test_every_requirement_is_planned_from_its_declaration():
    """At level full every implemented requirement has a row whose cost is its declared one (no fallback)."""
    prof = resolve("h100-sxm5")
    plan = Plan("full", prof, accelerators=8)
    assert set(plan.rows) == {r.id for r in IMPLEMENTED} | set(CONDITIONS)
    for name, cond in CONDITIONS.items():
        assert plan.rows[name].cost is cond.cost and plan.rows[name].thresholds == prof.condition(name)
    for rid, row in plan.rows.items():
        if rid in CONDITIONS:
            continue
        assert row.cost is CATALOGUE[rid].cost
        assert (row.trials is None) == (CATALOGUE[rid].trials is None
                                        or CATALOGUE[rid].trials.numbers(row.thresholds) is None), rid
        assert row.seconds() >= 0


def test_declared_trials_are_what_the_plan_hands_the_acquire_functions():
    prof = resolve("h100-sxm5")
    plan = Plan("full", prof, accelerators=8)
    for req in IMPLEMENTED:
        if req.trials is None:
            with pytest.raises(KeyError, match="not measured in trials"):
                plan.trials_for(req.id)
            continue
        want = req.trials.numbers(prof.check_thresholds(req.id)) or dataclasses.asdict(req.trials)
        got = plan.trials_for(req.id)
        assert (got.initial, got.step, got.cap, got.minimum) == tuple(
            want[k] for k in ("initial", "step", "cap", "minimum")), req.id


def test_sits_requirements_shows_a_declaration_whole(capsys):
    from pytest_sits.cli import main

    assert main(["requirements", "--id=DEP-THROTTLE"]) == 0
    out = capsys.readouterr().out
    assert "decided on live,evidence,sim" in out and "throttle-power-brake" in out and "max_fault_share: 0.0" in out
    assert main(["requirements", "--id=DEP-ECX"]) == 4
    assert "did you mean DEP-ECC?" in capsys.readouterr().err


def test_a_cost_says_whether_its_subjects_are_measured_at_once_or_apart():
    from pytest_sits.catalogue.base import Cost, DeclarationError, _concurrency_error

    assert _concurrency_error(Cost("acc", together=True)) == ""
    assert "both given" in _concurrency_error(Cost("acc", together=True, apart="shared link"))
    assert "only a per-accelerator" in _concurrency_error(Cost("host", together=True))
    assert "nothing to keep apart" in _concurrency_error(Cost("host", apart="x"))
    assert "without together=True" in _concurrency_error(Cost("acc", group="thermal"))
    assert issubclass(DeclarationError, ValueError)
    # what the catalogue declares: the calibrations at once, the copies sharing a root complex or links apart
    assert CATALOGUE["THERM-GPU-STEADY"].cost.together and CATALOGUE["THERM-CPU-STEADY"].cost.together
    assert "root complex" in CATALOGUE["TOPO-PCIE-BW"].cost.apart and "links" in CATALOGUE["CRG-EDGE"].cost.apart
