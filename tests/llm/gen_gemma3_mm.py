"""tests/llm/models/tiny-gemma3-mm: a tiny Gemma3ForConditionalGeneration (what users download for
gemma-3-4b/12b/27b-it) whose text model is tests/llm/models/tiny-gemma3 (the same config and the
same bf16 weights) beside a tiny SigLIP vision tower and projector (random, seeded), saved by
transformers' save_pretrained as it saves the real ones: config.json with text_config and
vision_config, the text weights under language_model.model.*. relaxc reads it as its text model
(frontends/hf/config.c, checkpoint.c; tests/lit/run/gemma3_mm.test).

Writes the folder and tests/llm/ref/tiny-gemma3-mm.json: the greedy prompt of
tests/llm/ref/tiny-gemma3.json and 16 greedy tokens of transformers on the multimodal model
(text only), and 8 after its prompts of 33 and 100 tokens, each checked here to equal the text
model's (the references of tiny-gemma3), with the smallest gap between the best two logits on
the way. Run from anywhere with the packages of
requirements.txt: python3 tests/llm/gen_gemma3_mm.py (seconds; deterministic)."""
import json
import os

import torch
from safetensors.torch import load_file
from transformers import (Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig,
                          SiglipVisionConfig)

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "models", "tiny-gemma3")
OUT = os.path.join(HERE, "models", "tiny-gemma3-mm")
GREEDY = 16


def main():
    torch.manual_seed(32)
    tc = json.load(open(os.path.join(TEXT, "config.json")))
    drop = ("architectures", "transformers_version", "dtype", "torch_dtype", "model_type")
    text = Gemma3TextConfig(**{k: v for k, v in tc.items() if k not in drop})
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, image_size=28, patch_size=14)
    cfg = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                       boi_token_index=500, eoi_token_index=501, image_token_index=502,
                       bos_token_id=tc["bos_token_id"], eos_token_id=tc["eos_token_id"])
    m = Gemma3ForConditionalGeneration(cfg).to(torch.bfloat16).eval()
    st = load_file(os.path.join(TEXT, "model.safetensors"))
    lm = {k[len("model."):]: v for k, v in st.items() if k.startswith("model.")}
    missing, unexpected = m.model.language_model.load_state_dict(lm, strict=True)
    assert not missing and not unexpected
    m.tie_weights()
    m.save_pretrained(OUT, safe_serialization=True)
    os.chmod(os.path.join(OUT, "model.safetensors"), 0o644)
    ref = json.load(open(os.path.join(HERE, "ref", "tiny-gemma3.json")))
    prompt = ref["greedy"]["prompt"]
    m32 = m.float()

    def greedy(prompt, n):  # one full forward per token (no cache): plain and exact
        ids, gaps = list(prompt), []
        with torch.no_grad():
            for _ in range(n):
                logits = m32(input_ids=torch.tensor([ids])).logits[0, -1]
                top = torch.topk(logits, 2).values
                gaps.append(float(top[0] - top[1]))
                ids.append(int(torch.argmax(logits)))
        return ids[len(prompt):], min(gaps)

    out = {"model": "tiny-gemma3-mm", "architecture": "Gemma3ForConditionalGeneration"}
    tokens, gap = greedy(prompt, GREEDY)
    assert tokens == ref["greedy"]["tokens"][:GREEDY], (tokens, ref["greedy"]["tokens"][:GREEDY])
    out["greedy"] = {"prompt": prompt, "tokens": tokens, "min_gap": gap}
    for n in ("33", "100"):  # the text model's prompts (local and global layers past the window)
        p = ref["prompts"][n]
        tokens, gap = greedy(p, 8)
        assert tokens == ref["decode"][n]["tokens"], (n, tokens, ref["decode"][n]["tokens"])
        out["greedy_" + n] = {"prompt": p, "tokens": tokens, "min_gap": gap}
    json.dump(out, open(os.path.join(HERE, "ref", "tiny-gemma3-mm.json"), "w"), indent=1)
    print("tiny-gemma3-mm greedy", {k: v["tokens"] for k, v in out.items() if k.startswith("g")})


if __name__ == "__main__":
    main()
