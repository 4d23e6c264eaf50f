"""The checks' sample evidence, in one place: for every registered check (and every earlier version kept for
replay), evidence it decides PASS (or another non-FAIL status) on and evidence it FAILs on, each with the status
it decides.

A sample is ``(id, builder, status)``; the builder returns ``(evidence, thresholds, subject)``. The thresholds are
a profile's for the requirement (the bundled ``base`` unless the sample needs a device's), with the values the
sample is about overridden: a check is given every threshold its requirement has, as in a run.

Used by tests/test_checks.py (each check passes its passing evidence and fails its failing evidence) and
tests/test_replayable.py (each decision replays).
"""

from pathlib import Path

import numpy as np

from pytest_sits.checks import load_all
from pytest_sits.checks.interval import quantile_tail
from pytest_sits.checks.inventory import GIB
from pytest_sits.equivalence.comparator import compare
from pytest_sits.platforms import from_spec
from pytest_sits.plugin.session import SitsRun
from pytest_sits.probes.readers.lspci_tv import parse_lspci_tv
from pytest_sits.probes.readers.nvidia_smi_topo import parse_nvidia_smi_topo
from pytest_sits.probes.topology import link_capability, pcie_path, peer_mesh, sample_link
from pytest_sits.profiles import resolve
from pytest_sits.verdict import ERROR, FAIL, INCONCLUSIVE, PASS, SKIP, WARN

DATA = Path(__file__).resolve().parent / "data"
REGISTRY = load_all()

#: The bundled base profile: the SITS2026 default thresholds of every requirement.
BASE = resolve("base")


def th(rid, **override):
    """The base profile's thresholds of requirement ``rid`` as its check receives them, with ``override`` on top
    (the values the sample is about)."""
    return dict(BASE.check_thresholds(rid), **override)


def _profile(name):
    run = SitsRun(profile=resolve(name), platform=None, level="quick", level_how="default", report_dir=None)
    return run.expected(), run.profile


def _gpus(n, pci_id="10de:2330", mem=int(79.65 * GIB)):
    return [{"bdf": f"0000:{0x10 + i:02x}:00.0", "pci_id": pci_id, "name": "NVIDIA H100 80GB HBM3",
             "display_name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": mem, "memory_source": "nvml"}
            for i in range(n)]


NVML_OK = {"available": True, "driver_version": "560.35.03", "cuda_driver_version": "12.6"}
NVML_OLD = {"available": True, "driver_version": "535.104.05", "cuda_driver_version": "12.2"}


# -- inventory ------------------------------------------------------------------------------------------------

def devices(accs, nvml):
    exp, prof = _profile("h100")
    return {"accelerators": accs, "nvml": nvml}, dict(prof.thresholds("INV-DEVICES"), expected=exp), ""


def capacity(accs, profile="h100"):
    return {"accelerators": accs}, _profile(profile)[1].thresholds("MEM-CAPACITY"), ""


def driver(evidence):
    return evidence, _profile("h100")[1].thresholds("DEP-DRIVER"), ""


# -- topology -------------------------------------------------------------------------------------------------

def lspci_path(bdf):
    paths = {p["device"]: p for p in parse_lspci_tv((DATA / "lspci-tv-switch.txt").read_text())}
    return {"path": paths[bdf]}, th("TOPO-PCIE-DIRECT", max_switch_ports=0), ""


def sim_gpus(spec):
    sim = from_spec(spec)
    inv = sim.inventory()
    index = {d["bdf"]: d for d in inv["pci"]}
    gpus = [d for d in inv["pci"] if d["bdf"] in {a["bdf"] for a in inv["accelerators"]}]
    return sim, inv, index, gpus


def sim_direct(spec):
    _, _, index, gpus = sim_gpus(spec)
    return {"path": pcie_path(gpus[0], index)}, th("TOPO-PCIE-DIRECT", max_switch_ports=0), ""


def sim_link(spec, loaded, want):
    """The link evidence of the first simulated device whose link check decides ``want``."""
    sim, _, index, gpus = sim_gpus(spec)
    for gpu in gpus:
        ev = {"device": gpu["bdf"], "capability": link_capability(gpu, index),
              "samples": sample_link(sim.root, gpu, 3, 0, loaded=loaded), "load": {"reason": None}}
        thresholds = th("TOPO-PCIE-LINK", samples=3, require_load=True)
        if REGISTRY["TOPO-PCIE-LINK"].fn(ev, thresholds).status == want:
            return ev, thresholds, ""
    raise AssertionError(f"{spec}: no device whose TOPO-PCIE-LINK is {want}")


NODES2 = [{"node": 0, "cpulist": "0-31"}, {"node": 1, "cpulist": "32-63"}]
BOUND = {"node": 1, "applied": True, "cpus_in_force": list(range(32, 64)),
         "memory_policy_in_force": {"mode": "bind", "nodes": [1]}}


def numa(device, binding, thresholds=None):
    return {"device": device, "host_nodes": NODES2, "binding": binding}, th("TOPO-NUMA-BIND", **(thresholds or {})), ""


def sim_mesh(spec, required=True):
    _, inv, _, _ = sim_gpus(spec)
    return ({"mesh": peer_mesh(inv["accelerators"], inv["management"]["nvml"]), "expected_devices": 8},
            th("LINK-NVLINK-MESH", required=required), "")


def smi_mesh(text):
    return {"mesh": parse_nvidia_smi_topo(text), "expected_devices": 4}, th("LINK-NVLINK-MESH", required=True), ""


SMI_PARTIAL = (DATA / "nvidia-smi-topo-partial.txt").read_text()


# -- bandwidth ------------------------------------------------------------------------------------------------

HOLD_TH = th("MEM-BW-HOLD", band_low=0.85, band_high=0.92, window_ms=100, min_in_band_share=0.95, duration_s=30)


def hold(occupancies, errors=()):
    timeline = [{"t": k * 0.1, "occupancy": x, "in_band": 0.85 <= x <= 0.92, "phase": "hold"}
                for k, x in enumerate(occupancies)]
    return ({"band": [0.85, 0.92], "peak_gbps": 40.0, "timeline": timeline, "windows": len(timeline),
             "windows_in_band": sum(r["in_band"] for r in timeline), "source": "own accounting (injected bytes only)",
             "errors": list(errors)}, HOLD_TH, "host")


DEV_BW = {"gbps_median": 3000.0, "gbps_min": 2950.0, "gbps_max": 3020.0, "verified": True, "method": "m"}


def device_bw(**change):
    return dict(DEV_BW, **change), th("MEM-BW-EFFICIENCY", min_efficiency=0.8, datasheet_gbps=3350), "0000:17:00.0"


PCIE_BW = {"h2d": {"gbps_median": 53.0}, "d2h": {"gbps_median": 52.0}, "verified": True, "method": "m", "hold": "x"}


def pcie_bw(bandwidth, link=None):
    return {"bandwidth": bandwidth, "link": link or {"gen": 5, "width": 16}}, th("TOPO-PCIE-BW", min_efficiency=0.7), "d"


# -- thermal --------------------------------------------------------------------------------------------------

GPU_TH = th("THERM-GPU-STEADY", band_low_c=68, band_high_c=72, window_s=120, tolerance_c=0.3, timeout_s=1200)
CPU_TH = th("THERM-CPU-STEADY", band_low_c=62, band_high_c=66, window_s=120, tolerance_c=0.5, timeout_s=1200)
NVML_SENSOR = {"id": "gpu", "kind": "gpu", "source": "test", "resolution_c": 1.0, "label": "gpu0"}
K10_SENSOR = {"id": "cpu", "kind": "cpu", "source": "test", "resolution_c": 0.125, "label": "Tdie"}


def trace_of(values, dt=1.0):
    return {"samples": [{"t": i * dt, "value_c": v, "error": None if v is not None else "N/A", "duty": 0.5}
                        for i, v in enumerate(values)], "stopped": "test", "final_duty": 0.5}


def gpu_steady(values):
    return {"trace": trace_of(values), "sensor": NVML_SENSOR}, GPU_TH, "gpu0"


def cpu_steady(values):
    return {"trace": trace_of(values), "sensor": K10_SENSOR}, CPU_TH, "cpu package 0"


DITHER = [69.0 if (i * 7) % 10 < 5 else 70.0 for i in range(130)]
SPREAD = [63.0 + (1.5 if i % 2 else 0.0) for i in range(300)]


# -- equivalence ----------------------------------------------------------------------------------------------

#: The profile's EQ-PRECISION thresholds, and an operator whose own override sets its tolerance (the check resolves
#: the tolerance from the two).
EQ_TH = th("EQ-PRECISION", rtol_fp16=0.003, risk_class="default", atol={"high": 1e-4, "default": 1e-3, "low": 1e-2})
OPERATOR = {"name": "gemm", "dtype": "float32", "accumulation": 0, "override": [1e-3, 1e-5], "why": "test"}
TOL = {"rtol": 1e-3, "atol": 1e-5}


def precision(perturb=None):
    ref = np.linspace(-2.0, 2.0, 64, dtype=np.float32).reshape(8, 8)
    out = ref.copy()
    if perturb:
        perturb(out)
    return ({"comparison": compare(out, ref, rtol=TOL["rtol"], atol=TOL["atol"]), "reference": "f64",
             "operator": OPERATOR}, EQ_TH, "cpu gemm float32")


def _nan(a):
    a[3, 7] = np.nan


def _off(a):
    a[2, 5] = a[2, 5] * 1.01 + 0.01


STEADY = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98]
JUMPY = [1.0, 1.3, 0.8, 1.1, 0.7, 1.2]


def throughput(samples, control_cv):
    return {"samples_s": samples, "control_cv": control_cv, "method": "m"}, th("EQ-THROUGHPUT", max_cv=0.05), "cpu gemm"


ROWS = [{"op": "gemm", "dtype": "float16", "ratio": 1.4}, {"op": "gelu", "dtype": "float16", "ratio": 0.9}]


def ratio(rows, max_ratio, rid="EQ-LATENCY"):
    return {"operators": rows}, th(rid, max_ratio=max_ratio), "cuda:0"


