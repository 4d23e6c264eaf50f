"""The built-in system under test and the load around it.

* :mod:`.model` - a small decoder-only transformer in torch (seeded random weights, never downloaded) with a
  block-paged KV cache, served by a continuous-batching engine;
* :mod:`.sut` - MLPerf LoadGen (``mlperf_loadgen``) scenarios driving a system under test, logs kept;
* :mod:`.endpoint` - an OpenAI-compatible completions client, and a loopback server around the built-in model;
* :mod:`.coldstart` - the stages of a cold start, timed in a fresh interpreter.

torch and mlperf_loadgen are imported by the functions that need them, never at import time.
"""

LOADGEN_INSTALL = "pip install 'pytest-sits[load]'  (mlcommons-loadgen, module mlperf_loadgen)"
TORCH_INSTALL = "pip install torch  (the build for your accelerator: https://pytorch.org/get-started/locally/)"


def loadgen_missing() -> "str | None":
    """None when MLPerf LoadGen imports; else the reason, with the install command."""
    try:
        import mlperf_loadgen  # noqa: F401
    except ImportError as exc:
        return f"MLPerf LoadGen is not installed ({exc}); install it with {LOADGEN_INSTALL}"
    return None


def torch_missing() -> "str | None":
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return f"torch is not installed ({exc}); install it with {TORCH_INSTALL}"
    return None
