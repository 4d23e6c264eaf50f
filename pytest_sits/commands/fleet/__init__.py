"""``sits fleet run|merge``: the suite on many nodes through Slurm, and the fleet report.

The three roles of a fleet run live in :mod:`.launch` (the Slurm launcher),
:mod:`.node` (the runner Slurm starts on each node) and :mod:`.merge` (the
fleet report); :mod:`.common` holds what they share.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..base import add, err

EXAMPLES = """\
  sits fleet run --nodelist='gpu[01-16]' --partition=gpu -- --sits-profile=h100 --sits-level=standard
  sits fleet run --nodes=64 --array --out=/shared/sits-fleet-0601 -- --sits-profile=h200
  sits fleet merge /shared/sits-fleet-0601                exit 0 every node passes, 10 a FAIL, 13 an ERROR, 11 undecided
  sits fleet merge /shared/sits-fleet-0601 --prometheus=/var/lib/node_exporter/textfile/sits_fleet.prom
"""


def add_parser(sub: Any) -> None:
    p = add(sub, "fleet", "run the suite on many nodes through Slurm, merge their reports", EXAMPLES)
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
    q.add_argument("--pending-limit", type=float, default=900, metavar="S",
                   help="--array: after S seconds, cancel the elements still pending (never started) and merge "
                        "what ran; they count as ERROR (default 900)")
    _merge_options(q)
    q.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: arguments for the suite on every node")
    q.set_defaults(func=run)
    q = fsub.add_parser("merge", help="merge OUT/<node>/ reports into fleet-report.json/.html and fleet-junit.xml")
    q.add_argument("dir")
    q.add_argument("--k", type=float, default=3.5, help="outlier rule: median ± k·1.4826·MAD (default 3.5)")
    _merge_options(q)
    q.set_defaults(func=run)


def _merge_options(q: Any) -> None:
    q.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="processes that read the node reports (default: one per CPU)")
    q.add_argument("--prometheus", metavar="FILE",
                   help="also write the fleet's metrics as a Prometheus textfile (node_exporter's textfile "
                        "collector; needs prometheus-client)")
    q.add_argument("--replay", choices=("full", "none"), default="full",
                   help="full (default): replay every node report from its evidence before it counts; a report "
                        "that does not replay is that node's ERROR; none: take the reports as written (a quick "
                        "look; the fleet report says so)")
    q.add_argument("--strict", action="store_true",
                   help="validate every node report against the whole report schema (slower; by default the "
                        "fields the merge reads are checked)")


def run(args: argparse.Namespace) -> int:
    """`sits fleet run` through Slurm, or `sits fleet merge DIR`; exit by the fleet's headline (common.fleet_exit), 4
    on a usage error."""
    from .common import FleetError
    from .launch import run_fleet
    from .merge import merge, print_summary

    try:
        if args.action == "run":
            return run_fleet(args)
        merged = merge(Path(args.dir), k=args.k, jobs=args.jobs,
                       prometheus=Path(args.prometheus) if args.prometheus else None, strict=args.strict,
                       replay=args.replay)
    except FleetError as exc:
        return err(str(exc))
    print_summary(merged, Path(args.dir))
    from .common import fleet_exit

    return fleet_exit(merged["summary"]["result"])
