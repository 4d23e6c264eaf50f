"""Thermal calibration: steer a load until a temperature is steady in its band (THERM-*-STEADY).

* :class:`ThermalController` - drives a load's duty cycle so that the
  temperature moves into the band, then holds the load still so it can settle.
* :func:`calibrate` - the loop: read, detect (:mod:`pytest_sits.checks.thermal`),
  control, until steady or timeout.
* live rigs: a sensor (hwmon/thermal zone for a CPU package, NVML for a GPU)
  with the load that heats it (numpy threads on the package's CPUs, a torch
  matmul on the GPU), in wall time.  The simulated plant is in
  :mod:`pytest_sits.platforms.sim.thermal`.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..checks.thermal import MAX_NA_RUN, SteadyDetector
from ..probes.sensors import AmdsmiTemperature, NvmlTemperature, cpu_package_sensors, no_cpu_sensor_reason
from ..probes.sysfs import parse_cpulist, read_text
from .loads import CpuLoad


class ThermalController:
    """PI on the load's duty towards the band centre; inside a dead band the duty is held still."""

    def __init__(self, band: Tuple[float, float], kp: float = 0.02, ki: float = 0.0015, duty0: float = 0.5,
                 deadband_c: Optional[float] = None):
        self.target = (band[0] + band[1]) / 2
        self.deadband = deadband_c if deadband_c is not None else (band[1] - band[0]) / 4
        self.kp, self.ki, self.duty = kp, ki, duty0
        self._prev: Optional[float] = None

    def update(self, value: float, dt: float) -> float:
        err = self.target - value
        if abs(err) <= self.deadband:
            self._prev = err
            return self.duty
        d = 0.0 if self._prev is None else err - self._prev
        self._prev = err
        self.duty = min(1.0, max(0.0, self.duty + self.kp * d + self.ki * err * dt))
        return self.duty


def calibrate(read: Callable[[], Dict[str, Any]], set_duty: Callable[[float], None], clock: Callable[[], float],
              sleep: Callable[[float], None], th: Dict[str, Any], step_c: float, sample_s: float = 1.0,
              progress: Optional[Callable[[Dict[str, Any]], None]] = None, progress_every_s: float = 10.0,
              duty0: float = 0.5, stop: Optional[Callable[[], bool]] = None) -> Dict[str, Any]:
    """Drive the load until the temperature is steady in band, or the timeout, or ``stop()`` says the run is
    ending (``stopped``: "interrupted"); return the trace."""
    band = (th["band_low_c"], th["band_high_c"])
    det = SteadyDetector(th["window_s"], th["tolerance_c"], band, step_c)
    ctl = ThermalController(band, duty0=duty0)
    set_duty(ctl.duty)
    t_start = clock()
    samples: List[Dict[str, Any]] = []
    na_run = 0
    stopped = "timeout"
    last_progress = time.monotonic()  # on the wall clock, from the start: a simulated plant settles in no time
    last_t = t_start
    state: Dict[str, Any] = {}
    while clock() - t_start <= th["timeout_s"]:
        r = read()
        now = r["t"]
        state = det.add(now, r["value_c"])
        if r["value_c"] is None:
            na_run += 1
        else:
            na_run = 0
            set_duty(ctl.update(r["value_c"], now - last_t))
        last_t = now
        samples.append({"t": round(now - t_start, 3), "value_c": r["value_c"], "error": r.get("error"),
                        "duty": round(ctl.duty, 4)})
        if progress and time.monotonic() - last_progress >= progress_every_s:
            last_progress = time.monotonic()
            progress({"elapsed_s": now - t_start, "value_c": r["value_c"], "state": state, "band": band})
        if state.get("in_band") and (state.get("steady") or state.get("stable_constant")):
            stopped = "steady" if state["steady"] else "constant reading (sensor too coarse)"
            break
        if na_run >= MAX_NA_RUN:
            stopped = f"sensor failed {na_run} times in a row"
            break
        if stop is not None and stop():
            stopped = "interrupted"
            break
        sleep(sample_s)
    return {"samples": samples, "stopped": stopped, "sample_s": sample_s, "step_c": step_c,
            "duration_s": round(clock() - t_start, 3), "final_duty": ctl.duty}


