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
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from .catalogue import CATALOGUE, CONDITIONS, condition_schema, threshold_schema

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
    def num_pos(maximum: float) -> Dict[str, Any]:
        return {"type": "number", "exclusiveMinimum": 0, "maximum": maximum}

    text = {"type": "string", "maxLength": 200}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://pytest-sits.invalid/schemas/profile-1.json",
        "title": "pytest-sits hardware profile",
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 64},
            "aliases": {"type": "array", "maxItems": 16,
                        "items": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 64}},
            "extends": {"type": "string", "minLength": 1, "maxLength": MAX_EXTENDS_CHARS},
            "description": {"type": "string", "maxLength": 2000},
            "sources": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 1000}},
            "identity": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "vendor": text,
                    "model": text,
                    "kind": {"type": "string", "enum": ["gpu", "npu", "none"]},
                    "pci_ids": {"type": "array", "maxItems": 64, "uniqueItems": True,
                                "items": {"type": "string", "pattern": PCI_ID_PATTERN}},
                    "count": {"type": "integer", "minimum": 0, "maximum": 64},
                },
            },
            "hardware": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "memory_gb": num_pos(4096),
                    "memory_type": text,
                    "memory_bandwidth_gbps": num_pos(100_000),
                    "pcie_gen": {"type": "integer", "minimum": 1, "maximum": 6},
                    "pcie_width": {"type": "integer", "enum": [1, 2, 4, 8, 16, 32]},
                    "peer_link": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "type": {"type": "string", "enum": ["nvlink", "xgmi", "hccs", "none"]},
                            "topology": {"type": "string", "enum": ["mesh", "pairs"],
                                         "description": "mesh: every device reaches every other over the link "
                                                        "(NVSwitch, XGMI, HCCS); pairs: bridges join two cards "
                                                        "each (PCIe cards' NVLink bridges). Default: mesh"},
                            "version": {"type": "number", "minimum": 1, "maximum": 20},
                            "links": {"type": "integer", "minimum": 0, "maximum": 64},
                            "bandwidth_gbps": {"type": "number", "minimum": 0, "maximum": 100_000},
                        },
                    },
                    "tdp_w": num_pos(10_000),
                    "fp16_dense_tflops": num_pos(1_000_000),
                    "unconfirmed": {"type": "array", "maxItems": 32, "items": {"type": "string", "maxLength": 64}},
                },
            },
            "thresholds": threshold_schema(),
            "conditions": condition_schema(),
            "site": _site_schema(),
            "serving": _serving_schema(),
            "fleet_baseline": _fleet_baseline_schema(),
            "waivers": {
                "type": "array",
                "maxItems": 256,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["id", "reason"],
                    "properties": {
                        "id": {"type": "string", "maxLength": 64},
                        "reason": {"type": "string", "minLength": 10, "maxLength": 2000},
                    },
                },
            },
        },
    }


def _serving_schema() -> Dict[str, Any]:
    """The ``serving:`` section: the serving stack under test, as ``--sits-serve*`` gives it (an option overrides
    the profile's value).  A profile's command is run only when the command line asks, ``--sits-serve=profile``:
    a profile may come from someone else, and the suite runs no code from one unasked."""
    return {
        "type": "object", "additionalProperties": False,
        "description": "the server under test the suite launches with --sits-serve=profile (options override)",
        "properties": {
            "command": {"type": "string", "minLength": 1, "maxLength": 4000,
                        "description": "the command that starts the server ({port} is replaced by the port)"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                     "description": "the port it listens on, on 127.0.0.1 (default: a free one)"},
            "env": {"type": "object", "maxProperties": 64,
                    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "maxLength": 128},
                    "additionalProperties": {"type": "string", "maxLength": 4000},
                    "description": "environment variables of the server (their values never reported)"},
            "model": {"type": "string", "minLength": 1, "maxLength": 200,
                      "description": "the model /v1/models must list before the server is ready"},
            "ready_timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400,
                                "description": "seconds the server may take to be ready (default 900)"},
            "accelerators": {"type": "array", "maxItems": 64, "items": {"type": "string", "maxLength": 64},
                             "description": "the accelerators it uses (addresses or indices)"},
        },
    }


def _fleet_baseline_schema() -> Dict[str, Any]:
    """The ``fleet_baseline`` section written by ``sits baseline``: per measured value, the fleet's band."""
    num = {"type": "number", "minimum": -1e18, "maximum": 1e18}
    text = {"type": "string", "maxLength": 1000}
    band = {"type": "object", "additionalProperties": False,
            "required": ["requirement", "subject", "unit", "median", "mad", "low", "high", "nodes"],
            "properties": {"requirement": {"type": "string", "enum": sorted(CATALOGUE)},
                           "subject": {"type": "string", "maxLength": 200},
                           "unit": {"type": ["string", "null"], "maxLength": 64},
                           "median": num, "mad": dict(num, minimum=0), "low": num, "high": num,
                           "nodes": {"type": "integer", "minimum": 1, "maximum": 1_000_000}}}
    return {"type": "object", "additionalProperties": False,
            "properties": {"sku": text, "source": text, "created_at": text, "fleet_created_at": text, "rule": text,
                           "nodes": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                           "k": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                           "rel_floor": {"type": "number", "minimum": 0, "maximum": 1},
                           "bands": {"type": "array", "maxItems": 2000, "items": band}}}


