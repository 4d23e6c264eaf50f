"""Load generators always stop, join their thread and record what they did."""

import threading

import pytest

from pytest_sits.conditions.loads import LoadUnavailable, TorchMatmulLoad, torch_device_for_bdf


def test_torch_load_on_cpu_stops_and_records():
    pytest.importorskip("torch")
    with TorchMatmulLoad("cpu", duty=0.5, size=64, dtype="float32", period_s=0.02) as load:
        threading.Event().wait(0.2)
    ev = load.evidence()
    assert ev["error"] is None and not ev["thread_alive"]
    assert ev["iterations"] > 0 and ev["periods"] >= 3
    assert 0.05 <= ev["achieved_duty"] <= 0.95  # duty 0.5 requested; loose: no timing assertion
    assert not [t for t in threading.enumerate() if t.name.startswith("sits-load")]


def test_torch_load_stops_on_exception():
    pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        with TorchMatmulLoad("cpu", duty=1.0, size=32, dtype="float32", period_s=0.01):
            raise RuntimeError("test body failed")
    assert not [t for t in threading.enumerate() if t.name.startswith("sits-load")]


def test_bad_device_is_recorded_not_raised():
    pytest.importorskip("torch")
    with TorchMatmulLoad("nosuchdevice:0", size=8) as load:
        pass
    assert load.evidence()["error"]


def test_no_gpu_here_is_a_reason():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this host has a CUDA device")
    with pytest.raises(LoadUnavailable, match="sees no CUDA/ROCm device"):
        torch_device_for_bdf("0000:17:00.0")


def test_duty_out_of_range():
    with pytest.raises(ValueError):
        TorchMatmulLoad("cpu", duty=1.5)