class ThermalUnavailable(Exception):
    """No calibration can run; the message says why.

    ``present``: the device is there (a CPU package, an accelerator the inventory found) but its sensor or
    its load cannot be had, so the requirement cannot be decided (INCONCLUSIVE, never a SKIP that would let
    a run conform without it); False when the platform itself measures nothing (a snapshot)."""

    def __init__(self, reason: str, present: bool = True):
        super().__init__(reason)
        self.present = present


class LiveRig:
    def __init__(self, sensor: Any, subject: str, make_load: Any):
        self.sensor = sensor
        self.sensor_info = sensor.describe()
        self.subject = subject
        self._make_load = make_load
        self.read = sensor.read
        self.clock = time.time
        self.sleep = time.sleep

    @contextmanager
    def load(self) -> Iterator[Any]:
        with self._make_load() as load:
            yield load


def _package_cpus(root: Path, package: str) -> List[int]:
    cpus = []
    for d in (root / "sys/devices/system/cpu").glob("cpu[0-9]*"):
        pkg = read_text(root, str(d.relative_to(root) / "topology/physical_package_id"))
        if pkg == package:
            cpus.append(int(d.name[3:]))
    return sorted(cpus) or parse_cpulist(read_text(root, "sys/devices/system/cpu/online"))


def live_cpu_rigs(root: Path) -> List[LiveRig]:
    sensors = cpu_package_sensors(root)
    if not sensors:
        raise ThermalUnavailable(no_cpu_sensor_reason(root))
    rigs = []
    for i, s in enumerate(sensors):
        package = s.label.split()[-1] if s.label.startswith("Package id") else str(i)
        cpus = _package_cpus(root, package)
        rigs.append(LiveRig(s, f"cpu package {package}", lambda cpus=cpus: CpuLoad(cpus, duty=0.5)))
    return rigs


def live_gpu_rig(acc: Dict[str, Any]) -> LiveRig:
    from .loads import LoadUnavailable, TorchMatmulLoad, torch_device_for_bdf

    mgmt = acc.get("management") or {}
    vendor = acc["pci_id"].split(":")[0]
    make_sensor: Callable[[], Any]
    if vendor == "10de":
        if "index" not in mgmt:
            raise ThermalUnavailable(f"{acc['bdf']}: the GPU temperature cannot be read: NVML gave no facts for "
                                     "this device (driver not loaded, or nvidia-ml-py missing)")
        make_sensor = lambda: NvmlTemperature(mgmt["index"], acc["bdf"])  # noqa: E731
    elif vendor == "1002":
        make_sensor = lambda: AmdsmiTemperature(acc["bdf"])  # noqa: E731
    else:
        raise ThermalUnavailable(f"{acc['bdf']}: the temperature of {acc['vendor']} devices is read through the "
                                 "vendor's own tools, which this version does not read")
    try:
        device = torch_device_for_bdf(acc["bdf"])
    except LoadUnavailable as exc:
        raise ThermalUnavailable(f"{acc['bdf']}: no load to steer the temperature: {exc}") from None
    try:
        sensor = make_sensor()
    except Exception as exc:  # the library would not open the device: the sensor cannot be read
        raise ThermalUnavailable(f"{acc['bdf']}: the GPU temperature cannot be read: {type(exc).__name__}: "
                                 f"{exc}") from None
    return LiveRig(sensor, acc["bdf"], lambda: TorchMatmulLoad(device, duty=0.5, size=8192))


def thermal_rigs(platform: Any, kind: str, acc: Optional[Dict[str, Any]] = None) -> Any:
    """The platform's rigs for ``kind`` ("cpu" or "gpu"), or the evidence of why there are none:
    ``{"unreadable": reason}`` when the device is there but cannot be calibrated (INCONCLUSIVE),
    ``{"unavailable": reason}`` when the platform measures nothing (SKIP, counted as not measured)."""
    try:
        return platform.thermal_rigs(kind, acc)
    except ThermalUnavailable as exc:
        return {"unreadable": str(exc)} if exc.present else {"unavailable": str(exc)}