#: Upper bounds of the site's figures that have a natural one (every other figure is at most 10^12).
#: The ``site:`` section's fields (the report's TCO inputs, A §4.2).
SITE_FIELDS: Dict[str, str] = {
    "currency": "currency of every cost below",
    "card_price": "purchase price of one card (with its share of the server)",
    "depreciation_years": "straight-line depreciation period (A §4.2: 3 years)",
    "electricity_price_per_kwh": "electricity price per kWh",
    "cooling_overhead": "cooling energy as a share of the card's power (A §4.2: air 0.28, single-phase immersion 0.09)",
    "hours_per_year": "hours of operation per year",
    "utilisation": "share of those hours the card runs at the measured power",
    "rack_redundancy_cost_per_year": "yearly cost of one rack's redundant power (N+1 supplies, PDU, UPS share)",
    "cards_per_rack": "cards sharing one rack's power redundancy",
    "operator_cost_per_year": "yearly cost of one operations engineer",
    "operators": "operations staff per `operator_cards` cards (A §4.2: 0.15)",
    "operator_cards": "cards those operators look after (A §4.2: 16)",
}

_SITE_MAXIMA = {"depreciation_years": 100, "hours_per_year": 8784, "cards_per_rack": 4096, "operator_cards": 1e6,
                "operators": 1e6}


def _site_schema() -> Dict[str, Any]:
    """The ``site:`` section: a lab's own cost inputs and SLA targets for the report's analytics (TCO per card,
    SLA weights).  Declared, never measured; reports show them as such."""
    num_pos = {"type": "number", "exclusiveMinimum": 0, "maximum": 1e12}
    types = {k: dict(num_pos, description=d) for k, d in SITE_FIELDS.items()}
    for key, most in _SITE_MAXIMA.items():
        if key in types:
            types[key]["maximum"] = most
    types["currency"] = {"type": "string", "minLength": 1, "maxLength": 16, "description": SITE_FIELDS["currency"]}
    types["cooling_overhead"] = {"type": "number", "minimum": 0, "maximum": 2,
                                 "description": SITE_FIELDS["cooling_overhead"]}
    types["utilisation"] = {"type": "number", "minimum": 0, "maximum": 1, "description": SITE_FIELDS["utilisation"]}
    types["sla"] = {
        "type": "object", "additionalProperties": False,
        "description": "SLA targets in A §2.5's units (the SLA weights depend on the units); default: SVC-SLA",
        "properties": {"latency_ms": dict(num_pos, maximum=3.6e6, description="P99 latency target, ms"),
                       "error_rate_pct": dict(num_pos, maximum=100, description="error-rate ceiling, percent"),
                       "throughput_qps": dict(num_pos, maximum=1e9,
                                              description="throughput floor, requests per second")},
    }
    return {"type": "object", "additionalProperties": False, "properties": types,
            "description": "site cost inputs and SLA targets for the report's analytics (declared, not measured)"}


# --------------------------------------------------------------------------
# YAML with line numbers
#
# Profiles are often written by someone else (a vendor, another lab): the loader is built for hostile input.
# Before anything is built, one streaming pass over the parser's events refuses anchors and aliases (so an alias
# bomb cannot expand), tags other than YAML's core ones, more than one document, nesting deeper than
# MAX_DEPTH, more than MAX_NODES values and scalars longer than MAX_SCALAR_CHARS.  Building then refuses
# non-string keys, NaN and infinities, and integers beyond 64 bits.  Every refusal is a ProfileError with the
# file, the line and the fix.

#: Limits on one profile file (README "What the suite trusts").
PROFILE_MAX_BYTES = 1 << 20
MAX_DEPTH = 16
MAX_NODES = 20_000
MAX_SCALAR_CHARS = 10_000
MAX_KEY_CHARS = 128
MAX_CHAIN = 16
MAX_EXTENDS_CHARS = 1024
PROFILE_SUFFIXES = (".yaml", ".yml")
_CORE = "tag:yaml.org,2002:"
_CORE_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map")}
#: A plain scalar that YAML 1.2 reads as a number but YAML 1.1 (PyYAML) as a string: 1e9, 5E-3, 1.5e300.
_FLOAT_12 = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)[eE][-+]?[0-9]+$")


