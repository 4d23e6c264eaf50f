#!/usr/bin/env python3
"""Write a tiny, deterministic, random-weight llama-architecture GGUF model (for tools/llama/llama_sla.sh).

Runs in the server's virtual environment (it needs the `gguf` package, which pytest-sits does not).

2 layers, hidden 64, 4 heads (2 KV heads), FFN 256, ctx 2048, f32/f16 tensors,
SentencePiece-style ("llama") tokenizer with byte fallback (~500 tokens).

Generation is made to always run to max_tokens and to emit exactly one
printable-ASCII token per step: residual dim 0 is held at a constant value
(embedding col 0 = 1, attn_output/ffn_down row 0 = 0) and the output rows of
control/byte tokens (incl. EOS) get a large negative weight on that dim, so
they are never sampled. Use --allow-eos to keep EOS reachable.
"""
import argparse
import string
import sys

import gguf
import numpy as np

N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_CTX = 2, 64, 4, 2, 256, 2048
HEAD_DIM = N_EMBD // N_HEAD
SPACE = "\u2581"  # SentencePiece word-boundary marker

WORDS = """the of and to a in is it you that he was for on are with as I his they be at
one have this from or had by hot word but what some we can out other were all there when
up use your how said an each she which do their time if will way about many then them write
would like so these her long make thing see him two has look more day could go come did
number sound no most people my over know water than call first who may down side been now find
hello world model token server llama test fast slow data"""


def build_vocab():
    toks, scores, types = [], [], []

    def add(piece, score, ttype):
        toks.append(piece)
        scores.append(float(score))
        types.append(int(ttype))

    add("<unk>", 0.0, gguf.TokenType.UNKNOWN)
    add("<s>", 0.0, gguf.TokenType.CONTROL)
    add("</s>", 0.0, gguf.TokenType.CONTROL)
    for b in range(256):
        add(f"<0x{b:02X}>", 0.0, gguf.TokenType.BYTE)
    seen = set(toks)
    pieces = [SPACE] + list(string.ascii_letters + string.digits + string.punctuation)
    pieces += [SPACE + c for c in string.ascii_letters + string.digits + string.punctuation]
    words = WORDS.split()
    pieces += [SPACE + w for w in words] + words
    # a few sub-word pieces so SPM merges have intermediate steps
    pieces += ["he", "ll", "llo", "hell", "th", "in", "er", "an", "re", "on", "at", "en", "nd", "ing"]
    for i, p in enumerate(pieces):
        if p in seen:
            continue
        seen.add(p)
        # SPM merges prefer higher scores: longer pieces win
        add(p, len(p) * 1.0 - i * 1e-4, gguf.TokenType.NORMAL)
    return toks, scores, types


CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="tiny-llama.gguf")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--f16", action="store_true", help="store 2-D weights as f16 (default f32)")
    ap.add_argument("--allow-eos", action="store_true", help="do not suppress EOS in the output layer")
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    toks, scores, types = build_vocab()
    n_vocab = len(toks)
    wdtype = np.float16 if args.f16 else np.float32

    def rnd(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("tiny-random-llama")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if args.f16 else gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)

    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    # token embedding: dim 0 constant 1.0 (the "bias" channel), others random
    emb = rnd(n_vocab, N_EMBD, std=0.5)
    emb[:, 0] = 1.0
    w.add_tensor("token_embd.weight", emb.astype(wdtype))

    kv_dim = N_HEAD_KV * HEAD_DIM
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(p + "attn_q.weight", rnd(N_EMBD, N_EMBD, std=0.1).astype(wdtype))
        w.add_tensor(p + "attn_k.weight", rnd(kv_dim, N_EMBD, std=0.1).astype(wdtype))
        w.add_tensor(p + "attn_v.weight", rnd(kv_dim, N_EMBD, std=0.1).astype(wdtype))
        o = rnd(N_EMBD, N_EMBD, std=0.05)
        o[0, :] = 0.0  # keep residual dim 0 constant
        w.add_tensor(p + "attn_output.weight", o.astype(wdtype))
        w.add_tensor(p + "ffn_norm.weight", np.ones(N_EMBD, np.float32))
        w.add_tensor(p + "ffn_gate.weight", rnd(N_FF, N_EMBD, std=0.1).astype(wdtype))
        w.add_tensor(p + "ffn_up.weight", rnd(N_FF, N_EMBD, std=0.1).astype(wdtype))
        d = rnd(N_EMBD, N_FF, std=0.05)
        d[0, :] = 0.0
        w.add_tensor(p + "ffn_down.weight", d.astype(wdtype))

    w.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    out = rnd(n_vocab, N_EMBD, std=0.4)
    out[:, 0] = 0.0
    banned = [i for i, t in enumerate(types) if t != gguf.TokenType.NORMAL]
    if args.allow_eos:
        banned = [i for i in banned if i != 2]
    out[banned, 0] = -30.0  # logit ~ -60 for control/byte tokens (and EOS)
    w.add_tensor("output.weight", out.astype(wdtype))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: vocab={n_vocab} layers={N_LAYER} n_embd={N_EMBD} heads={N_HEAD}/{N_HEAD_KV} ff={N_FF} ctx={N_CTX}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