def coverage(golden, corpus):
    return {"golden": golden, "corpus": corpus, "source": "/g"}, th("EQ-PRECISION"), ""


# -- compute-ready graph ----------------------------------------------------------------------------------------

GEMM = [{"dtype": "float16", "tflops": 700.0, "size": 8192, "iterations": 20, "verified": True},
        {"dtype": "bfloat16", "tflops": 690.0, "size": 8192, "iterations": 20, "verified": True}]
EDGE = {"pair": [0, 1], "gbps_median": 350.0, "samples_gbps": [349.0, 350.0, 351.0], "verified": True,
        "peer_access": True, "nvlink_bytes": 1 << 30}
SYNC = {"backend": "nccl", "world_size": 8, "bytes": 1 << 28, "algbw_gbps": 200.0, "busbw_gbps": 350.0,
        "verified": True}
FINE_TIMER = {"clock": "tsc", "implementation": "rdtsc", "resolution_ns": 0.25, "granularity_ns": 0.3,
              "read_cost_ns": 7.0}
COARSE_TIMER = dict(FINE_TIMER, clock="perf_counter", implementation="clock_gettime", resolution_ns=1.0,
                    granularity_ns=30.0)


def jitter(timer, p1, p50, p99):
    return ({"timer": timer, "latency_ns": {"n": 1000, "p1": p1, "p50": p50, "p99": p99, "max": p99 + 5},
             "workload": "a fixed operation"}, th("CRG-JITTER", max_ns=2.5), "cuda:0")


# -- deployment health ------------------------------------------------------------------------------------------