def _show(value: Any, limit: int = 60) -> str:
    """A value as a message may quote it: short, one line, never a huge number written out."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # pragma: no cover - repr of plain YAML data does not fail
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + "..."


def _yaml_loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_problem(exc: Exception, text: str) -> Tuple[str, Optional[int]]:
    """(problem, line) of a YAML error, whichever kind (scanner, parser, reader, libyaml)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + 1 if mark is not None else None
    problem = getattr(exc, "problem", None)
    reason = getattr(exc, "reason", None)
    if problem is None and reason:  # ReaderError: a character YAML does not allow
        pos = getattr(exc, "position", 0) or 0
        line = text[:pos].count("\n") + 1
        char = getattr(exc, "character", None)
        code = f"#x{char:04x}" if isinstance(char, int) else repr(char)[:12]
        problem = f"character {code} is not allowed ({reason})"
    problem = str(problem or exc).splitlines()[0]
    return (problem[:120], line)


def _scan_events(text: str, file: str) -> set:
    """One streaming pass over the parse events: refuse what could expand, recurse or smuggle types.  Returns
    where the scalars with an explicit tag start (their text is read as the tag says, never re-interpreted)."""
    import yaml

    depth = nodes = documents = 0
    tagged = set()
    line: Optional[int] = None
    try:
        for ev in yaml.parse(text, Loader=_yaml_loader()):
            line = ev.start_mark.line + 1 if ev.start_mark is not None else line
            if isinstance(ev, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise ProfileError("more than one YAML document (a second `---`)", file, line,
                                       "keep one profile per file")
            elif isinstance(ev, yaml.AliasEvent):
                raise ProfileError("YAML aliases (*name) are not allowed in a profile", file, line,
                                   "write the value out in full where it is used")
            elif isinstance(ev, yaml.NodeEvent):
                if ev.anchor is not None:
                    raise ProfileError("YAML anchors (&name) are not allowed in a profile", file, line,
                                       "remove the anchor; write each value out in full")
                nodes += 1
                if nodes > MAX_NODES:
                    raise ProfileError(f"more than {MAX_NODES} values in one profile", file, line,
                                       "a profile holds a few hundred values; check that this is the right file")
                tag = getattr(ev, "tag", None)
                if tag not in (None, "!") and tag not in _CORE_TAGS:
                    shown = tag.replace(_CORE, "!!")[:40]
                    raise ProfileError(f"YAML tag {shown!r} is not allowed in a profile", file, line,
                                       "remove the tag; only plain strings, numbers, booleans, lists and "
                                       "mappings are allowed")
                if tag is not None:
                    tagged.add(ev.start_mark.index)
                if isinstance(ev, yaml.CollectionStartEvent):
                    depth += 1
                    if depth > MAX_DEPTH:
                        raise ProfileError(f"nested more than {MAX_DEPTH} levels deep", file, line,
                                           "a profile is nested a few levels deep; check the indentation")
                elif len(ev.value) > MAX_SCALAR_CHARS:
                    raise ProfileError(f"a value of {len(ev.value)} characters (the limit is {MAX_SCALAR_CHARS})",
                                       file, line, "shorten it")
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        problem, where = _yaml_problem(exc, text)
        raise ProfileError(f"not valid YAML: {problem}", file, where or line,
                           "check indentation and quoting on that line") from None
    return tagged


def _decode(raw: Union[str, bytes], file: str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ProfileError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})", file, line,
                           "save the file as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _load_yaml_with_lines(raw: Union[str, bytes], file: str) -> Tuple[Any, Dict[Tuple, int]]:
    import yaml

    text = _decode(raw, file)
    tagged = _scan_events(text, file)
    try:
        root = yaml.compose(text, Loader=_yaml_loader())
    except yaml.YAMLError as exc:  # pragma: no cover - the scan above parsed the same text
        problem, line = _yaml_problem(exc, text)
        raise ProfileError(f"not valid YAML: {problem}", file, line,
                           "check indentation and quoting on that line") from None
    lines: Dict[Tuple, int] = {}
    constructor = yaml.SafeLoader("")  # used only to build scalars with YAML's own rules

    def scalar(node: Any, path: Tuple) -> Any:
        line = node.start_mark.line + 1
        explicit = node.start_mark.index in tagged
        if node.tag not in _CORE_TAGS:  # an implicit timestamp and the like: keep the text as written
            return node.value
        if node.tag == _CORE + "str" and not node.style and not explicit and _FLOAT_12.match(node.value):
            value = float(node.value.replace("_", ""))  # 1e9 (YAML 1.2) as well as 1.0e+9 (YAML 1.1)
        else:
            try:
                value = constructor.construct_object(node, deep=True)
            except Exception:
                kind = node.tag.replace(_CORE, "!!")
                raise ProfileError(f"{_dotted(path)}: {_show(node.value)} cannot be read as {kind}", file, line,
                                   "remove the tag and write a plain value, e.g. 0.5, 12, true or a quoted string"
                                   if explicit else "write a plain number, e.g. 0.5 or 12, or quote the text") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ProfileError(f"{_dotted(path)} = {node.value[:40]} is not a finite number", file, line,
                               "write a finite number (NaN and infinities are not allowed; a number "
                               "beyond 1.8e308 is infinite)")
        if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 63):
            raise ProfileError(f"{_dotted(path)} = {node.value[:40]} is beyond the signed 64-bit range", file, line,
                               f"write an integer from {-(1 << 63)} to {(1 << 63) - 1}")
        return value

    def build(node: Any, path: Tuple) -> Any:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            if node.tag != _CORE + "map":
                raise ProfileError(f"{_dotted(path)}: a mapping tagged {node.tag.replace(_CORE, '!!')[:40]!r}",
                                   file, node.start_mark.line + 1, "remove the tag")
            out: Dict[str, Any] = {}
            for knode, vnode in node.value:
                kline = knode.start_mark.line + 1
                if not isinstance(knode, yaml.ScalarNode):
                    raise ProfileError("a key is a list or a mapping, not a string", file, kline,
                                       "write keys as plain words")
                key = scalar(knode, path)
                if not isinstance(key, str):
                    raise ProfileError(f"key {_show(key)} is not a string", file, kline, "quote the key")
                if len(key) > MAX_KEY_CHARS:
                    raise ProfileError(f"a key of {len(key)} characters", file, kline,
                                       f"keys are at most {MAX_KEY_CHARS} characters long")
                if key in out:
                    raise ProfileError(f"key {key!r} appears twice", file, kline,
                                       "remove one of the two entries")
                lines[path + (key,)] = kline
                out[key] = build(vnode, path + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _CORE + "seq":
                raise ProfileError(f"{_dotted(path)}: a list tagged {node.tag.replace(_CORE, '!!')[:40]!r}",
                                   file, node.start_mark.line + 1, "remove the tag")
            return [build(item, path + (i,)) for i, item in enumerate(node.value)]
        return scalar(node, path)

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


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12, except that ``integer`` means a whole number written as one: 5.0 is not an integer here
    (the code that uses a count needs an int), and a boolean is never a number."""
    import jsonschema

    def is_int(checker: Any, inst: Any) -> bool:
        return isinstance(inst, int) and not isinstance(inst, bool)

    checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", is_int)
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)


def _schema_errors(data: Any, file: str, lines: Dict[Tuple, int]) -> None:
    validator = _validator_class()(profile_schema())
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
            raise ProfileError(f"unknown requirement ID {_show(extra)} in thresholds", file, line,
                               f"{hint} Requirement IDs are written exactly as in the catalogue.")
        moved = [c for c in CONDITIONS.values() if len(path) == 2 and path[0] == "thresholds"
                 and path[1] in c.serves and extra in c.settings]
        if moved:
            raise ProfileError(f"unknown key {_show(extra)} in {where}: it sizes a condition {path[1]} is measured "
                               f"under, with settings of its own", file, line,
                               f"write it as conditions: {moved[0].name}: {extra}: ...")
        hint = _suggest(extra, allowed)
        raise ProfileError(f"unknown key {_show(extra)} in {where}", file, line,
                           (hint + " " if hint else "") + f"allowed keys: {', '.join(allowed)}")
    line = _line_for(lines, path)
    if err.validator == "type":
        want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
        percent = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", err.instance) if isinstance(err.instance, str) else None
        if percent and "number" in want:
            fraction = float(percent.group(1)) / 100
            raise ProfileError(f"{where} must be a number, got {_show(err.instance)}", file, line,
                               f"write the fraction {fraction:g} (a share is a fraction of 1, not a percentage)")
        raise ProfileError(f"{where} must be of type {want}, got {_show(err.instance)}", file, line,
                           f"write a {want} value for {where}")
    if err.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum",
                         "minLength", "maxLength", "pattern", "maxItems"):
        limits = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        if err.validator in limits:
            rule = f"{limits[err.validator]} {err.validator_value}"
        elif err.validator == "enum":
            rule = "one of " + ", ".join(map(repr, err.validator_value))
        elif err.validator == "pattern":
            rule = f"matching {err.validator_value}"
            if err.validator_value == PCI_ID_PATTERN:
                rule = "a PCI ID written as 'vvvv:dddd' in lower-case hex, e.g. '10de:2330'"
        elif err.validator == "maxLength":
            rule = f"at most {err.validator_value} characters long"
        elif err.validator == "maxItems":
            rule = f"with at most {err.validator_value} entries"
        else:
            rule = f"at least {err.validator_value} characters long"
        raise ProfileError(f"{where} = {_show(err.instance)} is out of range", file, line, f"use a value {rule}")
    if err.validator == "uniqueItems":
        raise ProfileError(f"{where} lists the same entry twice", file, line, "remove the repeated entry")
    if err.validator == "required":
        raise ProfileError(f"{err.message} in {where}", file, line, "add the missing key")
    raise ProfileError(f"{where}: {err.message[:200]}", file, line, "see the profile schema (`sits profile schema`)")


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

    def condition(self, name: str) -> Dict[str, Any]:
        """The settings of a condition several requirements are measured under (``conditions:``, e.g. the
        health window), resolved: the profile's values over the defaults."""
        if name not in CONDITIONS:
            raise KeyError(f"unknown condition {name!r}")
        return copy.deepcopy(self.data["conditions"][name])

    def fleet_band(self, req_id: str, subject: str, unit: Optional[str]) -> Optional[Dict[str, Any]]:
        """The fleet's band for one measured value (``fleet_baseline`` of ``sits baseline``), or None."""
        from .verdict import find_band

        return find_band(self.data.get("fleet_baseline"), req_id, subject, unit)

    @property
    def serving(self) -> Dict[str, Any]:
        """The profile's ``serving:`` section (the server under test), or {}."""
        return copy.deepcopy(self.data.get("serving") or {})

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

    def lineage_names(self) -> List[str]:
        """Its name and those of the bundled profiles it extends, with their aliases ("h200", "h200-sxm"): what a
        submitter's model name is compared with where the model's name gives no form factor."""
        names = [self.name]
        bundled = {path.resolve(): (path.stem, data) for path, data in _bundled_data().items()}
        for c in self.chain:
            found = bundled.get(Path(c).resolve())
            if found is not None:
                names += [found[0]] + list((found[1] or {}).get("aliases") or [])
        return list(dict.fromkeys(names))

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
        facts = CATALOGUE[req_id].facts
        return dict(th, **facts(self)) if facts else th

    @property
    def bundled(self) -> bool:
        """A profile shipped with the suite (its whole chain is bundled files): `sits replay` compares a report's
        profile section with the bundled profile of that name."""
        folder = bundled_dir().resolve()
        return bool(self.chain) and all(Path(c).resolve().parent == folder for c in self.chain)

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "path": self.path, "chain": self.chain, "how": self.how,
                "why": self.why, "bundled": self.bundled, "data": self.data}


