"""The SITS2026 test environment around a measurement (document A §2.4): what was read while it ran.

:class:`EnvironmentMonitor` reads every environment sensor of the machine (each accelerator's die temperature,
each CPU package's) once a second from the first measured requirement to the end of the session, stamped with the
wall clock, so that any measurement's window (``measured_window`` in its evidence, else its test's call) can be
looked up afterwards, in any xdist worker.  :class:`LiveEnvironment` is the live machine's (NVML / amdsmi for the
dies, hwmon for the packages; what has no sensor is named as not measured with the reason); the simulated
platform has its own (``platforms/sim/environment.py``).  :func:`window_block` puts together the block a verdict
carries: the readings in the window, the DRAM hold's windows in it, the NUMA binding, and the rules (from the
profile's THERM-GPU-STEADY, THERM-CPU-STEADY and MEM-BW-HOLD thresholds).  The rule itself is pure
(:mod:`pytest_sits.checks.environment`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..checks.environment import MAX_SAMPLES

#: Seconds between two readings of every sensor.
PERIOD_S = 1.0


def remote_reason(endpoint: Optional[str]) -> Optional[str]:
    """Why this machine is not the environment of what is measured (an endpoint served elsewhere), or None."""
    if not endpoint:
        return None
    from .inference.deployment import is_local

    if is_local(endpoint):
        return None
    return "the endpoint's server runs on another machine; its environment is not read from here"


def rules_from(profile: Any) -> Dict[str, Any]:
    """The environment rules of the profile: the thermal bands and tolerances, the DRAM band and share."""
    g, c, d = (profile.check_thresholds(r) for r in ("THERM-GPU-STEADY", "THERM-CPU-STEADY", "MEM-BW-HOLD"))
    return {"gpu_die": {"band_c": [g["band_low_c"], g["band_high_c"]], "tolerance_c": g["tolerance_c"]},
            "cpu_package": {"band_c": [c["band_low_c"], c["band_high_c"]], "tolerance_c": c["tolerance_c"]},
            "dram": {"band": [d["band_low"], d["band_high"]], "min_in_band_share": d["min_in_band_share"]}}


class EnvironmentMonitor:
    """Reads ``sensors`` (``{name: (read, description)}``, ``read()`` -> °C or None) every ``period_s`` in a
    daemon thread until :meth:`stop`; keeps at most :data:`MAX_SAMPLES` x 4 readings per sensor."""

    def __init__(self, sensors: Dict[str, Tuple[Callable[[], Optional[float]], Dict[str, Any]]],
                 period_s: float = PERIOD_S, clock: Callable[[], float] = time.time):
        self.sensors, self.period_s, self.clock = sensors, period_s, clock
        self.readings: Dict[str, List[List[Any]]] = {name: [] for name in sensors}
        self.errors: Dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def start(self) -> EnvironmentMonitor:
        if self._thread is None and self.sensors:
            self.sample()
            self._thread = threading.Thread(target=self._run, name="sits-environment", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def sample(self) -> None:
        for name, (read, _) in self.sensors.items():
            t = self.clock()
            try:
                value = read()
            except Exception as exc:  # a broken sensor: the reading is missing, the error is kept
                value, self.errors[name] = None, f"{type(exc).__name__}: {exc}"
            with self._lock:
                rows = self.readings[name]
                rows.append([t, value])
                if len(rows) > 4 * MAX_SAMPLES:
                    del rows[:len(rows) - 4 * MAX_SAMPLES]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def window(self, t0: float, t1: float) -> Dict[str, Dict[str, Any]]:
        """Each sensor's readings from ``t0`` to ``t1`` (seconds from ``t0``), with the reading just before the
        window and one taken now when the window is shorter than a period (so a short measurement is not
        without a reading)."""
        if t1 - t0 < 2 * self.period_s:
            self.sample()
        out = {}
        for name, (_, desc) in self.sensors.items():
            with self._lock:
                rows = list(self.readings[name])
            inside = [r for r in rows if t0 <= r[0] <= t1 + self.period_s]
            before = [r for r in rows if r[0] < t0]
            if before and (not inside or inside[0][0] - t0 > self.period_s / 2):
                inside.insert(0, before[-1])
            out[name] = dict(desc, samples=[[round(t - t0, 3), v] for t, v in inside[-MAX_SAMPLES:]],
                             error=self.errors.get(name))
        return out


class LiveEnvironment:
    """The live machine's environment sensors, read by one monitor per process from its first use."""

    simulated = False

    def __init__(self, platform: Any):
        self.platform = platform
        self.not_measured: Dict[str, str] = {}
        #: The DRAM holds of this process's finished tests (:func:`hold_state`): a measurement read later (a
        #: shared sweep, devices measured at once) finds the hold's windows of its own time here.
        self.holds: List[Dict[str, Any]] = []
        self._monitor: Optional[EnvironmentMonitor] = None
        self._closers: List[Callable[[], None]] = []

    def _sensors(self) -> Dict[str, Tuple[Callable[[], Optional[float]], Dict[str, Any]]]:
        from ..probes.sensors import cpu_package_sensors, no_cpu_sensor_reason

        sensors: Dict[str, Tuple[Callable[[], Optional[float]], Dict[str, Any]]] = {}
        root = Path(self.platform.root)
        packages = cpu_package_sensors(root)
        if not packages:
            self.not_measured["cpu_package"] = f"CPU package temperature: {no_cpu_sensor_reason(root)}"
        for s in packages:
            sensors[f"cpu {s.label}"] = (_reader(s),
                                         {"kind": "cpu_package", "label": s.label, "source": s.source,
                                          "step_c": s.resolution_c})
        for acc in self.platform.inventory().get("accelerators", []):
            sensor, why = _die_sensor(acc)
            if sensor is None:
                self.not_measured[f"die {acc['bdf']}"] = f"{acc['bdf']} die temperature: {why}"
                continue
            self._closers.append(getattr(sensor, "close", lambda: None))
            sensors[f"die {acc['bdf']}"] = (_reader(sensor),
                                            {"kind": "gpu_die", "label": f"{acc['bdf']} die", "device": acc["bdf"],
                                             "source": sensor.source, "step_c": sensor.resolution_c})
        return sensors

    def keep(self, hold: Any) -> None:
        """Keep the windows of a hold that has ended (the last 64 holds)."""
        self.holds.append(hold_state(hold))
        del self.holds[:-64]

    def monitor(self) -> EnvironmentMonitor:
        if self._monitor is None:
            self._monitor = EnvironmentMonitor(self._sensors()).start()
        return self._monitor

    def trace(self, t0: float, t1: float, requirement: str, device: Optional[str]) -> Dict[str, Any]:
        """The readings of the window and what has no sensor."""
        return {"sensors": self.monitor().window(t0, t1), "not_measured": dict(self.not_measured)}

    def numa(self, node: Optional[int]) -> Dict[str, Any]:
        return numa_binding(self.platform.inventory(), node)

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
        for close in self._closers:
            try:
                close()
            except Exception:  # pragma: no cover - a library that will not shut down: nothing left to do
                pass