ECC_TH = th("DEP-ECC", require_enabled=True, max_volatile_uncorrected=0, max_aggregate_uncorrected=0)
ECC_ZERO = {"volatile_uncorrected": 0, "aggregate_uncorrected": 0, "volatile_corrected": 3, "aggregate_corrected": 12}
ROWS_OK = {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
THROTTLE_TH = th("DEP-THROTTLE", max_fault_share=0.0)
AER_ZERO = {"fatal": 0, "nonfatal": 0, "correctable": 2}
CRITICAL_XIDS = th("DEP-XID", max_critical_events=0)


def ecc(mode, counts, pending=None):
    return ({"ecc_mode_current": mode, "ecc_mode_pending": mode if pending is None else pending, "counts": counts,
             "source": "nvml (test)", "errors": []}, ECC_TH, "0000:17:00.0")


def rowremap(rows, pages=None):
    return ({"remapped_rows": rows, "retired_pages": pages, "source": "nvml (test)"},
            th("DEP-ROWREMAP", max_uncorrectable_remaps=0, max_correctable_remaps=8, max_retired_pages=60),
            "0000:17:00.0")


def throttle(reasons, under_load=True):
    return ({"samples": [{"t": i * 0.1, "reasons": r, "under_load": under_load} for i, r in enumerate(reasons)],
             "load": {"reason": None if under_load else "torch missing"}}, THROTTLE_TH, "0000:17:00.0")


def persistence(mode):
    return {"persistence_mode": mode, "errors": []}, th("DEP-PERSIST", expected=True), "0000:17:00.0"


def nvlink(before, after, links=4):
    """DEP-NVLINK-ERRORS evidence: ``before``/``after`` {link: {counter: count}} over zeroed links; ``before``
    None: one reading (a submitted ``nvidia-smi nvlink -e``)."""
    def reading(counts):
        out = {str(k): {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0} for k in range(links)}
        for link, c in (counts or {}).items():
            out[link].update(c)
        return {"links": out, "unread": [], "source": "sample"}
    ev = ({"reading": reading(after), "source": "nvlink.txt line 1"} if before is None
          else {"before": reading(before), "after": reading(after), "reader": "NVML", "window_s": 4.0, "load": None})
    return ev, th("DEP-NVLINK-ERRORS"), "0000:17:00.0"


def powercap(enforced_w, requested_w=None):
    requested_w = enforced_w if requested_w is None else requested_w
    return ({"enforced_mw": enforced_w * 1000, "requested_mw": requested_w * 1000, "default_mw": 700_000,
             "constraints_mw": [200_000, 700_000]}, th("DEP-POWERCAP", tdp_w=700, tolerance=0.03), "0000:17:00.0")


def pcie_errors(after, replays_after=5):
    return ({"aer_before": AER_ZERO, "aer_after": after, "replay_before": 5, "replay_after": replays_after,
             "window_s": 30}, th("DEP-PCIE-ERRORS", max_new_fatal=0, max_new_nonfatal=0, max_new_replays=0),
            "0000:17:00.0")


def xid(events, history=()):
    return ({"watch": {"source": "nvml events", "window_s": 30, "events": [{"xid": x} for x in events]},
             "history": {"readable": True, "source": "dmesg", "xids": [{"xid": x, "line": f"NVRM: Xid {x}"}
                                                                    for x in history]}},
            CRITICAL_XIDS, "0000:17:00.0")


# -- security ---------------------------------------------------------------------------------------------------

FW_VERSIONS = {"driver": "560.35.03", "vbios": "96.00.89.00.01", "inforom": "G520.0200.00.05", "gsp": "560.35.03"}
FW_ALLOWED = {"driver": [{"min": "550", "reason": "CUDA 12.4 floor"}],
              "vbios": [{"version": "96.00.89.00.01", "reason": "OEM release 2024-05"}]}


def firmware(versions):
    return ({"versions": versions, "module_signature": {"state": "signed", "reason": "sig_enforce"}},
            th("SEC-FIRMWARE", allowed=FW_ALLOWED), "0000:17:00.0")


def tee(value):
    rows = [{"capability": "AMD SEV-SNP", "role": "host", "value": value, "source": "/proc/cpuinfo",
             "detail": "sev_snp flag"}]
    return {"cpu": rows, "gpu": []}, th("SEC-TEE", required=["AMD SEV-SNP:host"]), "host"


# -- inference under load ---------------------------------------------------------------------------------------

NVML_SOURCE = {"fast": True, "readings": 1000, "failed": 0, "p99_ms": 4.0, "max_ms": 6.0, "sensor_stamped": True}
BMC_SOURCE = {"fast": False, "readings": 30, "failed": 0, "p99_ms": 900.0, "max_ms": 1000.0, "sensor_stamped": False}


def plp_sample(nvml=NVML_SOURCE, overruns=0):
    return ({"period_ms": 10, "sources": {"nvml": nvml, "bmc": BMC_SOURCE}, "primary_power": ["nvml"],
             "ticks": 1000, "overruns": overruns, "statement": "test"}, th("PLP-SAMPLE", max_skew_periods=1.0), "cuda:0")


PEAK = {"flops_per_s": 1e15, "theoretical": True, "source": "profile hardware.fp16_dense_tflops"}
PPL_POINT = {"target_qps": 10.0, "rho": 0.5, "rho_p99": 0.6, "rho_max": 0.7, "step_ms_p50": 5.0}


def plp_ppl(point=PPL_POINT, window_ms=10, peak=PEAK):
    return ({"window_ms": window_ms, "rho_rule": "sliding windows", "peak": peak, "points": [point]},
            th("PLP-PPL", window_ms=10), "cuda:0")


SWEEP = [{"target_qps": 10.0, "rho": 0.4, "power_w": 450.0, "power_valid_reads": 100, "power_failed_reads": 0,
          "p99_latency_s": 0.002, "error_rate": 0.0},
         {"target_qps": 20.0, "rho": 0.65, "power_w": 560.0, "power_valid_reads": 100, "power_failed_reads": 0,
          "p99_latency_s": 0.004, "error_rate": 0.0},
         {"target_qps": 30.0, "rho": 0.95, "power_w": 690.0, "power_valid_reads": 100, "power_failed_reads": 0,
          "p99_latency_s": 0.020, "error_rate": 0.0}]


def plp_power(max_power_w, sweep=SWEEP):
    return {"sweep": sweep}, th("PLP-POWER", at_load_max=0.85, max_power_w=max_power_w), "cuda:0"


def plp_latency(max_latency_us, sweep=SWEEP):
    return {"sweep": sweep}, th("PLP-LATENCY", at_load_max=0.70, metric="query", max_latency_us=max_latency_us), "cuda:0"


TENANT = {"name": "chat", "p99_latency_s": 0.05, "early_stopping": {"estimate_s": 0.06, "queries": 5000},
          "throughput_rps": 10.0, "offered_rps": 10.0, "error_rate": 0.0, "errors": 0, "issued": 5000,
          "error_kinds": None}


def sla(**change):
    return ({"tenant": dict(TENANT, **change), "rule": "LoadGen Server, per tenant"},
            th("SVC-SLA", p99_ms=100, min_rps=5, max_error_rate=0.01), "chat")


COLDSTART = {"stages": [{"stage": "import", "seconds": 1.5}, {"stage": "load_weights", "seconds": 8.0},
                        {"stage": "first_token", "seconds": 0.5}], "total_s": 10.0, "page_cache": {"state": "warm"}}
KV_POOL = {"view": "kv-pool", "fraction": 0.01, "peak_blocks_used": 990, "pool_blocks": 1000, "block_tokens": 16,
           "fraction_time_weighted": 0.02, "method": "paged KV pool accounting"}
ALLOCATOR = {"view": "allocator", "fraction": 0.2, "inactive_split_peak_bytes": 200 << 20,
             "reserved_peak_bytes": 1000 << 20, "unused_reserved_fraction": 0.05, "method": "torch.cuda.memory_stats"}



# -- decided under noise: the evidence of the checks' current versions (trials, tails, blocks, controls) ---------

def scatter(center, rel, n, seed=1):
    """``n`` trials around ``center`` with a relative scatter ``rel`` (seeded)."""
    r = np.random.default_rng(seed)
    return [round(float(center * (1 + rel * x)), 4) for x in r.standard_normal(n)]


def hold3(occupancies, peak_share=1.0, reference=(40.0, 40.4)):
    timeline = [{"t": k * 0.1, "occupancy": x, "in_band": 0.85 <= x <= 0.92, "phase": "hold"}
                for k, x in enumerate(occupancies)]
    ev = {"band": [0.85, 0.92], "peak_gbps": 40.0, "peak_kernel": "copy", "window_s": 0.1, "timeline": timeline,
          "windows": len(timeline), "windows_in_band": sum(r["in_band"] for r in timeline),
          "source": "own accounting (injected bytes only)", "errors": [],
          "peak": {"kernels": {"copy": {"gbps_median": 40.0, "cpu_share_median": peak_share}}},
          "sequential": {"looks": 1}}
    if reference is not None:
        before, after = reference
        ev["reference"] = {"before_gbps": before, "during": [], "after_gbps": after, "after_cpu_share": 1.0,
                           "moved": round(abs(after - before) / before, 4)}
    return ev, HOLD_TH, "host"


def busy(sample, every=10, width=3, wait=0.4):
    """The hold of ``sample`` with other processes holding the CPUs for ``width`` windows out of ``every``."""
    ev, th, subject = sample
    for k, r in enumerate(ev["timeline"]):
        r["cpu_wait"] = wait if k % every < width else 0.01
    return ev, th, subject


def dips_when_busy(n=300, every=10, width=3):
    """Occupancy that leaves the band exactly in the windows where (and after) the CPUs were taken."""
    return [0.60 if k % every <= width else 0.88 for k in range(n)]


def dips(sample, every=12, width=2):
    """The hold of ``sample`` with the injectors flat out (saturated) in ``width`` windows out of ``every``."""
    ev, th, subject = sample
    for k, r in enumerate(ev["timeline"]):
        r["saturated"] = k % every < width
    return ev, th, subject


def dip_then_catch_up(n=300, every=12, width=2):
    """Occupancy below the band for ``width`` windows, above it for the one after: a machine's brief dip."""
    return [0.60 if k % every < width else 0.97 if k % every == width else 0.88 for k in range(n)]


def broken(sample):
    ev, th, subject = sample
    return dict(ev, errors=["injector 0: MemoryError"]), th, subject


def mixed(share_in, n=300, seed=3):
    r = np.random.default_rng(seed)
    return [0.88 if x < share_in else 0.80 for x in r.random(n)]


def device_bw2(samples, floor=0.8, verified=True, **extra):
    return (dict({"samples_gbps": samples, "gbps_median": float(np.median(samples)), "gbps_min": min(samples),
                  "gbps_max": max(samples), "verified": verified, "method": "m", "sequential": {"looks": 1}}, **extra),
            th("MEM-BW-EFFICIENCY", min_efficiency=floor, datasheet_gbps=3350), "0000:17:00.0")


def pcie_bw2(h2d, d2h, link=None, **extra):
    one = lambda s: {"samples_gbps": s, "gbps_median": float(np.median(s))}  # noqa: E731
    return ({"bandwidth": dict({"h2d": one(h2d), "d2h": one(d2h), "verified": True, "method": "m", "hold": "x"},
                               **extra),
             "link": link or {"gen": 5, "width": 16}}, th("TOPO-PCIE-BW", min_efficiency=0.7), "d")


#: A hold that lost its band under the copies (seen on an H200 host: the copies' DMA starved the injectors).
HOLD_OFF = {"hold": "1/5 windows in band",
            "hold_evidence": {"windows": 5, "windows_in_band": 1, "min_in_band_share": 0.95}}


def root_bus_path(port_type):
    """A device on a root bus with no port above it, of the given PCI Express port type (an H200 passed through to
    a virtual machine reads "endpoint")."""
    return ({"path": {"device": "0000:00:06.0", "pci_id": "10de:2335", "hops": [], "method": "exact",
                      "device_port_type": port_type,
                      "note": "no bridge above the device: it sits on a root bus (root-complex integrated, or a "
                              "virtual machine's passthrough)"}},
            th("TOPO-PCIE-DIRECT", max_switch_ports=0), "")


def crg_node_th(**bounds):
    """CRG-NODE's thresholds with only the bounds given (the base profile's 128 TFLOPS ceiling lifted)."""
    return th("CRG-NODE", **dict({"max_tflops": None, "min_tflops": None}, **bounds))


def gemm2(fp16, bf16, bounds):
    res = [{"dtype": d, "tflops": float(np.median(x)), "samples_tflops": x, "size": 8192, "iterations": 20,
            "verified": True} for d, x in (("float16", fp16), ("bfloat16", bf16))]
    return {"results": res, "method": "torch matmul"}, crg_node_th(**bounds), "cuda:0"


def edge2(fwd, rev, floor=300):
    return ({"pair": [0, 1], "forward": {"samples_gbps": fwd}, "reverse": {"samples_gbps": rev},
             "gbps_median": min(float(np.median(fwd)), float(np.median(rev))), "verified": True, "peer_access": True,
             "nvlink_bytes": None}, th("CRG-EDGE", min_gbps=floor), "cuda:0<->cuda:1")


def sync2(bus_samples_gbps, floor=0.3):
    n, nbytes = 8, 1 << 28
    times = [nbytes / (b * n / (2 * (n - 1))) / 1e9 for b in bus_samples_gbps]
    return ({"backend": "nccl", "world_size": n, "bytes": nbytes, "samples_s": times, "busbw_gbps": 350.0,
             "algbw_gbps": 200.0, "verified": True}, th("CRG-SYNC", min_tbps=floor), "8 devices")


def throughput2(samples, control_before, control_after):
    return ({"samples_s": samples, "control": {"before_s": control_before, "after_s": control_after},
             "control_cv": 0.01, "method": "m"}, th("EQ-THROUGHPUT", max_cv=0.05), "cpu gemm")


QUIET = scatter(0.02, 0.005, 15, seed=7)
NOISY = scatter(0.02, 0.2, 15, seed=8)


def ratio2(rows, max_ratio, rid="EQ-LATENCY"):
    return {"operators": rows}, th(rid, max_ratio=max_ratio), "cuda:0"


LAT_ROWS = [{"op": "gemm", "dtype": "float16", "here": 0.0014, "reference": 0.001, "ratio": 1.4,
             "samples": [0.00139, 0.00141, 0.0014, 0.00142, 0.00138]},
            {"op": "gelu", "dtype": "float16", "here": 0.0009, "reference": 0.001, "ratio": 0.9,
             "samples": [0.0009, 0.00091, 0.00089, 0.0009, 0.0009]}]
MEM_ROWS = [{"op": "gemm", "dtype": "float16", "here": 1400, "reference": 1000, "ratio": 1.4},
            {"op": "gelu", "dtype": "float16", "here": 900, "reference": 1000, "ratio": 0.9}]


def skew_sample(p99_ms, n=1000):
    values = list(np.random.default_rng(12).uniform(0.0, p99_ms / 0.99, n))  # its true P99 is p99_ms
    return dict(NVML_SOURCE, p99_ms=p99_ms, tails=[quantile_tail(values, 0.99)])


def plp_sample2(nvml):
    return ({"period_ms": 10, "sources": {"nvml": nvml, "bmc": BMC_SOURCE}, "primary_power": ["nvml"],
             "ticks": 1000, "overruns": 0, "statement": "test"}, th("PLP-SAMPLE", max_skew_periods=1.0), "cuda:0")


def lat_tail(p99_s, n=2000, seed=5):
    r = np.random.default_rng(seed)
    return quantile_tail(list(r.uniform(0.2 * p99_s, p99_s * 1.0101, n)), 0.99)


def point2(qps, rho, power, p99_s, n=2000, blocks_rel=0.005):
    return {"target_qps": qps, "rho": rho, "power_w": power, "power_valid_reads": 100, "power_failed_reads": 0,
            "p99_latency_s": p99_s, "error_rate": 0.0, "queries": n, "duration_s": n / qps,
            "latency_tail": lat_tail(p99_s, n), "power_blocks_w": scatter(power, blocks_rel, 10, seed=int(qps))}


SWEEP2 = [point2(10.0, 0.4, 450.0, 0.002), point2(20.0, 0.65, 560.0, 0.004), point2(30.0, 0.95, 690.0, 0.020)]


def runs3(sweep, *p99s):
    """Version 3's sweep: each point run once per P99 factor given (the point's own P99 times it)."""
    return [dict(p, latency_runs=[{"p99_latency_s": p["p99_latency_s"] * f, "queries": p["queries"]} for f in p99s],
                 latency_sequential={"looks": 1 + max(0, len(p99s) - 2), "trials": len(p99s),
                                     "plan": {"initial": 2, "step": 1, "cap": 4, "deadline": None}},
                 planned_s=p["duration_s"]) for p in sweep]


def sla3(**change):
    lat = list(np.random.default_rng(9).uniform(0.005, 0.0505, 5000))
    tenant = {"name": "chat", "p99_latency_s": 0.05, "latency": {"p99_s": 0.05, "tail": quantile_tail(lat, 0.99)},
              "early_stopping": {"estimate_s": 0.051, "queries": 5000}, "throughput_rps": 10.0, "offered_rps": 10.0,
              "error_rate": 0.0, "errors": 0, "issued": 5000, "completed": 5000, "error_kinds": None}
    tenant.update(change)
    return ({"tenant": tenant, "rule": "LoadGen Server, per tenant", "span_s": 500.0},
            th("SVC-SLA", p99_ms=100, min_rps=5, max_error_rate=0.01), "chat")


def coldstart2(samples, ceiling):
    return (dict(COLDSTART, samples_s=samples, total_s=float(np.median(samples))), th("SVC-COLDSTART", max_s=ceiling), "cold start")


def frag2(center, rel=0.1):
    return (dict(KV_POOL, fraction=center, step_fractions=scatter(center, rel, 400, seed=11)),
            th("SVC-FRAG", max_fraction=0.03), "kv-pool")


NOISE_SAMPLES = {
    "MEM-BW-HOLD": [
        ("in-band", lambda: hold3([0.88] * 300), PASS),
        ("too-weak", lambda: hold3([0.80] * 300), FAIL),
        ("mostly-in-band", lambda: hold3(mixed(0.95)), INCONCLUSIVE),
        ("no-window", lambda: hold3([]), INCONCLUSIVE),
        ("injector-broke", lambda: broken(hold3([0.88] * 50)), ERROR),
        ("reference-moved", lambda: hold3([0.55] * 300, reference=(30.0, 16.0)), INCONCLUSIVE),
        ("peak-cpu-starved", lambda: hold3([0.55] * 300, peak_share=0.24), INCONCLUSIVE),
        # out of band only while other processes held the CPUs: the scheduler, not the DRAM
        ("dips-while-cpus-busy", lambda: busy(hold3(dips_when_busy())), INCONCLUSIVE),
        # out of band whether or not the CPUs were busy: the DRAM cannot be held there
        ("too-weak-cpus-busy-too", lambda: busy(hold3([0.80] * 300)), FAIL),
        ("in-band-cpus-busy", lambda: busy(hold3([0.88] * 300)), PASS),
        # brief dips too short to re-measure the peak, each followed by its catch-up: the machine moved
        ("brief-bandwidth-dips", lambda: dips(hold3(dip_then_catch_up())), INCONCLUSIVE),
        # flat out below the band for the whole hold with the peak unchanged: the DRAM cannot be held there
        ("saturated-throughout", lambda: dips(hold3([0.80] * 300), every=1, width=1), FAIL),
    ],
    "MEM-BW-EFFICIENCY": [
        ("3000-of-3350", lambda: device_bw2(scatter(3000, 0.003, 7)), PASS),
        ("1900-of-3350", lambda: device_bw2(scatter(1900, 0.003, 7)), FAIL),
        ("on-the-floor", lambda: device_bw2(scatter(2680, 0.02, 7)), INCONCLUSIVE),
        ("moved-down", lambda: device_bw2([2500.0, 2450.0, 2400.0, 2350.0, 2300.0, 2250.0, 2200.0]), INCONCLUSIVE),
        ("not-verified", lambda: device_bw2(scatter(3000, 0.003, 7), verified=False), FAIL),
        ("no-floor", lambda: device_bw2(scatter(3000, 0.003, 7), floor=None), WARN),
        ("absent", lambda: ({"absent": "no GPU"}, th("MEM-BW-EFFICIENCY", datasheet_gbps=3350), "x"), SKIP),
        ("low-but-ungated", lambda: device_bw2(scatter(1900, 0.003, 7), gated=False), INCONCLUSIVE),
        ("low-and-gated", lambda: device_bw2(scatter(1900, 0.003, 7), gated=True), FAIL),
    ],
    "TOPO-PCIE-BW": [
        ("gen5-x16", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(52.0, 0.01, 7, seed=2)), PASS),
        ("d2h-low", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(20.0, 0.01, 7, seed=2)), FAIL),
        ("d2h-on-the-floor", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(44.1, 0.05, 7, seed=2)), INCONCLUSIVE),
        ("unknown-link", lambda: pcie_bw2([53.0] * 7, [52.0] * 7, {"gen": None, "width": 16}), INCONCLUSIVE),
        ("hold-out-of-band", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(52.0, 0.01, 7, seed=2), **HOLD_OFF),
         INCONCLUSIVE),
        ("d2h-low-but-ungated", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(20.0, 0.01, 7, seed=2), gated=False),
         INCONCLUSIVE),
    ],
    "CRG-NODE": [
        ("within-floor", lambda: gemm2(scatter(700, 0.005, 5), scatter(690, 0.005, 5, 2), {"min_tflops": 500}), PASS),
        ("above-ceiling", lambda: gemm2(scatter(700, 0.005, 5), scatter(690, 0.005, 5, 2), {"max_tflops": 128}), FAIL),
        ("below-floor", lambda: gemm2(scatter(700, 0.005, 5), scatter(690, 0.005, 5, 2), {"min_tflops": 800}), FAIL),
        ("on-the-floor", lambda: gemm2(scatter(700, 0.05, 5), scatter(700, 0.05, 5, 2), {"min_tflops": 700}),
         INCONCLUSIVE),
        ("no-bound", lambda: gemm2(scatter(700, 0.005, 5), scatter(690, 0.005, 5, 2), {}), WARN),
    ],
    "CRG-EDGE": [
        ("nvlink-pair", lambda: edge2(scatter(350, 0.01, 7), scatter(349, 0.01, 7, 2)), PASS),
        ("slow-pair", lambda: edge2(scatter(25, 0.01, 7), scatter(25, 0.01, 7, 2)), FAIL),
        ("on-the-floor", lambda: edge2(scatter(301, 0.05, 7), scatter(350, 0.01, 7, 2)), INCONCLUSIVE),
        ("no-floor", lambda: edge2(scatter(350, 0.01, 7), scatter(349, 0.01, 7, 2), None), WARN),
    ],
    "CRG-SYNC": [
        ("nccl-8", lambda: sync2(scatter(350, 0.01, 5)), PASS),
        ("below-2tbps", lambda: sync2(scatter(350, 0.01, 5), 2.0), FAIL),
        ("on-the-floor", lambda: sync2(scatter(300, 0.05, 5), 0.3), INCONCLUSIVE),
    ],
    "EQ-THROUGHPUT": [
        ("steady", lambda: throughput2(scatter(0.01, 0.01, 25), QUIET, QUIET), PASS),
        ("jumpy-quiet-host", lambda: throughput2(scatter(0.01, 0.2, 25), QUIET, QUIET), FAIL),
        ("jumpy-noisy-host", lambda: throughput2(scatter(0.01, 0.2, 25), NOISY, NOISY), INCONCLUSIVE),
        ("host-moved", lambda: throughput2(scatter(0.01, 0.2, 25), QUIET, [x * 1.3 for x in QUIET]), INCONCLUSIVE),
    ],
    "EQ-LATENCY": [
        ("within-2x", lambda: ratio2(LAT_ROWS, 2.0), PASS),
        ("above-1.2x", lambda: ratio2(LAT_ROWS, 1.2), FAIL),
        ("on-1.4x", lambda: ratio2(LAT_ROWS, 1.4), INCONCLUSIVE),
        ("no-limit", lambda: ratio2(LAT_ROWS, None), WARN),
        ("no-rows", lambda: ratio2([], 2.0), SKIP),
    ],
    "EQ-RESOURCE": [
        ("within-2x", lambda: ratio2(MEM_ROWS, 2.0, "EQ-RESOURCE"), PASS),
        ("above-1.2x", lambda: ratio2(MEM_ROWS, 1.2, "EQ-RESOURCE"), FAIL),
        ("no-limit", lambda: ratio2(MEM_ROWS, None, "EQ-RESOURCE"), WARN),
    ],
    "PLP-SAMPLE": [
        ("nvml-4ms", lambda: plp_sample2(skew_sample(4.0)), PASS),
        ("nvml-25ms", lambda: plp_sample2(skew_sample(25.0)), FAIL),
        ("nvml-near-10ms", lambda: plp_sample2(skew_sample(10.0)), INCONCLUSIVE),
        ("overruns", lambda: (dict(plp_sample2(skew_sample(4.0))[0], overruns=200), th("PLP-SAMPLE", max_skew_periods=1.0),
                              "cuda:0"), INCONCLUSIVE),
    ],
    "PLP-PPL": [
        ("rho-0.5", lambda: plp_ppl(dict(PPL_POINT, rho_tail=quantile_tail(list(np.random.default_rng(6).uniform(0.3, 0.7, 500)), 0.99))),
         PASS),
        ("above-peak", lambda: plp_ppl(dict(PPL_POINT, rho_max=1.3)), FAIL),
        ("wrong-window", lambda: plp_ppl(window_ms=100), FAIL),
        ("measured-peak", lambda: plp_ppl(peak=dict(PEAK, theoretical=False)), WARN),
    ],
    "PLP-POWER": [
        ("under-600w", lambda: plp_power(600, SWEEP2), PASS),
        ("over-500w", lambda: plp_power(500, SWEEP2), FAIL),
        ("on-560w", lambda: plp_power(560, SWEEP2), INCONCLUSIVE),
        ("no-ceiling", lambda: plp_power(None, SWEEP2), WARN),
        ("no-reading", lambda: plp_power(600, [dict(p, power_w=None) for p in SWEEP2]), SKIP),
    ],
    "PLP-LATENCY": [
        ("under-5ms", lambda: plp_latency(5000, SWEEP2), PASS),
        ("over-3ms", lambda: plp_latency(3000, SWEEP2), FAIL),
        ("on-4ms", lambda: plp_latency(4000, SWEEP2), INCONCLUSIVE),
        ("few-queries", lambda: plp_latency(5000, [point2(10.0, 0.4, 450.0, 0.002, n=50)]), INCONCLUSIVE),
        ("errors", lambda: plp_latency(5000, [dict(p, error_rate=0.2) for p in SWEEP2]), INCONCLUSIVE),
        # over the ceiling while the device's maximum throughput moved under the sweep (measured again around
        # each point): the point ran at another load than planned
        ("over-3ms-max-moved", lambda: (dict(plp_latency(3000, [dict(p, max_qps_around=[100.0, 88.0],
                                                                       reference_moved=0.12) for p in SWEEP2])[0],
                                             max={"qps": 100.0}),) + plp_latency(3000)[1:], INCONCLUSIVE),
        # the same move, measured by Offline runs of 20 queries (resolution about 22%): it does not explain the FAIL
        ("over-3ms-coarse-max", lambda: (dict(plp_latency(3000, [dict(p, max_qps_around=[100.0, 88.0],
                                                                        max_queries_around=[20, 20],
                                                                        reference_moved=0.12) for p in SWEEP2])[0],
                                              max={"qps": 100.0, "queries": 20}),) + plp_latency(3000)[1:], FAIL),
        # over the ceiling, and the maximum held still around every point: the device is slow at that load
        ("over-3ms-max-held", lambda: (dict(plp_latency(3000, [dict(p, max_qps_around=[100.0, 101.0],
                                                                      reference_moved=0.01) for p in SWEEP2])[0],
                                            max={"qps": 100.0}),) + plp_latency(3000)[1:], FAIL),
        # version 3: each point run until decided, on the mean of its runs' P99s
        ("runs-under-5ms", lambda: plp_latency(5000, runs3(SWEEP2, 1.0, 1.02)), PASS),
        ("runs-over-3ms", lambda: plp_latency(3000, runs3(SWEEP2, 1.0, 1.02)), FAIL),
        ("runs-straddle-4ms", lambda: plp_latency(4000, runs3(SWEEP2, 0.7, 1.3, 0.9, 1.2)), INCONCLUSIVE),
    ],
    "SVC-SLA": [
        ("within", lambda: sla3(), PASS),
        ("p99-200ms", lambda: sla3(latency={"p99_s": 0.2, "tail": quantile_tail(
            list(np.random.default_rng(4).uniform(0.05, 0.202, 5000)), 0.99)}), FAIL),
        ("errors", lambda: sla3(error_rate=0.05, errors=250), FAIL),
        ("p99-on-100ms", lambda: sla3(latency={"p99_s": 0.1, "tail": quantile_tail(
            list(np.random.default_rng(4).uniform(0.01, 0.101, 5000)), 0.99)}), INCONCLUSIVE),
        ("too-few-queries", lambda: sla3(early_stopping={"estimate_s": None, "queries": 50, "queries_needed": 600}),
         INCONCLUSIVE),
    ],
    "SVC-COLDSTART": [
        ("within-30s", lambda: coldstart2(scatter(10.0, 0.02, 3), 30), PASS),
        ("over-5s", lambda: coldstart2(scatter(10.0, 0.02, 3), 5), FAIL),
        ("on-10s", lambda: coldstart2(scatter(10.0, 0.1, 3), 10), INCONCLUSIVE),
        ("no-ceiling", lambda: coldstart2(scatter(10.0, 0.02, 3), None), WARN),
    ],
    "SVC-FRAG": [
        ("kv-pool-1pct", lambda: frag2(0.01), PASS),
        ("kv-pool-20pct", lambda: frag2(0.2), FAIL),
        ("kv-pool-near-3pct", lambda: frag2(0.03, 0.3), INCONCLUSIVE),
        ("allocator-20pct", lambda: (ALLOCATOR, th("SVC-FRAG", max_fraction=0.03), "allocator"), FAIL),
    ],
    "THERM-GPU-STEADY": [
        ("dither", lambda: gpu_steady(DITHER), PASS),
        ("gap", lambda: gpu_steady([70.0, 69.0] * 50 + [None] + [70.0, 69.0] * 70), PASS),
        ("constant-coarse", lambda: gpu_steady([70.0] * 130), INCONCLUSIVE),
        ("stopped-answering", lambda: gpu_steady([70.0, 69.0] * 30 + [None] * 10), INCONCLUSIVE),
        ("never-answered", lambda: gpu_steady([None] * 10), ERROR),
        ("settled-at-75", lambda: gpu_steady([75.0, 76.0] * 100), FAIL),
        ("short-run", lambda: gpu_steady([70.0, 69.0] * 20), FAIL),
    ],
    "THERM-CPU-STEADY": [
        ("constant-fine", lambda: cpu_steady([64.0] * 130), PASS),
        ("spread-1.5", lambda: cpu_steady(SPREAD), FAIL),
    ],
}