@functools.cache
def _bundled_data() -> Dict[Path, Any]:
    """Every bundled profile file, parsed once per process (package data: it does not change).

    Read-only: callers look names, aliases and PCI IDs up; ``resolve`` validates and merges copies."""
    folder = Path(os.path.realpath(bundled_dir()))
    return {path: _load_yaml_with_lines(_read_profile(path), str(path))[0]
            for path in sorted(folder.glob("*.yaml"))}


def bundled_identities() -> Dict[str, Tuple[Dict[str, Any], List[str]]]:
    """Each bundled profile's name: its ``identity`` section (as written: a profile that extends another and sets
    none has an empty one) and its names (the name and its aliases)."""
    return {path.stem: (dict((data or {}).get("identity") or {}), [path.stem] + list((data or {}).get("aliases") or []))
            for path, data in _bundled_data().items()}


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


def _bundled(spec: str) -> Path:
    """The bundled profile a bare name (``h100``, ``h100.yaml``) stands for; ProfileError listing them if none."""
    name = spec
    for suffix in PROFILE_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[:-len(suffix)]
    index = _bundled_index()
    if name in index:
        return index[name]
    names = bundled_names()
    aliases = ", ".join(f"{k} ({index[k].stem})" for k in sorted(index) if k not in names)
    hint = _suggest(name, index)
    raise ProfileError(
        f"unknown profile {_show(spec)}: no such file, and no bundled profile of that name",
        fix=(hint + " " if hint else "") + f"bundled profiles: {', '.join(names)}"
            + (f"; aliases: {aliases}" if aliases else "") + "; or give a path to a YAML file")


