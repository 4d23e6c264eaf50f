"""One device's inference runs in a session (what the fixture hands to the conformance tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..trials import TrialPlan
from .coldstart import acquire_coldstart
from .frag import acquire_frag
from .rig import InferenceUnavailable
from .sla import acquire_sla
from .sweep import acquire_sweep, sweep_config

class Inference:
    """The inference-under-load runs of one device: each acquire runs once per session (the sweep serves the
    four PLP-* requirements) under an exclusive lock on the device, so xdist workers never load it twice."""

    def __init__(self, rig: Any, profile: Any, options: Dict[str, Any], logdir: Path, cache: Dict[str, Any],
                 absent: Optional[str] = None, run_id: Optional[str] = None, unavailable: Optional[str] = None):
        self.rig, self.profile, self.options, self.cache, self.absent = rig, profile, options, cache, absent
        #: Why this platform cannot run the workload at all (a snapshot): not measured, never "not applicable".
        self.unavailable = unavailable
        self.subject = rig.subject if rig is not None else "accelerators"
        self.logdir = Path(logdir) / self.subject.replace(":", "-").replace("/", "-")
        if options.get("endpoint"):
            # The server under test is one deployment: what is measured on it is judged once, under its name.
            self.subject = f"endpoint {options['endpoint']}"
        self.run_id = run_id
        #: Called with a line of progress during the runs (``sits_progress``); None: silent.
        self.progress: Optional[Any] = None
        #: PLP-LATENCY's runs of each sweep point (the run's plan and budget); None: the default, no deadline
        self.latency_plan: Optional[TrialPlan] = None
        #: The inventory of an MLPerf submission (evidence platform): SVC-SLA and PLP-LATENCY/PPL/POWER are judged
        #: on its runs (:meth:`mlperf`); None elsewhere.
        self.inventory: Optional[Dict[str, Any]] = None
        #: ``environment(t0, t1, requirement)``: the test environment's readings over a measurement's window (set by
        #: the fixture around a measured requirement's test); each measurement keeps them in its evidence
        #: (``environment_block``), so that the tests that read it later take that window's environment.
        self.environment: Optional[Any] = None
        self._used: Dict[str, str] = {}
        #: ``peers()``: the runs of the machine's other accelerators, measured at once with this device's (set by
        #: the fixture when the run measures every device in one process); None: this device alone.
        self.peers: Optional[Any] = None
        #: The run's hand-over (``SitsRun.to_workerinput``) and this device's PCI address: what a child process needs
        #: to make this device's LoadGen measurement at once with the others' (conditions/inference/child.py).
        self.child_run: Optional[Dict[str, Any]] = None
        self.device: Optional[str] = None
        #: Called before a measurement starts here (the test environment's DRAM hold is started then).
        self.before: Optional[Any] = None

    def mlperf(self, check: Any, thresholds: Dict[str, Any]) -> Optional[List[Any]]:
        """The verdicts of ``check`` (a check of :mod:`pytest_sits.checks.inference` for MLPerf runs) on each run
        of the submission its requirement is judged on; None when the platform is no MLPerf submission."""
        if self.inventory is None:
            return None
        from ...checks import REGISTRY
        from .mlperf import evidence

        req = next(c.requirement for c in REGISTRY.values() if c.fn is check)
        return [check(ev, thresholds, subject) for subject, ev in evidence(self.inventory, req)]

    def _once(self, key: str, fn: Any, remote: bool = False) -> Any:
        """Run ``fn`` once per session and device.  Under xdist the workers share the log folder: the first
        to take the device's lock runs it and leaves the evidence there (tagged with the run), the others
        read it back instead of loading the device again.  ``remote``: the run measures a server someone else
        runs (``--sits-endpoint``), not this device: once per run, whatever the accelerator, under a lock of the
        run's own (no machine-wide device lock: the run never touches the device)."""
        if remote:
            # One lock for everything measured on the deployment: the sweep and the SLA run never load it at once.
            k, shared = f"endpoint/{key}", self.logdir.parent / f"endpoint-{key}.evidence.json"
            lock, run_scoped = "endpoint-deployment", True
        else:
            if self.absent:
                return {"absent": self.absent}
            if self.unavailable:
                return {"unavailable": self.unavailable}
            k, shared = f"{self.subject}/{key}", self.logdir / f"{key}.evidence.json"
            lock, run_scoped = f"device-{self.subject}", bool(getattr(self.rig, "simulated", False))
        if k not in self.cache:
            from ..locks import exclusive

            shared.parent.mkdir(parents=True, exist_ok=True)
            with exclusive(lock, purpose=f"inference {key}", simulated=run_scoped):
                found = self._shared(shared)
                if not found and self.before is not None:
                    self.before()
                self.cache[k] = found or _measured(fn, key, self.environment)
                if self.run_id is not None and not self.cache[k].get("absent"):
                    from ...files import atomic_write

                    atomic_write(shared, json.dumps({"run": self.run_id, "evidence": self.cache[k]}, default=str))
        self._used[key] = k
        return self.cache[k]

    def environment_block(self, requirement: str) -> Optional[Dict[str, Any]]:
        """The test environment of the measurement ``requirement``'s verdicts read in this test (None: none read)."""
        key = next((k for k, reqs in MEASURES.items() if requirement in reqs), None)
        found = self.cache.get(self._used.get(key, "")) if key else None
        if key == "frag" and isinstance(found, dict):  # one record per view, each with the same window
            found = next((v for v in found.values() if isinstance(v, dict)), None)
        block = found.get("environment_block") if isinstance(found, dict) else None
        return block if isinstance(block, dict) else None

    def _shared(self, path: Path) -> Optional[Dict[str, Any]]:
        if self.run_id is None or not path.is_file() or path.is_symlink():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data.get("evidence") if data.get("run") == self.run_id else None

    def th(self, req: str) -> Dict[str, Any]:
        return self.profile.thresholds(req)

    def sweep(self) -> Dict[str, Any]:
        cfg = sweep_config({r: self.th(r) for r in ("PLP-PPL", "PLP-LATENCY", "PLP-SAMPLE")})
        if self.options.get("endpoint"):
            return self._served_sweep(cfg)
        return self._at_once("sweep", lambda p: p.sweep(),
                             lambda: self._once("sweep", lambda: acquire_sweep(self.rig, cfg, self.logdir / "sweep",
                                                                               self.progress, self.latency_plan)))

    def _served_sweep(self, cfg: Dict[str, Any]) -> Dict[str, Any]:
        """The sweep on the server under test: once per run, whatever the accelerator."""
        from .served import acquire_served_sweep, served_target

        if self.options.get("serve_error"):
            return self._once("sweep", lambda: {"error": self.options["serve_error"]}, remote=True)
        sla = self.th("SVC-SLA")
        logdir = self.logdir.parent / "endpoint" / "sweep"

        def run() -> Dict[str, Any]:  # the target (a name lookup for the endpoint's host) only when the sweep runs
            target = served_target(self.options, sla.get("model_name"), sla.get("api") or "completions",
                                   sla.get("timeout_s"))
            return self._served(acquire_served_sweep(target, cfg, logdir, self.progress, self.latency_plan))

        return self._once("sweep", run, remote=True)

    @property
    def sla_subject(self) -> str:
        """Whose SLA is judged: the endpoint (one deployment, judged once per run) or this device's built-in
        model."""
        endpoint = self.options.get("endpoint")
        return f"endpoint {endpoint}" if endpoint else self.subject

    def sla(self) -> Dict[str, Any]:
        cfg = dict(self.th("SVC-SLA"), model=self.th("PLP-PPL")["model"], dataset=self.options.get("dataset"),
                   accelerators=self.options.get("deployment_accelerators"), redfish=self.options.get("redfish"))
        endpoint = self.options.get("endpoint")
        if self.options.get("serve_error"):  # the launched server never became ready: nothing to measure
            return self._once("sla", lambda: {"error": self.options["serve_error"]}, remote=True)
        logdir = self.logdir.parent / "endpoint" / "sla" if endpoint else self.logdir / "sla"

        def own() -> Dict[str, Any]:
            return self._once("sla", lambda: self._served(acquire_sla(self.rig, cfg, logdir, endpoint,
                                                                      self.options.get("endpoint_key"),
                                                                      self.progress)), remote=bool(endpoint))
        return own() if endpoint else self._at_once("sla", lambda p: p.sla(), own)

    def _served(self, ev: Dict[str, Any]) -> Dict[str, Any]:
        """Evidence of a launched server names it; one that stopped under the run quotes its log."""
        served = self.options.get("served")
        if not served:
            return ev
        ev = dict(ev, server={k: served.get(k) for k in ("command", "url", "models", "version", "log", "launched")})
        if ev.get("error") and ev.get("stopped") and served.get("log"):
            from ...inference.launch import log_tail

            ev["error"] = f"{ev['error']}; last lines of the server's log {served['log']}:\n{log_tail(served['log'])}"
        return ev

    def coldstart(self, plan: Optional[TrialPlan] = None) -> Dict[str, Any]:
        cfg = dict(self.th("SVC-COLDSTART"), model=self.th("PLP-PPL")["model"])
        if self.options.get("endpoint"):
            return self._served_coldstart()
        return self._at_once("coldstart", lambda p: p.coldstart(plan),
                             lambda: self._once("coldstart", lambda: acquire_coldstart(self.rig, cfg, plan)))

    def _served_coldstart(self) -> Dict[str, Any]:
        """The launches of the server under test (measured when the suite started it), or why not measured."""
        served = self.options.get("served") or {}
        if not served.get("launched"):
            return {"unavailable": f"the server at {self.options['endpoint']} is run by someone else "
                                   "(--sits-endpoint), so the suite cannot start it cold; --sits-serve=COMMAND "
                                   "launches it and measures its cold start"}
        ev = served.get("coldstart")
        if not ev:
            return {"error": self.options.get("serve_error") or "the server was launched without cold-start trials"}
        return self._served(dict(ev))

    def frag(self) -> Dict[str, Dict[str, Any]]:
        cfg = dict(self.th("SVC-FRAG"), model=self.th("PLP-PPL")["model"])
        if self.options.get("endpoint"):
            sweep = self.sweep()
            if sweep.get("error") or sweep.get("unavailable"):
                return {"kv-pool": {k: v for k, v in sweep.items() if k in ("error", "unavailable", "server")}}
            return {"kv-pool": dict(sweep["frag"], server=sweep.get("server"))}
        if self.absent:
            return {"kv-pool": {"absent": self.absent}}
        if self.unavailable:
            return {"kv-pool": {"unavailable": self.unavailable}}
        return self._at_once("frag", lambda p: p.frag(),
                             lambda: self._once("frag", lambda: acquire_frag(self.rig, cfg, self.logdir / "frag",
                                                                             self.progress)))

    #: What runs at once on every device in one process: everything on a simulated machine; on a real one the
    #: cold starts (each a process of its own), not the LoadGen runs (LoadGen runs one test per process).
    LIVE_AT_ONCE = ("coldstart",)

    def _at_once(self, key: str, theirs: Any, own: Any) -> Any:
        """``own()`` (this device's measurement ``key``), with the same measurement of every peer that has not made
        it yet running at the same time, each in a thread of its own (``theirs(peer)``); a peer's failure is left
        for its own test to meet."""
        simulated = bool(getattr(self.rig, "simulated", False))
        processes = not simulated and key not in self.LIVE_AT_ONCE
        if (self.peers is None or f"{self.subject}/{key}" in self.cache or self.absent or self.unavailable
                or (processes and (self.child_run is None or self.run_id is None))):
            return own()
        peers = [p for p in self.peers() if f"{p.subject}/{key}" not in self.cache and not p.absent
                 and not p.unavailable and p._shared(p.logdir / f"{key}.evidence.json") is None]
        if not peers:
            return own()
        if self.before is not None:
            self.before()
        if self.progress is not None:
            self.progress(f"inference {key}: {len(peers) + 1} accelerators measured at once"
                          + (" (one process per device: LoadGen runs one test per process)" if processes else ""))
        if processes:
            return self._in_processes(key, peers, own)

        import functools

        from ..atonce import run_at_once

        # a peer's failure is left for its own test to meet; this device's is raised here
        jobs = [own] + [functools.partial(theirs, p) for p in peers]
        mine = run_at_once(jobs, [self.subject] + [p.subject for p in peers])[0]
        if isinstance(mine, Exception):
            raise mine
        return mine

    def _in_processes(self, key: str, peers: List[Any], own: Any) -> Any:
        """``own()`` here while each peer's measurement runs in a child process (plugin/inference_child.py);
        then each peer's evidence is read back from its shared file, with the test environment of its window.  A
        child that failed leaves its device to be measured by its own test, alone, and says so.  Ctrl-C or SIGTERM
        stops every child (SIGTERM to its group, SIGKILL after 30 s) before it propagates."""
        import signal
        import subprocess
        import sys
        import time

        from ...inference.launch import _die_with_parent, _killpg
        from ...files import atomic_write

        procs = []
        for p in peers:
            p.logdir.mkdir(parents=True, exist_ok=True)
            spec = p.logdir / f"{key}.child.json"
            spec.write_text(json.dumps({"run": self.child_run, "device": p.device, "what": key,
                                        "logdir": str(p.logdir.parent.resolve()), "run_id": self.run_id,
                                        "latency_plan": p.latency_plan.to_json() if p.latency_plan else None},
                                       default=str), encoding="utf-8")
            log = open(p.logdir / f"{key}.child.log", "w", encoding="utf-8")
            procs.append((p, log, subprocess.Popen(
                [sys.executable, "-m", "pytest_sits.plugin.inference_child", str(spec.resolve())],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                # its own folder: ``-m`` puts the working folder first on the path, and a checkout there would
                # shadow the installed package
                cwd=str(p.logdir.resolve()),
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)))

        def stop_all() -> None:
            for _, _, proc in procs:
                if proc.poll() is None:
                    _killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 30.0
            for _, _, proc in procs:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

        try:
            result = own()
            for _, _, proc in procs:
                while proc.poll() is None:
                    time.sleep(0.2)
        except BaseException:
            stop_all()
            raise
        finally:
            for _, log, _ in procs:
                log.close()
        for p, log, proc in procs:
            shared = p.logdir / f"{key}.evidence.json"
            ev = p._shared(shared)
            if ev is None:
                if self.progress is not None:
                    self.progress(f"inference {key} of {p.subject}: its process exited {proc.returncode} without "
                                  f"evidence (log {log.name}); its own test measures it alone")
                continue
            records = list(ev.values()) if key == "frag" else [ev]
            window = next((r.get("measured_window") for r in records if isinstance(r, dict)), None)
            if p.environment is not None and isinstance(window, list) and len(window) == 2:
                block = p.environment(window[0], window[1], MEASURES[key][0])
                for r in records:
                    if isinstance(r, dict) and "measured_window" in r:
                        r["environment_block"] = block
                atomic_write(shared, json.dumps({"run": self.run_id, "evidence": ev}, default=str))
            self.cache[f"{p.subject}/{key}"] = ev
        return result



