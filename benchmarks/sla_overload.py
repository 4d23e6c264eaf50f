"""SVC-SLA against a server far slower than the offered load, N times: each run must end with a FAIL verdict
and a report pair (never a crash, never an ERROR or a lost report).

    python benchmarks/sla_overload.py [--runs 10] [--qps 100] [--duration 10] [--endpoint URL]

Without ``--endpoint`` the server is a scripted one on 127.0.0.1 that generates one request at a time (about
12 requests/s: 50 ms to the first token, then 4 tokens 10 ms apart); each run is a separate
``pytest --sits-level=full -k tenant_sla`` process.  Prints one line per run and the count.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_sits.inference.servers import ScriptedServer

PROFILE = """
name: overload
extends: host
thresholds:
  SVC-SLA:
    target_qps: {qps}
    duration_s: {duration}
    timeout_s: 2
    tenants:
      - {{name: chat, share: 1.0, p99_ms: 250, min_rps: 5}}
    workload: {{samples: 256, prompt_tokens: [8, 32], output_tokens: [4, 4]}}
"""


def one(url: str, folder: Path, qps: float, duration: float) -> dict:
    (folder / "overload.yaml").write_text(PROFILE.format(qps=qps, duration=duration))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "pytest_sits.conformance", "-p", "no:cacheprovider",
                        "--sits-profile=overload.yaml", "--sits-level=full", "-k", "tenant_sla",
                        f"--sits-endpoint={url}", "--sits-report-dir=report", "-q"],
                       cwd=folder, capture_output=True, text=True, timeout=duration * 3 + 120)
    out = {"rc": p.returncode, "seconds": round(time.monotonic() - t0, 1), "statuses": [], "pair": False}
    jpath, hpath = folder / "report" / "sits-report.json", folder / "report" / "sits-report.html"
    if jpath.is_file() and hpath.is_file():
        out["pair"] = True
        rep = json.loads(jpath.read_text())
        out["statuses"] = [v["status"] for v in rep["verdicts"] if v["requirement"] == "SVC-SLA"]
        out["reason"] = next((v["reason"][:160] for v in rep["verdicts"] if v["requirement"] == "SVC-SLA"), "")
    if p.returncode < 0 or "Fatal Python error" in p.stdout + p.stderr:
        out["crash"] = (p.stdout + p.stderr)[-2000:]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--qps", type=float, default=100.0)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--endpoint", default=None, help="a real server instead of the scripted one")
    a = ap.parse_args()
    ok = 0
    with tempfile.TemporaryDirectory(prefix="sits-overload-") as tmp:
        for i in range(a.runs):
            folder = Path(tmp) / f"run{i}"
            folder.mkdir()
            # a fresh scripted server per run: one still working off the last run's backlog would fail the
            # next pre-flight (an ERROR, rightly, but not what this measures)
            server = None if a.endpoint else ScriptedServer(ttft_s=0.05, itl_s=0.01, capacity=1)
            url = a.endpoint or server.__enter__()
            try:
                r = one(url, folder, a.qps, a.duration)
            finally:
                if server is not None:
                    server.__exit__(None, None, None)
            good = r["rc"] == 1 and r["pair"] and r["statuses"] == ["FAIL"] and "crash" not in r
            ok += good
            print(f"run {i + 1}: exit {r['rc']}, {r['seconds']} s, report pair {'yes' if r['pair'] else 'NO'}, "
                  f"verdicts {r['statuses']} {'ok' if good else 'NOT OK'} - {r.get('reason', '')}", flush=True)
            if "crash" in r:
                print(r["crash"])
    print(f"{ok} of {a.runs} overload runs ended with a FAIL verdict and a report pair (exit 1, no crash)")
    return 0 if ok == a.runs else 1


if __name__ == "__main__":
    sys.exit(main())
