"""Acquire the evidence of DEP-ECC, DEP-ROWREMAP, DEP-THROTTLE, DEP-PERSIST, DEP-POWERCAP, DEP-PCIE-ERRORS
and DEP-XID.

Static facts (ECC, remapped rows, persistence, power limits) come
from the device's management facts in the inventory (live NVML/amdsmi, a
snapshot's captured facts, the simulated ones, or ``nvidia-smi -q`` text).
The rest needs a *health window*: one loaded period per device in which the
clock-event reasons are sampled while the suite's load runs, AER and replay
counters are read before and after, and XID events are watched.  The window
runs once per device per session (a lock per device keeps xdist workers from
loading one device twice) and serves DEP-THROTTLE, DEP-PCIE-ERRORS and DEP-XID.
"""

from __future__ import annotations

import re

import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Dict, Iterator, List, Optional, cast

from ..catalogue import unsupported_for
from ..probes import health as hp
from ..probes.nvml import NvmlDevice, NvmlEventError
from ..probes.nvml import importable as nvml_importable
from .inventory import AMD, NVIDIA, management_facts, not_in_texts, relevant_errors, submitted
from .loads import LoadUnavailable

# --------------------------------------------------------------------------
# Static facts


ECC_FIELDS = ["ecc_mode_current", "ecc_mode_pending", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
              "ecc_aggregate_corrected", "ecc_aggregate_uncorrected"]


def _gap(f: Dict[str, Any]) -> bool:
    return "absent" in f or "unavailable" in f


ECC_COUNTS = ("volatile_uncorrected", "aggregate_uncorrected", "volatile_corrected", "aggregate_corrected")


