"""Inference under load, driven by MLPerf LoadGen: PLP-SAMPLE, PLP-PPL, PLP-POWER, PLP-LATENCY (one sweep of
load levels), SVC-COLDSTART, SVC-FRAG (standard) and SVC-SLA (full).  On a submitted MLPerf Inference submission,
PLP-PPL, PLP-POWER, PLP-LATENCY and SVC-SLA are judged on its runs instead (``sits_inference.mlperf``)."""

import pytest

from pytest_sits.checks.inference import (check_coldstart, check_frag, check_latency, check_mlperf_latency,
                                          check_mlperf_power, check_mlperf_ppl, check_mlperf_sla, check_power,
                                          check_ppl, check_sample, check_sla)
from pytest_sits.conditions.inference import acquire_power, acquire_ppl, acquire_sample_skew, per_tenant


@pytest.mark.sits_requirement("PLP-SAMPLE")
def test_power_latency_load_sampled_together(sits_inference, sits_thresholds, sits_record):
    sits_record(check_sample(acquire_sample_skew(sits_inference.sweep()), sits_thresholds, sits_inference.subject))


@pytest.mark.sits_requirement("PLP-PPL")
def test_peak_processing_load(sits_inference, sits_thresholds, sits_record):
    submitted = sits_inference.mlperf(check_mlperf_ppl, sits_thresholds)
    if submitted is not None:
        return sits_record(*submitted)
    sits_record(check_ppl(acquire_ppl(sits_inference.sweep()), sits_thresholds, sits_inference.subject))


@pytest.mark.sits_requirement("PLP-POWER")
def test_power_under_load(sits_inference, sits_thresholds, sits_record):
    submitted = sits_inference.mlperf(check_mlperf_power, sits_thresholds)
    if submitted is not None:
        return sits_record(*submitted)
    sits_record(check_power(acquire_power(sits_inference.sweep()), sits_thresholds, sits_inference.subject))


@pytest.mark.sits_requirement("PLP-LATENCY")
def test_latency_under_load(sits_inference, sits_thresholds, sits_record):
    submitted = sits_inference.mlperf(check_mlperf_latency, sits_thresholds)
    if submitted is not None:
        return sits_record(*submitted)
    sits_record(check_latency(sits_inference.sweep(), sits_thresholds, sits_inference.subject))


@pytest.mark.sits_requirement("SVC-SLA")
def test_tenant_sla(sits_inference, sits_thresholds, sits_record):
    submitted = sits_inference.mlperf(check_mlperf_sla, sits_thresholds)
    if submitted is not None:
        return sits_record(*submitted)
    subject = sits_inference.sla_subject
    sits_record(*[check_sla(ev, sits_thresholds, f"{subject} tenant {ev['tenant']['name']}" if "tenant" in ev
                            else subject) for ev in per_tenant(sits_inference.sla())])


@pytest.mark.sits_requirement("SVC-COLDSTART")
def test_cold_start(sits_inference, sits_thresholds, sits_trials, sits_record):
    sits_record(check_coldstart(sits_inference.coldstart(sits_trials), sits_thresholds, sits_inference.subject))


@pytest.mark.sits_requirement("SVC-FRAG")
def test_kv_fragmentation(sits_inference, sits_thresholds, sits_record):
    sits_record(*[check_frag(ev, sits_thresholds, f"{sits_inference.subject} {view}")
                  for view, ev in sits_inference.frag().items()])
