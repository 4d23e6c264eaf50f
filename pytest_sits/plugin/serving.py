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
from typing import Any, Optional

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

    said(f"starting the server under test: {' '.join(run.serve.command)} (log {server.log_path})")
    try:
        server.start()
        server.wait_ready(signalled, said)
    except ServeError as exc:
        run.serve_error = f"the server under test could not be used: {exc}"
        run.served = dict(server.describe(), error=run.serve_error)
        said(run.serve_error)
        return server
    run.served = server.describe()
    said(f"the server under test is ready at {run.serve.url} after {server.ready_s:g} s (models: "
         f"{', '.join(server.models)}{', version ' + server.version if server.version else ''})")
    config.pluginmanager.register(_Stopper(run, server), "sits-serving")
    return server


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
