"""The built-in system under test: a small decoder-only transformer with a block-paged KV cache.

* :class:`ModelConfig` - the shape (chosen by the profile: a few MB for a 2-core CI machine, GBs for a
  datacenter GPU), with :meth:`ModelConfig.flops_prefill` / :meth:`ModelConfig.flops_decode` counting the
  work of each step from that shape;
* :class:`KVBlockPool` - the KV cache as fixed-size blocks from one preallocated pool, handed out one block at
  a time as a sequence grows and returned when it ends (the PagedAttention scheme); each sequence has a block
  table.  Attention reads a sequence's blocks through its table (a gather; a fused paged kernel reads them in
  place, which changes speed, not the memory layout measured here);
* :class:`Engine` - continuous batching on one worker thread: admit waiting requests (prefill, which also
  yields the first token), then one batched decode step for every running sequence; finished sequences free
  their blocks.  Every step is recorded as work (start, end, output tokens, FLOPs) for the load ρ.

Weights are random, from a seed: nothing is downloaded, ever.  Outputs are greedy and deterministic.
torch is imported when a model is built, not when this module is imported.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, cast

#: Hard limits, so that an absurd profile value cannot exhaust memory or hang a run.
MAX_D_MODEL = 16384
MAX_LAYERS = 128
MAX_SEQ_TOKENS = 32768
MAX_POOL_BYTES = 64 << 30


class ModelConfigError(ValueError):
    """The model shape cannot be built; the message says which value and the fix."""


@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 256
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 512
    max_seq_tokens: int = 1024
    block_tokens: int = 16
    pool_blocks: int = 1024
    max_batch: int = 32
    dtype: str = "float32"
    seed: int = 2026
    threads: Optional[int] = None

    @classmethod
    def from_thresholds(cls, model: Dict[str, Any]) -> ModelConfig:
        known = {k: v for k, v in (model or {}).items() if k in cls.__dataclass_fields__}
        cfg = cls(**known)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.d_model % self.n_heads:
            raise ModelConfigError(f"model.d_model ({self.d_model}) is not a multiple of model.n_heads "
                                   f"({self.n_heads}); fix: choose n_heads dividing d_model")
        if self.d_model > MAX_D_MODEL or self.n_layers > MAX_LAYERS or self.max_seq_tokens > MAX_SEQ_TOKENS:
            raise ModelConfigError(f"model too large (d_model {self.d_model} <= {MAX_D_MODEL}, n_layers "
                                   f"{self.n_layers} <= {MAX_LAYERS}, max_seq_tokens {self.max_seq_tokens} <= "
                                   f"{MAX_SEQ_TOKENS}); fix: lower them in the profile")
        if self.pool_bytes() > MAX_POOL_BYTES:
            raise ModelConfigError(f"KV pool of {self.pool_bytes() / 2**30:.1f} GiB exceeds {MAX_POOL_BYTES >> 30} "
                                   "GiB; fix: lower model.pool_blocks")
        if self.dtype not in ("float32", "float16", "bfloat16"):
            raise ModelConfigError(f"model.dtype {self.dtype!r}; fix: float32, float16 or bfloat16")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def dtype_bytes(self) -> int:
        return 4 if self.dtype == "float32" else 2

    def matmul_params(self) -> int:
        """Parameters that take part in a matrix product per token (layers + the LM head)."""
        d, f = self.d_model, self.d_ff
        return self.n_layers * (4 * d * d + 2 * d * f) + d * self.vocab

    def weight_bytes(self) -> int:
        d = self.d_model
        params = self.matmul_params() + (self.vocab + self.max_seq_tokens) * d + self.n_layers * 2 * d + d
        return params * self.dtype_bytes

    def pool_bytes(self) -> int:
        return 2 * self.n_layers * self.pool_blocks * self.block_tokens * self.d_model * self.dtype_bytes

    def flops_prefill(self, tokens: int) -> float:
        """Multiply-adds x 2 of a prefill of ``tokens``: the matmuls, plus causal QK^T and AV."""
        att = 4 * self.n_layers * self.d_model * tokens * (tokens + 1) / 2
        return 2.0 * self.matmul_params() * tokens + att

    def flops_decode(self, context: int) -> float:
        """One decoded token attending over ``context`` tokens."""
        return 2.0 * self.matmul_params() + 4.0 * self.n_layers * self.d_model * context

    def describe(self) -> Dict[str, Any]:
        out = asdict(self)
        out.update(matmul_params=self.matmul_params(), weight_bytes=self.weight_bytes(),
                   pool_bytes=self.pool_bytes(), head_dim=self.head_dim, weights="random (seeded), never downloaded")
        return out


def encode(text: str, vocab: int) -> List[int]:
    """Byte-level tokens (the UTF-8 bytes, folded into the vocabulary)."""
    return [b % vocab for b in text.encode("utf-8")] or [0]


def decode_tokens(tokens: List[int]) -> str:
    """Printable ASCII, one character per token (outputs of random weights have no meaning)."""
    return "".join(chr(32 + t % 95) for t in tokens)


class PoolExhausted(RuntimeError):
    pass


class KVBlockPool:
    """The KV cache as fixed-size blocks of one preallocated pool, with a block table per sequence."""

    def __init__(self, cfg: ModelConfig, device: Any, dtype: Any):
        import torch

        shape = (cfg.n_layers, cfg.pool_blocks, cfg.block_tokens, cfg.n_heads, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.block_tokens = cfg.block_tokens
        self.total_blocks = cfg.pool_blocks
        self.free: Deque[int] = collections.deque(range(cfg.pool_blocks))
        self.tables: Dict[int, List[int]] = {}
        self.lengths: Dict[int, int] = {}
        self.reserved = 0  # blocks promised to admitted sequences (so that one never runs out mid-way)
        self._reservation: Dict[int, int] = {}
        self.failed_allocations = 0

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_tokens)

    def can_admit(self, tokens: int) -> bool:
        return self.reserved + self.blocks_for(tokens) <= self.total_blocks

    def admit(self, seq: int, max_tokens: int) -> None:
        need = self.blocks_for(max_tokens)
        if self.reserved + need > self.total_blocks:
            self.failed_allocations += 1
            raise PoolExhausted(f"sequence of {max_tokens} tokens needs {need} blocks; "
                                f"{self.total_blocks - self.reserved} unreserved")
        self.reserved += need
        self.tables[seq] = []
        self.lengths[seq] = 0
        self._reservation[seq] = need

    def grow(self, seq: int, tokens: int) -> List[int]:
        """Make room for ``tokens`` more tokens of ``seq``; return their slots (block * block_tokens + offset)."""
        table = self.tables[seq]
        start = self.lengths[seq]
        end = start + tokens
        while len(table) * self.block_tokens < end:
            table.append(self.free.popleft())
        self.lengths[seq] = end
        bt = self.block_tokens
        return [table[p // bt] * bt + p % bt for p in range(start, end)]

    def release(self, seq: int) -> None:
        self.free.extend(self.tables.pop(seq, []))
        self.lengths.pop(seq, None)
        self.reserved -= self._reservation.pop(seq, 0)

    def stats(self) -> Dict[str, int]:
        used = self.total_blocks - len(self.free)
        return {"blocks_used": used, "tokens_stored": sum(self.lengths.values()), "sequences": len(self.tables)}


@dataclass
class Request:
    id: int
    prompt: List[int]
    max_new: int
    on_done: Callable[[Request], None]
    on_first: Optional[Callable[[Request], None]] = None
    #: Called from the engine's thread with each token after the first, as it is produced (streaming).
    on_token: Optional[Callable[[Request, int], None]] = None
    submitted_ns: int = 0
    first_ns: Optional[int] = None
    done_ns: Optional[int] = None
    output: Optional[List[int]] = None
    error: Optional[str] = None


class TinyDecoder:
    """Pre-norm decoder-only transformer (RMSNorm, SiLU MLP, learned positions, an LM head)."""

    def __init__(self, cfg: ModelConfig, device: str = "cpu"):
        import torch

        self.torch = torch
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = getattr(torch, cfg.dtype)
        g = torch.Generator(device="cpu").manual_seed(cfg.seed)
        d, f = cfg.d_model, cfg.d_ff

        def w(*shape: int, std: float = 0.02) -> Any:
            return (torch.randn(*shape, generator=g) * std).to(device=self.device, dtype=self.dtype)

        self.emb = w(cfg.vocab, d, std=1.0 / math.sqrt(d))
        self.pos = w(cfg.max_seq_tokens, d)
        self.layers = [{"wqkv": w(d, 3 * d), "wo": w(d, d), "w1": w(d, f), "w2": w(f, d),
                        "n1": torch.ones(d, device=self.device, dtype=self.dtype),
                        "n2": torch.ones(d, device=self.device, dtype=self.dtype)} for _ in range(cfg.n_layers)]
        self.norm = torch.ones(d, device=self.device, dtype=self.dtype)
        self.head = w(d, cfg.vocab, std=1.0 / math.sqrt(d))

    def _rms(self, x: Any, wt: Any) -> Any:
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(self.dtype) * wt

    def prefill(self, pool: KVBlockPool, tokens: List[int], slots: List[int]) -> int:
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        t = len(tokens)
        ids = torch.tensor(tokens, device=self.device)
        slot = torch.tensor(slots, device=self.device)
        blk, off = slot // cfg.block_tokens, slot % cfg.block_tokens
        x = self.emb[ids] + self.pos[:t]
        for li, L in enumerate(self.layers):
            qkv = (self._rms(x, L["n1"]) @ L["wqkv"]).view(t, 3, cfg.n_heads, cfg.head_dim)
            q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
            pool.k[li, blk, off] = k
            pool.v[li, blk, off] = v
            a = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                               is_causal=True)
            x = x + a.transpose(0, 1).reshape(t, cfg.d_model) @ L["wo"]
            x = x + F.silu(self._rms(x, L["n2"]) @ L["w1"]) @ L["w2"]
        logits = self._rms(x[-1:], self.norm) @ self.head
        return int(logits.argmax(-1).item())

    def decode(self, pool: KVBlockPool, last: List[int], positions: List[int], slots: List[int],
               tables: List[List[int]]) -> List[int]:
        """One token for each of B sequences; ``tables`` are their block tables, ``positions`` the new tokens'."""
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        b = len(last)
        bt = cfg.block_tokens
        nblk = max(len(tb) for tb in tables)
        table = torch.tensor([tb + [0] * (nblk - len(tb)) for tb in tables], device=self.device)
        ctx = torch.tensor(positions, device=self.device) + 1
        span = nblk * bt
        mask = (torch.arange(span, device=self.device)[None, :] < ctx[:, None])[:, None, None, :]
        slot = torch.tensor(slots, device=self.device)
        blk, off = slot // bt, slot % bt
        x = self.emb[torch.tensor(last, device=self.device)] + self.pos[torch.tensor(positions, device=self.device)]
        for li, L in enumerate(self.layers):
            qkv = (self._rms(x, L["n1"]) @ L["wqkv"]).view(b, 3, cfg.n_heads, cfg.head_dim)
            q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
            pool.k[li, blk, off] = k
            pool.v[li, blk, off] = v
            kk = pool.k[li][table].reshape(b, span, cfg.n_heads, cfg.head_dim).transpose(1, 2)
            vv = pool.v[li][table].reshape(b, span, cfg.n_heads, cfg.head_dim).transpose(1, 2)
            a = F.scaled_dot_product_attention(q[:, :, None, :], kk, vv, attn_mask=mask)
            x = x + a.reshape(b, cfg.d_model) @ L["wo"]
            x = x + F.silu(self._rms(x, L["n2"]) @ L["w1"]) @ L["w2"]
        logits = self._rms(x, self.norm) @ self.head
        return [int(t) for t in logits.argmax(-1).tolist()]