def mlperf(req, server=None, with_offline=True, with_power=True, **over):
    """One Server run of an MLPerf submission tree (tests/mlperf_texts.py) as ``req`` is judged on it, with the
    h100 profile's thresholds and ``over`` on top."""
    import shutil
    import tempfile

    from mlperf_texts import submission
    from pytest_sits.conditions.inference.mlperf import evidence

    root = Path(tempfile.mkdtemp(prefix="sits-mlperf-sample-"))
    try:
        submission(root, server=server, with_offline=with_offline, with_power=with_power)
        [(subject, ev)] = evidence(from_spec(f"evidence:{root}").inventory(), req)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return ev, dict(resolve("h100").check_thresholds(req), **over), subject


#: SVC-SLA's workload with output lengths covering the sample runs' requests (100 tokens on average).
MLPERF_WL = {"samples": 1000, "prompt_tokens": [16, 128], "output_tokens": [1, 512]}

def nvb_edge(fwd, rev):
    """One GPU pair of a submitted nvbandwidth text, as conditions/crg.py submitted_edges() gives it."""
    ev = {"source": "nvbandwidth", "file": "nvbandwidth.txt", "test": "device_to_device_memcpy_read_ce",
          "label": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", "line": 20, "version": "v0.4",
          "pair": ["0000:18:00.0", "0000:2a:00.0"], "indices": [0, 1], "forward_gbps": fwd, "reverse_gbps": rev,
          "match_rule": "its CUDA index in bus order (the counts agree)", "cut": False}
    return ev, dict(resolve("h100").check_thresholds("CRG-EDGE")), "0000:18:00.0<->0000:2a:00.0"


