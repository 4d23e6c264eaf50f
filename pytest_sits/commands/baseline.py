"""``sits baseline FLEET.json``: profile overlays learned from a fleet, one per SKU.

A merged fleet report (``sits fleet merge``) holds every numeric measured value
of every node, grouped per profile (the SKU), requirement, subject and unit.
For each SKU with at least ``--min-nodes`` nodes this writes
``OUT/<sku>-fleet.yaml``: a profile that extends the SKU's profile and adds a
``fleet_baseline`` section, the fleet's median and robust band for every such
value:

    band = median ± max(k × 1.4826 × MAD, rel_floor × |median|)

(MAD: the median of the absolute deviations from the median; 1.4826 × MAD
estimates the standard deviation of normal data; the relative floor keeps a
fleet of identical values from making every rounding difference stand out).
A run with the overlay (``--sits-profile=OUT/<sku>-fleet.yaml``) turns a PASS
whose value lies outside its band into WARN, naming the band and the fleet
size; the thresholds of the datasheet profile stay the floor (a FAIL stays a
FAIL, and a value inside the band but below the threshold still fails).

The command also lists the nodes of the fleet that lie outside their SKU's
band, and exits 1 when there is one.  The overlay is checked by the profile
loader before the command ends.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from .base import add, err, yaml_text

EXAMPLES = """\
  sits baseline /shared/sits-fleet-0601/fleet-report.json            overlays into ./sits-baseline/
  sits baseline fleet-report.json --out=profiles/ --k=4 --min-nodes=5
  pytest --sits-profile=profiles/h100-sxm5-fleet.yaml                a node unlike its fleet is WARN
