"""The `sits` command: profiles, inventory, snapshots, reports.

    sits profile validate FILE...   check profiles against the schema (exit 4 on error)
    sits profile list               bundled profiles
    sits profile show NAME|FILE     the resolved profile, as YAML
    sits profile schema             the profile JSON schema
    sits requirements               the SITS2026 catalogue
    sits inventory [--platform P]   what the platform has, as YAML
    sits capture DIR                store a snapshot of this machine's evidence
    sits audit-text --lspci-tv F --lspci-vv F [--under-load] --nvidia-smi-topo F --nvidia-smi-q F [--profile P]
                                    topology verdicts from submitted text
    sits report validate JSON       check a stored report against its schema
    sits report render JSON [--html OUT] [--markdown OUT]
    sits replay REPORT.json [--profile FILE]
                                    recompute every verdict from its evidence (exit 1: one differs)
    sits fleet run (--nodes N | --nodelist L) [--partition P] [--array] -- <pytest args>
    sits fleet merge DIR            fleet report of OUT/<node>/ reports (exit 1 unless all nodes pass)
    sits health [--drain]           quick run for Slurm's HealthCheckProgram (exit 0 healthy, 1 not)
    sits bundle create REPORT_DIR -o BUNDLE [--key KEY]
    sits verify BUNDLE --pubkey PUB signature, hashes, replayed verdicts (exit 1 naming what fails)
    sits keygen [PREFIX]            an Ed25519 key pair for bundles
    sits compare A.json B.json ... [--class low-latency|batch] [--html OUT] [--markdown OUT]
                                    decision matrix across platforms (A §4.1 tier weights)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, List, Optional

USAGE_ERROR = 4
#: `sits audit-text` exit status by the worst verdict: 1 does not conform, 2 undecided (INCONCLUSIVE).
AUDIT_EXIT = {"ERROR": 1, "FAIL": 1, "INCONCLUSIVE": 2}


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
    from .platforms import PlatformError, from_spec
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
    from .platforms import PlatformError
    from .platforms.snapshot import capture

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


def _load_report(path: str) -> Any:
    """A stored report, read as untrusted input; a usage-error message (str) when it cannot be one."""
    from .untrusted import JSON_LIMIT, UntrustedInputError, load_json

    try:
        data = load_json(path, JSON_LIMIT, what="report")
    except UntrustedInputError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: {exc.strerror}; fix: give the path of a sits-report.json"
    if not isinstance(data, dict) or data.get("schema") != "pytest-sits/report":
        return (f"{path}: not a pytest-sits report (no \"schema\": \"pytest-sits/report\"); fix: give the "
                "sits-report.json a run wrote")
    return data


def cmd_report(args: argparse.Namespace) -> int:
    from . import report as rep

    data = _load_report(args.json)
    if isinstance(data, str):
        return _err(data)
    errors = rep.validate(data)
    if errors:
        for e in errors[:20]:
            print(f"{args.json}: {e}", file=sys.stderr)
        if args.action == "render":
            return _err(f"{args.json}: does not match the report schema, so it is not rendered; fix: give the "
                        "sits-report.json a run wrote")
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


def _audit_pci_text(args: argparse.Namespace, prof, not_judged: list, check_pcie_direct, check_peer_mesh) -> list:
    """TOPO-PCIE-DIRECT, LINK-NVLINK-MESH and TOPO-PCIE-LINK verdicts of `lspci -tv`, `lspci -vv` and
    `nvidia-smi topo -m` texts (the rules: pytest_sits/probes/textimport.py)."""
    from .checks.topology import check_pcie_link
    from .probes import textimport as ti
    from .untrusted import read_file

    def text(path: str, parse, *a, **kw):
        try:
            return parse(read_file(path, ti.MAX_BYTES).decode("utf-8", "replace"), *a, **kw)
        except ti.TextEvidenceError as exc:
            raise ti.TextEvidenceError(f"{path}: {exc}") from None

    known = list(getattr(prof, "pci_ids", None) or [])
    verdicts = []
    funcs = text(args.lspci_vv, ti.parse_lspci_vv) if args.lspci_vv else None
    mesh = text(args.nvidia_smi_topo, ti.parse_nvidia_smi_topo) if args.nvidia_smi_topo else None
    direct = prof.check_thresholds("TOPO-PCIE-DIRECT")
    if args.lspci_tv:
        tree = text(args.lspci_tv, ti.read_lspci_tv, classes=ti.classes_by_bdf(funcs) if funcs else None,
                    known_ids=known)
        not_judged.extend(tree["unidentified"])
        for path in tree["accelerators"]:
            verdicts.append(check_pcie_direct({"path": path}, direct, path["device"]))
    elif mesh is not None:  # the matrix alone: PIX/PXB cells are the only evidence of switches
        for path in ti.topo_pcie_paths(mesh):
            verdicts.append(check_pcie_direct({"path": path}, direct, path["device"]))
    if mesh is not None:
        verdicts.append(check_peer_mesh({"mesh": mesh, "expected_devices": len(mesh["devices"])},
                                        prof.check_thresholds("LINK-NVLINK-MESH"), "accelerators"))
    if funcs is not None:
        links = ti.link_evidence_vv(funcs, under_load=args.under_load, known_ids=known)
        if not args.lspci_tv:
            not_judged.extend(links["unidentified"])
        for ev in links["links"]:
            verdicts.append(check_pcie_link(ev, prof.check_thresholds("TOPO-PCIE-LINK"), ev["device"]))
    return verdicts


def cmd_audit_text(args: argparse.Namespace) -> int:
    """Topology verdicts from text evidence a vendor submitted."""
    from . import profiles
    from .checks.topology import check_pcie_direct, check_peer_mesh
    from .probes.textimport import TextEvidenceError
    from .verdict import apply_waiver, worst

    if not args.lspci_tv and not args.lspci_vv and not args.nvidia_smi_topo and not args.nvidia_smi_q:
        return _err("give --lspci-tv FILE, --lspci-vv FILE, --nvidia-smi-topo FILE and/or --nvidia-smi-q FILE")
    if args.under_load and not args.lspci_vv:
        return _err("--under-load declares that a load ran while the `lspci -vv` text was captured: give "
                    "--lspci-vv FILE with it")
    try:
        prof = profiles.resolve(args.profile)
    except profiles.ProfileError as exc:
        return _err(str(exc))
    verdicts, not_judged = [], []
    try:
        verdicts.extend(_audit_pci_text(args, prof, not_judged, check_pcie_direct, check_peer_mesh))
        if args.nvidia_smi_q:
            from .conditions.health import audit_nvidia_smi_q

            verdicts.extend(audit_nvidia_smi_q(Path(args.nvidia_smi_q), prof))
    except OSError as exc:
        return _err(f"{exc.filename}: {exc.strerror}")
    except TextEvidenceError as exc:  # the message names the file and the line
        return _err(str(exc))
    except ValueError as exc:  # NvsmiTextError, UntrustedInputError: the message names the line or the limit
        return _err(f"{args.nvidia_smi_q}: {exc}")
    for n in not_judged:
        print(f"not judged: {n['device']} {n['name'] or ''} ({n['source']}): {n['why']}")
    if not verdicts:
        print("no accelerator found in the text evidence")
        return 1
    # Waivers and the worst-status rule come from the verdict layer, as in a pytest run.
    verdicts = [apply_waiver(v, prof.waiver(v.requirement)) for v in verdicts]
    for v in verdicts:
        print(f"{v.requirement:18} {v.subject:14} {v.status:12} {v.reason}")
    if args.json:
        Path(args.json).write_text(json.dumps([v.to_json() for v in verdicts], indent=2, default=str))
    return AUDIT_EXIT.get(worst(v.status for v in verdicts), 0)


def cmd_replay(args: argparse.Namespace) -> int:
    """Recompute every verdict of a stored report; exit 1 when one would now differ."""
    from .profiles import ProfileError
    from .replay import replay_report

    data = _load_report(args.json)
    if isinstance(data, str):
        return _err(data)
    try:
        out = replay_report(data, args.profile)
    except ProfileError as exc:
        return _err(f"bad profile: {exc}")
    for d in out["differs"]:
        print(f"DIFFERS  #{d['index']} {d['requirement']} [{d['subject']}] {d['field']}: stored {d['stored']!r} -> "
              f"now {d['now']!r}")
    for n in out["not_replayable"]:
        print(f"NOT REPLAYABLE  #{n['index']} {n['requirement']} [{n['subject']}]: {n['why']}")
    for d in out["summary"]:
        print(f"DIFFERS  {d['field']}: stored {d['stored']!r} -> now {d['now']!r}")
    changed = len({d["index"] for d in out["differs"]})
    print(f"replayed {out['replayed']} of {out['total']} verdicts: {out['replayed'] - changed} reproduced, "
          f"{changed} differ, {len(out['not_replayable'])} not replayable"
          + (f" ({len(out['unbacked'])} of them claim more than ERROR)" if out["unbacked"] else "")
          + (f"; the run's summary differs in {len(out['summary'])} field(s)" if out["summary"] else "")
          + (f" (thresholds and waivers of {args.profile})" if args.profile else ""))
    return 1 if changed or out["unbacked"] or out["summary"] else 0


# ---- fleet (Slurm), health, evidence bundles -------------------------------------------------------------

def cmd_fleet(args: argparse.Namespace) -> int:
    """`sits fleet run` through Slurm, or `sits fleet merge DIR`; exit 1 unless every node passes."""
    from . import fleet

    try:
        if args.action == "run":
            return fleet.run_fleet(args)
        merged = fleet.merge(Path(args.dir), k=args.k)
    except fleet.FleetError as exc:
        return _err(str(exc))
    fleet.print_summary(merged, Path(args.dir))
    return 0 if merged["summary"]["result"] == "PASS" else 1


def cmd_health(args: argparse.Namespace) -> int:
    """A quick-level run for Slurm's HealthCheckProgram or a prolog: exit 0 healthy, 1 not."""
    from . import fleet

    return fleet.health(args)