def _is_profile_name(spec: str) -> bool:
    return spec.lower().endswith(PROFILE_SUFFIXES)


def _check_plain_file(path: Path, folder: Optional[Path] = None) -> None:
    """``path`` is a regular profile file of at most PROFILE_MAX_BYTES; with ``folder``, no component between
    that folder and the file is a symbolic link (``extends`` follows no link)."""
    anchor = Path(os.path.commonpath([folder, path])) if folder is not None else path.parent
    cur = anchor
    for part in Path(os.path.relpath(path, anchor)).parts:
        cur = cur / part
        try:
            st = os.lstat(cur)
        except OSError as exc:
            raise ProfileError(f"{cur}: {exc.strerror}", fix="check the path") from None
        if stat.S_ISLNK(st.st_mode):
            raise ProfileError(f"{cur} is a symbolic link; profiles are not read through links",
                               fix="name the file itself, by a path relative to the profile that extends it")
    if not stat.S_ISREG(st.st_mode):
        raise ProfileError(f"{path} is not a regular file", fix="name a .yaml profile file")
    if st.st_size > PROFILE_MAX_BYTES:
        raise ProfileError(f"{path} holds {st.st_size} bytes, over the {PROFILE_MAX_BYTES}-byte limit for a "
                           "profile", fix="check that it is the right file (a profile is a few kilobytes)")