def inference_for(platform: Any, profile: Any, acc: Optional[Dict[str, Any]], expected_absent: Optional[str],
                  options: Dict[str, Any], logdir: Path, cache: Dict[str, Any],
                  run_id: Optional[str] = None, unavailable: Optional[str] = None) -> Inference:
    """The runs for ``acc``; with no accelerator, the CPU when the profile expects none, else absent (or, on
    submitted texts that cannot tell whether the machine has them, ``unavailable``: not measured)."""
    if getattr(platform, "kind", None) == "evidence":
        from .mlperf import submitted

        inv = platform.inventory()
        if submitted(inv) is not None:  # an MLPerf submission: its runs are the evidence, whatever the devices
            out = Inference(None, profile, options, logdir, cache,
                            unavailable="an MLPerf submission gives LoadGen's figures, not this requirement's run")
            out.inventory = inv
            return out
    if acc is None and unavailable:
        return Inference(None, profile, options, logdir, cache, unavailable=unavailable)
    if acc is None and expected_absent:
        return Inference(None, profile, options, logdir, cache, absent=expected_absent)
    try:
        rig = platform.inference_rig(acc, profile, options)
    except InferenceUnavailable as exc:
        return Inference(None, profile, options, logdir, cache, unavailable=str(exc))
    return Inference(rig, profile, options, logdir, cache, run_id=run_id)


#: What each measurement serves (the requirement whose environment it carries first).
MEASURES = {"sweep": ("PLP-SAMPLE", "PLP-PPL", "PLP-POWER", "PLP-LATENCY"), "sla": ("SVC-SLA",),
            "coldstart": ("SVC-COLDSTART",), "frag": ("SVC-FRAG",)}


def _measured(fn: Any, key: str, environment: Optional[Any]) -> Any:
    """``fn()``'s evidence with the wall-clock window it was measured in (``measured_window``) and, where the test
    environment is read, its readings over that window (``environment_block``)."""
    import time

    t0 = time.time()
    ev = fn()
    # SVC-FRAG's evidence is one record per view (kv-pool, ...): each carries the window
    records = list(ev.values()) if key == "frag" and isinstance(ev, dict) else [ev]
    t1 = time.time()
    block = None
    for rec in records:
        if isinstance(rec, dict) and not ({"absent", "unavailable"} & set(rec)):
            rec.setdefault("measured_window", [round(t0, 3), round(t1, 3)])
            if environment is not None and key in MEASURES:
                block = block or environment(t0, t1, MEASURES[key][0])
                rec["environment_block"] = block
    return ev
