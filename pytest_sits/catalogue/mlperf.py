"""MLPerf Inference's accuracy targets: what a submission's ``accuracy.txt`` is held to (EQ-PRECISION on submitted
evidence, :func:`pytest_sits.checks.equivalence.check_mlperf_accuracy`).

Each benchmark's targets are those of MLPerf Inference's rules and submission checker (rounds v5.0 to v6.0, which
give these benchmarks the same reference figures): a quality metric must reach a fraction of the reference
implementation's score (99 % for the ``-99`` benchmarks and the LLMs named without a suffix, 99.9 % for ``-99.9``);
a generated-length metric (``tokens_per_sample``, ``gen_len``) must lie within 90 %..110 % of the reference's; the
image scores of stable-diffusion-xl within fixed ranges.  A metric is named as ``accuracy.txt`` prints it.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple, TypedDict


class Target(TypedDict, total=False):
    metric: str            # the key as accuracy.txt prints it
    reference: float       # the reference implementation's score (None for a fixed range)
    fraction: float        # a quality metric: at least reference x fraction
    low: float             # the lowest accepted value
    high: Optional[float]  # the highest accepted value (length metrics and image scores), None: no upper limit
    quality: bool          # a quality score (its shortfall from the reference is reported), not a length


def _q(metric: str, reference: float, fraction: float) -> Target:
    return {"metric": metric, "reference": reference, "fraction": fraction, "low": reference * fraction,
            "high": None, "quality": True}


def _len(metric: str, reference: float, high_reference: Optional[float] = None, upper: bool = True) -> Target:
    return {"metric": metric, "reference": reference, "fraction": 0.9, "low": reference * 0.9,
            "high": (high_reference or reference) * 1.1 if upper else None, "quality": False}


def _range(metric: str, low: float, high: float) -> Target:
    return {"metric": metric, "low": low, "high": high, "quality": False}


def _llama2(fraction: float) -> List[Target]:
    return [_q("rouge1", 44.4312, fraction), _q("rouge2", 22.0352, fraction), _q("rougeL", 28.6162, fraction),
            _len("tokens_per_sample", 294.45)]


def _gptj(fraction: float) -> List[Target]:
    # its generated length has a floor and no upper limit
    return [_q("rouge1", 42.9865, fraction), _q("rouge2", 20.1235, fraction), _q("rougeL", 29.9881, fraction),
            _len("gen_len", 4016878, upper=False)]


#: benchmark -> its targets.
TARGETS: Dict[str, List[Target]] = {
    "resnet": [_q("accuracy", 76.46, 0.99)],
    "retinanet": [_q("mAP", 37.55, 0.99)],
    "bert-99": [_q("f1", 90.874, 0.99)],
    "bert-99.9": [_q("f1", 90.874, 0.999)],
    "dlrm-v2-99": [_q("AUC", 80.31, 0.99)],
    "dlrm-v2-99.9": [_q("AUC", 80.31, 0.999)],
    "3d-unet-99": [_q("DICE", 0.86170, 0.99)],
    "3d-unet-99.9": [_q("DICE", 0.86170, 0.999)],
    "gptj-99": _gptj(0.99),
    "gptj-99.9": _gptj(0.999),
    "llama2-70b-99": _llama2(0.99),
    "llama2-70b-99.9": _llama2(0.999),
    "llama2-70b-interactive-99": _llama2(0.99),
    "llama2-70b-interactive-99.9": _llama2(0.999),
    "llama3.1-8b": [_q("rouge1", 38.7792, 0.99), _q("rouge2", 15.9075, 0.99), _q("rougeL", 24.4957, 0.99),
                    _q("rougeLsum", 35.793, 0.99), _len("gen_len", 8167644)],
    "llama3.1-8b-edge": [_q("rouge1", 39.06, 0.99), _q("rouge2", 16.1147, 0.99), _q("rougeL", 24.6375, 0.99),
                         _q("rougeLsum", 36.124, 0.99), _len("gen_len", 3051113)],
    "mixtral-8x7b": [_q("rouge1", 45.5989, 0.99), _q("rouge2", 23.3526, 0.99), _q("rougeL", 30.4608, 0.99),
                     _len("tokens_per_sample", 144.84, 145.9), _q("gsm8k", 73.66, 0.99), _q("mbxp", 60.16, 0.99)],
    "llama3.1-405b": [_q("rougeL", 21.6666, 0.99), _q("exact_match", 90.1335, 0.99),
                      _len("tokens_per_sample", 684.68)],
    "deepseek-r1": [_q("exact_match", 81.3582, 0.99), _len("tokens_per_sample", 3886.2274)],
    "stable-diffusion-xl": [_range("CLIP_SCORE", 31.68631873, 31.81331801),
                            _range("FID_SCORE", 23.01085758, 23.95007626)],
    # R-GAT's accuracy script prints a percentage (accuracy=72.9%): its reference 0.7286 as a percentage
    "rgat": [_q("accuracy", 72.86, 0.99)],
    "whisper": [_q("ACCURACY", 100.0 - 2.0671, 0.99)],
}

#: The samples a benchmark's accuracy run covers (its dataset): the count an accuracy.txt prints (an LLM's
#: ``gen_num``, ResNet's ``total=``) must be this.
DATASET = {"resnet": 50000, "retinanet": 24781, "bert-99": 10833, "bert-99.9": 10833, "dlrm-v2-99": 330067,
           "dlrm-v2-99.9": 330067, "3d-unet-99": 43, "3d-unet-99.9": 43, "gptj-99": 13368, "gptj-99.9": 13368,
           "llama2-70b-99": 24576, "llama2-70b-99.9": 24576, "llama2-70b-interactive-99": 24576,
           "llama2-70b-interactive-99.9": 24576, "llama3.1-8b": 13368, "llama3.1-8b-edge": 5000,
           "mixtral-8x7b": 15000, "llama3.1-405b": 8313, "deepseek-r1": 4388, "stable-diffusion-xl": 5000,
           "rgat": 788379, "whisper": 1633}
#: The keys under which an accuracy.txt prints how many samples it scored.
COUNT_KEYS = ("gen_num", "total")
#: A quality score this far above the reference is not one of this benchmark's (another unit or format): not judged.
PLAUSIBLE_RATIO = 1.05

#: The submission folders' other spellings of a benchmark.
ALIASES = {"llama3_1-8b": "llama3.1-8b", "llama3_1-405b": "llama3.1-405b", "llama3_1-8b-edge": "llama3.1-8b-edge",
           "resnet50": "resnet"}

_NAMES = sorted(list(TARGETS) + list(ALIASES), key=len, reverse=True)
_IN_TEXT = re.compile(r"(?<![A-Za-z0-9.])(" + "|".join(re.escape(n) for n in _NAMES) + r")(?![0-9]|\.[0-9])",
                      re.I)


#: MLPerf Inference's scenarios, as submission folders spell them.
SCENARIOS = ("Offline", "Server", "Interactive", "SingleStream", "MultiStream")


def benchmark_in(path: str) -> Tuple[Optional[str], Optional[str]]:
    """The benchmark a submitted file belongs to, told from its path, and the path part that named it: in a
    submission tree the folder above the scenario folder (``<system>/<benchmark>/<scenario>/accuracy/
    accuracy.txt``), whatever it names (a benchmark with no target here is named, not guessed at); elsewhere a
    benchmark named in the file's name or its folders, nearest first; (None, None) where the path names none."""
    parts = [p for p in re.split(r"[/\\]", path) if p]
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] in SCENARIOS:
            return ALIASES.get(parts[i - 1].lower(), parts[i - 1].lower()), parts[i - 1]
    for part in reversed(parts):  # a benchmark named inside a file or folder name
        m = _IN_TEXT.search(part)
        if m:
            found = m.group(1).lower()
            return ALIASES.get(found, found), part
    return None, None
