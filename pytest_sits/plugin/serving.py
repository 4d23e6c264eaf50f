"""The server under test launched by the suite (``--sits-serve``): started by the controller before the header
(which names it), handed to the workers as an endpoint, stopped when the run ends whatever ends it.

A server that cannot be started, or is not ready by its deadline, does not end the run: every requirement that
measures it is ERROR with the reason (exit status and the log's last lines), the others run, and the report pair
is written.  A signal while it starts stops it and the run (INCOMPLETE)."""

from __future__ import annotations

import atexit
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional

import pytest


def launch(config: Any, run: Any) -> Optional[Any]:
    """Start ``run.serve`` and wait for it; the server (stopped at the config's cleanup), or None."""
    from ..inference.launch import LaunchedServer, ServeError

    if run.serve is None:
        return None
    if run.report_dir is not None:
        logdir = run.report_dir / "serving"
    else:
        logdir = Path(tempfile.mkdtemp(prefix="sits-serving-"))
    server = LaunchedServer(run.serve, logdir)
    config.add_cleanup(server.stop)
    atexit.register(server.stop)  # a run that ends without its cleanups (an internal error) stops it too

    def said(line: str) -> None:
        sys.stderr.write(f"sits: {line}\n")
        sys.stderr.flush()

    def signalled() -> Optional[str]:
        got = run.interrupts.received
        return f"{got[0]['signal']} received" if got else None

    coldstart = _coldstart_trials(run, logdir, signalled, said) if _coldstart_selected(config) else None
    if coldstart is not None and coldstart.get("interrupted"):
        run.serve_error = f"the server under test could not be used: {coldstart['interrupted']}"
        run.served = dict(server.describe(), error=run.serve_error, coldstart=None)
        said(run.serve_error)
        return server
    said(f"starting the server under test: {' '.join(run.serve.command)} (log {server.log_path})")
    try:
        server.start()
        server.wait_ready(signalled, said)
    except ServeError as exc:
        run.serve_error = f"the server under test could not be used: {exc}"
        run.served = dict(server.describe(), error=run.serve_error, coldstart=coldstart)
        said(run.serve_error)
        return server
    run.served = dict(server.describe(), coldstart=coldstart)
    said(f"the server under test is ready at {run.serve.url} after {server.ready_s:g} s (models: "
         f"{', '.join(server.models)}{', version ' + server.version if server.version else ''})")
    config.pluginmanager.register(_Stopper(run, server), "sits-serving")
    return server


#: The names pytest's -k matches the bundled cold-start test by (its function, module, parameter and folder).
COLDSTART_NAMES = ("test_cold_start", "test_cold_start[endpoint]", "endpoint", "test_inference.py", "conformance")


def _coldstart_selected(config: Any) -> bool:
    """Whether the run keeps the cold-start test: the launches it costs (minutes each for a large model) are spent
    only then.  Decided as pytest decides -k (a case-insensitive substring of a name) and by test ids naming
    another test; anything it cannot tell keeps the trials."""
    args = [str(a) for a in getattr(config, "args", []) or []]
    if args and all("::" in a for a in args) and not any("test_cold_start" in a for a in args):
        return False
    keyword = config.getoption("keyword", "") or ""
    if not keyword:
        return True
    try:
        from _pytest.mark.expression import Expression

        def matches(name: str, /, **_: Any) -> bool:
            return any(name.lower() in n.lower() for n in COLDSTART_NAMES)

        return bool(Expression.compile(keyword).evaluate(matches))
    except Exception:  # pragma: no cover - pytest's expression module moved: keep the trials
        return True


def _coldstart_trials(run: Any, logdir: Path, signalled: Any, said: Any) -> Optional[Dict[str, Any]]:
    """SVC-COLDSTART on the server under test, before the launch the run measures: cold starts (launch, ready, first
    token, stop) until the requirement's rule decides (its trial plan); None when the run's level does not include
    it.  A signal stops the trials (``interrupted``)."""
    from ..catalogue import CATALOGUE, LEVELS
    from ..conditions.inference.coldstart import coldstart_trials
    from ..inference.coldstart import evict
    from ..inference.launch import cold_start

    if LEVELS.index(run.level) < LEVELS.index(CATALOGUE["SVC-COLDSTART"].level):
        return None
    th = run.profile.thresholds("SVC-COLDSTART")
    how = th.get("page_cache", "asis")
    if how == "evict_files":
        return {"unavailable": "SVC-COLDSTART.page_cache = evict_files names the built-in model's files; the "
                               "server's own files are not known to the suite: use asis, or drop_all (root) to start "
                               "it with an empty page cache"}
    count = [0]
    stopped: Dict[str, Any] = {}

    def one() -> Dict[str, Any]:
        if stopped:
            return {"error": stopped["why"]}
        count[0] += 1
        said(f"SVC-COLDSTART: cold start {count[0]} of the server under test (launch, ready, first token, stop)")
        r = cold_start(run.serve, logdir / f"coldstart-{count[0]}", signalled,
                       (lambda: evict("all", [])) if how == "drop_all" else None)
        why = signalled()
        if why:
            stopped["why"] = f"{why} during cold start {count[0]}"
        if r.get("total_s") is not None:
            said(f"SVC-COLDSTART: cold start {count[0]}: first token {r['total_s']:.3g} s after the launch")
        else:
            said(f"SVC-COLDSTART: cold start {count[0]} failed: {str(r.get('error')).splitlines()[0]}")
        return r

    ev = coldstart_trials(one, {"max_s": th.get("max_s")}, run.plan().trials_for("SVC-COLDSTART"))
    if stopped:
        return {"interrupted": stopped["why"]}
    ev["launches"] = count[0]
    ev["method"] = ("each trial launches the server's command afresh in a process group of its own, waits until "
                    "/v1/models lists the model, sends one streamed request and stops the group; stages from the "
                    "suite's clock, phases as the server printed them")
    return ev


class _Stopper:
    """Stops the server when the tests are over, before the report is written (which records how it ended: a
    server that died under the run says so)."""

    def __init__(self, run: Any, server: Any):
        self.run, self.server = run, server

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        died = self.server.alive()
        stopped = self.server.stop()
        if self.run.served is not None:
            self.run.served["stopped"] = dict(stopped, before_the_end=died) if died else stopped