def nvb_host(h2d, d2h, gen=5, width=16):
    """One GPU's host<->device figures of a submitted nvbandwidth text (a modelled two-GPU run, figures of our own)
    with its link from nvidia-smi -q, as conditions/bandwidth.py submitted_pcie_bw() gives them."""
    from pytest_sits.conditions.bandwidth import submitted_pcie_bw
    from pytest_sits.probes.readers.nvbandwidth import parse_nvbandwidth

    text = ("nvbandwidth Version: v0.5\nDevice 0: NVIDIA H100 80GB HBM3 (00000000:18:00)\n"
            "Device 1: NVIDIA H100 80GB HBM3 (00000000:2a:00)\n\nRunning host_to_device_memcpy_ce.\n"
            "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n           0         1\n"
            f" 0     {h2d:8.2f}     55.31\n\nSUM host_to_device_memcpy_ce {h2d + 55.31:.2f}\n\n"
            "Running device_to_host_memcpy_ce.\nmemcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)\n"
            f"           0         1\n 0     {d2h:8.2f}     55.12\n\nSUM device_to_host_memcpy_ce {d2h + 55.12:.2f}\n")
    facts = parse_nvbandwidth(text)
    bdf = "0000:18:00.0"
    inv = {"submitted": {"nvbandwidth": [{"file": "nvbandwidth.txt", "version": facts["version"], "tests": facts["tests"],
                                          "index_to_key": {"0": bdf, "1": "0000:2a:00.0"}, "cuts": [],
                                          "match_rule": "its CUDA index in bus order (the counts agree)"}],
                         "links": {bdf: {"capability": {"achievable_gen": gen, "achievable_width": width}}
                                   if gen else {}}}}
    return submitted_pcie_bw(inv, {"bdf": bdf}), th("TOPO-PCIE-BW"), bdf


def dcgmi(tests=(), messages=(), gpu=0):
    """One GPU's results of a submitted dcgmi diag, as conditions/health.py submitted_dcgmi() gives them."""
    return {"source": "dcgmi diag", "file": "dcgmi.txt", "version": "3.3.9", "gpu": gpu, "device": f"GPU{gpu}",
            "tests": [{"name": n, "line": 10 + i, "category": c, "status": [st]} for i, (n, c, st) in enumerate(tests)],
            "messages": [{"text": t, "line": 30, "kind": k, "gpu": gpu} for t, k in messages],
            "match_rule": None, "cut": False}


def mlperf_accuracy(scores=None, with_hash=True, path="closed/T/results/S/llama2-70b-99.9/Server/accuracy/accuracy.txt"):
    """EQ-PRECISION on an accuracy.txt (tests/mlperf_texts.py) read by the MLPerf reader, at ``path`` (its benchmark
    is told from it)."""
    from mlperf_texts import ACCURACY, accuracy
    from pytest_sits.conditions.inference.mlperf import accuracy_evidence
    from pytest_sits.probes.readers.mlperf import parse_accuracy

    facts = parse_accuracy(accuracy(dict(ACCURACY, **(scores or {})), with_hash=with_hash))["accuracy"]
    [(subject, ev)] = accuracy_evidence({"submitted": {"mlperf": {"accuracy": [dict(facts, file=path)]}}})
    return ev, th("EQ-PRECISION"), subject


def declared_inventory(**system):
    """The inventory of submitted texts that hold an MLPerf systems JSON (tests/mlperf_texts.py) and no reading."""
    from mlperf_texts import system as system_json
    from pytest_sits.probes.readers.mlperf import parse_system

    facts = dict(parse_system(system_json(**system))["system"], file="closed/T/systems/S.json")
    return {"accelerators": [], "management": {"nvml": {"available": False}},
            "submitted": {"files": [], "mlperf": {"runs": [], "power": [], "systems": [facts]}}}


def declared(req, **system):
    """INV-DEVICES, MEM-CAPACITY or DEP-DRIVER on a systems JSON alone, with the h100 profile's thresholds."""
    from pytest_sits.conditions.inventory import acquire_capacity, acquire_devices, acquire_driver

    inv = declared_inventory(**system)
    exp, prof = _profile("h100")
    if req == "INV-DEVICES":
        return acquire_devices(inv), dict(prof.thresholds(req), expected=exp), "accelerators"
    if req == "MEM-CAPACITY":
        return acquire_capacity(inv, exp), prof.thresholds(req), "accelerators"
    return acquire_driver(inv), prof.thresholds(req), "driver"


H100_DECLARED = {"model": "NVIDIA H100-SXM-80GB", "memory": "80 GB", "stack": "TensorRT 10.8, CUDA 12.8, Driver 570.124.06"}