def _reader(sensor: Any) -> Callable[[], Optional[float]]:
    def read() -> Optional[float]:
        value = sensor.read().get("value_c")
        return float(value) if isinstance(value, (int, float)) else None
    return read


def _die_sensor(acc: Dict[str, Any]) -> Tuple[Optional[Any], str]:
    from ..probes.sensors import AmdsmiTemperature, NvmlTemperature

    vendor = str(acc.get("pci_id", "")).split(":")[0]
    mgmt = acc.get("management") or {}
    try:
        if vendor == "10de":
            if "index" not in mgmt:
                return None, "NVML gave no facts for this device (driver not loaded, or nvidia-ml-py missing)"
            return NvmlTemperature(mgmt["index"], acc["bdf"]), ""
        if vendor == "1002":
            return AmdsmiTemperature(acc["bdf"]), ""
    except Exception as exc:  # the library would not open the device
        return None, f"{type(exc).__name__}: {exc}"
    return None, f"the temperature of {acc.get('vendor')} devices is read through the vendor's own tools"


def _allowed(field: str) -> Optional[List[int]]:
    from ..probes.sysfs import parse_cpulist

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return parse_cpulist(line.split(":", 1)[1].strip())
    except OSError:
        return None
    return None


def numa_binding(inventory: Dict[str, Any], node: Optional[int]) -> Dict[str, Any]:
    """The measuring process's binding (CPUs and memory nodes it may use) against NUMA node ``node``: bound when
    the host has one node, or when every allowed CPU and memory node is that node's."""
    nodes = inventory.get("numa") or []
    cpus, mems = _allowed("Cpus_allowed_list"), _allowed("Mems_allowed_list")
    out: Dict[str, Any] = {"node": node, "nodes": len(nodes), "cpus_allowed": _short(cpus),
                           "mems_allowed": mems, "source": "/proc/self/status"}
    if len(nodes) <= 1:
        return dict(out, bound=True, why="the host has one NUMA node")
    if node is None:
        return dict(out, bound=None, why="the accelerator's NUMA node is not known")
    mine = next((n for n in nodes if n.get("node") == node), None)
    if mine is None or cpus is None:
        return dict(out, bound=None, why=f"node {node}'s CPUs or this process's affinity could not be read")
    if set(cpus) <= set(mine.get("cpus") or []) and (mems is None or set(mems) <= {node}):
        return dict(out, bound=True, why=f"every allowed CPU and memory node is node {node}'s")
    return dict(out, bound=False, why=(f"the process may run on CPUs {_short(cpus)} and memory nodes {mems}; fix: run "
                                       f"this device's measurements under numactl --cpunodebind={node} "
                                       f"--membind={node}"))


