"""Cross-platform equivalence: EQ-PRECISION, EQ-THROUGHPUT, EQ-LATENCY, EQ-RESOURCE (level standard).

Without a golden set, every torch device present is compared with numpy float64 on the same (rounded)
inputs.  With ``--sits-golden=DIR`` the stored inputs are fed byte for byte and the outputs compared with
the stored ones; with ``--sits-golden-record=DIR`` the reference device's inputs and outputs are stored.
On a submitted MLPerf Inference submission, each accuracy run's ``accuracy.txt`` is held to its benchmark's
targets (elsewhere that test skips: the operator corpus decides).
"""

import pytest

from pytest_sits.checks.equivalence import (check_golden_coverage, check_latency_ratio, check_mlperf_accuracy,
                                            check_precision, check_resource_ratio, check_throughput)
from pytest_sits.conditions.equivalence import (PAIRS, acquire_golden_coverage, acquire_precision, acquire_ratios,
                                                acquire_throughput)
from pytest_sits.conditions.inference.mlperf import accuracy_evidence
from pytest_sits.equivalence.corpus import CORPUS


@pytest.mark.sits_requirement("EQ-PRECISION")
@pytest.mark.parametrize("op_name,dtype", PAIRS, ids=[f"{o}-{d}" for o, d in PAIRS])
def test_precision(op_name, dtype, sits_equivalence, sits_thresholds, sits_record):
    sits_record(*[check_precision(ev, sits_thresholds, subject)
                  for ev, subject in acquire_precision(sits_equivalence, op_name, dtype, sits_thresholds)])


@pytest.mark.sits_requirement("EQ-PRECISION")
def test_golden_set_matches_corpus(sits_equivalence, sits_thresholds, sits_record):
    sits_record(check_golden_coverage(acquire_golden_coverage(sits_equivalence), sits_thresholds, "golden set"))


@pytest.mark.sits_requirement("EQ-PRECISION")
def test_submitted_accuracy(sits_inventory, sits_thresholds, sits_record):
    runs = accuracy_evidence(sits_inventory)
    if runs is None:
        pytest.skip("no MLPerf accuracy.txt among the submitted texts: the operator corpus decides EQ-PRECISION")
    sits_record(*[check_mlperf_accuracy(ev, sits_thresholds, subject) for subject, ev in runs])


@pytest.mark.sits_requirement("EQ-THROUGHPUT")
@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")  # where nothing can be timed, it says why
@pytest.mark.parametrize("op_name", list(CORPUS))
def test_throughput(op_name, sits_equivalence, sits_benchmark, sits_thresholds, sits_trials, sits_record):
    ev, subject = acquire_throughput(sits_equivalence, op_name, sits_benchmark, sits_trials)
    sits_record(check_throughput(ev, sits_thresholds, subject))


@pytest.mark.sits_requirement("EQ-LATENCY")
def test_latency_beside_reference(sits_equivalence, sits_thresholds, sits_record):
    ev, subject = acquire_ratios(sits_equivalence, "latency_s", "latency")
    sits_record(check_latency_ratio(ev, sits_thresholds, subject))


@pytest.mark.sits_requirement("EQ-RESOURCE")
def test_resource_beside_reference(sits_equivalence, sits_thresholds, sits_record):
    ev, subject = acquire_ratios(sits_equivalence, "peak_bytes", "peak device memory")
    sits_record(check_resource_ratio(ev, sits_thresholds, subject))
