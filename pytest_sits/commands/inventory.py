"""``sits inventory``: what a platform has, as YAML."""

from __future__ import annotations

import argparse
from typing import Any

from .base import add, err, yaml_text

EXAMPLES = """\
  sits inventory                         this machine: CPU, memory, NUMA, accelerators
  sits inventory --platform=sim:h100     the simulated H100 machine
  sits inventory --platform=snapshot:DIR --all-pci
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "inventory", "print what the platform has, as YAML", EXAMPLES)
    p.add_argument("--platform", default="live", help="live, snapshot:DIR, evidence:DIR or sim:PROFILE[+fault,...]")
    p.add_argument("--all-pci", action="store_true", help="list every PCI function")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..platforms import PlatformError, from_spec
    from ..profiles import ProfileError

    try:
        plat = from_spec(args.platform)
        inv = plat.inventory()
    except (PlatformError, ProfileError) as exc:
        return err(str(exc))
    if not args.all_pci:
        inv = dict(inv)
        inv["pci"] = f"{len(inv['pci'])} functions (use --all-pci to list them)"
    print(yaml_text(inv), end="")
    return 0
