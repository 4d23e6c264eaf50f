"""The STREAM probe's layout (page-aligned arrays, L2-sized triad blocks) and the probe-vs-C benchmark's
pairing logic (reference drift and CPU starvation flags), on data alone except one small real probe run."""

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_sits.conditions.stream import (ALIGN_BYTES, KERNELS, _aligned_empty, _triad_blocks, l2_bytes, stream_peak,
                                           triad_block)

REPO = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("stream_vs_c", REPO / "benchmarks" / "stream_vs_c.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_triad_block_fits_three_blocks_in_three_quarters_of_l2():
    assert triad_block(None) == 1 << 14
    assert triad_block(256 * 1024) == 8192
    assert triad_block(1280 * 1024) == 32768  # 3 x 256 KiB <= 960 KiB, 3 x 512 KiB is not
    assert triad_block(2 * 1024 ** 2) == 65536
    assert triad_block(64 * 1024) == 4096 and triad_block(64 * 1024 ** 2) == 1 << 17  # clamped
    for l2 in (512 * 1024, 1024 ** 2, 1280 * 1024, 2 * 1024 ** 2):
        b = triad_block(l2)
        assert 3 * 8 * b <= l2 * 3 // 4 < 3 * 8 * 2 * b


def test_l2_from_sysfs_is_a_level_two_cache():
    l2 = l2_bytes()
    assert l2 is None or l2 >= 64 * 1024


def test_arrays_start_on_a_page_and_are_untouched_views():
    for n in (1, 4097, 1 << 20):
        a = _aligned_empty(np, n)
        assert a.dtype == np.float64 and a.shape == (n,) and a.flags.c_contiguous and a.flags.writeable
        assert a.__array_interface__["data"][0] % ALIGN_BYTES == 0


def test_blocked_triad_equals_the_formula_including_a_short_last_block():
    n = 3 * 4096 + 17
    a, b, c = np.zeros(n), np.arange(n, dtype=np.float64), np.linspace(-1, 1, n)
    _triad_blocks(np, a, b, c, 4096)()
    np.testing.assert_allclose(a, b + 3.0 * c, rtol=1e-15, atol=0)


def test_probe_reports_its_layout():
    res = stream_peak(threads=1, cpus=[sorted(__import__("os").sched_getaffinity(0))[0]],
                      array_bytes=8 * 1024 ** 2, ntimes=2)
    assert res["validated"], res
    assert res["alignment_bytes"] == ALIGN_BYTES
    assert res["triad_block_elements"] == triad_block(l2_bytes())
    for k in KERNELS:
        r = res["kernels"][k]
        assert 0 < r["cpu_share_median"] <= 1
        assert r["gbps_on_cpu_max"] > 0


def _run(side, gbps, share=0.98):
    r = {"side": side, "gbps": dict(gbps), "on_cpu_gbps": {k: g / share for k, g in gbps.items()},
         "cpu_share": {k: share for k in KERNELS}, "cpu_pressure": 0.0, "wall_s": 1.0}
    if side == "C":
        r["triad_2pass_gbps"] = gbps["triad"] * 0.85
        r["triad_2pass_on_cpu_gbps"] = r["on_cpu_gbps"]["triad"] * 0.85
    return r


def _pairs(ref, probe, shares=None):
    """ref[i], probe[i]: one figure per pair for every kernel."""
    shares = shares or [(0.98, 0.98)] * len(ref)
    return [{"pair": i, "C": _run("C", {k: ref[i] for k in KERNELS}, shares[i][0]),
             "probe": _run("probe", {k: probe[i] for k in KERNELS}, shares[i][1])} for i in range(len(ref))]


def test_steady_reference_keeps_every_pair_and_takes_the_median():
    bench = _bench()
    out = bench.analyse(_pairs([20.0, 20.5, 19.8, 20.2], [19.0, 20.0, 18.0, 19.5]), drift=0.10, min_share=0.75)
    t = out["kernels"]["triad"]
    assert out["moves"] == [] and t["pairs_kept"] == 4
    assert t["flagged_reference_moved"] == 0 and t["flagged_cpu_starved"] == 0
    ratios = sorted([19.0 / 20.0, 20.0 / 20.5, 18.0 / 19.8, 19.5 / 20.2])
    assert t["median_ratio"] == pytest.approx((ratios[1] + ratios[2]) / 2)
    assert t["best_ratio"] == pytest.approx(20.0 / 20.5)
    assert t["reference_gbps"]["spread"] == pytest.approx((20.5 - 19.8) / 20.1)
    assert out["triad_decomposition"]["c_2pass_over_c"] == pytest.approx(0.85)
    assert out["triad_decomposition"]["probe_over_c_2pass"] == pytest.approx(
        (ratios[1] + ratios[2]) / 2 / 0.85)


def test_reference_moving_around_the_probe_flags_both_pairs_of_the_bracket():
    bench = _bench()
    # Time order: C0 P0 P1 C1 | C2 P2 P3 C3.  C0 -> C1 moves 50%: pairs 0 and 1 are not comparable.
    out = bench.analyse(_pairs([40.0, 20.0, 20.0, 20.5], [10.0, 10.0, 19.0, 19.5]), drift=0.10, min_share=0.75)
    t = out["kernels"]["triad"]
    assert t["flagged_reference_moved"] == 2 and t["pairs_kept"] == 2
    assert t["median_ratio"] == pytest.approx((19.0 / 20.0 + 19.5 / 20.5) / 2)
    moved = [m for m in out["moves"] if m["kernel"] == "triad"]
    assert len(moved) == 1 and moved[0]["flags"] == [0, 1] and moved[0]["move"] == pytest.approx(-0.5)


def test_move_between_back_to_back_reference_rounds_is_reported_not_flagged():
    bench = _bench()
    # C1 (end of pair 1) and C2 (start of pair 2) run one after the other: no probe lies between them.
    out = bench.analyse(_pairs([20.0, 20.0, 30.0, 30.0], [19.0, 19.0, 29.0, 29.0]), drift=0.10, min_share=0.75)
    moved = [m for m in out["moves"] if m["kernel"] == "copy"]
    assert len(moved) == 1 and (moved[0]["from_pair"], moved[0]["to_pair"]) == (1, 2) and moved[0]["flags"] == []
    assert out["kernels"]["copy"]["pairs_kept"] == 4


def test_cpu_starved_round_flags_its_pair_and_too_few_pairs_say_so():
    bench = _bench()
    pairs = _pairs([20.0] * 4, [19.0] * 4, shares=[(0.98, 0.2), (0.3, 0.98), (0.98, 0.98), (0.98, 0.98)])
    out = bench.analyse(pairs, drift=0.10, min_share=0.75)
    t = out["kernels"]["copy"]
    assert t["flagged_cpu_starved"] == 2 and t["pairs_kept"] == 2
    assert pairs[0]["flags"]["copy"] == ["cpu-starved"]
    out = bench.analyse(_pairs([20.0] * 4, [19.0] * 4, shares=[(0.1, 0.1)] * 4), drift=0.10, min_share=0.75)
    t = out["kernels"]["triad"]
    assert t["pairs_kept"] == 0 and t["median_ratio"] is None and t["best_ratio"] is None
    # CPU time still compares the implementations: equal shares leave the ratio as it is.
    assert t["on_cpu_median_ratio"] == pytest.approx(19.0 / 20.0)
    assert out["triad_decomposition"]["c_2pass_over_c"] is None
    assert out["triad_decomposition"]["on_cpu_c_2pass_over_c"] == pytest.approx(0.85)
    # A kernel starved on one side flags that kernel only.
    pairs = _pairs([20.0] * 4, [19.0] * 4)
    pairs[2]["probe"]["cpu_share"]["triad"] = 0.5
    out = bench.analyse(pairs, drift=0.10, min_share=0.75)
    assert pairs[2]["flags"]["triad"] == ["cpu-starved"] and pairs[2]["flags"]["copy"] == []
    assert out["kernels"]["triad"]["pairs_kept"] == 3 and out["kernels"]["copy"]["pairs_kept"] == 4


@pytest.mark.skipif(not shutil.which("gcc"), reason="gcc not installed (apt-get install gcc)")
def test_c_reference_validates_and_reports_the_two_pass_triad(tmp_path):
    exe = tmp_path / "stream_ref"
    subprocess.run(["gcc", "-O3", "-fopenmp", "-march=native", str(REPO / "benchmarks" / "stream_ref.c"), "-o",
                    str(exe)], check=True)
    out = json.loads(subprocess.run([str(exe), "100000", "3", "4096"], check=True, capture_output=True, text=True,
                                    env={"OMP_NUM_THREADS": "1"}).stdout)
    assert out["validated"] is True and out["block"] == 4096
    assert all(out[k] > 0 for k in ("copy", "scale", "add", "triad", "triad_2pass"))
    assert all(0 < out["cpu_share"][k] <= 1.05 for k in ("copy", "triad", "triad_2pass"))
    bad = subprocess.run([str(exe), "100", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "NTIMES >= 2" in bad.stderr