class Engine:
    """Continuous batching of a :class:`TinyDecoder` on one worker thread (a context manager that always stops).

    ``work`` holds one record per step: ``(t0_ns, t1_ns, output_tokens, flops, kind)``; ``pool_trace`` the
    pool's occupancy after each step, for SVC-FRAG.  Both are bounded (``max_records``).
    """

    def __init__(self, cfg: ModelConfig, device: str = "cpu", max_records: int = 2_000_000):
        import torch

        cfg.validate()
        self.cfg = cfg
        self.device = device
        if cfg.threads:
            torch.set_num_threads(int(cfg.threads))
        self.model = TinyDecoder(cfg, device)
        self.pool = KVBlockPool(cfg, self.model.device, self.model.dtype)
        self._sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda *a: None)
        self._lock = threading.Condition()
        self._pending: Deque[Request] = collections.deque()
        self._active: List[Request] = []
        self._ids = 0
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        self.max_records = max_records
        self.work: List[tuple] = []
        self.pool_trace: List[tuple] = []
        self.rejected = 0
        self.worker_error: Optional[str] = None

    # -- client side
    def submit(self, prompt: List[int], max_new: int, on_done: Callable[[Request], None],
               on_first: Optional[Callable[[Request], None]] = None,
               on_token: Optional[Callable[[Request, int], None]] = None) -> Request:
        max_new = max(1, min(int(max_new), self.cfg.max_seq_tokens - 1))
        prompt = list(prompt)[: self.cfg.max_seq_tokens - max_new] or [0]
        with self._lock:
            self._ids += 1
            req = Request(self._ids, prompt, max_new, on_done, on_first, on_token, submitted_ns=time.monotonic_ns())
            if self._stop or self.worker_error:
                req.error = self.worker_error or "engine stopped"
                on_done(req)
                return req
            self._pending.append(req)
            self._lock.notify()
        return req

    def generate(self, prompt: List[int], max_new: int, timeout_s: float = 60.0) -> Request:
        """Blocking helper: submit and wait."""
        ev = threading.Event()
        req = self.submit(prompt, max_new, lambda r: ev.set())
        if not ev.wait(timeout_s):
            req.error = f"no answer within {timeout_s:g} s"
        return req

    def warmup(self) -> None:
        self.generate([1, 2, 3, 4], 2)

    # -- lifecycle
    def __enter__(self) -> Engine:
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="sits-engine", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
        with self._lock:  # whatever is left is answered, never left hanging
            left = list(self._pending) + list(self._active)
            self._pending.clear()
            self._active.clear()
        for r in left:
            r.error = r.error or "engine stopped before the request finished"
            self.pool.release(r.id)
            r.on_done(r)

    def busy(self) -> int:
        with self._lock:
            return len(self._pending) + len(self._active)

    # -- worker
    def _record(self, t0: int, t1: int, tokens: int, flops: float, kind: str) -> None:
        if len(self.work) < self.max_records:
            self.work.append((t0, t1, tokens, flops, kind))
            s = self.pool.stats()
            self.pool_trace.append((t1, s["blocks_used"], s["tokens_stored"], s["sequences"]))

    def _loop(self) -> None:
        torch = self.model.torch
        try:
            with torch.inference_mode():
                while True:
                    with self._lock:
                        while not self._stop and not self._pending and not self._active:
                            self._lock.wait(0.05)
                        if self._stop:
                            return
                        admit: List[Request] = []
                        while self._pending and len(self._active) + len(admit) < self.cfg.max_batch:
                            r = self._pending[0]
                            if not self.pool.can_admit(len(r.prompt) + r.max_new):
                                if not self._active and not admit:
                                    self._pending.popleft()
                                    r.error = (f"request of {len(r.prompt) + r.max_new} tokens does not fit the "
                                               f"KV pool ({self.pool.total_blocks} blocks of {self.pool.block_tokens})")
                                    self.rejected += 1
                                    r.on_done(r)
                                    continue
                                break
                            self._pending.popleft()
                            self.pool.admit(r.id, len(r.prompt) + r.max_new)
                            admit.append(r)
                    for r in admit:
                        self._prefill(r)
                    running = [r for r in self._active if r.output is not None and len(r.output) < r.max_new]
                    if running:
                        self._decode(running)
                    self._finish()
        except Exception as exc:  # the engine broke: every waiting request is answered with the error
            self.worker_error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                left = list(self._pending) + list(self._active)
                self._pending.clear()
                self._active.clear()
            for r in left:
                r.error = self.worker_error
                r.on_done(r)

    def _prefill(self, r: Request) -> None:
        t0 = time.monotonic_ns()
        slots = self.pool.grow(r.id, len(r.prompt))
        tok = self.model.prefill(self.pool, r.prompt, slots)
        self._sync()
        t1 = time.monotonic_ns()
        r.output = [tok]
        r.first_ns = t1
        self._record(t0, t1, 1, self.cfg.flops_prefill(len(r.prompt)), "prefill")
        with self._lock:
            self._active.append(r)
        if r.on_first:
            r.on_first(r)

    def _decode(self, running: List[Request]) -> None:
        t0 = time.monotonic_ns()
        outputs = [cast(List[int], r.output) for r in running]  # prefilled: each has its first token
        positions = [len(r.prompt) + len(o) - 1 for r, o in zip(running, outputs)]
        slots = [self.pool.grow(r.id, 1)[0] for r in running]
        tables = [self.pool.tables[r.id] for r in running]
        out = self.model.decode(self.pool, [o[-1] for o in outputs], positions, slots, tables)
        self._sync()
        t1 = time.monotonic_ns()
        for r, o, tok in zip(running, outputs, out):
            o.append(tok)
            if r.on_token:
                r.on_token(r, tok)
        self._record(t0, t1, len(running), sum(self.cfg.flops_decode(p + 1) for p in positions), "decode")

    def _finish(self) -> None:
        done = [r for r in self._active if r.output is not None and len(r.output) >= r.max_new]
        if not done:
            return
        now = time.monotonic_ns()
        with self._lock:
            self._active = [r for r in self._active if r not in done]
        for r in done:
            self.pool.release(r.id)
            r.done_ns = now
            r.on_done(r)
