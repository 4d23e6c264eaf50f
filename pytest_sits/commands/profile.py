"""``sits profile validate|list|show|schema``: hardware profiles."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from .base import USAGE_ERROR, add, err, yaml_text

EXAMPLES = """\
  sits profile list                      the bundled profiles
  sits profile init --from=texts/ --out=my-a10.yaml   a profile for the model the texts show (values from them)
  sits profile validate my-server.yaml   check a profile (exit 4 naming the file, line and fix)
  sits profile show h100                 the resolved profile (its extends chain merged), as YAML
  sits profile schema > profile.schema.json
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "profile", "validate, list, show profiles", EXAMPLES)
    p.add_argument("action", choices=["validate", "list", "show", "schema", "init"])
    p.add_argument("files", nargs="*", metavar="NAME|FILE")
    p.add_argument("--from", dest="source", metavar="PATH",
                   help="init: the submitted texts (a folder or one file, as `sits audit` reads them)")
    p.add_argument("--out", metavar="FILE", help="init: write the profile here (a new file; default: print it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .. import profiles

    if args.action == "list":
        for name in profiles.bundled_names():
            p = profiles.resolve(name)
            print(f"{name:16} {p.data.get('description', '')}")
        return 0
    if args.action == "init":
        return _init(args)
    if args.action == "schema":
        print(json.dumps(profiles.profile_schema(), indent=2, sort_keys=True))
        return 0
    if not args.files:
        return err(f"`sits profile {args.action}` needs a profile name or file")
    status = 0
    for spec in args.files:
        try:
            p = profiles.resolve(spec)
        except profiles.ProfileError as exc:
            print(f"sits: {exc}", file=sys.stderr)
            status = USAGE_ERROR
            continue
        if args.action == "validate":
            print(f"{spec}: ok (profile {p.name}, chain {' -> '.join(Path(c).name for c in p.chain)})")
        else:
            print(yaml_text(p.data), end="")
    return status


def _init(args: argparse.Namespace) -> int:
    """A profile for the accelerator model submitted texts show: its identity and hardware figures read from them,
    each with the file and line it came from in a comment; every threshold base's."""
    from .. import profiles
    from ..files import write_new
    from ..platforms import PlatformError
    from ..platforms.evidence import EvidencePlatform

    if not args.source:
        return err("`sits profile init` needs --from=PATH: the submitted texts (a folder or one file)")
    try:
        inv = EvidencePlatform(Path(args.source)).inventory()
    except PlatformError as exc:
        return err(str(exc))
    try:
        text = init_text(inv, args.source)
    except ValueError as exc:
        return err(f"{args.source}: {exc}")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sits-profile-init-") as tmp:  # what is written resolves, or it is ours
        check = Path(tmp) / "p.yaml"
        check.write_text(text, encoding="utf-8")
        try:
            profiles.resolve(str(check))
        except profiles.ProfileError as exc:  # pragma: no cover - a defect of init_text
            raise AssertionError(f"sits profile init wrote a profile that does not resolve: {exc}") from None
    if not args.out:
        print(text, end="")
        return 0
    try:
        write_new(Path(args.out), text)
    except FileExistsError:
        return err(f"{args.out}: exists; fix: give a new file to --out (nothing is overwritten)")
    except OSError as exc:
        return err(f"{args.out}: cannot write ({exc.strerror}); fix: give a writable path to --out")
    print(f"{args.out}: profile {yaml_name(text)} written from {args.source}; check every value against the "
          f"datasheet and set identity.count to the number of accelerators the machine must have (it is the texts' "
          f"count now), then run `sits audit {args.source} --profile={args.out}`")
    return 0


def yaml_name(text: str) -> str:
    return next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("name:")), "?")


def init_text(inv: dict, source: str) -> str:
    """The profile's YAML text (see :func:`_init`).  Raises ValueError when the texts show no accelerator, or
    several models (one profile is for one model)."""
    import re

    accs = [a for a in inv.get("accelerators") or [] if a.get("pci_id")]
    by_name = False
    if not accs:  # npu-smi info, mthreads-gmi: a vendor and a model name, no PCI ID
        accs = [a for a in inv.get("accelerators") or [] if a.get("name") and a.get("vendor")]
        by_name = bool(accs)
    if not accs:
        declared = _declared_text(inv, source)
        if declared is not None:
            return declared
        raise ValueError("the texts show no accelerator with a PCI ID (nvidia-smi -q, lspci, rocm-smi or amd-smi "
                         "give one) or a model name (npu-smi info, mthreads-gmi, an MLPerf systems JSON); a profile "
                         "names its model by them")
    ids = sorted({a["name"] if by_name else a["pci_id"] for a in accs})
    if len(ids) > 1:
        raise ValueError(f"the texts show several models ({', '.join(ids)}); fix: one profile per model: submit "
                         "one model's texts")
    first = accs[0]
    mgmt = first.get("management") or {}

    def where(acc: dict) -> str:
        m = acc.get("management") or {}
        src = str(m.get("source") or ", ".join(acc.get("sources") or []) or "the texts")
        src = re.sub(r"^submitted ", "", src)
        return src + (f" line {m['source_line']}" if m.get("source_line") else "")

    name = str(first.get("name") or first.get("display_name") or ids[0])
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "accelerator"
    q = lambda v: json.dumps(v, ensure_ascii=True)  # noqa: E731 - a YAML scalar that is also JSON
    lines = [
        f"# A profile for {name}, written by `sits profile init --from={source}`.",
        "# Every identity and hardware value below was read from the submitted texts (the file and line in its",
        "# comment); every threshold is base's. Check each value against the datasheet before certifying with it.",
        f"name: {q(slug)}",
        "extends: base",
        f"description: {q(name + ' (from submitted texts; check against the datasheet)')}",
        "identity:",
        f"  vendor: {q(first.get('vendor') or 'unknown')}  # {where(first)}",
        f"  model: {q(name)}  # {where(first)}",
        f"  kind: {'npu' if first.get('vendor') == 'Huawei' else 'gpu'}",
        (f"  pci_ids: []  # {where(first)} gives no PCI ID: the model is matched by its vendor and name (add the "
         "PCI ID from `lspci -nn` to match by it)" if by_name else f"  pci_ids: [{q(ids[0])}]  # {where(first)}"),
        f"  count: {len(accs)}  # {len(accs)} in the texts: INV-DEVICES holds the machine to this count, so a "
        "count copied from texts that lack a GPU passes them; set the count the machine must have",
    ]
    hw: list = []
    mem = first.get("memory_total_bytes")
    if isinstance(mem, (int, float)) and mem > 0:
        hw.append(f"  memory_gb: {round(mem / 1e9, 1)}  # {where(first)}: {int(mem)} bytes of device memory")
    gen, width = mgmt.get("pcie_max_gen") or mgmt.get("pcie_gpu_max_gen"), mgmt.get("pcie_max_width")
    if isinstance(gen, int):
        hw.append(f"  pcie_gen: {gen}  # {where(first)}: the device's maximum PCIe generation")
    if isinstance(width, int):
        hw.append(f"  pcie_width: {width}  # {where(first)}: the device's maximum link width")
    tdp = mgmt.get("power_limit_default_mw")
    if isinstance(tdp, (int, float)) and tdp > 0:
        hw.append(f"  tdp_w: {round(tdp / 1000)}  # {where(first)}: the default power limit")
    if hw:
        lines += ["hardware:"] + hw
    return "\n".join(lines) + "\n"