"""
DEFAULT_K = 3.5
DEFAULT_REL_FLOOR = 0.02
DEFAULT_MIN_NODES = 3
RULE = ("band = median ± max(k × 1.4826 × MAD, rel_floor × |median|) over the nodes of the SKU (MAD: median of "
        "|x - median|); a PASS outside the band is WARN; the absolute thresholds stay the floor")


#: What an overlay may be named after: a SKU that is a plain file name (a node report's profile name is untrusted).
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def add_parser(sub: Any) -> None:
    p = add(sub, "baseline", "learn per-SKU bands from a merged fleet report: profile overlays, nodes unlike "
            "their fleet", EXAMPLES)
    p.add_argument("fleet", metavar="FLEET.json", help="a fleet report written by `sits fleet merge`")
    p.add_argument("--out", default="sits-baseline", metavar="DIR", help="where the overlays go (default "
                   "./sits-baseline)")
    p.add_argument("--k", type=float, default=DEFAULT_K, help=f"band width in robust σ (default {DEFAULT_K})")
    p.add_argument("--rel-floor", type=float, default=DEFAULT_REL_FLOOR, metavar="R",
                   help=f"the band is never narrower than ±R × |median| (default {DEFAULT_REL_FLOOR})")
    p.add_argument("--min-nodes", type=int, default=DEFAULT_MIN_NODES, metavar="N",
                   help=f"SKUs and values seen on fewer nodes get no band (default {DEFAULT_MIN_NODES})")
    p.add_argument("--extends", metavar="PROFILE", help="the profile the overlay extends (default: the SKU's "
                   "profile name, which must be a bundled profile)")
    p.set_defaults(func=baseline_command)


class BaselineError(Exception):
    """A fleet report or an option that cannot give a baseline; the message says the fix."""


def read_fleet(path: Path) -> Dict[str, Any]:
    """A merged fleet report, read as untrusted input and checked."""
    from ..files import REPORT_LIMIT, UntrustedInputError, load_json
    from .fleet.merge import _skeleton, validate

    try:
        fleet = load_json(path, REPORT_LIMIT, what="fleet report")
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file; fix: give the fleet-report.json of `sits fleet merge`") from None
    except (UntrustedInputError, OSError) as exc:
        raise BaselineError(str(exc)) from None
    if not isinstance(fleet, dict) or fleet.get("schema") != "pytest-sits/fleet-report":
        raise BaselineError(f"{path}: not a fleet report (no \"schema\": \"pytest-sits/fleet-report\"); fix: give "
                            "the fleet-report.json of `sits fleet merge`")
    if "measurements" not in fleet:
        raise BaselineError(f"{path}: a fleet report without measurements (written by an older pytest-sits); fix: "
                            "merge the fleet folder again with `sits fleet merge DIR`")
    try:
        errors = validate(_skeleton(fleet))
    except (KeyError, TypeError, AttributeError) as exc:
        errors = [f"{type(exc).__name__}: {exc}"]
    measurements = fleet.get("measurements")
    for i, m in enumerate(measurements if isinstance(measurements, list) else []):
        ok = (isinstance(m, dict) and isinstance(m.get("nodes"), list) and isinstance(m.get("values"), list)
              and len(m["nodes"]) == len(m["values"])
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in m["values"])
              and all(isinstance(n, str) for n in m["nodes"]))
        if not ok:
            errors.append(f"measurements/{i}: nodes and values must be lists of names and numbers of one length")
            break
    if errors:
        raise BaselineError(f"{path}: not a valid fleet report: {'; '.join(errors[:3])}; fix: merge the fleet "
                            "folder again with `sits fleet merge DIR`")
    return fleet


def band(values: List[float], k: float, rel_floor: float) -> Dict[str, float]:
    from .fleet.merge import robust_band
    from .fleet.common import MAD_SCALE

    med, mad, _, _ = robust_band(values, k)
    half = max(k * MAD_SCALE * mad, rel_floor * abs(med))
    return {"median": med, "mad": mad, "low": med - half, "high": med + half}


def baselines(fleet: Dict[str, Any], k: float = DEFAULT_K, rel_floor: float = DEFAULT_REL_FLOOR,
              min_nodes: int = DEFAULT_MIN_NODES) -> Tuple[Dict[str, Dict[str, Any]], List[Dict[str, Any]],
                                                           Dict[str, int]]:
    """(per SKU: its fleet_baseline section, the nodes outside their band, SKUs too small: their node count)."""
    sku_nodes: Dict[str, set] = {}
    for n in fleet["nodes"]:
        if n.get("profile") and n.get("report"):
            sku_nodes.setdefault(n["profile"], set()).add(n["node"])
    sections: Dict[str, Dict[str, Any]] = {}
    flagged: List[Dict[str, Any]] = []
    small: Dict[str, int] = {}
    for m in fleet["measurements"]:
        sku = m["profile"]
        if not sku or len(sku_nodes.get(sku, ())) < min_nodes:
            if sku:
                small[sku] = len(sku_nodes.get(sku, ()))
            continue
        if len(set(m["nodes"])) < min_nodes:
            continue
        b = band([float(x) for x in m["values"]], k, rel_floor)
        sec = sections.setdefault(sku, {"sku": sku, "nodes": len(sku_nodes[sku]), "k": k, "rel_floor": rel_floor,
                                        "rule": RULE, "bands": []})
        sec["bands"].append({"requirement": m["requirement"], "subject": m["subject"], "unit": m["unit"],
                             "median": b["median"], "mad": b["mad"], "low": b["low"], "high": b["high"],
                             "nodes": len(set(m["nodes"]))})
        for node, x in zip(m["nodes"], m["values"]):
            if not (b["low"] <= x <= b["high"]):
                flagged.append({"sku": sku, "node": node, "requirement": m["requirement"], "subject": m["subject"],
                                "unit": m["unit"], "value": x, **b, "fleet_nodes": len(sku_nodes[sku])})
    return sections, flagged, small


def overlay(section: Dict[str, Any], extends: str, source: str, fleet_created: Optional[str]) -> Dict[str, Any]:
    sku = section["sku"]
    name = f"{sku}-fleet"[:64]
    return {"name": name, "extends": extends,
            "description": (f"Fleet baseline of {sku}: the median and robust band of {section['nodes']} nodes for "
                            f"every numeric measured value ({len(section['bands'])} values), written by sits "
                            f"baseline from {source}. A PASS outside its band is WARN; the thresholds of "
                            f"{extends} stay the floor.")[:2000],
            "fleet_baseline": dict(section, source=source[:1000],
                                   created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   fleet_created_at=str(fleet_created or "")[:1000])}


def baseline_command(args: argparse.Namespace) -> int:
    """Write the overlays, list the nodes outside their band; 0 when there is none, 1 otherwise, 4 on a usage
    error."""
    from ..files import atomic_write, unlink_quietly
    from ..profiles import ProfileError, bundled_names, resolve

    if not (args.k > 0) or not (0 <= args.rel_floor <= 1) or args.min_nodes < 2:
        return err("--k must be positive, --rel-floor between 0 and 1, --min-nodes at least 2")
    path = Path(args.fleet)
    try:
        fleet = read_fleet(path)
    except BaselineError as exc:
        return err(str(exc))
    sections, flagged, small = baselines(fleet, args.k, args.rel_floor, args.min_nodes)
    for sku, n in sorted(small.items()):
        print(f"sits baseline: {sku}: {n} node(s) with a report, fewer than --min-nodes={args.min_nodes}: no band")
    if not sections:
        return err(f"{path}: no SKU has {args.min_nodes} nodes with numeric measured values; fix: merge a fleet of "
                   f"at least {args.min_nodes} nodes of one profile (or lower --min-nodes)")
    out = Path(args.out)
    known = set(bundled_names())
    written = []
    for sku in sorted(sections):  # every name checked before anything is written
        if not PLAIN_NAME.fullmatch(sku):
            return err(f"{path}: the SKU {sku!r} (a node report's profile name) is not a plain name, so no file is "
                       f"named after it (a file is written only inside {out}); fix: merge reports of profiles with "
                       "plain names (letters, digits, '.', '_', '-')")
        if not args.extends and sku not in known:
            return err(f"{sku}: not a bundled profile, so the overlay cannot name what it extends; fix: give the "
                       f"profile file the nodes ran with: --extends=PATH (relative to {out})")
    for sku, section in sorted(sections.items()):
        extends = args.extends or sku
        dest = out / f"{sku}-fleet.yaml"
        text = ("# Written by `sits baseline`: the fleet's bands for this SKU (a profile overlay).\n"
                + yaml_text(overlay(section, extends, str(path.resolve()), fleet.get("created_at"))))
        if dest.is_dir() and not dest.is_symlink():
            return err(f"{dest}: a folder is in the way of the overlay; fix: move it, or give another --out")
        try:
            atomic_write(dest, text)
        except OSError as exc:
            return err(f"{dest}: cannot write the overlay ({exc.strerror or exc}); fix: give a writable --out")
        try:
            resolve(str(dest))
        except ProfileError as exc:
            unlink_quietly(dest)  # a refused overlay is not left behind
            return err(f"the overlay {dest} is not a valid profile: {exc}; fix: check --extends")
        written.append((dest, section))
    for dest, section in written:
        print(f"sits baseline: {section['sku']}: {len(section['bands'])} bands from {section['nodes']} nodes -> "
              f"{dest}")
    for f in flagged:
        unit = f" {f['unit']}" if f["unit"] else ""
        print(f"  outside its band: {f['node']} {f['requirement']} {f['subject']}: {f['value']:g}{unit} not in "
              f"[{f['low']:g}, {f['high']:g}] (median {f['median']:g} of {f['fleet_nodes']} {f['sku']} nodes)")
    print(f"sits baseline: {len({f['node'] for f in flagged})} node(s) outside their SKU's band"
          + (f" ({len(flagged)} values)" if flagged else ""))
    return 1 if flagged else 0
