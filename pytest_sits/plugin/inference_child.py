"""One accelerator's LoadGen measurement in a process of its own: ``python -m pytest_sits.plugin.inference_child
SPEC.json``.

MLPerf LoadGen runs one test per process, so the sweeps, SLA runs and fragmentation runs of a node's accelerators
run at once as one process per device (``Inference._at_once``, conditions/inference/session.py).  The spec (JSON,
written by the run) holds the run's hand-over (the one an xdist worker gets: profile, platform, inventory,
options), the device's PCI address, the measurement (``sweep``, ``sla`` or ``frag``), the log folder, the run's id
and PLP-LATENCY's trial plan.  The child measures and leaves the evidence where the run's tests read it back (the
shared evidence file of ``Inference._once``), then exits 0; anything else is its exit status and its log.  It
dies with its parent (``PR_SET_PDEATHSIG``) and stops on SIGTERM like a run does.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any, List, Optional

KEYS = ("sweep", "sla", "frag")


def _stop(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


def main(argv: Optional[List[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m pytest_sits.plugin.inference_child SPEC.json", file=sys.stderr)
        return 4
    signal.signal(signal.SIGTERM, _stop)
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    if spec.get("what") not in KEYS:
        print(f"unknown measurement {spec.get('what')!r}; one of {', '.join(KEYS)}", file=sys.stderr)
        return 4
    from .session import SitsRun
    from ..conditions.trials import TrialPlan
    from ..conditions.inference import inference_for

    run = SitsRun.from_workerinput(spec["run"])
    acc = next((a for a in run.platform.inventory()["accelerators"] if a["bdf"] == spec["device"]), None)
    if acc is None:
        print(f"no accelerator {spec['device']} in the run's inventory", file=sys.stderr)
        return 4
    inf = inference_for(run.platform, run.profile, acc, None, run.inference_options(), Path(spec["logdir"]), {},
                        run_id=spec["run_id"])
    inf.progress = lambda line: print(line, flush=True)
    if spec.get("latency_plan"):
        inf.latency_plan = TrialPlan(**spec["latency_plan"])
    try:
        ev = getattr(inf, spec["what"])()
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc}", flush=True)
        return 130
    print(f"{spec['what']} of {spec['device']} measured: "
          f"{'error: ' + str(ev.get('error')) if isinstance(ev, dict) and ev.get('error') else 'evidence written'}",
          flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a module
    sys.exit(main())