#: INV-DEVICES, MEM-CAPACITY and DEP-DRIVER on an MLPerf systems JSON alone (as declared), added to theirs below.
DECLARED_SAMPLES = {
    "INV-DEVICES": [
        ("h100-declared", lambda: declared("INV-DEVICES", **H100_DECLARED), WARN),
        ("h200-declared", lambda: declared("INV-DEVICES", **dict(H100_DECLARED, model="NVIDIA H200-SXM-141GB")), FAIL),
        ("four-declared", lambda: declared("INV-DEVICES", count=4, **H100_DECLARED), FAIL),
        ("no-form-factor", lambda: declared("INV-DEVICES", **dict(H100_DECLARED, model="NVIDIA H100 80GB HBM3")),
         INCONCLUSIVE),
    ],
    "MEM-CAPACITY": [
        ("141-gb", lambda: declared("MEM-CAPACITY", **dict(H100_DECLARED, memory="141 GB")), WARN),
        ("48-gb", lambda: declared("MEM-CAPACITY", **dict(H100_DECLARED, memory="48 GB")), FAIL),
        ("80-gb-between", lambda: declared("MEM-CAPACITY", **H100_DECLARED), INCONCLUSIVE),
    ],
    "DEP-DRIVER": [
        ("570", lambda: declared("DEP-DRIVER", **H100_DECLARED), WARN),
        ("550-carries-12.4", lambda: declared("DEP-DRIVER", **dict(H100_DECLARED, stack="CUDA 12.4, Driver 550.90.07")),
         FAIL),
        ("535", lambda: declared("DEP-DRIVER", **dict(H100_DECLARED, stack="Driver 535.104.05")), FAIL),
        ("no-driver", lambda: declared("DEP-DRIVER", **dict(H100_DECLARED, stack="TensorRT 10.8")), INCONCLUSIVE),
    ],
}

MLPERF_SAMPLES = {
    "TOPO-PCIE-BW/nvbandwidth": [
        ("gen5-x16-40pct", lambda: nvb_host(25.1, 55.2), FAIL),
        ("gen5-x16-88pct", lambda: nvb_host(55.3, 55.2), INCONCLUSIVE),
        ("above-the-link-c2c", lambda: nvb_host(359.1, 377.2), INCONCLUSIVE),
        ("no-link-facts", lambda: nvb_host(55.3, 55.2, gen=None), INCONCLUSIVE),
    ],
    "EQ-PRECISION/mlperf": [
        ("targets-met", lambda: mlperf_accuracy(), PASS),
        ("rouge1-below-99.9", lambda: mlperf_accuracy({"rouge1": 44.30}), FAIL),
        ("tokens-per-sample-above", lambda: mlperf_accuracy({"tokens_per_sample": 330.0}), FAIL),
        ("99-class-0.6pct-short", lambda: mlperf_accuracy({"rouge2": 21.90}, path="r/S/llama2-70b-99/Offline/accuracy/"
                                                                                    "accuracy.txt"), WARN),
        ("no-hash", lambda: mlperf_accuracy(with_hash=False), INCONCLUSIVE),
        ("benchmark-unknown", lambda: mlperf_accuracy(path="accuracy.txt"), INCONCLUSIVE),
    ],
    "DEP-PERSIST/dcgmi": [
        ("pass", lambda: (dcgmi([("Persistence Mode", "Deployment", "pass")]), th("DEP-PERSIST"), "GPU0"), PASS),
        ("fail", lambda: (dcgmi([("Persistence Mode", "Deployment", "fail")]), th("DEP-PERSIST"), "GPU0"), FAIL),
    ],
    "DEP-ROWREMAP/dcgmi": [
        ("pass", lambda: (dcgmi([("Page Retirement/Row Remap", "Deployment", "pass")]), th("DEP-ROWREMAP"), "GPU3"),
         PASS),
        ("error-pending", lambda: (dcgmi(messages=[("GPU 3 has uncorrectable memory errors and row remappings are "
                                                    "pending", "errors")], gpu=3), th("DEP-ROWREMAP"), "GPU3"), FAIL),
        ("pass-with-limits", lambda: (dcgmi([("Page Retirement/Row Remap", "Deployment", "pass")]),
                                      th("DEP-ROWREMAP", max_uncorrectable_remaps=0), "GPU0"), INCONCLUSIVE),
    ],
    "DEP-ECC/dcgmi": [
        ("memory-fail", lambda: (dcgmi([("GPU Memory", "Hardware", "fail")]), th("DEP-ECC"), "GPU0"), FAIL),
        ("memory-pass", lambda: (dcgmi([("GPU Memory", "Hardware", "pass")]), th("DEP-ECC"), "GPU0"), INCONCLUSIVE),
        ("memory-skip", lambda: (dcgmi([("GPU Memory", "Hardware", "skip")]), th("DEP-ECC"), "GPU0"), INCONCLUSIVE),
    ],
    "CRG-EDGE/nvbandwidth": [
        ("nvlink4-pair", lambda: nvb_edge(370.9, 371.7), PASS),
        ("one-direction-over-pcie", lambda: nvb_edge(370.9, 22.1), FAIL),
        ("cut", lambda: nvb_edge(370.9, None), INCONCLUSIVE),
    ],
    "SVC-SLA/mlperf": [
        ("within", lambda: mlperf("SVC-SLA", p99_ms=2000, min_rps=40, workload=MLPERF_WL), PASS),
        ("b-targets", lambda: mlperf("SVC-SLA", workload=MLPERF_WL), FAIL),
        ("ttft-only-other-workload", lambda: mlperf("SVC-SLA", ttft_p99_ms=500), PASS),
        ("another-workload", lambda: mlperf("SVC-SLA"), INCONCLUSIVE),
        ("invalid-duration", lambda: mlperf("SVC-SLA", server={"min_duration_met": "No", "result": "INVALID"},
                                            p99_ms=2000, min_rps=40, workload=MLPERF_WL), INCONCLUSIVE),
    ],
    "PLP-LATENCY/mlperf": [
        ("within-above-bound", lambda: mlperf("PLP-LATENCY", max_latency_us=50_000), PASS),
        ("beyond-within-bound", lambda: mlperf("PLP-LATENCY", server={"tokens_per_s": 3000.0}), FAIL),
        ("beyond-above-bound", lambda: mlperf("PLP-LATENCY"), INCONCLUSIVE),
    ],
    "PLP-PPL/mlperf": [
        ("whole-run-ratio", lambda: mlperf("PLP-PPL"), INCONCLUSIVE),
        ("server-over-offline", lambda: mlperf("PLP-PPL", server={"tokens_per_s": 7000.0}), FAIL),
    ],
    "PLP-POWER/mlperf": [
        ("node-within", lambda: mlperf("PLP-POWER", max_node_power_w=10_000, at_load_max=0.8), PASS),
        ("node-over", lambda: mlperf("PLP-POWER", server={"tokens_per_s": 3000.0}, max_node_power_w=8_000), FAIL),
        ("per-accelerator-bound", lambda: mlperf("PLP-POWER"), INCONCLUSIVE),
    ],
}