def _declared_text(inv: dict, source: str) -> Optional[str]:
    """A profile from an MLPerf systems JSON alone (no accelerator reading among the texts): the model, count and
    memory it declares, each commented as declared; None where the texts hold no such declaration."""
    import re

    from ..checks.inventory import model_tokens
    from ..conditions.inventory import declared_system

    decl = declared_system(inv)
    if decl is None:
        return None
    if decl.get("several"):
        raise ValueError(f"the systems JSONs declare several systems ({', '.join(decl['several'][:6])}); fix: one "
                         "profile per model: submit one system's folder")
    name = str(decl.get("accelerator_model_name") or "").strip()
    if not name:
        return None
    from ..checks.inventory import declared_model
    from ..profiles import bundled_identities

    n = decl.get("accelerators_per_node")
    lines_of = decl.get("lines") or {}
    bundled = [b for b, (ident, aliases) in sorted(bundled_identities().items())
               if ident.get("model") and declared_model(name, ident, aliases)[0] is True]
    if len(bundled) == 1:  # the bundled profile's identity (its PCI IDs: a reading of the machine matches by them)
        where = decl["file"] + (f" line {lines_of['accelerators_per_node']}" if lines_of.get("accelerators_per_node")
                                else "")
        return "\n".join([
            f"# A profile for {name}, written by `sits profile init --from={source}`.",
            f"# The MLPerf systems JSON declares {name}: the bundled profile `{bundled[0]}` is for that model, and this",
            "# one extends it (its identity, PCI IDs and thresholds) with the count declared. Check it before "
            "certifying with it.",
            f"name: {json.dumps(re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')[:60] or 'accelerator')}",
            f"extends: {bundled[0]}",
            "identity:",
            f"  count: {n if isinstance(n, int) else 1}  # {where}: accelerators_per_node as declared"
            + ("" if isinstance(n, int) else " (not a count there: set it)"),
        ]) + "\n"
    vendors = sorted(model_tokens(name)[0])
    at = lambda key: f"{decl['file']}" + (f" line {lines_of[key]}" if lines_of.get(key) else "")  # noqa: E731
    q = lambda v: json.dumps(v, ensure_ascii=True)  # noqa: E731
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "accelerator"
    lines = [
        f"# A profile for {name}, written by `sits profile init --from={source}`.",
        "# The texts hold no reading of an accelerator: every identity and hardware value below is as DECLARED in the",
        "# MLPerf systems JSON (the file and line in its comment); every threshold is base's. Check each value against",
        "# the datasheet, and add the PCI ID (`lspci -nn`) before certifying with it.",
        f"name: {q(slug)}",
        "extends: base",
        f"description: {q(name + ' (declared in an MLPerf systems JSON; check against the datasheet)')}",
        "identity:",
        f"  vendor: {q(vendors[0] if len(vendors) == 1 else 'unknown')}  # {at('accelerator_model_name')}"
        + ("" if len(vendors) == 1 else ": the name names no one vendor; set it"),
        f"  model: {q(name)}  # {at('accelerator_model_name')}",
        "  kind: gpu",
        "  pci_ids: []  # declared, no PCI ID: the model is matched by vendor and name until one is added (a reading "
        "of the machine, nvidia-smi -q or lspci, gives its PCI ID: add it from `lspci -nn`)",
        f"  count: {n if isinstance(n, int) else 1}  # {at('accelerators_per_node')}: accelerators_per_node as declared"
        + ("" if isinstance(n, int) else " (not a count there: set it)"),
    ]
    mem = decl.get("memory")
    if mem:
        lines += ["hardware:", f"  memory_gb: {mem['gb']:g}  # {at(mem['key'])}: {mem['text']} as declared"]
    return "\n".join(lines) + "\n"
