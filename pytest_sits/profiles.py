"""Hardware profiles: YAML files with ``extends:`` inheritance and a JSON schema.

A profile holds the identity of the accelerator it describes (used to pick
it automatically from PCI IDs), hardware facts from vendor datasheets,
threshold overrides keyed by requirement ID, and waivers.  Every problem with
a profile is a :class:`ProfileError` that names the file, the line and the
fix; the plugin turns it into a usage error (exit code 4).
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .catalogue import CATALOGUE, threshold_schema

BUNDLED_DIR_PACKAGE = "pytest_sits.bundled"
PCI_ID_PATTERN = "^[0-9a-f]{4}:[0-9a-f]{4}$"


class ProfileError(Exception):
    """A profile cannot be used.  ``str()`` is the whole message for a user."""

    def __init__(self, problem: str, file: Optional[str] = None, line: Optional[int] = None,
                 fix: Optional[str] = None):
        self.problem, self.file, self.line, self.fix = problem, file, line, fix
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        text = f"{where}{problem}"
        if fix:
            text += f"\n  fix: {fix}"
        super().__init__(text)


def bundled_dir() -> Path:
    """The folder of bundled profiles (works installed and in a checkout)."""
    from importlib import resources

    return Path(str(resources.files(BUNDLED_DIR_PACKAGE)))


def profile_schema() -> Dict[str, Any]:
    """The JSON schema of one profile file (before ``extends`` is resolved)."""
    num_pos = {"type": "number", "exclusiveMinimum": 0}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://pytest-sits.invalid/schemas/profile-1.json",
        "title": "pytest-sits hardware profile",
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$"},
            "aliases": {"type": "array", "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$"}},
            "extends": {"type": "string", "minLength": 1},
            "description": {"type": "string"},
            "sources": {"type": "array", "items": {"type": "string"}},
            "identity": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "vendor": {"type": "string"},
                    "model": {"type": "string"},
                    "kind": {"type": "string", "enum": ["gpu", "npu", "none"]},
                    "pci_ids": {"type": "array", "items": {"type": "string", "pattern": PCI_ID_PATTERN}},
                    "count": {"type": "integer", "minimum": 0, "maximum": 64},
                },
            },
            "hardware": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "memory_gb": num_pos,
                    "memory_type": {"type": "string"},
                    "memory_bandwidth_gbps": num_pos,
                    "pcie_gen": {"type": "integer", "minimum": 1, "maximum": 7},
                    "pcie_width": {"type": "integer", "enum": [1, 2, 4, 8, 16, 32]},
                    "peer_link": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "type": {"type": "string", "enum": ["nvlink", "xgmi", "hccs", "none"]},
                            "version": {"type": "number"},
                            "links": {"type": "integer", "minimum": 0},
                            "bandwidth_gbps": {"type": "number", "minimum": 0},
                        },
                    },
                    "tdp_w": num_pos,
                    "fp16_dense_tflops": num_pos,
                    "unconfirmed": {"type": "array", "items": {"type": "string"}},
                },
            },
            "thresholds": threshold_schema(),
            "waivers": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["id", "reason"],
                    "properties": {
                        "id": {"type": "string"},
                        "reason": {"type": "string", "minLength": 10},
                    },
                },
            },
        },
    }


# --------------------------------------------------------------------------
# YAML with line numbers


def _load_yaml_with_lines(text: str, file: str) -> Tuple[Any, Dict[Tuple, int]]:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ProfileError(f"not valid YAML: {problem}", file, line,
                           "check indentation and quoting on that line") from None
    lines: Dict[Tuple, int] = {}
    constructor = yaml.SafeLoader("")  # used only to build scalars with YAML's own rules

    def build(node, path: Tuple) -> Any:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: Dict[str, Any] = {}
            for knode, vnode in node.value:
                key = constructor.construct_object(knode, deep=True)
                if not isinstance(key, str):
                    raise ProfileError(f"key {key!r} is not a string", file, knode.start_mark.line + 1,
                                       "quote the key")
                if key in out:
                    raise ProfileError(f"key {key!r} appears twice", file, knode.start_mark.line + 1,
                                       "remove one of the two entries")
                lines[path + (key,)] = knode.start_mark.line + 1
                out[key] = build(vnode, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [build(item, path + (i,)) for i, item in enumerate(node.value)]
        return constructor.construct_object(node, deep=True)

    if root is None:
        return {}, lines
    return build(root, ()), lines


# --------------------------------------------------------------------------
# Validation


def _line_for(lines: Dict[Tuple, int], path: Iterable) -> Optional[int]:
    path = tuple(path)
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return lines.get((), 1)


def _dotted(path: Iterable) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else ""


def _schema_errors(data: Any, file: str, lines: Dict[Tuple, int]) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(profile_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (_line_for(lines, e.absolute_path) or 0))
    if not errors:
        return
    err = errors[0]
    path = list(err.absolute_path)
    where = _dotted(path)
    if err.validator == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))[0]
        line = _line_for(lines, path + [extra])
        if path == ["thresholds"]:
            hint = _suggest(extra, CATALOGUE) or "see `sits requirements` for the known IDs"
            raise ProfileError(f"unknown requirement ID {extra!r} in thresholds", file, line,
                               f"{hint} Requirement IDs are written exactly as in the catalogue.")
        hint = _suggest(extra, allowed)
        raise ProfileError(f"unknown key {extra!r} in {where}", file, line,
                           (hint + " " if hint else "") + f"allowed keys: {', '.join(allowed)}")
    line = _line_for(lines, path)
    if err.validator == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        raise ProfileError(f"{where} must be of type {want}, got {err.instance!r}", file, line,
                           f"write a {want} value for {where}")
    if err.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum",
                         "minLength", "pattern"):
        limits = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        if err.validator in limits:
            rule = f"{limits[err.validator]} {err.validator_value}"
        elif err.validator == "enum":
            rule = "one of " + ", ".join(map(repr, err.validator_value))
        elif err.validator == "pattern":
            rule = f"matching {err.validator_value}"
            if err.validator_value == PCI_ID_PATTERN:
                rule = "a PCI ID written as 'vvvv:dddd' in lower-case hex, e.g. '10de:2330'"
        else:
            rule = f"at least {err.validator_value} characters long"
        raise ProfileError(f"{where} = {err.instance!r} is out of range", file, line, f"use a value {rule}")
    if err.validator == "required":
        raise ProfileError(f"{err.message} in {where}", file, line, "add the missing key")
    raise ProfileError(f"{where}: {err.message}", file, line, "see the profile schema (`sits profile schema`)")


# --------------------------------------------------------------------------
# Locating and resolving


@dataclass
class Profile:
    """One resolved profile: the merged data of the file and its ancestors."""

    name: str
    path: str
    chain: List[str]
    data: Dict[str, Any]
    how: str = "option"  # option / env / ini / auto / default
    why: str = ""

    @property
    def identity(self) -> Dict[str, Any]:
        return self.data.get("identity", {})

    @property
    def hardware(self) -> Dict[str, Any]:
        return self.data.get("hardware", {})

    @property
    def expected_count(self) -> int:
        return int(self.identity.get("count", 0))

    @property
    def pci_ids(self) -> List[str]:
        return list(self.identity.get("pci_ids", []))

    def thresholds(self, req_id: str) -> Dict[str, Any]:
        if req_id not in CATALOGUE:
            raise KeyError(f"unknown requirement ID {req_id!r}")
        return copy.deepcopy(self.data.get("thresholds", {}).get(req_id, {}))

    def waiver(self, req_id: str) -> Optional[str]:
        for w in self.data.get("waivers", []):
            if w["id"] == req_id:
                return w["reason"]
        return None

    def describe_expected(self) -> str:
        ident = self.identity
        if not self.expected_count:
            return "no accelerator"
        ids = ", ".join(self.pci_ids) or "any PCI ID"
        return f"{self.expected_count} × {ident.get('model', self.name)} ({ids})"

    def expected(self) -> Dict[str, Any]:
        """What the profile says should be installed (the checks' ``expected``)."""
        ident, hw = self.identity, self.hardware
        return {"vendor": ident.get("vendor"), "model": ident.get("model"), "kind": ident.get("kind"),
                "pci_ids": list(ident.get("pci_ids", [])), "count": self.expected_count,
                "memory_gb": hw.get("memory_gb"), "describe": self.describe_expected(), "profile": self.name}

    def check_thresholds(self, req_id: str) -> Dict[str, Any]:
        """Everything the profile demands of a requirement, as its check receives it: the thresholds, plus
        the profile facts the check compares against (expected devices, datasheet figures)."""
        th = self.thresholds(req_id)
        facts = CHECK_FACTS.get(req_id)
        return dict(th, **facts(self)) if facts else th

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "path": self.path, "chain": self.chain, "how": self.how,
                "why": self.why, "data": self.data}


