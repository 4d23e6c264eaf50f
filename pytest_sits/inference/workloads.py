"""What is sent to a served deployment: prompts whose lengths are set in tokens as the server counts them, or the
prompts of the user's own dataset file.

* **Synthetic prompts** are English words.  Before the load, two requests ask the server how many tokens a prompt
  of 1 word and of :data:`CALIBRATION_WORDS` words is (``usage.prompt_tokens``, its own tokenizer, never a
  download): a prompt of N tokens is then the number of words that makes N by that measure.  The lengths the
  server counted for every request are reported beside the planned ones; what is judged is what was returned.
* **A dataset file** (``--sits-dataset=FILE``): JSON Lines, one object per line with ``prompt`` (a string) and,
  optionally, ``output_tokens`` (or ``max_tokens``); or the ShareGPT layout (a JSON array of objects whose
  ``conversations`` list ``{"from": "human"|"gpt", "value": ...}`` turns: the first human turn is the prompt,
  the reply's length in words times the server's measured tokens per word its output length, said so).  A
  record without an output length takes the profile's output range.  The file is someone else's: it is read
  whole only up to :data:`DATASET_LIMIT` bytes, through no link, at most :data:`MAX_PROMPTS` prompts (the first),
  each at most :data:`MAX_PROMPT_CHARS` characters; an empty prompt, a line that is not JSON, or a layout that is
  neither is a :class:`DatasetError` naming the file, the line and the fix.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .sut import tenant_split

#: A dataset file is refused above this size (take a subset of a larger one).
DATASET_LIMIT = 128 << 20
#: At most this many prompts of a dataset are used (the first ones).
MAX_PROMPTS = 100_000
#: One prompt of a dataset may hold at most this many characters.
MAX_PROMPT_CHARS = 1 << 20
#: Output lengths are bounded to this many tokens.
MAX_OUTPUT_TOKENS = 32_768
#: The calibration prompt's length in words.
CALIBRATION_WORDS = 200

WORDS = tuple("""the of and to in is was for on that with as by at from his her they this which be are or an had
were but not their has have one all been would who more there can other when its into some time these two may
then first any new only after like over such most could out also about our year people than many work state
world part made under each between school through system program life great where during long day number
place city later same small group government because high water power house while children against
home within service market question public area process business order level report result light line
change river table model energy power signal memory network server garden music travel family morning
evening history science nature paper window street mountain village ocean forest weather summer winter
company market language country health reason answer simple clear early strong quiet green yellow
north south east west center story picture letter number friend teacher student doctor engineer""".split())


class DatasetError(ValueError):
    """A dataset file cannot be used; the message names the file, the line and the fix."""


@dataclass
class ServedWorkload:
    """The query sample library of a served run (what :func:`~.sut.run_loadgen` reads: ``prompts`` for the count,
    ``tenant_of``), with the texts sent and how they were made."""

    texts: List[str]
    out_tokens: List[int]
    tenant_of: List[int]
    tenants: List[str]
    source: Dict[str, Any] = field(default_factory=dict)

    @property
    def prompts(self) -> List[str]:
        return self.texts

    def describe(self) -> Dict[str, Any]:
        n = len(self.texts)
        return dict(self.source, samples=n, output_tokens_mean=round(sum(self.out_tokens) / n, 2),
                    output_tokens_range=[min(self.out_tokens), max(self.out_tokens)],
                    prompt_chars_mean=round(sum(map(len, self.texts)) / n, 1),
                    tenants={name: round(self.tenant_of.count(k) / n, 4) for k, name in enumerate(self.tenants)})


def calibrate(client: Any, deadline_s: float = 10.0) -> Dict[str, Any]:
    """Tokens per word and the prompt's fixed overhead (a BOS token, a chat template) as the server counts them:
    two non-streamed requests of one output token.  ``{"tokens_per_word": None, "why": ...}`` where the server
    reports no ``usage.prompt_tokens``."""
    counts = []
    for n in (1, CALIBRATION_WORDS + 1):
        text = " ".join(WORDS[i % len(WORDS)] for i in range(n))
        r = client.request(text, 1, payload=client.payload(text, 1, stream=False), deadline_s=deadline_s)
        if not r["ok"] or r.get("prompt_tokens") is None:
            why = r.get("error") if not r["ok"] else "the server reports no usage.prompt_tokens"
            return {"tokens_per_word": None, "overhead_tokens": None,
                    "why": f"prompt lengths could not be measured in the server's tokens ({why}): prompts are sized "
                           "at 1 token per word, and the lengths the server counted, where it says, are reported"}
        counts.append(int(r["prompt_tokens"]))
    per_word = max(0.05, (counts[1] - counts[0]) / CALIBRATION_WORDS)
    return {"tokens_per_word": round(per_word, 4), "overhead_tokens": max(0, round(counts[0] - per_word)),
            "measured": {"1 word": counts[0], f"{CALIBRATION_WORDS + 1} words": counts[1]},
            "how": "usage.prompt_tokens of a 1-word and a 201-word prompt (the server's own tokenizer)"}


def _words_for(tokens: int, cal: Dict[str, Any]) -> int:
    per = cal.get("tokens_per_word") or 1.0
    return max(1, round((tokens - (cal.get("overhead_tokens") or 0)) / per))


def synthetic(spec: Dict[str, Any], cal: Dict[str, Any], tenants: Optional[Sequence[Dict[str, Any]]] = None,
              seed: int = 2026) -> ServedWorkload:
    """Prompts of ``spec["prompt_tokens"]`` (a [low, high] range, uniform) tokens as the server counts them, output
    lengths from ``spec["output_tokens"]``."""
    rng = random.Random(seed)
    n = int(spec.get("samples", 512))
    p_lo, p_hi = spec.get("prompt_tokens", [32, 128])
    o_lo, o_hi = spec.get("output_tokens", [8, 32])
    tenant_of, names = tenant_split(n, tenants)
    texts = [" ".join(rng.choice(WORDS) for _ in range(_words_for(rng.randint(int(p_lo), int(p_hi)), cal)))
             for _ in range(n)]
    outs = [rng.randint(int(o_lo), int(o_hi)) for _ in range(n)]
    return ServedWorkload(texts, outs, tenant_of, names, {
        "kind": "synthetic: English words", "prompt_tokens_planned": [int(p_lo), int(p_hi)],
        "calibration": cal})


def load_dataset(path: Any, spec: Dict[str, Any], cal: Dict[str, Any],
                 tenants: Optional[Sequence[Dict[str, Any]]] = None, seed: int = 2026) -> ServedWorkload:
    """The prompts of a dataset file (module docstring); a :class:`DatasetError` when it cannot be used."""
    from ..files import UntrustedInputError, read_file

    p = Path(path)
    try:
        size = p.lstat().st_size
        if size > DATASET_LIMIT:
            raise DatasetError(f"--sits-dataset={p}: {size} bytes, over the {DATASET_LIMIT >> 20} MiB limit; fix: "
                               f"take a subset (at most {MAX_PROMPTS} prompts are used), e.g. jq '.[:10000]' for a "
                               "ShareGPT file or head -n 10000 for JSON Lines")
        data = read_file(p, DATASET_LIMIT)
    except UntrustedInputError as exc:
        raise DatasetError(f"--sits-dataset: {exc}") from None
    except OSError as exc:
        raise DatasetError(f"--sits-dataset={p}: cannot be read ({exc.strerror or exc}); fix: name an existing "
                           "file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"--sits-dataset={p}: not UTF-8 text (byte {exc.start}); fix: save it as UTF-8") from None
    stripped = text.lstrip()
    if not stripped:
        raise DatasetError(f"--sits-dataset={p}: the file is empty; fix: one JSON object per line with a "
                           "\"prompt\", or a ShareGPT JSON array")
    rows = _sharegpt(p, stripped) if stripped.startswith("[") else _jsonl(p, text)
    if not rows:
        raise DatasetError(f"--sits-dataset={p}: no prompt found; fix: one JSON object per line with a \"prompt\"")
    rng = random.Random(seed)
    o_lo, o_hi = spec.get("output_tokens", [8, 32])
    per_word = cal.get("tokens_per_word") or 1.0
    texts, outs, how = [], [], {"dataset": 0, "reply words x tokens per word": 0, "the profile's range": 0}
    for prompt, out, reply_words in rows:
        texts.append(prompt)
        if out is not None:
            outs.append(out)
            how["dataset"] += 1
        elif reply_words:
            outs.append(max(1, min(MAX_OUTPUT_TOKENS, round(reply_words * per_word))))
            how["reply words x tokens per word"] += 1
        else:
            outs.append(rng.randint(int(o_lo), int(o_hi)))
            how["the profile's range"] += 1
    tenant_of, names = tenant_split(len(texts), tenants)
    return ServedWorkload(texts, outs, tenant_of, names, {
        "kind": "dataset", "file": str(p), "layout": "ShareGPT" if stripped.startswith("[") else "JSON Lines",
        "output_tokens_from": {k: v for k, v in how.items() if v}, "calibration": cal})


def _output_of(doc: Dict[str, Any], where: str) -> Optional[int]:
    for key in ("output_tokens", "max_tokens"):
        if key in doc:
            v = doc[key]
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_OUTPUT_TOKENS:
                raise DatasetError(f"{where}: {key} = {v!r} is not a whole number of tokens in [1, "
                                   f"{MAX_OUTPUT_TOKENS}]; fix: correct it or leave it out")
            return v
    return None


def _prompt_of(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise DatasetError(f"{where}: the prompt is {type(value).__name__}, not a string; fix: \"prompt\": \"...\"")
    if not value.strip():
        raise DatasetError(f"{where}: the prompt is empty; fix: remove the record or give it a prompt")
    if len(value) > MAX_PROMPT_CHARS:
        raise DatasetError(f"{where}: the prompt has {len(value)} characters, more than {MAX_PROMPT_CHARS}; fix: "
                           "shorten it")
    return value


def _jsonl(p: Path, text: str) -> List[tuple]:
    rows: List[tuple] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{lineno}"
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise DatasetError(f"{where}: not JSON ({getattr(exc, 'msg', exc)}): {line[:80]!r}; fix: one JSON object per line "
                               "(JSON Lines), e.g. {\"prompt\": \"...\", \"output_tokens\": 128}") from None
        if not isinstance(doc, dict) or "prompt" not in doc:
            raise DatasetError(f"{where}: a JSON object with a \"prompt\" is expected, got {line[:80]!r}; fix: "
                               "{\"prompt\": \"...\"}")
        rows.append((_prompt_of(doc["prompt"], where), _output_of(doc, where), None))
        if len(rows) >= MAX_PROMPTS:
            break
    return rows


def _sharegpt(p: Path, text: str) -> List[tuple]:
    from ..files import MAX_JSON_DEPTH, nesting_depth

    try:
        doc = json.loads(text)
    except RecursionError:
        raise DatasetError(f"{p}: nested too deeply; fix: a ShareGPT array of conversations") from None
    except ValueError as exc:
        raise DatasetError(f"{p}: not valid JSON ({exc}); fix: a ShareGPT array of conversations, or JSON "
                           "Lines") from None
    if not isinstance(doc, list) or nesting_depth(doc) > MAX_JSON_DEPTH:
        raise DatasetError(f"{p}: a JSON array of conversations is expected; fix: the ShareGPT layout")
    rows: List[tuple] = []
    for i, item in enumerate(doc):
        where = f"{p}: record {i}"
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise DatasetError(f"{where}: no \"conversations\" list; fix: the ShareGPT layout ({{\"conversations\": "
                               "[{\"from\": \"human\", \"value\": \"...\"}, {\"from\": \"gpt\", \"value\": "
                               "\"...\"}]})")
        human = next((t for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")), None)
        if human is None:
            continue  # a conversation without a human turn has no prompt: skipped, as other tools do
        reply = next((t for t in turns[turns.index(human) + 1:] if isinstance(t, dict)
                      and t.get("from") in ("gpt", "assistant")), None)
        words = len(str(reply.get("value") or "").split()) if reply else 0
        rows.append((_prompt_of(human.get("value"), where), None, words or None))
        if len(rows) >= MAX_PROMPTS:
            break
    return rows
