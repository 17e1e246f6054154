"""tests/ccl/gen_tp_model.py: the fixture of ccl.tp_tiny-llama-kv4_4, a tiny Llama whose 4 KV
heads (and 8 query heads, intermediate 128, vocabulary 256) split over 4 ranks by the Megatron
preset (the models of tests/llm have 1 or 2 KV heads). Random weights (std 0.2, as
tests/llm/gen_models.py's initializer_range, so that the logits have clear greedy gaps), saved in
float16 (about 230 KB). The test compares relaxc's sharded model with relaxc's whole one, so no
reference of transformers' is stored.

    /work/venv_onnxexp/bin/python tests/ccl/gen_tp_model.py   # requirements: tests/llm
"""
import json
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "tiny-llama-kv4")


def main():
    torch.manual_seed(35)
    cfg = LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=4, head_dim=16, intermediate_size=128, vocab_size=256,
                      max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.2,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:  # the norms: around 1
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.2)
    model.to(torch.float16).save_pretrained(OUT, safe_serialization=True)
    with open(os.path.join(OUT, "config.json")) as f:
        c = json.load(f)
    assert c["num_key_value_heads"] == 4 and c["vocab_size"] == 256, c
    print(OUT, sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT)), "bytes")


if __name__ == "__main__":
    main()
