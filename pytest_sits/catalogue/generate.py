"""``profiles/base.yaml``, written from the declarations: every default with its comment.

``python tools/docs_reference.py`` writes it, and its ``--check`` (run by the tests) fails while the file differs
from what the declarations give, so the defaults have one home and the file a lab reads stays commented.
"""

from __future__ import annotations

import textwrap
from typing import Any, List

from .base import CATALOGUE, CONDITIONS, Threshold

HEADER = """\
# The SITS2026 defaults of every requirement. Every other profile extends this
# one (directly or through another profile). The figures are the SITS2026
# documents' own (see the catalogue: `sits requirements`); where the documents
# contradict themselves or the datasheets, the comment says so. Override any
# of them in a profile that extends this one.
#
# Generated from the requirement declarations (pytest_sits/catalogue/) by
# tools/docs_reference.py: edit the declaration, not this file.
name: base
description: SITS2026 default thresholds; no hardware identity.
identity:
  kind: none
  count: 0
  pci_ids: []
thresholds:
"""
WIDTH = 118
COMMENT_COLUMN = 34


def flow(value: Any) -> str:
    """One value in YAML flow style (what ``yaml.safe_load`` reads back as ``value``)."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False, allow_unicode=True)
    text = text.strip()
    if text.endswith("\n..."):
        text = text[:-4].strip()
    elif text.endswith("..."):
        text = text[:-3].strip()
    return text


def _comment_block(text: str, indent: str) -> List[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - len(indent) - 2, break_on_hyphens=False)]


def _keyed(indent: str, key: str, value: str, comment: str) -> List[str]:
    line = f"{indent}{key}: {value}" if value else f"{indent}{key}:"
    if not comment:
        return [line]
    padded = line.ljust(max(COMMENT_COLUMN, len(line) + 2) - 0)
    if len(padded) + 2 + len(comment) <= WIDTH:
        return [f"{padded}# {comment}"]
    return _comment_block(comment, indent) + [line]


def _threshold(key: str, t: Threshold) -> List[str]:
    d = t.default
    if isinstance(d, dict) and d:
        out = _keyed("    ", key, "", t.help)
        for k, v in d.items():
            out += _keyed("      ", k, flow(v), t.items.get(k, ""))
        return out
    if isinstance(d, list) and d and all(isinstance(x, dict) for x in d):
        out = _keyed("    ", key, "", t.help)
        out += [f"      - {flow(x)}" for x in d]
        return out
    return _keyed("    ", key, flow(d), t.help)


def base_profile_yaml() -> str:
    lines = [HEADER.rstrip("\n")]
    for req in CATALOGUE.values():
        lines.append(f"  {req.id}:")
        if req.note:
            lines += _comment_block(req.note, "    ")
        for key, t in req.threshold_keys.items():
            lines += _threshold(key, t)
    lines.append("conditions:")
    for cond in CONDITIONS.values():
        lines.append(f"  {cond.name}:")
        lines += _comment_block(f"{cond.title} (serves {', '.join(cond.serves)})", "    ")
        for key, t in cond.settings.items():
            lines += _threshold(key, t)
    return "\n".join(lines) + "\n"
