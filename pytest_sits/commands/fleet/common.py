"""What the fleet's three processes share: the layout of a fleet folder, node names, Slurm lookups, errors.

A fleet run has three roles, one module each (as pytest-xdist splits its
controller, launcher and workers):

* :mod:`.launch`: ``sits fleet run`` starts the suite on every node through
  Slurm (``srun``, one task per node, or an ``sbatch`` job array);
* :mod:`.node`: what Slurm runs on each node; it writes the node's report into
  ``OUT/<node>/`` of a directory all nodes see;
* :mod:`.merge`: ``sits fleet merge OUT`` writes ``fleet-report.json``
  (schema ``resources/fleet.schema.json``), ``fleet-report.html`` and
  ``fleet-junit.xml``.

Every Slurm command is run with an argument list, never through a shell.
Reports read from the shared directory are untrusted: confined reads (no
links followed), size limits, schema validation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Any, Dict, List

from ... import exitcodes
from ...files import atomic_write

FLEET_SCHEMA_VERSION = "1.1"
RUN_FILE = "fleet-run.json"
NODE_FILE = "node.json"
NODE_EXIT_FILE = "node-exit.json"
NODE_LOG = "pytest.log"
REPORT_NAME = "sits-report.json"
JUNIT_NAME = "junit.xml"
FLEET_JSON, FLEET_HTML, FLEET_JUNIT = "fleet-report.json", "fleet-report.html", "fleet-junit.xml"
MAX_JUNIT_BYTES = 64 * 1024 * 1024
MAX_SMALL_JSON = 1024 * 1024
DEFAULT_K = 3.5
MIN_GROUP = 3
MAD_SCALE = 1.4826  # MAD × 1.4826 estimates σ for normally distributed values
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SLURM_INSTALL = ("apt-get install slurm-client (Debian/Ubuntu; the cluster itself needs slurmctld, slurmd and munge: "
                 "tools/slurm/install.sh and tools/slurm/local-cluster.sh start a local one)")

#: Node results: the node's own verdicts folded into one word.
NODE_PASS, NODE_FAIL, NODE_UNDECIDED, NODE_ERROR = "PASS", "FAIL", "UNDECIDED", "ERROR"
NODE_RESULTS = (NODE_PASS, NODE_FAIL, NODE_UNDECIDED, NODE_ERROR)


def fleet_exit(result: str) -> int:
    """The exit status of a fleet whose headline is ``result`` (:mod:`pytest_sits.exitcodes`): 0 every node
    passes, 10 a node FAILs, 13 a node could not be tested (ERROR), 11 a node undecided."""
    return {NODE_PASS: exitcodes.OK, NODE_FAIL: exitcodes.NON_CONFORMANT, NODE_ERROR: exitcodes.NOT_TESTED,
            NODE_UNDECIDED: exitcodes.UNDECIDED}[result]
PASSING = ("PASS", "WARN", "WAIVED")

OUTLIER_RULE = ("per profile and per (requirement, subject, unit), over the nodes whose verdict has a numeric "
                "measured value: a value x is an outlier when |x - median| > k x 1.4826 x MAD, MAD being the "
                "median of |x_i - median| (1.4826 x MAD estimates the standard deviation of normal data); when "
                "MAD = 0 every value that differs from the median is an outlier; groups of fewer than "
                f"{MIN_GROUP} nodes are not judged")
PASS_RATE_RULE = ("per requirement: nodes whose worst verdict for it is PASS, WARN or WAIVED, divided by the nodes "
                  "where it was not skipped; a node that produced no report counts as ERROR for every requirement "
                  "the other nodes ran")


#: Options of the suite that take a value: the commands built here pass them as ``--opt=value`` (pytest takes a
#: value after a space that names an existing path for a test path, and picks rootdir and ini from it).
VALUE_OPTIONS = ("--sits-profile", "--sits-platform", "--sits-level", "--sits-report-dir", "--sits-golden-record",
                 "--sits-golden", "--sits-endpoint", "--sits-redfish", "--sits-prometheus", "--sits-watchdog",
                 "--sits-health-load", "--sits-serve", "--sits-serve-port", "--sits-serve-env", "--sits-serve-model",
                 "--sits-serve-timeout", "--sits-serve-accelerators", "--junitxml", "--junit-xml")


def equals_form(args: List[str]) -> List[str]:
    """``--sits-profile /x/h100.yaml`` -> ``--sits-profile=/x/h100.yaml`` for the options that take a value."""
    out: List[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in VALUE_OPTIONS and i + 1 < len(args):
            out.append(f"{a}={args[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


class FleetError(Exception):
    """A usage or environment problem, with its fix in the message."""



# --------------------------------------------------------------------------------------------- helpers

# --------------------------------------------------------------------------------------------- helpers

#: The most names a node list may expand to, in total (Slurm's largest clusters hold tens of thousands of
#: nodes; ``n[0-2999][0-2999]`` would be 9 million).
MAX_HOSTLIST = 100_000


def expand_hostlist(spec: str) -> List[str]:
    """Slurm's hostlist syntax, expanded: ``n[1-3,7],gpu[01-02]x`` -> n1 n2 n3 n7 gpu01x gpu02x.  At most
    :data:`MAX_HOSTLIST` names in total, counted before any is made."""
    names: List[str] = []
    for part in _split_top(spec.strip()):
        if not part:
            continue
        pieces = []
        for text, ranges in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", part):
            if text == "" and ranges == "":
                continue
            pieces.append([text] if not ranges else [text + v for v in _expand_ranges(ranges, spec)])
        count = 1
        for choices in pieces:
            count *= len(choices)
        if len(names) + count > MAX_HOSTLIST:
            raise FleetError(f"node list {spec[:80]!r}: expands to more than {MAX_HOSTLIST:,} names; fix: give the "
                             "node list Slurm gave the job (a cluster has at most tens of thousands of nodes)")
        expanded = [""]
        for choices in pieces:
            expanded = [e + c for e in expanded for c in choices]
        names.extend(expanded)
    seen: Dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    return list(seen)


def _split_top(spec: str) -> List[str]:
    out, depth, cur = [], 0, ""
    for ch in spec:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise FleetError(f"node list {spec!r}: unbalanced ']'; fix: write it as Slurm does, e.g. n[1-3],gpu7")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise FleetError(f"node list {spec!r}: unbalanced '['; fix: write it as Slurm does, e.g. n[1-3],gpu7")
    out.append(cur)
    return out


def _expand_ranges(ranges: str, spec: str) -> List[str]:
    values: List[str] = []
    for item in ranges.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item.strip())
        if not m:
            raise FleetError(f"node list {spec!r}: bad range {item!r}; fix: ranges are numbers, e.g. n[1-3,5]")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) > 100000:
            raise FleetError(f"node list {spec!r}: bad range {item!r}; fix: write low-high with low <= high")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return values


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def node_name() -> str:
    """This node's name as Slurm knows it (SLURMD_NODENAME in jobs), else the short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def which(cmd: str) -> str:
    path = shutil.which(cmd)
    if not path:
        raise FleetError(f"`{cmd}` not found on PATH; install the Slurm client: {SLURM_INSTALL}")
    return path