#: check name -> [(sample id, builder of (evidence, thresholds, subject), the status it decides)]
SAMPLES = {
    **MLPERF_SAMPLES,
    "INV-DEVICES": [
        ("eight-h100", lambda: devices(_gpus(8), NVML_OK), PASS),
        ("one-missing", lambda: devices(_gpus(7), NVML_OK), FAIL),
        ("wrong-model", lambda: devices(_gpus(7) + _gpus(1, "10de:2331"), NVML_OK), FAIL),
        ("no-memory-reading", lambda: devices(_gpus(8, mem=None), {"available": False, "reason": "NVML missing"}),
         INCONCLUSIVE),
    ],
    "MEM-CAPACITY": [
        ("eight-h100", lambda: capacity(_gpus(8)), PASS),
        ("48-gib-cards", lambda: capacity(_gpus(8, mem=48 * GIB)), FAIL),
        ("no-memory-reading", lambda: capacity(_gpus(2, mem=None)), INCONCLUSIVE),
        ("absent", lambda: ({"absent": "profile expects 8 × H100"}, capacity([])[1], "accelerators"), SKIP),
    ],
    "DEP-DRIVER": [
        ("560", lambda: driver({"nvml": NVML_OK}), PASS),
        ("535", lambda: driver({"nvml": NVML_OLD}), FAIL),
        ("unreadable", lambda: driver({"nvml": {"available": False, "reason": "x"}}), INCONCLUSIVE),
        ("no-nvidia", lambda: driver({"absent": "no NVIDIA device: the NVIDIA driver floor does not apply"}), SKIP),
        ("cuda-not-in-evidence", lambda: driver({"nvml": dict(NVML_OK, cuda_driver_version=None)}), INCONCLUSIVE),
        ("old-driver-cuda-unknown", lambda: driver({"nvml": dict(NVML_OLD, cuda_driver_version=None)}), FAIL),
    ],
    "TOPO-PCIE-DIRECT": [
        ("lspci-direct", lambda: lspci_path("0000:01:00.0"), PASS),
        ("lspci-behind-switch", lambda: lspci_path("0000:c4:00.0"), FAIL),
        ("sim-direct", lambda: sim_direct("sim:h100"), PASS),
        ("sim-switch", lambda: sim_direct("sim:h100+switch"), FAIL),
        ("vm-endpoint-on-root-bus", lambda: root_bus_path("endpoint"), INCONCLUSIVE),
        ("unread-on-root-bus", lambda: root_bus_path(None), INCONCLUSIVE),
        ("rc-integrated-on-root-bus", lambda: root_bus_path("rc_integrated_endpoint"), PASS),
    ],
    "TOPO-PCIE-LINK": [
        ("sim-full-link", lambda: sim_link("sim:h100", True, PASS), PASS),
        ("sim-degraded", lambda: sim_link("sim:h100+link-degraded", True, FAIL), FAIL),
        ("sim-idle", lambda: sim_link("sim:h100+link-idle", False, INCONCLUSIVE), INCONCLUSIVE),
        ("sim-idle-half-width", lambda: sim_link("sim:h100+link-degraded", False, FAIL), FAIL),
    ],
    "TOPO-NUMA-BIND": [
        ("bound", lambda: numa({"bdf": "0000:97:00.0", "numa_node": 1}, BOUND), PASS),
        ("host-bound", lambda: numa(None, BOUND), PASS),
        ("refused", lambda: numa({"bdf": "0000:97:00.0", "numa_node": 1},
                                 dict(BOUND, applied=False,
                                      errors=["set_mempolicy(bind, [1]): Operation not permitted"])), FAIL),
        ("unknown-node", lambda: numa({"bdf": "0000:17:00.0", "numa_node": -1}, None, {"require_known_node": True}),
         FAIL),
        ("snapshot", lambda: numa({"bdf": "0000:97:00.0", "numa_node": 1},
                                  {"node": 1, "applied": None, "reason": "a snapshot cannot bind"}), INCONCLUSIVE),
        ("not-attempted", lambda: numa({"bdf": "0000:97:00.0", "numa_node": 1}, None), INCONCLUSIVE),
    ],
    "LINK-NVLINK-MESH": [
        ("sim-full", lambda: sim_mesh("sim:h100"), PASS),
        ("sim-partial", lambda: sim_mesh("sim:h100+nvlink-partial"), FAIL),
        ("sim-partial-not-required", lambda: sim_mesh("sim:h100+nvlink-partial", required=False), WARN),
        ("sim-no-nvml", lambda: sim_mesh("sim:h100+no-nvml"), INCONCLUSIVE),
        ("smi-partial", lambda: smi_mesh(SMI_PARTIAL), FAIL),
        ("smi-full", lambda: smi_mesh(SMI_PARTIAL.replace("PXB", "NV18")), PASS),
        ("one-device", lambda: ({"mesh": {"devices": []}, "expected_devices": 1}, th("LINK-NVLINK-MESH", required=True), ""), SKIP),
    ],
    "EQ-PRECISION": [
        ("equal", lambda: precision(), PASS),
        ("one-nan", lambda: precision(_nan), FAIL),
        ("one-off", lambda: precision(_off), FAIL),
    ],
    "EQ-PRECISION/golden-coverage": [
        ("same-pairs", lambda: coverage(["a"], ["a"]), PASS),
        ("gelu-missing", lambda: coverage(["gemm__float16"], ["gemm__float16", "gelu__float16"]), INCONCLUSIVE),
    ],
    "CRG-JITTER": [
        ("fine-timer-steady", lambda: jitter(FINE_TIMER, 100.0, 101.0, 102.0), PASS),
        ("fine-timer-jittery", lambda: jitter(FINE_TIMER, 90.0, 101.0, 140.0), FAIL),
        ("coarse-timer", lambda: jitter(COARSE_TIMER, 90.0, 101.0, 140.0), SKIP),  # report only
    ],
    "DEP-ECC": [
        ("enabled-clean", lambda: ecc(True, ECC_ZERO), PASS),
        ("disabled", lambda: ecc(False, ECC_ZERO), FAIL),
        ("enable-pending", lambda: ecc(False, ECC_ZERO, pending=True), FAIL),
        ("uncorrected", lambda: ecc(True, dict(ECC_ZERO, volatile_uncorrected=2, aggregate_uncorrected=2)), FAIL),
        ("mode-unread", lambda: ecc(None, ECC_ZERO), INCONCLUSIVE),
    ],
    "DEP-ROWREMAP": [
        ("clean", lambda: rowremap(ROWS_OK), PASS),
        ("pending", lambda: rowremap(dict(ROWS_OK, pending=True, uncorrectable=1)), FAIL),
        ("failure", lambda: rowremap(dict(ROWS_OK, failure=True)), FAIL),
        ("pages-pending", lambda: rowremap(None, {"sbe": 2, "dbe": 1, "total": None, "pending": True}), FAIL),
        ("unread", lambda: rowremap(None), INCONCLUSIVE),
    ],
    "DEP-THROTTLE": [
        ("clean-under-load", lambda: throttle([0x0] * 20), PASS),
        ("power-brake", lambda: throttle([0x0] * 10 + [0x80 | 0x8] * 10), FAIL),
        ("idle-only", lambda: throttle([0x1] * 20, under_load=False), INCONCLUSIVE),
        ("power-brake-idle", lambda: throttle([0x1 | 0x80 | 0x8] * 5, under_load=False), FAIL),
    ],
    "DEP-PERSIST": [
        ("enabled", lambda: persistence(True), PASS),
        ("disabled", lambda: persistence(False), FAIL),
        ("unread", lambda: persistence(None), INCONCLUSIVE),
    ],
    "DEP-POWERCAP": [
        ("at-tdp", lambda: powercap(700), PASS),
        ("lowered", lambda: powercap(450), FAIL),
        ("no-tdp", lambda: (powercap(700)[0], th("DEP-POWERCAP", tolerance=0.03), "0000:17:00.0"), WARN),
    ],
    "DEP-PCIE-ERRORS": [
        ("clean", lambda: pcie_errors(AER_ZERO), PASS),
        ("new-fatal", lambda: pcie_errors(dict(AER_ZERO, fatal=1)), FAIL),
        ("replays", lambda: pcie_errors(AER_ZERO, replays_after=40), FAIL),
    ],
    "DEP-XID": [
        ("none", lambda: xid([]), PASS),
        ("xid-79-during-run", lambda: xid([79]), FAIL),
        ("xid-48-in-history", lambda: xid([], history=[48]), WARN),
        ("non-critical", lambda: xid([13]), WARN),
    ],
    "DEP-NVLINK-ERRORS": [
        ("no-growth", lambda: nvlink({"1": {"crc_flit": 3}}, {"1": {"crc_flit": 3}}), PASS),
        ("crc-grew", lambda: nvlink({}, {"2": {"crc_flit": 12, "replay": 12}}), FAIL),
        ("recovery-grew", lambda: nvlink({}, {"0": {"recovery": 1}}), FAIL),
        ("one-reading-zero", lambda: nvlink(None, {}), PASS),
        ("one-reading-counts", lambda: nvlink(None, {"3": {"replay": 2}}), INCONCLUSIVE),
    ],
    "SEC-FIRMWARE": [
        ("allowed", lambda: firmware(FW_VERSIONS), PASS),
        ("old-driver", lambda: firmware(dict(FW_VERSIONS, driver="535.104.05")), FAIL),
        ("vbios-unread", lambda: firmware(dict(FW_VERSIONS, vbios=None)), INCONCLUSIVE),
        ("no-allow-list", lambda: (firmware(FW_VERSIONS)[0], th("SEC-FIRMWARE"), "0000:17:00.0"), WARN),
    ],
    "SEC-TEE": [
        ("sev-snp", lambda: tee("yes"), PASS),
        ("no-sev-snp", lambda: tee("no"), FAIL),
        ("unknown", lambda: tee("unknown"), INCONCLUSIVE),
    ],
    **NOISE_SAMPLES,
}
for _name, _samples in DECLARED_SAMPLES.items():
    SAMPLES[_name] = SAMPLES[_name] + _samples

