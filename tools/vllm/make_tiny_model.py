#!/usr/bin/env python3
"""Write a tiny random-weight Llama model and its tokenizer into a folder, for serving with vLLM's CPU build.

Runs in the server's virtual environment (it needs `transformers` and `tokenizers`, which pytest-sits does not).
Nothing is downloaded: the tokenizer is trained here, on the few lines below, and the weights are seeded.

2 layers, hidden 256, 4 heads of 64 (2 KV heads), FFN 512, vocabulary 512, context 2048. A head size of 16 is
refused by vLLM's CPU attention; 64 works.

    python tools/vllm/make_tiny_model.py --out=DIR [--seed=0]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

TEXT = """the quick brown fox jumps over the lazy dog
an inference server answers requests for tokens with a model held in device memory
the first token arrives after the prompt is read, the next ones one by one
a conformance suite measures latency, throughput and power under load
hello world, this is a tiny model written for tests and nothing else
numbers 0 1 2 3 4 5 6 7 8 9 and punctuation . , ; : ! ? ' " ( ) [ ] { } - + * / = < > @ # $ % & _
"""
CHAT_TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder to write (created; an existing model there is replaced)")
    ap.add_argument("--seed", type=int, default=0)
    ns = ap.parse_args(argv)
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    special = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT.splitlines() * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=2048)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(ns.seed)
    config = LlamaConfig(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
                         intermediate_size=512, vocab_size=512, max_position_embeddings=2048,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    print(f"wrote {out} (vocabulary {len(fast)}, {sum(p.numel() for p in model.parameters()):,} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
