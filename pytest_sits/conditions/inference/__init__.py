"""Inference under load: the acquire functions of PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY, SVC-SLA,
SVC-COLDSTART and SVC-FRAG.

Each returns evidence (plain JSON), or ``{"unavailable": reason}`` when LoadGen, torch or the platform's means
are missing.  The runs:

* **sweep** (:func:`acquire_sweep`, :mod:`.sweep`): LoadGen Offline measures the maximum throughput; SingleStream
  the unloaded latency (with LoadGen's early-stopping estimate of P99); then LoadGen Server (Poisson arrivals)
  at each fraction of that maximum, with Sample3D sampling power at a fixed period.  Each point gives
  (ρ, P, D): ρ from the engine's work over sliding windows, P from energy counters, D from LoadGen.
  PLP-SAMPLE (:func:`acquire_sample_skew`) and PLP-PPL (:func:`acquire_ppl`) read the same run.
* **SLA** (:func:`acquire_sla`, :mod:`.sla`): LoadGen Server at the profile's offered load, split between tenants
  by share, against the built-in model or an OpenAI-compatible endpoint; per-tenant P99 with LoadGen's
  early-stopping bound, throughput, error rate.
* **cold start** (:func:`acquire_coldstart`, :mod:`.coldstart`) and **fragmentation** (:func:`acquire_frag`,
  :mod:`.frag`).

:mod:`.rig` is what a live platform lends the runs (the built-in model on a device, its power sources);
:mod:`.records` the summaries of the raw records; :mod:`.session` the runs of one device in a session
(:class:`Inference`, once per session and device).  The same summaries are computed from live runs and from the
simulated platform's runs (:mod:`pytest_sits.platforms.sim.inference`), which produce the same raw records in
simulated time.
"""

from __future__ import annotations

from .coldstart import acquire_coldstart, coldstart_trials
from .frag import acquire_frag, allocator_fragmentation, pool_fragmentation
from .records import (MAX_POINT_S, MAX_POINTS, MAX_QPS, MAX_SLA_S, MAX_STEP_FRACTIONS, MAX_TIMELINE, POWER_BLOCKS,
                      efficiency, energy_between, peak_of, power_blocks, power_windows, rho_series, run_latency,
                      summarise_point, timeline)
from .rig import InferenceRig, InferenceUnavailable, live_rig
from .session import Inference, inference_for
from .sla import (CLIENT_HEADROOM, CLIENT_QUEUE_S, ES_WHAT, SLA_RULE, TENANT_KEYS, _itl, acquire_sla,
                  client_capacity, per_tenant, summarise_sla)
from .sweep import (RHO_RULE, LiveRunner, acquire_power, acquire_ppl, acquire_sample_skew, acquire_sweep,
                    sweep_config)

__all__ = [
    "CLIENT_HEADROOM", "CLIENT_QUEUE_S", "ES_WHAT", "Inference", "InferenceRig", "InferenceUnavailable", "LiveRunner",
    "MAX_POINTS", "MAX_POINT_S", "MAX_QPS", "MAX_SLA_S", "MAX_STEP_FRACTIONS", "MAX_TIMELINE", "POWER_BLOCKS",
    "RHO_RULE", "SLA_RULE", "TENANT_KEYS", "_itl", "acquire_coldstart", "acquire_frag", "acquire_power", "acquire_ppl",
    "acquire_sample_skew", "acquire_sla", "acquire_sweep", "allocator_fragmentation", "client_capacity",
    "coldstart_trials", "efficiency", "energy_between", "inference_for", "live_rig", "peak_of", "per_tenant",
    "pool_fragmentation", "power_blocks", "power_windows", "rho_series", "run_latency", "summarise_point",
    "summarise_sla", "sweep_config", "timeline",
]
