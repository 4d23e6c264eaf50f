"""Per-device measurements run on every device at once (a requirement declared ``Cost(together=True)``).

A measurement that is per device and independent (a device's memory copies, its GEMM, its PCIe link under load,
its health window, its inference runs) runs on every accelerator of the machine at the same time, each in a
thread of its own: the run costs one device's time, not N, and the chassis (neighbours, fans, supplies) is
loaded as the node serves.  Each device keeps its own lock and its own evidence, stamped with the wall-clock
window it was measured in (``measured_window``), so the verdicts judged later read the test environment of that
window.  A device whose measurement raised gets its exception back, and only that device's test reports it.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Dict, List, Optional


def run_at_once(jobs: List[Callable[[], Any]], names: Optional[List[str]] = None) -> List[Any]:
    """Every job's result, or the exception it raised: the first in this thread, the others in threads of their
    own, all at the same time.  Ctrl-C or SIGTERM propagates once every thread has ended its current step (a
    measurement has no stop of its own: the threads are joined for at most a minute, then left as daemons)."""
    out: List[Any] = [None] * len(jobs)

    def one(i: int) -> None:
        try:
            out[i] = jobs[i]()
        except Exception as exc:  # this job's failure: its caller decides who reports it
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,), daemon=True,
                                name=f"sits-at-once-{(names or [])[i] if i < len(names or []) else i}")
               for i in range(1, len(jobs))]
    try:
        for t in threads:
            t.start()
        if jobs:
            one(0)
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        deadline = time.monotonic() + 60.0
        for t in threads:
            if t.ident is not None:
                t.join(max(0.0, deadline - time.monotonic()))
        raise
    return out


def measure_all(devices: List[Dict[str, Any]], measure: Callable[[Dict[str, Any]], Any],
                after: Optional[Callable[[Dict[str, Any], float, float, Any], Any]] = None) -> Dict[str, Any]:
    """``{bdf: measure(acc)}`` for every device, all at once (:func:`run_at_once`); ``{bdf: exception}`` where it
    raised.  ``after(acc, t0, t1, evidence)``: called in the device's thread once its measurement ended (the test
    environment of its window)."""

    def one(acc: Dict[str, Any]) -> Any:
        t0 = time.time()
        ev = measure(acc)
        t1 = time.time()
        if isinstance(ev, dict) and not ({"absent", "unavailable"} & set(ev)):
            ev.setdefault("measured_window", [round(t0, 3), round(t1, 3)])
            if after is not None:
                try:
                    after(acc, t0, t1, ev)
                except Exception as exc:  # pragma: no cover - a sensor that broke between readings
                    ev["environment_error"] = f"{type(exc).__name__}: {exc}"
        return ev

    jobs: List[Callable[[], Any]] = [functools.partial(one, acc) for acc in devices]
    results = run_at_once(jobs, [acc["bdf"] for acc in devices])
    return {acc["bdf"]: got for acc, got in zip(devices, results)}