#: Profile facts a check compares against, by requirement (added to its thresholds).
CHECK_FACTS: Dict[str, Any] = {
    "INV-DEVICES": lambda p: {"expected": p.expected()},
    "MEM-BW-EFFICIENCY": lambda p: {"datasheet_gbps": p.hardware.get("memory_bandwidth_gbps")},
    "LINK-NVLINK-MESH": lambda p: {"link_type": p.hardware.get("peer_link", {}).get("type")},
}


@functools.lru_cache(maxsize=None)
def _bundled_data() -> Dict[Path, Any]:
    """Every bundled profile file, parsed once per process (package data: it does not change).

    Read-only: callers look names, aliases and PCI IDs up; ``resolve`` validates and merges copies."""
    return {path: _load_yaml_with_lines(path.read_text(encoding="utf-8"), str(path))[0]
            for path in sorted(bundled_dir().glob("*.yaml"))}


def _bundled_index() -> Dict[str, Path]:
    """name and alias -> bundled file."""
    index: Dict[str, Path] = {}
    for path, data in _bundled_data().items():
        index[path.stem] = path
        for alias in data.get("aliases", []) if isinstance(data, dict) else []:
            index.setdefault(alias, path)
    return index


def bundled_names() -> List[str]:
    return sorted(p.stem for p in bundled_dir().glob("*.yaml"))