def acquire_ecc(inventory: Dict[str, Any], acc: Dict[str, Any],
                window: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """ECC mode and counts.  With the device's health window, the counts are those read after its load
    (before and after kept in ``during_load``), so errors the load provoked count."""
    f = management_facts(inventory, acc)
    if _gap(f):
        return f
    gap = not_in_texts(inventory, f, ECC_FIELDS)
    if gap:
        return gap
    m = f["facts"]
    counts = {k: m.get(f"ecc_{k}") for k in ECC_COUNTS}
    ev = {"device": acc["bdf"], "source": f["source"], "ecc_mode_current": m.get("ecc_mode_current"),
          "ecc_mode_pending": m.get("ecc_mode_pending"), "counts": counts,
          "errors": relevant_errors(f["errors"], ECC_FIELDS)}
    if m.get("ecc_mode_text") is not None:  # another vendor's tool: the words it showed
        ev["ecc_mode_text"] = m["ecc_mode_text"]
    w = window or {}
    after = w.get("ecc_after")
    if isinstance(after, dict) and any(after.get(k) is not None for k in ECC_COUNTS):
        ev["counts"] = {k: after.get(k) if after.get(k) is not None else counts[k] for k in ECC_COUNTS}
        ev["during_load"] = {"before": w.get("ecc_before"), "after": after,
                             "load": (w.get("load") or {}).get("kind"), "reader": w.get("reader")}
    return ev


def acquire_rowremap(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    f = management_facts(inventory, acc)
    if _gap(f):
        return f
    m = f["facts"]
    pages = {"sbe": m.get("retired_pages_sbe"), "dbe": m.get("retired_pages_dbe"),
             "total": m.get("retired_pages_total"), "pending": m.get("retired_pages_pending")}
    fields = ["remapped_rows", "retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending", "bad_pages"]
    gap = not_in_texts(inventory, f, fields + ["retired_pages_total"])
    if gap:
        return gap
    return {"device": acc["bdf"], "source": f["source"], "remapped_rows": m.get("remapped_rows"),
            "retired_pages": pages if any(v is not None for v in pages.values()) else None,
            "errors": relevant_errors(f["errors"], fields)}


def acquire_persistence(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    f = management_facts(inventory, acc)
    if "absent" in f:
        return f
    if acc.get("vendor") == "AMD" or f.get("library", "nvml") != "nvml":
        return {"absent": f"{acc['bdf']}: persistence mode is an NVIDIA driver setting; {acc.get('vendor')} "
                          "devices have none"}
    if "unavailable" in f:
        return f
    gap = not_in_texts(inventory, f, ["persistence_mode"])
    if gap:
        return gap
    return {"device": acc["bdf"], "source": f["source"], "persistence_mode": f["facts"].get("persistence_mode"),
            "errors": relevant_errors(f["errors"], ["persistence_mode"])}


def acquire_powercap(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    f = management_facts(inventory, acc)
    if _gap(f):
        return f
    m = f["facts"]
    if f["library"] != "nvml" and "power_limit_enforced_mw" not in m:  # the live amdsmi probe reads no cap
        return {"absent": f"{acc['bdf']}: the power cap of {acc.get('vendor')} devices is not read by this version"}
    gap = not_in_texts(inventory, f, ["power_limit_enforced_mw"])
    if gap:
        return gap
    return {"device": acc["bdf"], "source": f["source"], "enforced_mw": m.get("power_limit_enforced_mw"),
            "requested_mw": m.get("power_limit_mw"), "default_mw": m.get("power_limit_default_mw"),
            "constraints_mw": m.get("power_limit_constraints_mw"),
            "errors": relevant_errors(f["errors"], ["power_limit_enforced_mw", "power_limit_default_mw",
                                              "power_limit_constraints_mw"])}


# --------------------------------------------------------------------------
# The health window


class XidWatch:
    """XID events seen while a window ran: ``events`` [{xid, t}], or ``source`` None with the reason."""

    def __init__(self, source: Optional[str], reason: Optional[str] = None):
        self.source, self.reason = source, reason
        self.events: List[Dict[str, Any]] = []
        self.started = time.monotonic()
        self.window_s: Optional[float] = None

    def evidence(self) -> Dict[str, Any]:
        return {"source": self.source, "reason": self.reason, "events": list(self.events) if self.source else None,
                "window_s": self.window_s}


class HealthReader:
    """What a health window reads from one device.  This base serves snapshots: the captured facts (one
    reading, no load), the captured AER files and kernel log, and no event watch."""

    kind = "captured facts"

    def __init__(self, platform: Any, acc: Dict[str, Any]):
        self.platform, self.acc = platform, acc

    def __enter__(self) -> HealthReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def fields(self) -> Dict[str, Any]:
        """The sampled fields now: ``clock_event_reasons``, ``pcie_replay_counter`` (None when unread)."""
        m = self.acc.get("management") or {}
        return {"clock_event_reasons": m.get("clock_event_reasons"),
                "pcie_replay_counter": m.get("pcie_replay_counter"), "error": None if m else "no management facts"}

    def aer(self) -> Dict[str, Any]:
        return hp.read_aer(self.platform.root, self.acc["bdf"])

    def ecc(self) -> Dict[str, Any]:
        """The ECC error counts now (captured facts here: one reading)."""
        m = self.acc.get("management") or {}
        return {k: m.get(f"ecc_{k}") for k in ECC_COUNTS}

    def nvlink_errors(self) -> Optional[Dict[str, Any]]:
        """The NVLink error counters now (captured facts here: one reading); None where nothing reads them."""
        return (self.acc.get("management") or {}).get("nvlink_errors")

    def load(self, inner: Any = None) -> Any:
        """The window's load: ``inner`` when given (the inference load), else the suite's accelerator load."""
        return inner if inner is not None else self.platform.accelerator_load(self.acc)

    def sleep(self, seconds: float) -> None:
        """Wait between samples (a simulated reader's time passes at once)."""
        time.sleep(seconds)

    def wait(self, seconds: float) -> None:
        """Wait between samples while a load that runs in a thread is still at work (real time passes for
        it, also on a simulated reader, which waits less)."""
        time.sleep(seconds)

    @contextmanager
    def xid_watch(self) -> Iterator[XidWatch]:
        yield XidWatch(None, f"{self.platform.kind} platform: no device to watch for events")

    def xid_history(self) -> Dict[str, Any]:
        return hp.xid_history(self.platform.root)


class LiveNvmlReader(HealthReader):
    """This machine through NVML: fields read at each sample, XID events registered for the window."""

    kind = "NVML"

    def __enter__(self) -> LiveNvmlReader:
        self.device = NvmlDevice(self.acc["bdf"]).__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.device.__exit__(*exc)

    def fields(self) -> Dict[str, Any]:
        return self.device.fields()

    def ecc(self) -> Dict[str, Any]:
        return self.device.ecc()

    def nvlink_errors(self) -> Optional[Dict[str, Any]]:
        return self.device.nvlink_errors()

    @contextmanager
    def xid_watch(self) -> Iterator[XidWatch]:
        try:
            events = self.device.xid_events()
        except Exception as exc:
            yield XidWatch(None, f"NVML XID events cannot be registered: {exc}")
            return
        watch = XidWatch("NVML XID events (nvmlDeviceRegisterEvents)")
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                try:
                    xid = events.wait(200)
                except NvmlEventError as exc:
                    watch.reason = f"event wait failed: {exc}"
                    return
                if xid is None:
                    continue
                watch.events.append({"xid": xid, "t": round(time.monotonic() - watch.started, 3)})

        t = threading.Thread(target=poll, name="sits-xid-watch", daemon=True)
        t.start()
        try:
            yield watch
        finally:
            stop.set()
            t.join(timeout=5)
            watch.window_s = round(time.monotonic() - watch.started, 3)
            events.free()


class LiveAmdReader(HealthReader):
    """This machine's AMD device through amdsmi: the throttle status (as NVML's reason names) and the replay
    counter read at each sample, the ECC counts when asked; no XID (an NVIDIA driver event)."""

    kind = "amdsmi"

    def __enter__(self) -> LiveAmdReader:
        from ..probes.amd import AmdDevice

        self.device = AmdDevice(self.acc["bdf"]).__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.device.__exit__(*exc)

    def fields(self) -> Dict[str, Any]:
        return self.device.fields()

    def ecc(self) -> Dict[str, Any]:
        return self.device.ecc()

    def nvlink_errors(self) -> Optional[Dict[str, Any]]:
        return None


def reader_for(platform: Any, acc: Dict[str, Any]) -> HealthReader:
    """The reader of a live or snapshot platform (the sim platform brings its own).  On a live machine a device
    is sampled through its library; the captured facts (one reading from before the load) never stand in for
    samples under load there: a live device no library reads has no sample."""
    from ..probes.amd import importable as amd_importable

    pci = str(acc.get("pci_id", ""))
    if platform.kind == "live" and pci.startswith(NVIDIA) and acc.get("management") and nvml_importable():
        return LiveNvmlReader(platform, acc)
    if platform.kind == "live" and pci.startswith(AMD) and acc.get("management") and amd_importable():
        return LiveAmdReader(platform, acc)
    return HealthReader(platform, acc)


def _wait_running(load: Any, timeout_s: float) -> Optional[str]:
    """Wait until the load has done work (its first iteration); the reason when it did not."""
    if not hasattr(load, "iterations"):
        return None
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if getattr(load, "errors", None):
            return "; ".join(load.errors)
        if load.iterations > 0:
            return None
        time.sleep(0.05)
    return f"the load did no work within {timeout_s:g} s"


#: At most this many samples of a window whose load runs until it is done (the inference load).
MAX_WINDOW_SAMPLES = 4000


class InferenceLoad:
    """The inference load of PLP-* as a health window's load: the device's inference sweep (LoadGen Offline,
    SingleStream and Server at each fraction of the maximum) runs in a thread while the window samples.  The
    sweep is the same run PLP-PPL, PLP-POWER, PLP-LATENCY and PLP-SAMPLE judge (run once per session: one that
    ran before the window without it is run again under it)."""

    def __init__(self, inference: Any):
        self.inference = inference
        self.iterations = 0
        self.errors: List[str] = []
        self.result: Optional[Dict[str, Any]] = None
        self.thread: Optional[threading.Thread] = None
        self.started = self.ended = None  # type: Optional[float]

    def __enter__(self) -> InferenceLoad:
        key = f"{self.inference.subject}/sweep"
        self.inference.cache.pop(key, None)  # run it now, under the window

        def work() -> None:
            try:
                self.result = self.inference.sweep()
            except Exception as exc:  # the window records it; the PLP tests report their own ERROR
                self.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                self.ended = time.monotonic()
        self.started = time.monotonic()
        self.thread = threading.Thread(target=work, name="sits-health-inference-load", daemon=True)
        self.thread.start()
        self.iterations = 1
        return self

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def __exit__(self, *exc: Any) -> None:
        if self.thread is not None:
            self.thread.join()

    def evidence(self) -> Dict[str, Any]:
        res = self.result or {}
        reason = "; ".join(self.errors) or res.get("unavailable") or res.get("absent")
        return {"kind": "inference", "requirements": ["PLP-PPL", "PLP-POWER", "PLP-LATENCY", "PLP-SAMPLE"],
                "what": "the inference sweep of PLP-* on this device", "completed": bool(res) and not reason,
                "duration_s": round((self.ended or time.monotonic()) - (self.started or time.monotonic()), 3),
                "simulated": bool(getattr(self.inference.rig, "simulated", False)), "reason": reason}


def run_window(reader: HealthReader, th: Dict[str, Any], inner_load: Any = None) -> Dict[str, Any]:
    """One health window on one device: AER, replay and ECC counts before, clock-event reasons sampled under
    load, XID events watched, AER, replay and ECC counts after, kernel-log XID history.  ``inner_load``: the
    load to run instead of the suite's accelerator load (:class:`InferenceLoad`); a load that says when it is
    done (``running()``) is sampled until it is, with at least the profile's number of samples."""
    n = int(th["samples"])
    interval = float(th["interval_s"])
    warmup = float(th["warmup_s"])
    t0 = time.monotonic()
    with reader:
        aer_before = reader.aer()
        ecc_before = reader.ecc()
        nvlink_before = reader.nvlink_errors()
        f0 = reader.fields()
        samples: List[Dict[str, Any]] = []
        errors: List[Dict[str, Any]] = []
        with reader.xid_watch() as watch:
            load_ev: Dict[str, Any]
            try:
                load = reader.load(inner_load) if inner_load is not None else reader.load()
            except LoadUnavailable as exc:
                load, load_ev = None, {"kind": None, "reason": str(exc)}
            with load if load is not None else nullcontext():
                problem = _wait_running(load, 60.0) if load is not None else None
                running = getattr(inner_load, "running", None)
                if load is not None and problem is None and warmup > 0 and running is None:
                    reader.sleep(warmup)
                k = 0
                while True:
                    under = load is not None and problem is None and (running is None or running())
                    f = reader.fields()
                    if f.get("error"):
                        errors.append({"sample": k, "error": f["error"]})
                    samples.append({"t": round(time.monotonic() - t0, 3), "reasons": f.get("clock_event_reasons"),
                                    "under_load": under})
                    k += 1
                    more = k < n if running is None else (k < n or running()) and k < MAX_WINDOW_SAMPLES
                    if load is None or problem is not None or not more:
                        break
                    if running is not None and running():
                        reader.wait(interval)
                    else:
                        reader.sleep(interval)
            if load is not None:
                load_ev = load.evidence()
                if problem:
                    load_ev = dict(load_ev, reason=problem)
        f1 = reader.fields()
        aer_after = reader.aer()
        ecc_after = reader.ecc()
        nvlink_after = reader.nvlink_errors()
        history = reader.xid_history()
    bdf = reader.acc["bdf"]
    prefix = bdf.rsplit(".", 1)[0]
    if history.get("readable"):
        history = dict(history, xids=[x for x in history["xids"] if x["bdf_prefix"] == prefix],
                       all_devices=len(history["xids"]))
    return {"device": bdf, "reader": reader.kind, "window_s": round(time.monotonic() - t0, 3),
            "samples": samples, "sample_errors": errors, "load": load_ev,
            "aer_before": aer_before, "aer_after": aer_after, "ecc_before": ecc_before, "ecc_after": ecc_after,
            "nvlink_before": nvlink_before, "nvlink_after": nvlink_after,
            "replay_before": f0.get("pcie_replay_counter"), "replay_after": f1.get("pcie_replay_counter"),
            "replay_error": f1.get("error") if f1.get("pcie_replay_counter") is None else None,
            "xid_watch": watch.evidence(), "xid_history": history}


class HealthWindows:
    """One health window per device per session, run on first request (``windows(acc)``), under a lock per
    device so that no two processes load one device at once.  With ``inference`` (a function of the
    accelerator giving its PLP-* inference runs) the window's load is the inference load, which takes the
    device's lock itself while it runs."""

    def __init__(self, platform: Any, thresholds: Dict[str, Any],
                 reader_factory: Callable[[Any, Dict[str, Any]], HealthReader] = reader_for,
                 inference: Optional[Callable[[Dict[str, Any]], Any]] = None,
                 others: Optional[Callable[[], List[Dict[str, Any]]]] = None):
        """``others``: the machine's other accelerators, whose windows run at once with the first one asked for
        (each device's load and readings in a thread of its own; not under the inference load, whose LoadGen
        runs one test per process)."""
        self.platform, self.th, self.make, self.inference = platform, thresholds, reader_factory, inference
        self.others = others
        self.cache: Dict[str, Dict[str, Any]] = {}

    def __call__(self, acc: Dict[str, Any]) -> Dict[str, Any]:
        bdf = acc["bdf"]
        if bdf not in self.cache:
            todo = [acc]
            if self.others is not None and self.inference is None:
                todo += [a for a in self.others() if a["bdf"] not in self.cache and a["bdf"] != bdf]
            if len(todo) == 1:
                self.cache[bdf] = self._window(acc)
            else:
                from .atonce import measure_all

                self.cache.update(measure_all(todo, self._window))
        return self.cache[bdf]

    def _window(self, acc: Dict[str, Any]) -> Dict[str, Any]:
        from .locks import exclusive

        bdf = acc["bdf"]
        try:
            reader = self.make(self.platform, acc)
            if getattr(reader, "submitted", False):
                # Submitted evidence brings its window (what the texts show); nothing runs.
                return cast(Dict[str, Any], cast(Any, reader).window())
            if self.inference is not None:
                return run_window(reader, self.th, InferenceLoad(self.inference(acc)))
            with exclusive(f"device-{bdf}", "health window",
                           simulated=bool(getattr(self.platform, "simulated", False))):
                return run_window(reader, self.th)
        except Exception as exc:  # a broken reader is an ERROR of the checks, with the cause
            return {"device": bdf, "broken": f"{type(exc).__name__}: {exc}"}


def _broken(window: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    return {"error": f"the health window failed: {window['broken']}"} if window.get("broken") else None


def throttle_evidence(window: Dict[str, Any], acc: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    if window.get("submitted"):
        return window["throttle"]
    why = unsupported_for("DEP-THROTTLE", (acc or {}).get("vendor"))
    if why and not any(s.get("reasons") is not None for s in window.get("samples") or []):
        return {"absent": f"{window.get('device')}: {why}"}
    return _broken(window) or {"device": window["device"], "samples": window["samples"], "load": window["load"],
                               "errors": [{"field": "clock_event_reasons", "error": e["error"]}
                                          for e in window["sample_errors"]], "reader": window["reader"]}


def _aer_totals(aer: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    return aer.get("totals") if aer.get("available") else None


def pcie_errors_evidence(window: Dict[str, Any]) -> Dict[str, Any]:
    if window.get("submitted"):
        return window["pcie_errors"]
    broken = _broken(window)
    if broken:
        return broken
    before, after = window["aer_before"], window["aer_after"]
    replay_reason = None
    if window["replay_after"] is None:
        replay_reason = window.get("replay_error") or "the replay counter is not reported"
    return {"device": window["device"], "aer_before": _aer_totals(before), "aer_after": _aer_totals(after),
            "aer_reason": None if after.get("available") else after.get("reason"), "aer_detail_after": after,
            "replay_before": window["replay_before"], "replay_after": window["replay_after"],
            "replay_reason": replay_reason, "window_s": window["window_s"], "load": window["load"]}


def nvlink_errors_evidence(window: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """DEP-NVLINK-ERRORS: each active link's error counters before and after the window's load."""
    if window.get("submitted"):
        return window["nvlink_errors"]
    broken = _broken(window)
    if broken:
        return broken
    if acc.get("vendor") == "AMD" or str(acc.get("pci_id") or "").startswith(AMD):
        return {"unavailable": f"{acc['bdf']}: XGMI error counters are not read by this version (amdsmi gives an "
                               "error status since its last reset, not counters)"}
    before, after = window.get("nvlink_before"), window.get("nvlink_after")
    if after is None:
        return {"unavailable": f"{acc['bdf']}: the {window['reader']} reader gives no NVLink error counters"}
    if not after.get("links"):
        return {"absent": f"{acc['bdf']}: no active NVLink: no link error counter to watch"}
    if window["reader"] == HealthReader.kind:  # a snapshot's captured facts: one reading, no time between
        return {"device": window["device"], "reading": after, "source": after.get("source"), "reader": window["reader"]}
    return {"device": window["device"], "before": before, "after": after, "reader": window["reader"],
            "window_s": window["window_s"], "load": window["load"]}


def xid_evidence(window: Dict[str, Any]) -> Dict[str, Any]:
    if window.get("submitted"):
        return window["xid"]
    return _broken(window) or {"device": window["device"], "watch": window["xid_watch"],
                               "history": window["xid_history"], "load": window["load"]}


# --------------------------------------------------------------------------
# Submitted evidence: the window is what the texts show


def _is_pci(bdf: str) -> bool:
    import re

    return re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", str(bdf)) is not None


def submitted_throttle(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """DEP-THROTTLE evidence of a submitted text: its one clock-event reading, under load when the text's
    utilisation says so (or the submitter declared it).  An idle reading in which no reason but GPU-idle is
    active shows nothing about clocks under load: not measured.  Any other active reason goes to the check,
    which never passes an idle reading."""
    f = management_facts(inventory, acc)
    if _gap(f):
        return f
    m = f["facts"]
    if f["library"] != "nvml":
        return {"unavailable": f"{acc['bdf']}: the clock-event reasons of {acc.get('vendor')} devices are not read "
                               "from submitted texts by this version"}
    mask = m.get("clock_event_reasons")
    if mask is None:
        gap = not_in_texts(inventory, f, ["clock_event_reasons"])
        if gap:
            return gap
    load = dict(m.get("load") or {})
    sub = submitted(inventory) or {}
    if sub.get("under_load_declared") and not load.get("under_load"):
        load.update(under_load=True, kind="declared", declared=True,
                    reason="the submitter declared that a load ran while the texts were captured; not observed")
    names = hp.decode_reasons(mask) if mask is not None else None
    source = m.get("source") or "the submitted text"
    if mask is not None and not load.get("under_load") and not (int(mask) & ~hp.CLOCK_EVENT_BITS["gpu_idle"]):
        return {"unavailable": f"{source} holds one idle reading ({load.get('reason')}) in which "
                               f"{'only GPU-idle is' if names else 'no reason is'} active: clock events under "
                               "load are not in it (submit `nvidia-smi -q -d PERFORMANCE` captured while the GPUs "
                               "run a load)"}
    load_ev = ({"kind": load.get("kind") or "submitted reading", "utilization_gpu_percent":
                load.get("utilization_gpu_percent"), "declared": bool(load.get("declared"))}
               if load.get("under_load") else {"kind": None, "reason": f"one submitted reading ({load.get('reason')})"})
    return {"device": acc["bdf"], "reader": "submitted text", "source": source,
            "samples": [{"t": 0.0, "reasons": mask, "under_load": bool(load.get("under_load"))}],
            "load": load_ev, "reasons_not_shown": m.get("clock_reasons_not_shown") or [],
            "section": m.get("clock_reasons_section"), "section_line": m.get("clock_reasons_line"),
            "errors": relevant_errors(f["errors"], ["clock_event_reasons"])}


def submitted_pcie_errors(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """DEP-PCIE-ERRORS evidence of submitted texts: the AER lines of a kernel log that name the device (the
    errors of the period the log covers), and the replay counter as one reading since the GPU's reset (no
    counters before and after a run exist in texts)."""
    sub = submitted(inventory) or {}
    log = sub.get("kernel_log")
    replay = (acc.get("management") or {}).get("pcie_replay_counter")
    shown = f"; the replay counter reads {replay} since the GPU's last reset (one reading)" if replay is not None \
        else ""
    if log is None:
        return {"unavailable": "no kernel log (dmesg / journalctl -k) among the submitted files, and texts hold no "
                               f"error counters before and after a run{shown}"}
    if not _is_pci(acc["bdf"]):
        return {"unavailable": f"{acc['bdf']}: the kernel log names devices by PCI address, and no submitted text "
                               f"gives this one's{shown}"}
    counts = hp.aer_counts(log["aer"], acc["bdf"])
    lines = [e["line"] for e in log["aer"] if e["device"] == acc["bdf"]][:8]
    if not lines and log.get("aer_firmware_first"):
        return {"unavailable": f"the platform keeps AER from the kernel (firmware-first: "
                               f"{log['aer_firmware_first'][0]}): PCIe errors go to the firmware or BMC, so a log "
                               f"without AER lines shows none{shown}; submit the BMC's event log or run on the machine"}
    return {"device": acc["bdf"], "aer_log": {"files": log["files"], "records": log["records"], "counts": counts,
                                              "lines": lines, "all_devices": len({e["device"] for e in log["aer"]})},
            "replay_reading": replay}


def submitted_xid(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """DEP-XID evidence of submitted texts: the NVRM Xid lines of the kernel log that name the device are the
    events of the period the log covers."""
    sub = submitted(inventory) or {}
    log = sub.get("kernel_log")
    if acc.get("vendor") not in (None, "NVIDIA") and not str(acc.get("pci_id") or "").startswith(NVIDIA):
        return {"absent": f"{acc['bdf']}: XID events are NVIDIA driver events; {acc.get('vendor')} devices have none"}
    if log is None:
        return {"unavailable": "no kernel log (dmesg / journalctl -k) among the submitted files: XID events are "
                               "not in the evidence"}
    if not _is_pci(acc["bdf"]):
        return {"unavailable": f"{acc['bdf']}: Xid lines name devices by PCI address, and no submitted text gives "
                               "this one's"}
    prefix = acc["bdf"].rsplit(".", 1)[0]
    mine = [{"xid": x["xid"], "line": x["line"], "file": x.get("file")} for x in log["xids"]
            if x["bdf_prefix"] == prefix]
    if not mine and "nvidia_driver" in log and not log["nvidia_driver"]:
        return {"unavailable": f"the NVIDIA driver did not run within the submitted kernel log ({', '.join(log['files'])}: "
                               "no NVRM or nvidia line): it could log no Xid in the period the log covers"}
    spans = log.get("spans") or []
    period = (f"the submitted kernel log ({', '.join(log['files'])}, {log['records']} lines"
              + (f", {spans[0]['from_s']:.0f}-{spans[-1]['to_s']:.0f} s after boot" if spans else "") + ")")
    return {"device": acc["bdf"],
            "watch": {"source": f"submitted kernel log ({', '.join(log['files'])})", "reason": None, "events": mine,
                      "window_s": None, "period": f"in {period}"},
            "history": {"readable": False, "source": None,
                        "reason": "a submitted log is judged as the period it covers (the watch above)"},
            "load": None, "other_devices": sorted({x["bdf_prefix"] for x in log["xids"]} - {prefix})}


def submitted_nvlink_errors(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """DEP-NVLINK-ERRORS evidence of submitted texts: one reading of the link error counters (``nvidia-smi
    nvlink -e``), counts since they were last reset."""
    if acc.get("vendor") not in (None, "NVIDIA") and not str(acc.get("pci_id") or "").startswith(NVIDIA):
        return {"absent": f"{acc['bdf']}: NVLink is NVIDIA's; {acc.get('vendor')} devices' links are not read from "
                          "submitted texts by this version"}
    # The reader puts its reading on the accelerator (a GPU may have no `nvidia-smi -q` facts to hold it).
    reading = acc.get("nvlink_errors") or (acc.get("management") or {}).get("nvlink_errors")
    if not reading:
        return {"unavailable": f"{acc['bdf']}: no `nvidia-smi nvlink -e` text among the submitted files gives its "
                               "NVLink error counters"}
    if not reading.get("links"):
        return {"absent": f"{acc['bdf']}: {reading.get('source')} shows no active NVLink"}
    return {"device": acc["bdf"], "reading": reading, "source": reading.get("source"), "reader": "submitted text"}


def submitted_window(inventory: Dict[str, Any], acc: Dict[str, Any]) -> Dict[str, Any]:
    """The health window of submitted evidence: DEP-THROTTLE, DEP-PCIE-ERRORS, DEP-XID and DEP-NVLINK-ERRORS
    evidence of what the texts show (nothing runs)."""
    return {"device": acc["bdf"], "submitted": True, "throttle": submitted_throttle(inventory, acc),
            "pcie_errors": submitted_pcie_errors(inventory, acc), "xid": submitted_xid(inventory, acc),
            "nvlink_errors": submitted_nvlink_errors(inventory, acc)}


#: The DCGM diagnostics (``dcgmi diag``) each requirement reads, and the Error/Warning messages that speak of it.
DCGMI_TESTS = {
    "DEP-PERSIST": (("Persistence Mode",), None),
    "DEP-ROWREMAP": (("Page Retirement/Row Remap",), re.compile(r"remap|retire", re.I)),
    "DEP-ECC": (("GPU Memory", "Memtest"), re.compile(r"uncorrectable|\bECC\b|memory error", re.I)),
}


def submitted_dcgmi(inventory: Dict[str, Any], acc: Dict[str, Any], req: str) -> Optional[Dict[str, Any]]:
    """The results of a submitted ``dcgmi diag`` for ``acc`` and ``req`` (its tests' results for the GPU, the
    Error and Warning messages naming it), where no ``nvidia-smi -q`` text gives the device's own facts; None
    where there is no such text or nothing in it for ``req``."""
    runs = (submitted(inventory) or {}).get("dcgmi") or []
    if not runs or acc.get("management"):
        return None
    names, rx = DCGMI_TESTS[req]
    for d in runs:
        ids = [int(i) for i, k in d["index_to_key"].items() if k == acc["bdf"]]
        if not ids:
            continue
        gpu = ids[0]
        tests = [{"name": t["name"], "line": t["line"], "category": t.get("category"),
                  "status": [r["status"] for r in t["results"] if r["gpus"] is None or gpu in r["gpus"]]}
                 for t in d["tests"] if t["name"] in names]
        tests = [t for t in tests if t["status"]]
        msgs = [dict(m, kind=kind) for kind in ("errors", "warnings") for m in d[kind]
                if rx is not None and rx.search(m["text"]) and m.get("gpu") in (gpu, None)]
        if not tests and not msgs:
            continue
        return {"source": "dcgmi diag", "file": d["file"], "version": d.get("version"), "gpu": gpu,
                "device": acc["bdf"], "tests": tests, "messages": msgs, "match_rule": d.get("match_rule"),
                "cut": bool(d.get("cuts"))}
    return None


def dcgmi_verdict(inventory: Dict[str, Any], acc: Dict[str, Any], check: Any, thresholds: Dict[str, Any]) -> Any:
    """The verdict of ``check`` (one of the ``.../dcgmi`` checks of :mod:`pytest_sits.checks.health`) on a
    submitted dcgmi diag's result for ``acc``; None where :func:`submitted_dcgmi` has none."""
    from ..checks import REGISTRY

    req = next(c.requirement for c in REGISTRY.values() if c.fn is check)
    ev = submitted_dcgmi(inventory, acc, req)
    return None if ev is None else check(ev, thresholds, acc["bdf"])

