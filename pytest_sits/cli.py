"""The `sits` command: profiles, inventory, snapshots, reports.

    sits profile validate FILE...   check profiles against the schema (exit 4 on error)
    sits profile list               bundled profiles
    sits profile show NAME|FILE     the resolved profile, as YAML
    sits profile schema             the profile JSON schema
    sits requirements               the SITS2026 catalogue
    sits inventory [--platform P]   what the platform has, as YAML
    sits capture DIR                store a snapshot of this machine's evidence
    sits audit-text --lspci-tv F --nvidia-smi-topo F [--profile P]
                                    topology verdicts from submitted text
    sits report validate JSON       check a stored report against its schema
    sits report render JSON [--html OUT] [--markdown OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

USAGE_ERROR = 4


def _yaml(data) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=110)


def _err(msg: str) -> int:
    print(f"sits: error: {msg}", file=sys.stderr)
    return USAGE_ERROR


def cmd_profile(args: argparse.Namespace) -> int:
    from . import profiles

    if args.action == "list":
        for name in profiles.bundled_names():
            p = profiles.resolve(name)
            print(f"{name:16} {p.data.get('description', '')}")
        return 0
    if args.action == "schema":
        print(json.dumps(profiles.profile_schema(), indent=2, sort_keys=True))
        return 0
    if not args.files:
        return _err(f"`sits profile {args.action}` needs a profile name or file")
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
            print(_yaml(p.data), end="")
    return status


def cmd_requirements(args: argparse.Namespace) -> int:
    from .catalogue import CATALOGUE

    for r in CATALOGUE.values():
        state = "implemented" if r.implemented else "not implemented"
        ext = " [suite extension]" if r.extension else ""
        print(f"{r.id:18} {r.level:8} {state:16} {r.title} ({r.source}){ext}")
    return 0


def cmd_inventory(args: argparse.Namespace) -> int:
    from .platform import PlatformError, from_spec
    from .profiles import ProfileError

    try:
        plat = from_spec(args.platform)
        inv = plat.inventory()
    except (PlatformError, ProfileError) as exc:
        return _err(str(exc))
    if not args.all_pci:
        inv = dict(inv)
        inv["pci"] = f"{len(inv['pci'])} functions (use --all-pci to list them)"
    print(_yaml(inv), end="")
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    from .platform import PlatformError, capture

    try:
        manifest = capture(Path(args.dir), Path(args.root))
    except PlatformError as exc:
        return _err(str(exc))
    print(f"captured {manifest['files']} files into {args.dir} "
          f"({len(manifest['unreadable'])} unreadable); run the suite on it with "
          f"--sits-platform snapshot:{args.dir}")
    if manifest.get("euid") not in (0, None):
        print("note: not root, so PCI config space beyond 64 bytes was not readable; topology checks on this "
              "snapshot will infer port types from class codes", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from . import report as rep

    try:
        data = json.loads(Path(args.json).read_text(encoding="utf-8"))
    except OSError as exc:
        return _err(f"{args.json}: {exc.strerror}")
    except ValueError as exc:
        return _err(f"{args.json}: not valid JSON ({exc}); a report written by pytest-sits is always complete "
                    "JSON (atomic write), so this file was altered or truncated elsewhere")
    errors = rep.validate(data)
    if errors:
        for e in errors[:20]:
            print(f"{args.json}: {e}", file=sys.stderr)
        return 1
    if args.action == "validate":
        print(f"{args.json}: valid report (schema {data['schema_version']}), result {data['summary']['result']}")
        return 0
    if args.html:
        rep.atomic_write(Path(args.html), rep.render_html(data))
    if args.markdown:
        rep.atomic_write(Path(args.markdown), rep.render_markdown(data))
    if not args.html and not args.markdown:
        print("\n".join(rep.terminal_lines(data)))
    return 0


def cmd_audit_text(args: argparse.Namespace) -> int:
    """Topology verdicts from text evidence a vendor submitted."""
    from . import profiles
    from .checks.topology import check_pcie_direct, check_peer_mesh
    from .probes.textimport import TextEvidenceError, parse_lspci_tv, parse_nvidia_smi_topo

    if not args.lspci_tv and not args.nvidia_smi_topo:
        return _err("give --lspci-tv FILE and/or --nvidia-smi-topo FILE")
    try:
        prof = profiles.resolve(args.profile)
    except profiles.ProfileError as exc:
        return _err(str(exc))
    verdicts = []
    try:
        if args.lspci_tv:
            for path in parse_lspci_tv(Path(args.lspci_tv).read_text(errors="replace")):
                verdicts.append(check_pcie_direct(path, prof.thresholds("TOPO-PCIE-DIRECT")))
        if args.nvidia_smi_topo:
            mesh = parse_nvidia_smi_topo(Path(args.nvidia_smi_topo).read_text(errors="replace"))
            verdicts.append(check_peer_mesh(mesh, prof.thresholds("LINK-NVLINK-MESH"), len(mesh["devices"]),
                                            prof.hardware.get("peer_link", {}).get("type")))
    except OSError as exc:
        return _err(f"{exc.filename}: {exc.strerror}")
    except TextEvidenceError as exc:
        return _err(f"{args.lspci_tv or args.nvidia_smi_topo}: {exc}")
    if not verdicts:
        print("no accelerator found in the text evidence")
        return 1
    for v in verdicts:
        print(f"{v.requirement:18} {v.subject:14} {v.status:12} {v.reason}")
    if args.json:
        Path(args.json).write_text(json.dumps([v.to_json() for v in verdicts], indent=2, default=str))
    return 1 if any(v.status in ("FAIL", "ERROR") for v in verdicts) else 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="sits", description="pytest-sits: SITS2026 conformance tools")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("profile", help="validate, list, show profiles")
    p.add_argument("action", choices=["validate", "list", "show", "schema"])
    p.add_argument("files", nargs="*")
    p.set_defaults(func=cmd_profile)
    p = sub.add_parser("requirements", help="list the SITS2026 requirement catalogue")
    p.set_defaults(func=cmd_requirements)
    p = sub.add_parser("inventory", help="print what the platform has, as YAML")
    p.add_argument("--platform", default="live", help="live, snapshot:DIR or sim:PROFILE[+fault,...]")
    p.add_argument("--all-pci", action="store_true", help="list every PCI function")
    p.set_defaults(func=cmd_inventory)
    p = sub.add_parser("capture", help="store this machine's evidence as a snapshot")
    p.add_argument("dir")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_capture)
    p = sub.add_parser("audit-text", help="topology verdicts from submitted `lspci -tv` / `nvidia-smi topo -m` text")
    p.add_argument("--lspci-tv", metavar="FILE")
    p.add_argument("--nvidia-smi-topo", metavar="FILE")
    p.add_argument("--profile", default="base", help="profile whose thresholds apply (default: base)")
    p.add_argument("--json", metavar="OUT", help="also write the verdicts as JSON")
    p.set_defaults(func=cmd_audit_text)
    p = sub.add_parser("report", help="validate or re-render a stored JSON report")
    p.add_argument("action", choices=["validate", "render"])
    p.add_argument("json")
    p.add_argument("--html")
    p.add_argument("--markdown")
    p.set_defaults(func=cmd_report)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