def locate(spec: str, relative_to: Optional[Path] = None) -> Path:
    """Turn ``h100``, ``h100.yaml`` or a path into a profile file."""
    candidates = [Path(spec)]
    if relative_to is not None and not Path(spec).is_absolute():
        candidates.insert(0, relative_to / spec)
    for cand in candidates:
        if cand.is_file():
            return cand.resolve()
    name = spec[:-5] if spec.endswith(".yaml") else spec[:-4] if spec.endswith(".yml") else spec
    if "/" not in name and os.sep not in name:
        index = _bundled_index()
        if name in index:
            return index[name]
        known = ", ".join(k for k in sorted(index) if k != "base")
        hint = _suggest(name, index)
        raise ProfileError(
            f"unknown profile {spec!r}: no such file, and no bundled profile of that name",
            fix=(hint + " " if hint else "") + f"bundled profiles: {known}; or give a path to a YAML file")
    raise ProfileError(f"profile file {spec!r} does not exist",
                       fix="check the path, or name a bundled profile (`sits profile list`)")


def _merge(base: Dict[str, Any], child: Dict[str, Any]) -> Dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in child.items():
        if key == "waivers":
            by_id = {w["id"]: w for w in out.get("waivers", [])}
            for w in value:
                by_id[w["id"]] = copy.deepcopy(w)
            out["waivers"] = list(by_id.values())
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _semantic_checks(data: Dict[str, Any], file: str, lines: Dict[Tuple, int]) -> None:
    for i, w in enumerate(data.get("waivers", [])):
        if w["id"] not in CATALOGUE:
            hint = _suggest(w["id"], CATALOGUE)
            raise ProfileError(f"waiver for unknown requirement ID {w['id']!r}", file,
                               _line_for(lines, ("waivers", i, "id")),
                               hint or "use an ID from `sits requirements`")
    for req_id, th in data.get("thresholds", {}).items():
        for lo, hi in (("band_low", "band_high"), ("band_low_c", "band_high_c")):
            if lo in th and hi in th and th[lo] > th[hi]:
                raise ProfileError(f"thresholds.{req_id}: {lo} ({th[lo]}) is above {hi} ({th[hi]})", file,
                                   _line_for(lines, ("thresholds", req_id, lo)),
                                   f"make {lo} <= {hi}")


