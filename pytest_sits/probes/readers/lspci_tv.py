"""``lspci -tv``: every accelerator's PCIe path in the tree, port types inferred from the tree's shape.  The
parsed paths have the shape of the live probe's, so the same checks decide; the method says they came from
text.  The text is untrusted: the bounds of :mod:`.text`, anchored regular expressions without nested
repetition (linear time), and every error names the line.

``lspci -tv`` (layout of pciutils' ``ls-tree.c``)
    A bus is printed ``[dddd:bb]`` (the domain with ``%04x``, so an Intel VMD
    domain is ``[10000:e0]``); a device ``dd.f``; a bridge ``dd.f-[ss]-`` or
    ``dd.f-[ss-uu]-`` (secondary-subordinate; ``dd.f-`` when the secondary bus
    is 0); the children of a bus or bridge follow after ``--`` (one) or
    ``+-``/``\\-`` (several, continued on later lines at the same column with
    ``|`` for the open branches); a name follows a device after two spaces
    (``-v``), and only leaves are named.  The parser follows exactly that:
    each token's parent is the token before it on the line, or on a
    continuation line the open node whose children start at that column.
    Tabs are expanded to 8 columns; a common left margin, a shell prompt
    before the tree and lines without tree tokens (``...``, blank) are
    skipped.  The tree shows bridges and their bus ranges, not their
    Device/Port Type, so port types are inferred: the topmost bridge above a
    device is its root port, every bridge below it a switch port - exactly
    SITS2026 A's reading of the tree ("only one root-port level above the
    GPU").  A bridge printed without a bus range on top of the chain is a
    parent the OS reports (an Intel VMD controller hosting its own domain) and
    counts as the host bridge.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .base import PCI, Detection, Entry, Machine, Reader
from .pci import identify, merge_paths, pci_id_of
from .text import TextEvidenceError, text_lines

_TOKEN = re.compile(r"\[(?P<dom>[0-9a-f]{4,8}):(?P<bus>[0-9a-f]{2})\]"
                    r"|(?P<slot>[0-9a-f]{2}\.[0-7])(?:-\[(?P<sec>[0-9a-f]{2})(?:-(?P<sub>[0-9a-f]{2}))?\])?", re.I)
_TREE_LINE = re.compile(r"[ |]*[-+\\]")


def _tree_tokens(line: str, lineno: int) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """The bus and device tokens of one tree line (with their columns) and the name after the last one."""
    pos = len(line) - len(line.lstrip(" |"))
    tokens: List[Dict[str, Any]] = []
    name = None
    while pos < len(line):
        c = line[pos]
        if c in "-+\\":
            pos += 1
            continue
        if line.startswith("...", pos):  # pciutils cuts lines at 1,024 characters with "..."
            break
        m = _TOKEN.match(line, pos)
        if m is None:
            raise TextEvidenceError(f"line {lineno}, column {pos + 1}: {line[pos:pos + 12]!r} is not part of an "
                                    "`lspci -t` tree (expected [domain:bus], dd.f or a branch)")
        tok: Dict[str, Any] = {"col": pos, "line": lineno}
        if m.group("dom"):
            tok.update(kind="bus", domain=m.group("dom").lower(), bus=m.group("bus").lower())
        else:
            tok.update(kind="dev", slot=m.group("slot").lower(), sec=(m.group("sec") or "").lower() or None,
                       sub=(m.group("sub") or m.group("sec") or "").lower() or None)
        tokens.append(tok)
        pos = m.end()
        if tok["kind"] == "dev" and pos < len(line) and line[pos] == " ":
            name = line[pos:].strip() or None
            break
    return tokens, name


def read_lspci_tv(text: str, classes: Optional[Dict[str, int]] = None, known_ids: Iterable[str] = (),
                  match: Optional[re.Pattern[str]] = None) -> Dict[str, Any]:
    """Every accelerator's PCIe path in an ``lspci -tv`` text, and the functions that could not be identified.

    ``classes``: class codes by BDF, or ``{"class_code", "name"}`` by BDF (:func:`classes_by_bdf` of an
    ``lspci -vv`` text of the same host); ``known_ids``: the
    profile's accelerator IDs; ``match``: a regular expression on the name that replaces the rule (legacy).
    Returns ``{"accelerators": [path, ...], "unidentified": [...], "not_accelerators": n, "skipped_lines": [...],
    "cuts": [...], "functions": [...]}``.

    A snippet cut at the top (its first line ``+-[0000:20]-...`` or ``|  +-...``) and branches whose parent
    line was elided (``+-...``, ``[... removed ...]``) are read: the device and the bridges on its own line
    are known, what was above them is recorded as cut (``cuts``), and the path above is unknown there.
    """
    lines = text_lines(text, "`lspci -tv`")
    root: Dict[str, Any] = {"kind": "root", "child_col": None}
    stack: List[Dict[str, Any]] = []
    margin: Optional[int] = None
    leaves: List[Tuple[Dict[str, Any], List[Dict[str, Any]]]] = []
    skipped: List[int] = []
    cuts: List[Dict[str, Any]] = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.expandtabs(8).rstrip()
        if margin is None:
            m = re.match(r"[ \t]*-(?:\+-)?\[", line)
            cut = re.match(r"([ \t|]*)[+\\]-\[[0-9a-f]{4,8}:[0-9a-f]{2}\]", line, re.I)
            if m:
                margin = line.index("-")
            elif cut:  # a tree cut above its first line: "+-[0000:20]-..." (another domain came before it)
                col = len(cut.group(1))
                if col == 0:  # no column left for the root's "-": shift every line right by one
                    lines = [" " + ln for ln in lines]
                    line, col = " " + line, 1
                margin = col - 1
                root = {"kind": "root", "child_col": None}
                stack = [root]
                cuts.append({"line": lineno, "what": "the tree starts below its top: the lines above "
                                                     f"{line.strip()[:24]!r} (other domains) are not in the text"})
            elif re.match(r"[ \t|]*[+\\]-[0-9a-f]{2}\.[0-7]", line, re.I):  # starts in the middle of a bus
                margin = 0
                root = {"kind": "root", "child_col": None}
                stack = [root]
                cuts.append({"line": lineno, "what": "the tree starts in the middle of a bus: its domain and the "
                                                     "lines above are not in the text"})
            else:
                if line.strip():
                    skipped.append(lineno)
                continue
        if line[:margin].strip():
            skipped.append(lineno)
            continue
        line = line[margin:]
        if not _TREE_LINE.match(line):
            if line.strip():
                skipped.append(lineno)
                if "..." in line or "removed" in line.lower() or "\u2026" in line:
                    cuts.append({"line": lineno, "what": f"lines elided ({line.strip()[:60]!r})"})
            continue
        tokens, name = _tree_tokens(line, lineno)
        if not tokens:
            if "..." in line:
                cuts.append({"line": lineno, "what": f"a branch elided ({line.strip()[:60]!r})"})
            continue
        if line.startswith("-"):  # a new top-level domain (show_forest starts each at column 0)
            root = {"kind": "root", "child_col": None}
            stack = [root]
        else:
            col = tokens[0]["col"]
            kept = list(stack)
            while stack and stack[-1]["child_col"] != col:
                stack.pop()
            if not stack:
                if tokens[0]["kind"] == "bus" and kept and kept[0]["kind"] == "root" and \
                        kept[0]["child_col"] is None:
                    kept[0]["child_col"] = col
                    stack = [kept[0]]
                else:
                    # Its parent's line was cut: the branch hangs from an unknown parent.
                    cuts.append({"line": lineno, "what": f"the branch at column {col + margin + 1} hangs from a line "
                                                         "that is not in the text (elided or cut)"})
                    orphan = {"kind": "cut", "child_col": col, "line": lineno, "domain": _domain_of(kept),
                              "sec": None}
                    # the branches to its left are still open: a later line at their column continues them
                    left = []
                    for n in kept:
                        if n.get("child_col") is None or n["child_col"] >= col:
                            break
                        left.append(n)
                    stack = (left or [root]) + [orphan]
        for tok in tokens:
            parent = stack[-1]
            if parent["child_col"] is None:
                parent["child_col"] = tok["col"]
            tok["child_col"] = None
            if tok["kind"] == "bus":
                if parent["kind"] == "bus":
                    raise TextEvidenceError(f"line {lineno}: bus [{tok['domain']}:{tok['bus']}] directly below "
                                            "another bus; not `lspci -t` layout")
            else:
                if parent["kind"] == "root":
                    raise TextEvidenceError(f"line {lineno}: device {tok['slot']} before any [domain:bus]; "
                                            "is this `lspci -tv` output?")
                if parent["kind"] == "bus":
                    tok["domain"], bus = parent["domain"], parent["bus"]
                elif parent["kind"] == "cut":  # the bus of a device below a cut is unknown
                    tok["domain"], bus = parent.get("domain"), None
                else:  # on the secondary bus of the bridge above (printed "-" only when it is bus 00)
                    tok["domain"], bus = parent["domain"], parent["sec"] or "00"
                    if parent["domain"] is None:  # below a bridge whose own place was cut: its bus is known
                        tok["domain"] = _domain_of(stack)
                tok["bdf"] = f"{tok['domain'] or '????'}:{bus or '??'}:{tok['slot']}"
                tok["parent"] = parent
                parent["bridge"] = True
            stack.append(tok)
        last = tokens[-1]
        if last["kind"] == "dev":
            leaves.append((last, list(stack)))
            last["name"] = name
    if margin is None:
        raise TextEvidenceError("no `[domain:bus]` root found: this is not `lspci -tv` output")
    accelerators, unidentified, others, functions = [], [], 0, []
    for leaf, chain in leaves:
        if leaf.get("bridge") or leaf.get("sec"):
            continue  # a bridge (with or without devices below it), never a leaf function
        name = leaf.get("name")
        cls = (classes or {}).get(leaf["bdf"])
        if isinstance(cls, dict):  # from `lspci -vv`: the class, and the name where the tree has none (-t)
            name, cls = name or cls.get("name"), cls.get("class_code")
        if match is not None:
            ident = {"accelerator": bool(name and match.search(name)), "why": f"name matches {match.pattern!r}",
                     "pci_id": pci_id_of(name)}
        elif name is None:
            ident = {"accelerator": False, "why": "no name (`lspci -t` without -v)", "pci_id": None}
        else:
            ident = identify(name, cls, known_ids)
        functions.append({"bdf": leaf["bdf"], "name": name, "pci_id": ident.get("pci_id"),
                          "accelerator": ident["accelerator"], "line": leaf["line"]})
        if ident["accelerator"] is None:
            unidentified.append({"device": leaf["bdf"], "name": name, "why": ident["why"],
                                 "source": f"lspci -tv line {leaf['line']}"})
            continue
        if not ident["accelerator"]:
            others += 1
            continue
        accelerators.append(_tree_path(leaf, chain, name, ident))
    return {"accelerators": accelerators, "unidentified": unidentified, "not_accelerators": others,
            "skipped_lines": skipped, "cuts": cuts, "functions": functions}


def _domain_of(stack: List[Dict[str, Any]]) -> Optional[str]:
    return next((n.get("domain") for n in reversed(stack) if n.get("domain")), None)


def _tree_path(leaf: Dict[str, Any], chain: List[Dict[str, Any]], name: Optional[str],
               ident: Dict[str, Any]) -> Dict[str, Any]:
    nodes = [n for n in chain[:-1] if n.get("kind") in ("dev", "cut")]  # root first
    notes = []
    cut_nodes = [n for n in nodes if n["kind"] == "cut"]
    cut = bool(cut_nodes)
    if cut:  # only what is below the cut is known
        nodes = nodes[max(i for i, n in enumerate(nodes) if n["kind"] == "cut") + 1:]
    bridges = nodes
    while not cut and bridges and not bridges[0].get("sec"):  # a rangeless parent on top: the OS's host bridge
        notes.append(f"{bridges[0]['bdf']} has no bus range: a parent the OS reports (such as an Intel VMD "
                     "controller), taken as the host bridge")
        bridges.pop(0)
    hops = []
    for pos, n in enumerate(reversed(bridges)):
        top = pos == len(bridges) - 1
        if top and cut:  # the topmost bridge left below a cut: a root port or a switch port, the text cannot say
            ptype, src = "unknown", "the line above it was cut: root port or switch port"
        else:
            ptype = "root_port" if top else "switch_port_inferred"
            src = "inferred (lspci -tv text: the topmost bridge is the root port)"
        hops.append({"bdf": n["bdf"], "class": "0x0604", "pci_id": None, "port_type": ptype, "type_source": src,
                     "link": {}})
    if cut:
        hops.append({"bdf": f"the bridges above line {cut_nodes[-1]['line']} (cut from the text)",
                     "class": None, "pci_id": None, "port_type": "unknown",
                     "type_source": "not in the text", "link": {}})
        notes.append("the tree was cut above this branch: bridges above it are unknown")
    if not hops:
        notes.append("no bridge above the device in the tree")
    return {"device": leaf["bdf"], "name": name, "pci_id": ident.get("pci_id"), "hops": hops, "method": "inferred",
            "identified_by": ident["why"], "note": "; ".join(notes) or None,
            "method_text": "port types inferred from the submitted `lspci -tv` tree (the topmost bridge above "
                           "the device is its root port, every bridge below it a switch port: SITS2026 A's "
                           "reading); not read from the devices' PCI Express capability",
            "source": f"lspci -tv line {leaf['line']}"}


def parse_lspci_tv(text: str, match: Optional[re.Pattern[str]] = None, classes: Optional[Dict[str, int]] = None,
                   known_ids: Iterable[str] = ()) -> List[Dict[str, Any]]:
    """Paths of the accelerators: [{"device": bdf, "name", "pci_id", "hops": [...], "method", ...}]."""
    return read_lspci_tv(text, classes=classes, known_ids=known_ids, match=match)["accelerators"]


_TREE = re.compile(r"^[ \t|]*[-+\\]-?[-+\\]?\[[0-9a-f]{4,8}:[0-9a-f]{2}\]|-\[[0-9a-f]{2}(?:-[0-9a-f]{2})?\]-", re.M | re.I)


class LspciTv(Reader):
    kinds = {"lspci-tv": "lspci -tv"}
    steps = (PCI,)
    order = 60
    option = "--lspci-tv"

    def detect(self, head: str) -> Optional[Detection]:
        if _TREE.search(head):
            return "lspci-tv", "a tree of [domain:bus] and dd.f branches"
        return None

    def parse(self, kind: str, text: str, known_ids: Iterable[str] = ()) -> Dict[str, Any]:
        return read_lspci_tv(text, known_ids=known_ids)

    def merge(self, machine: Machine, entry: Entry, step: int) -> None:
        # a tree cut anywhere may have lost accelerators: only a whole one lists every accelerator
        merge_paths(machine, entry, None if entry["cuts"] else f"{entry['tool']}, the whole tree")


READER = LspciTv()