@contextmanager
def steady(rig: Any, requirement: str, th: Dict[str, Any], say: Callable[[str], None],
           settled_duty: Dict[str, float], stop: Optional[Callable[[], bool]] = None) -> Iterator[Dict[str, Any]]:
    """Calibrate the rig's load until its temperature is steady in the band (or the timeout) and keep the load
    on inside the block; yield the evidence (trace, sensor, lock, load).  One calibration per device at a
    time, across processes; a later calibration of a device starts from the duty it settled at."""
    from .locks import exclusive

    def progress(p: Dict[str, Any]) -> None:
        st = p["state"]
        where = "in band" if st.get("in_band") else f"band {p['band'][0]:g}-{p['band'][1]:g}"
        window = (f"window {min(p['elapsed_s'], th['window_s']):.0f}/{th['window_s']:g} s, drift "
                  f"{st['drift']:+.2f} °C") if st.get("samples") else "reading failed"
        say(f"[{requirement} {rig.subject}] {p['elapsed_s']:.0f} s: {p['value_c']} °C ({where}), {window}")

    with exclusive(f"device-{rig.subject}", purpose=f"{requirement} calibration",
                   simulated=bool(getattr(rig, "simulated", False))) as lock:
        with rig.load() as load:
            trace = calibrate(rig.read, load.set_duty, rig.clock, rig.sleep, th,
                              float(rig.sensor_info["resolution_c"]), progress=progress,
                              duty0=settled_duty.get(rig.subject, 0.5), stop=stop)
            if trace["stopped"] == "steady":
                settled_duty[rig.subject] = trace["final_duty"]
            trace["lock"] = lock
            trace["load"] = load.evidence()
            yield {"trace": trace, "sensor": rig.sensor_info}


def steady_all(rigs: List[Any], requirement: str, th: Dict[str, Any], say: Callable[[str], None],
               settled_duty: Dict[str, float],
               also: Optional[List[Tuple[Any, str, Dict[str, Any]]]] = None) -> Dict[str, Any]:
    """Calibrate every rig at once, each device with its own controller and load in a thread of its own, so that
    the chassis (neighbours, fans, supplies) is loaded as the node serves; ``also``: more devices calibrated with
    them for another requirement, ``(rig, requirement, thresholds)`` (the CPU packages beside the GPU dies).  A
    device that is steady first keeps its load on at the duty it settled at until every calibration has ended,
    so the others settle beside it loaded.  Return ``{subject: evidence}`` (the evidence of :func:`steady`, its
    trace naming every device calibrated with it under ``at_once``) or ``{subject: exception}`` where that
    device's calibration could not run.  Ctrl-C or SIGTERM stops every calibration and its load before it
    propagates."""
    import threading

    stop = threading.Event()
    jobs = [(r, requirement, th) for r in rigs] + list(also or [])
    subjects = [r.subject for r, _, _ in jobs]
    out: Dict[str, Any] = {}
    ended = threading.Condition()
    count = [0]

    def end() -> None:
        with ended:
            count[0] += 1
            ended.notify_all()

    def one(rig: Any, req: str, thresholds: Dict[str, Any]) -> None:
        try:
            with steady(rig, req, thresholds, say, settled_duty, stop=stop.is_set) as ev:
                ev["trace"]["at_once"] = subjects
                out[rig.subject] = ev
                end()
                with ended:  # the load stays on, still, until every device has ended its calibration
                    while count[0] < len(jobs) and not stop.is_set():
                        ended.wait(0.2)
        except Exception as exc:  # this device's lock or load: its own test reports it
            if rig.subject not in out:
                out[rig.subject] = exc
                end()

    threads = [threading.Thread(target=one, args=job, name=f"sits-thermal-{job[0].subject}", daemon=True)
               for job in jobs]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        stop.set()
        for t in threads:
            if t.ident is not None:
                t.join(30.0)
        raise
    return out
