"""CRG-NODE, CRG-EDGE, CRG-SYNC, CRG-JITTER: checks on data, the simulated figures and their fault, and the
measurements that run on a CPU (gloo all-reduce between two processes, the timer)."""

import json

import pytest

from pytest_sits.checks.crg import busbw, check_edge, check_jitter, check_node, check_sync, percentiles
from pytest_sits.conditions.crg import Crg, acquire_edges, acquire_sync, gemm_tflops, timer_info
from pytest_sits.platforms import from_spec
from pytest_sits.platforms.sim.crg import SimCrg
from pytest_sits.profiles import resolve
from pytest_sits.verdict import FAIL, INCONCLUSIVE, PASS, SKIP, WARN

H100 = resolve("h100")
#: Complete thresholds (every key the requirement declares), as a resolved profile hands them over.
TH = {r: H100.check_thresholds(r) for r in ("CRG-NODE", "CRG-EDGE", "CRG-SYNC", "CRG-JITTER")}


def base_th(rid, **override):
    """The thresholds a resolved profile gives requirement ``rid`` (the base profile's defaults), with ``override``."""
    return dict(resolve("base").thresholds(rid), **override)


def jitter_th(max_ns):
    return base_th("CRG-JITTER", max_ns=max_ns)


NODE = {"results": [{"dtype": "float16", "tflops": 702.0, "samples_tflops": [701.0, 702.0, 703.5, 702.0, 700.9],
                     "verified": True},
                    {"dtype": "bfloat16", "tflops": 688.5, "samples_tflops": [688.5, 687.0, 689.9, 688.0, 688.6],
                     "verified": True}]}
EDGE = {"pair": ["a", "b"], "gbps_median": 381.0, "verified": True, "peer_access": True, "nvlink_bytes": None,
        "forward": {"samples_gbps": [381.0, 380.2, 381.9, 381.0, 380.5]},
        "reverse": {"samples_gbps": [382.0, 381.2, 382.9, 381.6, 382.5]}}
SLOW_EDGE = dict(EDGE, gbps_median=24.0, forward={"samples_gbps": [24.0, 24.2, 23.8]},
                 reverse={"samples_gbps": [24.1, 24.0, 23.9]})