def locate(spec: str, relative_to: Optional[Path] = None) -> Path:
    """Turn ``h100``, ``h100.yaml`` or a path into a profile file.

    Without ``relative_to``, ``spec`` is what a user typed: a bundled name, or the path of a ``.yaml``/``.yml``
    file (through the user's own links, if any).  With ``relative_to`` (the folder of a profile whose
    ``extends:`` names ``spec``), ``spec`` is a bundled name or a path relative to that folder: an absolute path
    is refused and no link is followed on the way."""
    if not spec or "\x00" in spec or len(spec) > MAX_EXTENDS_CHARS:
        raise ProfileError(f"a profile name or path of {len(spec)} characters" + (" with a NUL byte" if "\x00" in spec
                                                                                 else ""),
                           fix=f"name a bundled profile or a .yaml file (at most {MAX_EXTENDS_CHARS} characters)")
    bare = "/" not in spec and os.sep not in spec
    if relative_to is None:
        cand = Path(spec)
        if bare and not _is_profile_name(spec):
            return _bundled(spec)
        if os.path.lexists(cand):
            if not _is_profile_name(spec):
                raise ProfileError(f"{_show(spec)} is not a profile: a profile is a .yaml or .yml file",
                                   fix="give the path of a .yaml profile, or a bundled name (`sits profile list`)")
            real = Path(os.path.realpath(cand))
            _check_plain_file(real)
            return real
        if bare:
            return _bundled(spec)
        raise ProfileError(f"profile file {_show(spec)} does not exist",
                           fix="check the path, or name a bundled profile (`sits profile list`)")
    if os.path.isabs(spec):
        raise ProfileError(f"{_show(spec)} is an absolute path",
                           fix="write a bundled name, or a path relative to this profile's folder")
    if not _is_profile_name(spec):
        if bare:
            return _bundled(spec)
        raise ProfileError(f"{_show(spec)} is not a profile: a profile is a .yaml or .yml file",
                           fix="write a bundled name, or the relative path of a .yaml profile")
    target = Path(os.path.normpath(os.path.join(relative_to, spec)))
    if not os.path.lexists(target):
        if bare:
            return _bundled(spec)
        raise ProfileError(f"profile file {_show(spec)} does not exist (relative to {relative_to})",
                           fix="check the path; it is relative to the folder of the profile that extends it")
    _check_plain_file(target, Path(relative_to))
    return target


def _read_profile(path: Path, folder: Optional[Path] = None) -> bytes:
    """The bytes of a profile file through the untrusted-file reader: a plain file, no link (from ``folder`` on,
    when given), at most PROFILE_MAX_BYTES."""
    from .files import UntrustedInputError, read_bytes, read_file

    try:
        if folder is None:
            return read_file(path, PROFILE_MAX_BYTES)
        anchor = os.path.commonpath([folder, path])
        return read_bytes(anchor, os.path.relpath(path, anchor), PROFILE_MAX_BYTES)
    except UntrustedInputError as exc:
        raise ProfileError(f"cannot read profile: {str(exc).split('; fix:')[0]}", str(path),
                           fix="a profile is a plain .yaml file of at most 1 MiB, named directly (links are not "
                               "followed)") from None
    except OSError as exc:
        raise ProfileError(f"cannot read profile: {exc.strerror}", str(path),
                           fix="check the path and its permissions") from None


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
    seen: Dict[str, int] = {}
    for i, w in enumerate(data.get("waivers", [])):
        if w["id"] not in CATALOGUE:
            hint = _suggest(w["id"], CATALOGUE)
            raise ProfileError(f"waiver for unknown requirement ID {_show(w['id'])}", file,
                               _line_for(lines, ("waivers", i, "id")),
                               hint or "use an ID from `sits requirements`")
        if w["id"] in seen:
            raise ProfileError(f"two waivers for {w['id']} (waivers[{seen[w['id']]}] and waivers[{i}])", file,
                               _line_for(lines, ("waivers", i, "id")), "keep one waiver per requirement")
        seen[w["id"]] = i
    for req_id, th in data.get("thresholds", {}).items():
        for lo, hi in _BANDS:
            if lo in th and hi in th and th[lo] >= th[hi]:
                raise ProfileError(f"thresholds.{req_id}: {lo} ({th[lo]}) is not below {hi} ({th[hi]})", file,
                                   _line_for(lines, ("thresholds", req_id, lo)), _band_fix(lo, hi))