#: Earlier versions of the checks whose rule changed (kept registered for replay): (name, version) -> samples of
#: the evidence they were given.
LEGACY_SAMPLES = {
    ("MEM-BW-EFFICIENCY", 2): [
        ("3000-of-3350", lambda: device_bw2(scatter(3000, 0.003, 7)), PASS),
        ("1900-of-3350", lambda: device_bw2(scatter(1900, 0.003, 7)), FAIL),
        ("low-but-ungated", lambda: device_bw2(scatter(1900, 0.003, 7), gated=False), FAIL),
    ],
    ("TOPO-PCIE-BW", 2): [
        ("gen5-x16", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(52.0, 0.01, 7, seed=2)), PASS),
        ("d2h-low", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(20.0, 0.01, 7, seed=2)), FAIL),
        ("hold-out-of-band", lambda: pcie_bw2(scatter(53.0, 0.01, 7), scatter(52.0, 0.01, 7, seed=2), **HOLD_OFF),
         PASS),
    ],
    ("TOPO-PCIE-DIRECT", 1): [
        ("lspci-direct", lambda: lspci_path("0000:01:00.0"), PASS),
        ("lspci-behind-switch", lambda: lspci_path("0000:c4:00.0"), FAIL),
        ("vm-endpoint-on-root-bus", lambda: root_bus_path("endpoint"), PASS),
    ],
    ("MEM-BW-HOLD", 2): [
        ("in-band", lambda: hold([0.88] * 50), PASS),
        ("too-weak", lambda: hold([0.80] * 100), FAIL),
        ("no-window", lambda: hold([]), INCONCLUSIVE),
        ("injector-broke", lambda: hold([0.88] * 50, errors=["injector 0: MemoryError"]), ERROR),
    ],
    ("MEM-BW-EFFICIENCY", 1): [
        ("3000-of-3350", lambda: device_bw(), PASS),
        ("1900-of-3350", lambda: device_bw(gbps_median=1900.0), FAIL),
        ("not-verified", lambda: device_bw(verified=False), FAIL),
        ("no-floor", lambda: (DEV_BW, th("MEM-BW-EFFICIENCY", min_efficiency=None, datasheet_gbps=3350), "x"), WARN),
        ("no-datasheet", lambda: (DEV_BW, th("MEM-BW-EFFICIENCY", min_efficiency=0.8, datasheet_gbps=None), "x"), INCONCLUSIVE),
        ("absent", lambda: ({"absent": "no GPU"}, th("MEM-BW-EFFICIENCY", datasheet_gbps=3350), "x"), SKIP),
    ],
    ("TOPO-PCIE-BW", 1): [
        ("gen5-x16", lambda: pcie_bw(PCIE_BW), PASS),
        ("d2h-low", lambda: pcie_bw(dict(PCIE_BW, d2h={"gbps_median": 20.0})), FAIL),
        ("not-verified", lambda: pcie_bw(dict(PCIE_BW, verified=False)), FAIL),
        ("unknown-link", lambda: pcie_bw(PCIE_BW, {"gen": None, "width": 16}), INCONCLUSIVE),
    ],
    ("THERM-GPU-STEADY", 1): [
        ("dither", lambda: gpu_steady(DITHER), PASS),
        ("gap", lambda: gpu_steady([70.0, 69.0] * 50 + [None] + [70.0, 69.0] * 70), PASS),
        ("constant-coarse", lambda: gpu_steady([70.0] * 130), INCONCLUSIVE),
        ("stopped-answering", lambda: gpu_steady([70.0, 69.0] * 30 + [None] * 10), INCONCLUSIVE),
        ("never-answered", lambda: gpu_steady([None] * 10), ERROR),
        ("settled-at-75", lambda: gpu_steady([75.0, 76.0] * 100), FAIL),
        ("short-run", lambda: gpu_steady([70.0, 69.0] * 20), FAIL),
    ],
    ("THERM-CPU-STEADY", 1): [
        ("constant-fine", lambda: cpu_steady([64.0] * 130), PASS),
        ("spread-1.5", lambda: cpu_steady(SPREAD), FAIL),
    ],
    ("EQ-THROUGHPUT", 1): [
        ("steady", lambda: throughput(STEADY, 0.01), PASS),
        ("jumpy", lambda: throughput(JUMPY, 0.005), FAIL),
        ("noisy-host", lambda: throughput(JUMPY, 0.08), INCONCLUSIVE),
    ],
    ("EQ-LATENCY", 1): [
        ("within-2x", lambda: ratio(ROWS, 2.0), PASS),
        ("above-1.2x", lambda: ratio(ROWS, 1.2), FAIL),
        ("no-limit", lambda: ratio(ROWS, None), WARN),
        ("no-rows", lambda: ratio([], 2.0), SKIP),
    ],
    ("EQ-RESOURCE", 1): [
        ("within-2x", lambda: ratio(ROWS, 2.0, "EQ-RESOURCE"), PASS),
        ("above-1.2x", lambda: ratio(ROWS, 1.2, "EQ-RESOURCE"), FAIL),
        ("no-limit", lambda: ratio(ROWS, None, "EQ-RESOURCE"), WARN),
    ],
    ("CRG-NODE", 1): [
        ("within-floor", lambda: ({"results": GEMM, "method": "torch matmul"}, crg_node_th(min_tflops=500), "cuda:0"), PASS),
        ("above-ceiling", lambda: ({"results": GEMM, "method": "torch matmul"}, crg_node_th(max_tflops=128), "cuda:0"), FAIL),
        ("below-floor", lambda: ({"results": GEMM, "method": "torch matmul"}, crg_node_th(min_tflops=800), "cuda:0"), FAIL),
        ("not-verified", lambda: ({"results": [dict(GEMM[0], verified=False)]}, crg_node_th(min_tflops=500), "cuda:0"),
         INCONCLUSIVE),
    ],
    ("CRG-EDGE", 1): [
        ("nvlink-pair", lambda: (EDGE, th("CRG-EDGE", min_gbps=300), "cuda:0->cuda:1"), PASS),
        ("slow-pair", lambda: (dict(EDGE, gbps_median=25.0, peer_access=False), th("CRG-EDGE", min_gbps=300), "cuda:0->cuda:1"),
         FAIL),
        ("no-floor", lambda: (EDGE, th("CRG-EDGE", min_gbps=None), "cuda:0->cuda:1"), WARN),
    ],
    ("CRG-SYNC", 1): [
        ("nccl-8", lambda: (SYNC, th("CRG-SYNC", min_tbps=0.3), "8 devices"), PASS),
        ("below-2tbps", lambda: (SYNC, th("CRG-SYNC", min_tbps=2.0), "8 devices"), FAIL),
        ("not-verified", lambda: (dict(SYNC, verified=False), th("CRG-SYNC", min_tbps=0.3), "8 devices"), INCONCLUSIVE),
    ],
    ("PLP-SAMPLE", 1): [
        ("nvml-4ms", lambda: plp_sample(), PASS),
        ("nvml-25ms", lambda: plp_sample(dict(NVML_SOURCE, p99_ms=25.0, max_ms=40.0)), FAIL),
        ("overruns", lambda: plp_sample(overruns=200), INCONCLUSIVE),
    ],
    ("PLP-PPL", 1): [
        ("rho-0.5", lambda: plp_ppl(), PASS),
        ("above-peak", lambda: plp_ppl(dict(PPL_POINT, rho_max=1.3)), FAIL),
        ("wrong-window", lambda: plp_ppl(window_ms=100), FAIL),
        ("measured-peak", lambda: plp_ppl(peak=dict(PEAK, theoretical=False)), WARN),
    ],
    ("PLP-POWER", 1): [
        ("under-600w", lambda: plp_power(600), PASS),
        ("over-500w", lambda: plp_power(500), FAIL),
        ("no-ceiling", lambda: plp_power(None), WARN),
        ("no-reading", lambda: plp_power(600, [dict(p, power_w=None) for p in SWEEP]), SKIP),
    ],
    ("PLP-LATENCY", 2): [
        ("under-5ms", lambda: plp_latency(5000, SWEEP2), PASS),
        # a report's stored thresholds without a key version 2 had a default for (metric: query)
        ("under-5ms-no-metric", lambda: ({"sweep": SWEEP2}, {"at_load_max": 0.70, "max_latency_us": 5000}, "cuda:0"),
         PASS),
        ("over-3ms", lambda: plp_latency(3000, SWEEP2), FAIL),
        ("on-4ms", lambda: plp_latency(4000, SWEEP2), INCONCLUSIVE),
        ("over-3ms-max-moved", lambda: (dict(plp_latency(3000, [dict(p, max_qps_around=[100.0, 88.0],
                                                                       reference_moved=0.12) for p in SWEEP2])[0],
                                             max={"qps": 100.0}),) + plp_latency(3000)[1:], INCONCLUSIVE),
    ],
    ("PLP-LATENCY", 1): [
        ("under-5ms", lambda: plp_latency(5000), PASS),
        ("over-3ms", lambda: plp_latency(3000), FAIL),
        ("errors", lambda: plp_latency(5000, [dict(p, error_rate=0.2) for p in SWEEP]), INCONCLUSIVE),
    ],
    ("SVC-SLA", 2): [
        ("within", lambda: sla(), PASS),
        ("p99-200ms", lambda: sla(p99_latency_s=0.2), FAIL),
        ("errors", lambda: sla(error_rate=0.05, errors=250), FAIL),
        ("too-few-queries", lambda: sla(early_stopping={"estimate_s": None, "queries": 50, "queries_needed": 600}),
         INCONCLUSIVE),
    ],
    ("SVC-SLA", 1): [
        ("within", lambda: sla(), PASS),
        ("p99-200ms", lambda: sla(p99_latency_s=0.2), FAIL),
        ("too-few-queries", lambda: sla(early_stopping={"estimate_s": None, "queries": 50, "queries_needed": 600}),
         INCONCLUSIVE),
    ],
    ("DEP-DRIVER", 1): [
        ("560", lambda: driver({"nvml": NVML_OK}), PASS),
        ("535", lambda: driver({"nvml": NVML_OLD}), FAIL),
        ("cuda-not-in-evidence", lambda: driver({"nvml": dict(NVML_OK, cuda_driver_version=None)}), FAIL),
    ],
    ("TOPO-PCIE-LINK", 1): [
        ("sim-full-link", lambda: sim_link("sim:h100", True, PASS), PASS),
        ("sim-degraded", lambda: sim_link("sim:h100+link-degraded", True, FAIL), FAIL),
        ("sim-idle", lambda: sim_link("sim:h100+link-idle", False, INCONCLUSIVE), INCONCLUSIVE),
    ],
    ("DEP-THROTTLE", 1): [
        ("clean-under-load", lambda: throttle([0x0] * 20), PASS),
        ("power-brake", lambda: throttle([0x0] * 10 + [0x80 | 0x8] * 10), FAIL),
        ("power-brake-idle", lambda: throttle([0x1 | 0x80 | 0x8] * 5, under_load=False), INCONCLUSIVE),
    ],
    ("DEP-ECC", 1): [
        ("enabled-clean", lambda: ecc(True, ECC_ZERO), PASS),
        ("disabled", lambda: ecc(False, ECC_ZERO), FAIL),
        ("mode-unread", lambda: ecc(None, ECC_ZERO), INCONCLUSIVE),
    ],
    ("LINK-NVLINK-MESH", 1): [
        ("sim-full", lambda: sim_mesh("sim:h100"), PASS),
        ("sim-partial", lambda: sim_mesh("sim:h100+nvlink-partial"), FAIL),
    ],
    ("SVC-COLDSTART", 1): [
        ("within-30s", lambda: (COLDSTART, th("SVC-COLDSTART", max_s=30), "cold start"), PASS),
        ("over-5s", lambda: (COLDSTART, th("SVC-COLDSTART", max_s=5), "cold start"), FAIL),
        ("no-ceiling", lambda: (COLDSTART, th("SVC-COLDSTART", max_s=None), "cold start"), WARN),
    ],
    ("SVC-FRAG", 1): [
        ("kv-pool-1pct", lambda: (KV_POOL, th("SVC-FRAG", max_fraction=0.03), "kv-pool"), PASS),
        ("kv-pool-20pct", lambda: (dict(KV_POOL, fraction=0.2), th("SVC-FRAG", max_fraction=0.03), "kv-pool"), FAIL),
        ("allocator-20pct", lambda: (ALLOCATOR, th("SVC-FRAG", max_fraction=0.03), "allocator"), FAIL),
    ],
}

#: Checks whose best decision on good evidence is not PASS, and why; their good sample decides that status instead.
NO_PASS = {
    "TOPO-PCIE-BW/nvbandwidth": (INCONCLUSIVE, "a submitted nvbandwidth text was not taken under the DRAM hold: a "
                                               "figure below the floor without the hold is below it with the hold "
                                               "(FAIL); one above it says nothing of the copies under the hold"),
    "DEP-ECC/dcgmi": (INCONCLUSIVE, "DCGM's memory test reads no ECC mode nor error count: a pass of it is not "
                                    "DEP-ECC's, a fail of it is"),
    "PLP-PPL/mlperf": (INCONCLUSIVE, "PLP-PPL asks ρ over sliding 10 ms windows and LoadGen's logs give whole-run "
                                     "rates: on them the check can show a Server run above the system's maximum "
                                     "(FAIL), never that no 10 ms window was"),
}

#: Checks whose worst decision on bad evidence is not FAIL, and why; their bad sample decides that status instead.
NO_FAIL = {
    "EQ-PRECISION/golden-coverage": (INCONCLUSIVE, "a golden set recorded with another operator list leaves the "
                                                   "missing pairs undecided; it says nothing against the hardware"),
}