def _short(cpus: Optional[List[int]]) -> Optional[str]:
    """A CPU list as the kernel writes one (``0-3,8``)."""
    if cpus is None:
        return None
    import itertools

    runs = [[c for _, c in g] for _, g in itertools.groupby(enumerate(sorted(set(cpus))), lambda x: x[1] - x[0])]
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def hold_state(hold: Any) -> Dict[str, Any]:
    """What the recorder needs of a running DRAM hold: its windows stamped with the wall clock (a hold in its own
    process first catches up with the windows it streams)."""
    catch_up = getattr(hold, "caught_up", None)
    if callable(catch_up):
        catch_up()
    offset = time.time() - hold.clock()
    ev = hold.evidence()
    return {"windows": [[r["t"] + offset, bool(r.get("in_band"))] for r in list(hold.timeline)
                        if r.get("phase") == "hold"],
            "source": ev.get("source"), "band": ev.get("band"), "peak_gbps": ev.get("peak_gbps")}


def dram_in(hold: Any, t0: float, t1: float) -> Optional[Dict[str, Any]]:
    """The DRAM hold's windows inside ``[t0, t1]`` (``hold``: a :func:`hold_state`, ``{"not_measured": why}``, or
    a list of them: the holds of this process's tests, the one running now included)."""
    holds = [h for h in (hold if isinstance(hold, list) else [hold]) if h]
    if not holds:
        return None
    rows = [r for h in holds for r in h.get("windows") or [] if t0 <= r[0] <= t1 + 0.5]
    held = next((h for h in holds if h.get("windows")), None)
    if not rows:
        why = next((h["not_measured"] for h in holds if h.get("not_measured")), None)
        return {"not_measured": why} if why else None
    return {"windows": len(rows), "windows_in_band": sum(1 for r in rows if r[1]),
            "source": (held or {}).get("source"), "band": (held or {}).get("band"),
            "peak_gbps": (held or {}).get("peak_gbps")}


def _window(t0: float, t1: float) -> Dict[str, float]:
    return {"start": round(t0, 3), "end": round(t1, 3), "seconds": round(t1 - t0, 3)}


def window_block(env: Any, rules: Dict[str, Any], t0: float, t1: float, requirement: str, device: Optional[str],
                 node: Optional[int], hold: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The environment block of one measurement (what :func:`pytest_sits.checks.environment.apply_environment`
    takes): the window, the sensors' readings in it, the DRAM hold's windows, the NUMA binding, the rules."""
    trace = env.trace(t0, t1, requirement, device)
    dram = trace["dram"] if "dram" in trace else dram_in([hold] + list(getattr(env, "holds", [])), t0, t1)
    return {"window": _window(t0, t1), "device": device, "rules": rules, "sensors": trace["sensors"],
            "not_measured": trace.get("not_measured") or {}, "dram": dram,
            "numa": trace.get("numa") or env.numa(node), "simulated": bool(getattr(env, "simulated", False))}


def measurement_block(env: Any, rules: Dict[str, Any], requirement: str, subject: str, evidence: Dict[str, Any],
                      inventory: Dict[str, Any], state: Dict[str, Any], remote: Optional[str] = None
                      ) -> Dict[str, Any]:
    """The block of one verdict: its measurement's window (``measured_window`` in its evidence, else its test's
    call from ``state["started"]`` to now), the accelerator its subject names (its own die is judged; none: every
    die), that device's NUMA node; the DRAM hold's windows from the test's running hold (``state["hold_object"]``)
    or what ``state["hold"]`` says.  ``remote``: the server measured runs elsewhere (why): nothing here is read."""
    window = evidence.get("measured_window") if isinstance(evidence, dict) else None
    if (isinstance(window, (list, tuple)) and len(window) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in window)):
        t0, t1 = float(window[0]), float(window[1])
    else:
        t0, t1 = float(state["started"]), time.time()
    if remote:
        return {"window": _window(t0, t1), "device": None, "rules": rules, "sensors": {}, "dram": {"not_measured": remote},
                "not_measured": {"remote": f"the server's machine: {remote}"},
                "numa": {"bound": None, "why": remote}, "simulated": bool(getattr(env, "simulated", False))}
    device = device_of(subject, inventory)
    acc = next((a for a in inventory.get("accelerators") or [] if a["bdf"] == device), None)
    node = acc.get("numa_node") if acc else next((n.get("node") for n in inventory.get("numa") or []), None)
    running = state.get("hold_object")
    hold = hold_state(running) if running is not None else state.get("hold")
    return window_block(env, rules, t0, t1, requirement, device, node, hold)


def device_of(subject: str, inventory: Dict[str, Any]) -> Optional[str]:
    """The accelerator a verdict's subject names (``0000:11:00.0``, ``0000:11:00.0 tenant a``), or None."""
    for a in inventory.get("accelerators") or []:
        if subject == a["bdf"] or subject.startswith(a["bdf"] + " "):
            return str(a["bdf"])
    return None