_BANDS = (("band_low", "band_high"), ("band_low_c", "band_high_c"))
#: Lists that are a [lowest, highest] range.
_RANGES = ("prompt_tokens", "output_tokens")


def _band_fix(lo: str, hi: str) -> str:
    return f"make {lo} <= {hi} and the two different ({lo} < {hi}: a band needs a width)"


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _resolved_checks(data: Dict[str, Any], prov: Dict[Tuple, Tuple[int, str, int]], top: str) -> None:
    """Rules between two values, checked on the merged profile: the two may come from different files of the
    ``extends`` chain.  The error names the file nearest the top of the chain that sets one of them."""

    def fail(problem: str, paths: List[Tuple], fix: str) -> None:
        known = [p for p in paths if p in prov]
        if not known:
            raise ProfileError(problem, top, None, fix)
        nearest = min(known, key=lambda p: prov[p][0])
        if len({prov[p][1] for p in known}) > 1:
            problem += " (" + ", ".join(f"{_dotted(p)} from {Path(prov[p][1]).name}:{prov[p][2]}"
                                        for p in known) + ")"
        raise ProfileError(problem, prov[nearest][1], prov[nearest][2], fix)

    for req_id, th in data.get("thresholds", {}).items():
        if not isinstance(th, dict):
            continue
        at = ("thresholds", req_id)
        for lo, hi in _BANDS:
            if _is_num(th.get(lo)) and _is_num(th.get(hi)) and th[lo] >= th[hi]:
                fail(f"thresholds.{req_id}: {lo} ({th[lo]}) is not below {hi} ({th[hi]})",
                     [at + (lo,), at + (hi,)], _band_fix(lo, hi))
        for key in th:
            other = "max_" + key[4:]
            if key.startswith("min_") and _is_num(th[key]) and _is_num(th.get(other)) and th[key] > th[other]:
                fail(f"thresholds.{req_id}: {key} ({th[key]}) is above {other} ({th[other]})",
                     [at + (key,), at + (other,)], f"make {key} <= {other}")
        if _is_num(th.get("window_s")) and _is_num(th.get("timeout_s")) and th["window_s"] > th["timeout_s"]:
            fail(f"thresholds.{req_id}: window_s ({th['window_s']}) is longer than timeout_s ({th['timeout_s']}): "
                 "the steady window could never fit", [at + ("window_s",), at + ("timeout_s",)],
                 "make window_s <= timeout_s (the default gives 120 s of window in a 1200 s timeout)")
        if (_is_num(th.get("duration_s")) and _is_num(th.get("window_ms"))
                and th["duration_s"] * 1000 < 10 * th["window_ms"]):
            fail(f"thresholds.{req_id}: duration_s ({th['duration_s']}) holds fewer than 10 windows of "
                 f"{th['window_ms']} ms", [at + ("duration_s",), at + ("window_ms",)],
                 "lengthen duration_s or shorten window_ms (at least 10 windows)")
        atol = th.get("atol")
        if isinstance(atol, dict):
            order = [k for k in ("high", "default", "low") if _is_num(atol.get(k))]
            for a, b in zip(order, order[1:]):
                if atol[a] > atol[b]:
                    fail(f"thresholds.{req_id}.atol: {a} ({atol[a]}) is looser than {b} ({atol[b]})",
                         [at + ("atol", a), at + ("atol", b)],
                         "a higher risk class takes the tighter tolerance: atol.high <= atol.default <= atol.low")
        mem_gb = data.get("hardware", {}).get("memory_gb")
        if _is_num(th.get("bytes")) and _is_num(mem_gb) and CATALOGUE.get(req_id) is not None \
                and CATALOGUE[req_id].scope == "accelerator" and th["bytes"] > mem_gb * 1e9 / 2:
            fail(f"thresholds.{req_id}: bytes ({th['bytes']}) is more than half the card's memory "
                 f"(hardware.memory_gb: {mem_gb})", [at + ("bytes",), ("hardware", "memory_gb")],
                 "use a buffer that fits on the card twice (a source and a destination)")
        for path, value in _walk(th, at):
            if path[-1] in _RANGES and isinstance(value, list) and len(value) == 2 \
                    and all(_is_num(v) for v in value) and value[0] > value[1]:
                fail(f"{_dotted(path)}: [{value[0]}, {value[1]}] runs backwards", [path],
                     "write the range as [lowest, highest]")
            if path[-1] == "tenants" and isinstance(value, list):
                names = [t.get("name") for t in value if isinstance(t, dict)]
                dup = next((n for n in names if names.count(n) > 1), None)
                if dup is not None:
                    fail(f"{_dotted(path)}: two tenants named {_show(dup)}", [path], "give each tenant its own name")
    ids = data.get("identity", {}).get("pci_ids", [])
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        fail(f"identity.pci_ids lists {dup} twice", [("identity", "pci_ids")], "remove the repeated PCI ID")