def cmd_bundle(args: argparse.Namespace) -> int:
    import os

    from . import bundle

    if os.path.lexists(args.output):
        return _err(f"{args.output}: exists; a bundle is never written over another file; fix: choose a new path "
                    "or remove the old one")
    try:
        manifest = bundle.create(Path(args.report_dir), Path(args.output), Path(args.key) if args.key else None,
                                 Path(args.snapshot) if args.snapshot else None, capture=args.capture)
    except bundle.BundleError as exc:
        return _err(str(exc))
    signed = (f"signed (Ed25519, key {manifest['signature']['public_key_sha256'][:16]}…)" if manifest["signature"]
              else "NOT signed (no --key): hashes only, nobody can tell who made it")
    print(f"{args.output}: {len(manifest['files'])} files, {signed}")
    if not any(f["path"] == bundle.SNAPSHOT for f in manifest["files"]):
        print("note: no snapshot of the machine's evidence in this bundle (give --snapshot DIR or --capture)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Check a bundle's signature, every hash, and replay every verdict; exit 1 naming what does not hold."""
    from . import bundle

    try:
        res = bundle.verify(Path(args.bundle), Path(args.pubkey), Path(args.extract) if args.extract else None)
    except bundle.BundleError as exc:
        return _err(str(exc))
    for note in res.notes:
        print(f"note: {note}")
    for problem in res.problems:
        print(f"FAILED: {problem}")
    if res.ok:
        print(f"{args.bundle}: verified: signature (key {res.signed_by[:16]}…), {res.files - 2} file hashes, "
              f"{res.replayed} of {res.verdicts} verdicts replayed from their evidence and reproduced")
        return 0
    print(f"{args.bundle}: NOT verified: {len(res.problems)} problem(s)")
    return 1


def cmd_keygen(args: argparse.Namespace) -> int:
    from . import bundle

    try:
        key, pub = bundle.keygen(args.prefix)
    except bundle.BundleError as exc:
        return _err(str(exc))
    print(f"private key: {key} (keep it secret; sign with `sits bundle create DIR -o B --key {key}`)")
    print(f"public key:  {pub} (give it to whoever verifies: `sits verify B --pubkey {pub}`)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """The decision matrix across platforms (A §4.1) from their stored reports."""
    from . import decision
    from .report import atomic_write

    if len(args.reports) < 2:
        return _err("`sits compare` needs two reports or more (one per platform), e.g. "
                    "`sits compare h100/sits-report.json a100/sits-report.json`")
    try:
        reports = [decision.load_report(path) for path in args.reports]
    except decision.ReportInputError as exc:
        return _err(str(exc))
    classes = [args.service_class] if args.service_class else list(decision.CLASSES)
    matrix = decision.compare(args.reports, reports, classes)
    try:
        if args.html:
            atomic_write(Path(args.html), decision.render_html(matrix))
        if args.markdown:
            atomic_write(Path(args.markdown), decision.render_markdown(matrix))
    except OSError as exc:
        return _err(f"{exc.filename}: cannot write ({exc.strerror}); choose a writable path")
    print(decision.render_text(matrix), end="")
    return 0


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
    p.add_argument("--lspci-vv", metavar="FILE", help="`lspci -vv` output: TOPO-PCIE-LINK from LnkCap/LnkSta (and "
                   "the class of each function)")
    p.add_argument("--under-load", action="store_true", help="declare that a load ran on the accelerators while "
                   "the `lspci -vv` text was captured (recorded as declared, not observed)")
    p.add_argument("--nvidia-smi-q", metavar="FILE", help="`nvidia-smi -q` output (current or older format): "
                   "link, ECC, row remapping, persistence, power limit, firmware verdicts")
    p.add_argument("--profile", default="base", help="profile whose thresholds apply (default: base)")
    p.add_argument("--json", metavar="OUT", help="also write the verdicts as JSON")
    p.set_defaults(func=cmd_audit_text)
    p = sub.add_parser("report", help="validate or re-render a stored JSON report")
    p.add_argument("action", choices=["validate", "render"])
    p.add_argument("json")
    p.add_argument("--html")
    p.add_argument("--markdown")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("replay", help="recompute every verdict of a report from its stored evidence")
    p.add_argument("json", metavar="REPORT.json")
    p.add_argument("--profile", metavar="FILE", help="judge with this profile's thresholds and waivers instead")
    p.set_defaults(func=cmd_replay)
    p = sub.add_parser("fleet", help="run the suite on many nodes through Slurm, merge their reports")
    fsub = p.add_subparsers(dest="action", required=True)
    q = fsub.add_parser("run", help="srun one task per node (or --array: an sbatch job array), then merge",
                        usage="sits fleet run (--nodes N | --nodelist L) [--partition P] [--array] [--out DIR] "
                              "-- <pytest args>")
    q.add_argument("--nodes", type=int, metavar="N", help="number of nodes (Slurm picks them)")
    q.add_argument("--nodelist", metavar="L", help="the nodes, in Slurm's syntax (n[1-3],gpu7)")
    q.add_argument("--partition", metavar="P")
    q.add_argument("--array", action="store_true", help="one sbatch job array element per node (--exclusive)")
    q.add_argument("--out", metavar="DIR", help="a new directory every node can write (default ./sits-fleet-<time>)")
    q.add_argument("--time", metavar="MINUTES", help="Slurm time limit of the job")
    q.add_argument("--job-name", default="sits-fleet")
    q.add_argument("--slurm-arg", action="append", metavar="ARG", help="pass ARG to srun/sbatch (repeatable)")
    q.add_argument("--python", default=sys.executable, help="the Python on the nodes (default: this one)")
    q.add_argument("--k", type=float, default=3.5, help="outlier rule: median ± k·1.4826·MAD (default 3.5)")
    q.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: arguments for the suite on every node")
    q.set_defaults(func=cmd_fleet)
    q = fsub.add_parser("merge", help="merge OUT/<node>/ reports into fleet-report.json/.html and fleet-junit.xml")
    q.add_argument("dir")
    q.add_argument("--k", type=float, default=3.5, help="outlier rule: median ± k·1.4826·MAD (default 3.5)")
    q.set_defaults(func=cmd_fleet)
    p = sub.add_parser("health", help="quick-level run for Slurm's HealthCheckProgram or a prolog (exit 0/1)")
    p.add_argument("--drain", action="store_true", help="when unhealthy, drain this node (scontrol) with the reason")
    p.add_argument("--node", help="the node to drain (default: $SLURMD_NODENAME, else the short host name)")
    p.add_argument("--platform", help="--sits-platform for the run (default: live)")
    p.add_argument("--profile", help="--sits-profile for the run (default: picked from the hardware)")
    p.add_argument("--report-dir", help="keep the report there (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before the run counts as failed")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: more pytest arguments")
    p.set_defaults(func=cmd_health)
    p = sub.add_parser("bundle", help="pack a report folder into a signed evidence bundle")
    bsub = p.add_subparsers(dest="action", required=True)
    q = bsub.add_parser("create", help="REPORT_DIR -o BUNDLE [--key KEY]")
    q.add_argument("report_dir")
    q.add_argument("-o", "--output", required=True, metavar="BUNDLE")
    q.add_argument("--key", help="Ed25519 private key (PEM, from `sits keygen`); without it the bundle is unsigned")
    q.add_argument("--snapshot", metavar="DIR", help="a snapshot of the machine (`sits capture DIR`) to include")
    q.add_argument("--capture", action="store_true", help="capture this machine's evidence now and include it")
    q.set_defaults(func=cmd_bundle)
    p = sub.add_parser("verify", help="check a bundle's signature and hashes, and replay every verdict")
    p.add_argument("bundle")
    p.add_argument("--pubkey", required=True, metavar="PUB", help="the signer's public key (PEM)")
    p.add_argument("--extract", metavar="DIR", help="also keep the verified files in DIR (new or empty)")
    p.set_defaults(func=cmd_verify)
    p = sub.add_parser("keygen", help="make an Ed25519 key pair for signing bundles")
    p.add_argument("prefix", nargs="?", default="sits-ed25519", help="writes PREFIX.key and PREFIX.pub")
    p.set_defaults(func=cmd_keygen)
    p = sub.add_parser("compare", help="decision matrix across platforms from their reports (A §4.1)")
    p.add_argument("reports", nargs="+", metavar="REPORT.json", help="one report per platform")
    p.add_argument("--class", dest="service_class", choices=["low-latency", "batch"],
                   help="service class whose A §4.1 tier weights rank the platforms (default: both)")
    p.add_argument("--html", metavar="OUT", help="also write the matrix as self-contained HTML")
    p.add_argument("--markdown", metavar="OUT", help="also write the matrix as Markdown")
    p.set_defaults(func=cmd_compare)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `sits ... | head`: the reader left; no traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