def load_file(path: Path) -> Tuple[Dict[str, Any], Dict[Tuple, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"cannot read profile: {exc.strerror}", str(path),
                           fix="check the path and its permissions") from None
    data, lines = _load_yaml_with_lines(text, str(path))
    if not isinstance(data, dict):
        raise ProfileError("a profile must be a YAML mapping (key: value lines)", str(path), 1,
                           "start the file with `name: my-profile` and `extends: base`")
    _schema_errors(data, str(path), lines)
    _semantic_checks(data, str(path), lines)
    return data, lines


def resolve(spec: str, how: str = "option", why: str = "") -> Profile:
    """Locate, load, validate and merge a profile with all its ancestors."""
    path = locate(spec)
    chain: List[Path] = []
    layers: List[Dict[str, Any]] = []
    current: Optional[Path] = path
    lines: Dict[Tuple, int] = {}
    while current is not None:
        if current in chain:
            cycle = " -> ".join(p.name for p in chain + [current])
            raise ProfileError(f"circular `extends`: {cycle}", str(chain[-1]), _line_for(lines, ("extends",)),
                               fix="make one profile in the cycle extend `base` instead")
        chain.append(current)
        data, lines = load_file(current)
        layers.append(data)
        parent = data.get("extends")
        if parent is None:
            if data.get("name") != "base":
                parent = "base"
            else:
                break
        try:
            current = locate(parent, relative_to=current.parent)
        except ProfileError as exc:
            raise ProfileError(f"`extends: {parent}`: {exc.problem}", str(current),
                               _line_for(lines, ("extends",)), exc.fix) from None
    merged: Dict[str, Any] = {}
    for layer in reversed(layers):
        merged = _merge(merged, layer)
    merged["name"] = layers[0]["name"]
    merged.pop("extends", None)
    merged.pop("aliases", None)
    missing = [rid for rid in CATALOGUE if rid not in merged.get("thresholds", {})]
    if missing:  # only possible when a chain does not reach the bundled base
        raise ProfileError(f"resolved profile has no defaults for {', '.join(missing)}", str(path),
                           fix="extend the bundled `base` profile")
    return Profile(name=merged["name"], path=str(path), chain=[str(p) for p in chain],
                   data=merged, how=how, why=why)


def auto_pick(accelerators: List[Dict[str, Any]]) -> Tuple[str, str]:
    """Choose a bundled profile from the accelerators found: (name, reason)."""
    if not accelerators:
        return "host", "no accelerator found"
    counts: Dict[str, int] = {}
    for acc in accelerators:
        counts[acc["pci_id"]] = counts.get(acc["pci_id"], 0) + 1
    for pci_id, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        for path, data in _bundled_data().items():
            if pci_id in data.get("identity", {}).get("pci_ids", []):
                return path.stem, f"{n} accelerator(s) with PCI ID {pci_id}"
    found = ", ".join(f"{n} × {pid}" for pid, n in counts.items())
    return "host", f"no bundled profile matches the accelerators found ({found}); write one that extends base"


def write_schema(path: Path) -> None:
    path.write_text(json.dumps(profile_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