def _walk(value: Any, path: Tuple) -> Iterable[Tuple[Tuple, Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, path + (k,))


def load_file(path: Path, folder: Optional[Path] = None,
              schema: bool = True) -> Tuple[Dict[str, Any], Dict[Tuple, int]]:
    """Read, parse and validate one profile file (not its ancestors).  With ``folder`` (the folder of the profile
    that extends this one), no link between that folder and the file is followed.  ``schema=False`` skips the
    JSON-schema pass (and the jsonschema import, a tenth of a second at start-up) for the bundled profiles,
    package data that the project's tests validate against the same schema."""
    data, lines = _load_yaml_with_lines(_read_profile(path, folder), str(path))
    if not isinstance(data, dict):
        raise ProfileError("a profile must be a YAML mapping (key: value lines)", str(path), 1,
                           "start the file with `name: my-profile` and `extends: base`")
    if not isinstance(data.get("name"), str):  # before any message quotes a key of a file that is no profile
        raise ProfileError("not a profile: no `name:` at the top level", str(path), 1,
                           "start the file with `name: my-profile` and `extends: base`")
    if schema:
        _schema_errors(data, str(path), lines)
    _semantic_checks(data, str(path), lines)
    return data, lines


@functools.cache
def _bundled_layer(path: Path) -> Tuple[Dict[str, Any], Dict[Tuple, int]]:
    """A bundled profile file, read and checked once per process (read-only: ``_merge`` copies)."""
    return load_file(path, schema=False)


def resolve(spec: str, how: str = "option", why: str = "") -> Profile:
    """Locate, load, validate and merge a profile with all its ancestors, then check the rules between values
    on the merged result."""
    path = locate(spec)
    chain: List[Path] = []
    layers: List[Tuple[Dict[str, Any], Dict[Tuple, int]]] = []
    current: Optional[Path] = path
    folder: Optional[Path] = None
    lines: Dict[Tuple, int] = {}
    while current is not None:
        if current in chain:
            cycle = " -> ".join(p.name for p in chain + [current])
            raise ProfileError(f"circular `extends`: {cycle}", str(chain[-1]), _line_for(lines, ("extends",)),
                               fix="make one profile in the cycle extend `base` instead")
        if len(chain) >= MAX_CHAIN:
            raise ProfileError(f"`extends` chain longer than {MAX_CHAIN} files", str(chain[-1]),
                               _line_for(lines, ("extends",)), fix="fold some of the profiles together")
        chain.append(current)
        data, lines = _bundled_layer(current) if current in _bundled_data() else load_file(current, folder)
        layers.append((data, lines))
        parent = data.get("extends")
        if data.get("name") == "base" and current != _bundled("base"):
            # Every chain ends at the bundled base, which holds every SITS2026 default: a file of that name
            # elsewhere would replace them (and a copy missing one would validate, then break the run).
            raise ProfileError("a profile named `base` outside the bundled profiles would replace the SITS2026 "
                               "defaults", str(current), _line_for(lines, ("name",)),
                               fix="give it another name and `extends: base` (the bundled one); override only "
                                   "the thresholds you mean to change")
        if parent is None:
            if data.get("name") != "base":
                parent = "base"
            else:
                break
        try:
            nxt = locate(parent, relative_to=current.parent)
        except ProfileError as exc:
            raise ProfileError(f"`extends: {_show(parent)[1:-1]}`: {exc.problem}", str(current),
                               _line_for(lines, ("extends",)), exc.fix) from None
        folder = None if nxt in _bundled_data() else current.parent
        current = nxt
    merged: Dict[str, Any] = {}
    prov: Dict[Tuple, Tuple[int, str, int]] = {}  # path -> (place in the chain, file, line) of the value in force
    for depth in reversed(range(len(layers))):
        data, lines = layers[depth]
        merged = _merge(merged, data)
        for key_path, line in lines.items():
            prov[key_path] = (depth, str(chain[depth]), line)
    merged["name"] = layers[0][0]["name"]
    merged.pop("extends", None)
    merged.pop("aliases", None)
    missing = [rid for rid in CATALOGUE if rid not in merged.get("thresholds", {})]
    missing += [f"conditions.{c}" for c in CONDITIONS if c not in merged.get("conditions", {})]
    if missing:  # only possible when a chain does not reach the bundled base
        raise ProfileError(f"resolved profile has no defaults for {', '.join(missing)}", str(path),
                           fix="extend the bundled `base` profile")
    _resolved_checks(merged, prov, str(path))
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
    found = ", ".join(f"{n} × {pid or 'PCI ID unknown'}" for pid, n in counts.items())
    return "host", f"no bundled profile matches the accelerators found ({found}); write one that extends base"


def write_schema(path: Path) -> None:
    path.write_text(json.dumps(profile_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