def _sync(bus_gbps, n=8, nbytes=1 << 28, **extra):
    times = [nbytes / (b * n / (2 * (n - 1))) / 1e9 for b in bus_gbps]
    return dict({"backend": "nccl", "world_size": n, "bytes": nbytes, "busbw_gbps": sorted(bus_gbps)[len(bus_gbps) // 2],
                 "samples_s": times, "verified": True}, **extra)


SYNC = _sync([455.0, 454.0, 456.2, 455.1, 454.7])
TIMER = {"clock": "time.perf_counter_ns", "implementation": "clock_gettime(CLOCK_MONOTONIC)", "resolution_ns": 1.0,
         "granularity_ns": 24.0, "read_cost_ns": 30.0}
LAT = {"n": 2000, "min": 9000.0, "p1": 9100.0, "p50": 9400.0, "p99": 9900.0, "max": 30000.0}
PHC = {"clock": "clock_gettime(/dev/ptp0)", "implementation": "PTP hardware clock", "resolution_ns": 1.0,
       "granularity_ns": 1.0, "read_cost_ns": 40.0}
TIGHT = {"n": 2000, "min": 9398.0, "p1": 9399.0, "p50": 9400.0, "p99": 9402.0, "max": 9410.0}

CASES = {
    "node-above-floor": (check_node, NODE, H100.check_thresholds("CRG-NODE"), PASS),
    "node-below-floor": (check_node, {"results": [{"dtype": "float16", "tflops": 210.0, "verified": True,
                                                   "samples_tflops": [210.0, 209.0, 211.0]}]},
                         H100.check_thresholds("CRG-NODE"), FAIL),
    "node-b-ceiling": (check_node, NODE, resolve("base").check_thresholds("CRG-NODE"), FAIL),
    "node-no-bound": (check_node, NODE, base_th("CRG-NODE", max_tflops=None, min_tflops=None), WARN),
    "node-unverified": (check_node, {"results": [{"dtype": "float16", "tflops": 700.0, "verified": False}]},
                        H100.check_thresholds("CRG-NODE"), INCONCLUSIVE),
    "edge-ok": (check_edge, EDGE, H100.check_thresholds("CRG-EDGE"), PASS),
    "edge-slow": (check_edge, SLOW_EDGE, H100.check_thresholds("CRG-EDGE"), FAIL),
    "edge-b-figure": (check_edge, EDGE, resolve("base").check_thresholds("CRG-EDGE"), FAIL),
    "edge-unverified": (check_edge, dict(EDGE, verified=False), H100.check_thresholds("CRG-EDGE"), INCONCLUSIVE),
    "sync-ok": (check_sync, SYNC, H100.check_thresholds("CRG-SYNC"), PASS),
    "sync-slow": (check_sync, _sync([40.0, 40.5, 39.8]), H100.check_thresholds("CRG-SYNC"), FAIL),
    "sync-host-no-floor": (check_sync, _sync([0.6, 0.61, 0.59], n=2, backend="gloo"),
                           resolve("host").check_thresholds("CRG-SYNC"), WARN),
    "jitter-report-only": (check_jitter, {"timer": TIMER, "latency_ns": LAT}, jitter_th(2.5), SKIP),
    "jitter-within-loose-bound": (check_jitter, {"timer": TIMER, "latency_ns": LAT}, jitter_th(1000.0), PASS),
    "jitter-over-bound": (check_jitter, {"timer": TIMER, "latency_ns": LAT}, jitter_th(200.0), FAIL),
    # A PTP hardware clock read at 1 ns steps decides the document's ±2.5 ns itself.
    "jitter-hardware-clock-within": (check_jitter, {"timer": PHC, "latency_ns": TIGHT}, jitter_th(2.5), PASS),
    "jitter-hardware-clock-over": (check_jitter, {"timer": PHC, "latency_ns": LAT}, jitter_th(2.5), FAIL),
    "jitter-no-sample": (check_jitter, {"timer": PHC, "latency_ns": {"n": 0}}, jitter_th(2.5), INCONCLUSIVE),
}


#: The cases in the form of tests/test_replayable.py's SAMPLES (check name -> [(id, builder, status)]).
REPLAY_SAMPLES = {}
for _name, (_fn, _ev, _th, _want) in sorted(CASES.items()):
    REPLAY_SAMPLES.setdefault({check_node: "CRG-NODE", check_edge: "CRG-EDGE", check_sync: "CRG-SYNC",
                               check_jitter: "CRG-JITTER"}[_fn], []).append(
        (_name, (lambda ev=_ev, th=_th: (ev, th, "d")), _want))


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_decides_and_replays(name):
    fn, ev, th, want = CASES[name]
    v = fn(ev, th, "d")
    assert v.status == want, v.reason
    if want == FAIL:
        assert v.remediation
    stored = json.loads(json.dumps(v.to_json()))
    again = fn(stored["evidence"], stored["thresholds"], stored["subject"])
    assert (again.status, again.measured, again.reason) == (v.status, v.measured, v.reason)


def test_jitter_never_passes_the_document_bound_on_a_software_timer():
    """Report only: never a pass, never a result held back, the timer's figures and the jitter it saw said."""
    v = check_jitter({"timer": TIMER, "latency_ns": dict(LAT, p1=9400.0, p99=9400.0), "hardware_clocks": []},
                     jitter_th(2.5), "host")
    assert v.status == SKIP and v.reason.startswith("report only") and "granularity 24 ns" in v.reason
    assert "no PTP hardware clock" in v.reason and v.measured == 0.0


def test_jitter_names_hardware_clocks_too_coarse_to_decide():
    coarse = [{"device": "/dev/ptp0", "name": "mlx5_ptp", "granularity_ns": 480.0}]
    v = check_jitter({"timer": TIMER, "latency_ns": LAT, "hardware_clocks": coarse}, jitter_th(2.5), "host")
    assert v.status == SKIP and "/dev/ptp0 (mlx5_ptp, granularity 480.0 ns)" in v.reason


def test_version_1_jitter_verdicts_of_older_reports_still_replay():
    from pytest_sits.checks import get_version

    old = get_version("CRG-JITTER", 1).fn({"timer": TIMER, "latency_ns": LAT}, {"max_ns": 2.5}, "host")
    assert old.status == INCONCLUSIVE and old.check == {"name": "CRG-JITTER", "version": 1}


def test_a_ptp_clock_of_this_machine_is_read_or_its_absence_recorded(tmp_path):
    """The acquire function lists /sys/class/ptp and reads every clock back to back; where none exists the
    evidence says so, and the software timer times the workload."""
    from pytest_sits.conditions.crg import acquire_jitter, hardware_clocks

    (tmp_path / "sys/class/ptp/ptp7").mkdir(parents=True)
    (tmp_path / "sys/class/ptp/ptp7/clock_name").write_text("fake nic\n")
    [clock] = hardware_clocks(tmp_path)
    assert clock["device"] == "/dev/ptp7" and clock["name"] == "fake nic" and "error" in clock  # no /dev/ptp7 here
    ev = acquire_jitter(None, dict(TH["CRG-JITTER"], samples=50, max_ns=2.5), tmp_path)
    assert ev["timer"]["clock"] == "time.perf_counter_ns" and ev["hardware_clocks"][0]["device"] == "/dev/ptp7"
    assert check_jitter(ev, jitter_th(2.5), "host").status == SKIP


def test_busbw_and_percentiles():
    assert busbw(100.0, 8) == pytest.approx(175.0)
    assert busbw(1.0, 2) == pytest.approx(1.0)
    p = percentiles([float(x) for x in range(1, 101)])
    assert (p["n"], p["p50"], p["max"]) == (100, 51.0, 100.0)


@pytest.mark.parametrize("profile", ["h100", "h200", "h100-pcie", "a100", "l40s", "h20", "mi300x"])
def test_sim_figures_pass_the_bundled_bounds_and_fail_with_crg_slow(profile):
    prof = resolve(profile)
    accs = [{"bdf": f"0000:{0x10 * (i + 1):02x}:00.0"} for i in range(4)]
    for faults, want in (([], PASS), (["crg-slow"], FAIL)):
        sim = SimCrg(prof, faults)
        th_n, th_e, th_s = (prof.check_thresholds(r) for r in ("CRG-NODE", "CRG-EDGE", "CRG-SYNC"))
        assert check_node(sim.node(accs[0], th_n), th_n, "a").status == want, profile
        assert {check_edge(e, th_e, s).status for e, s in sim.edges(accs, th_e)} == {want}, profile
        assert check_sync(sim.sync(accs, 4, th_s), th_s, "accelerators").status == want, profile


def test_edges_and_sync_skip_with_one_device_and_say_why():
    one = [{"bdf": "0000:17:00.0"}]
    (ev, subject), = acquire_edges(one, dict(TH["CRG-EDGE"], bytes=1 << 20))
    assert check_edge(ev, base_th("CRG-EDGE", min_gbps=300), subject).status == SKIP and "found 1" in ev["absent"]
    ev = acquire_sync(one, 8, TH["CRG-SYNC"])
    assert check_sync(ev, base_th("CRG-SYNC", min_tbps=0.3), "accelerators").status == SKIP


def test_no_cuda_device_is_a_skip_with_the_reason():
    accs = [{"bdf": "0000:17:00.0"}, {"bdf": "0000:18:00.0"}]
    (ev, _), = acquire_edges(accs, dict(TH["CRG-EDGE"], bytes=1 << 20))
    # The devices are there; this installation cannot drive them: not measured (PARTIAL), not "not applicable".
    assert "unavailable" in ev and "0000:17:00.0" in ev["unavailable"]


def test_snapshot_like_platform_measures_nothing():
    """A snapshot (or submitted texts) has devices it cannot measure: not measured, never "not applicable"."""
    class Frozen:
        def host_measurement_reason(self):
            return "a snapshot holds captured files, not a machine to measure"
    crg = Crg(Frozen())
    assert "snapshot" in crg.jitter(None, TH["CRG-JITTER"])["unavailable"]
    assert "snapshot" in crg.sync([], 0, TH["CRG-SYNC"])["unavailable"]
    assert "snapshot" in crg.node({"bdf": "0000:17:00.0"}, TH["CRG-NODE"])["unavailable"]
    (ev, _), = crg.edges([], TH["CRG-EDGE"])
    assert "snapshot" in ev["unavailable"]
    # an absence the caller established stays an absence
    assert crg.sync([], 8, TH["CRG-SYNC"], absent="profile expects 8 × H100; found none")["absent"].startswith("profile")


def test_gloo_allreduce_between_two_processes_runs_for_real():
    pytest.importorskip("torch", reason="the gloo all-reduce needs torch")
    ev = acquire_sync([], 0, base_th("CRG-SYNC", host_bytes=4 << 20, iterations=3, min_tbps=None))
    assert ev["backend"] == "gloo" and ev["world_size"] == 2 and ev["verified"], ev
    assert ev["busbw_gbps"] > 0 and len(ev["samples_s"]) == 3
    assert check_sync(ev, base_th("CRG-SYNC", min_tbps=None), "host").status == WARN
    assert check_sync(ev, base_th("CRG-SYNC", min_tbps=2.0), "host").status == FAIL  # B's 2 TB/s is not a CPU figure


def test_timer_is_measured():
    t = timer_info(20000)
    assert t["resolution_ns"] > 0 and t["granularity_ns"] and t["granularity_ns"] >= 1
    assert t["implementation"]


def test_gemm_on_cpu_is_verified():
    pytest.importorskip("torch", reason="the GEMM load needs torch")
    r = gemm_tflops("cpu", "bfloat16", size=128, iterations=2, repeats=1)
    assert r["verified"] and r["tflops"] > 0


def test_sim_platform_jitter_is_labelled_and_report_only():
    plat = from_spec("sim:h100")
    ev = SimCrg(plat.profile, plat.faults).jitter(None, plat.profile.check_thresholds("CRG-JITTER"))
    v = check_jitter(ev, plat.profile.check_thresholds("CRG-JITTER"), "host")
    assert ev["simulated"] and v.status == SKIP and "simulated" in v.method and "report only" in v.reason
