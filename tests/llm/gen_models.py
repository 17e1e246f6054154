#!/usr/bin/env python3
"""Makes the LLM fixtures of relaxc: tiny Hugging Face checkpoints under tests/llm/models/ and
their transformers references under tests/llm/ref/ (see tests/llm/README.md and docs/llm.md,
"Fixtures").

    pip install -r tests/llm/requirements.txt
    apt-get install bible-kjv          # the `bible` program (and its data, bible-kjv-text)
    python3 tests/llm/gen_models.py    # every model, then every reference
    python3 tests/llm/gen_models.py --only tiny-qwen2 --refs-only
    python3 tests/llm/gen_models.py --only random   # the random models, not the trained ones
    python3 tests/llm/gen_models.py --only kjv-llama-256   # one trained model

Everything is seeded and runs on one CPU thread; the trained model takes a fixed number of
steps (about five minutes on one core), so a rerun on the same machine gives the same bytes.
(Another CPU may round differently inside torch's kernels: the trained weights would then
differ slightly, and the references are always recomputed from the committed files.)

The references are computed in float32 by transformers with attn_implementation="eager", each
model loaded back from the folder this script wrote (so they describe what transformers reads
from the committed files). For the random models it also measures transformers in float16
against them (hf_f16_rel_l2), which their weights are shaped to keep small (randomize()).
"""

import argparse
import glob
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import safetensors.torch  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Phi3Config,
    Phi3ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")
REFS = os.path.join(HERE, "ref")

PROMPT_LENGTHS = (1, 7, 33, 100)
DECODE_STEPS = 8
GREEDY_PROMPT = 7
GREEDY_STEPS = 32
DEMO_PROMPT = "In the beginning"
DEMO_STEPS = 48
MIN_GAP = 0.05  # the logits have a standard deviation of about 4 to 5 (kjv-llama too)

# The trained models: steps x batch x sequence length of training.
KJV_STEPS = 600
KJV_BATCH = 32
KJV_SEQ = 128
KJV_HELDOUT_FRACTION = 0.05
KJV_HELDOUT_BYTES = 20000

# The trained models, same corpus, tokenizer and recipe: their shapes, training steps and the
# dtype of the committed weights. kjv-llama-256 is the one whose every projection reads a
# multiple of 256 inputs, so that llama.cpp's Q4_K (256-weight super-blocks per row) applies to
# each of them (tests/gguf/gen_models.py); it is saved in float16 to keep its file at 4 MB, and
# trained for fewer steps (each costs about twice kjv-llama's).
KJV_SHAPES = {
    "kjv-llama": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=32, intermediate_size=352),
    "kjv-llama-256": dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=64, intermediate_size=768),
}
KJV_MODEL_STEPS = {"kjv-llama": KJV_STEPS, "kjv-llama-256": 300}
KJV_SAVE_DTYPE = {"kjv-llama": torch.float32, "kjv-llama-256": torch.float16}
TRAINED_NAMES = tuple(KJV_SHAPES)

# The mixture-of-experts models (issue 32): k = 2 of 4 or 8 experts per token, so a prompt of one
# token leaves at least E - 2 experts without a token (and a decode step of b sequences at least
# E - 2 b): the 1-token prompt, the decode steps of one sequence and the two-sequence batched
# decode of tests/unit/test_llm.c run empty expert groups (check_moe_routing asserts it).
MOE_NAMES = ("tiny-mixtral", "tiny-qwen2-moe", "tiny-qwen3-moe")
RANDOM_NAMES = ("tiny-llama-gqa", "tiny-llama3", "tiny-mistral", "tiny-qwen2", "tiny-qwen3",
                "tiny-phi3", "tiny-gemma3", "tiny-gemma2") + MOE_NAMES
# Models whose config.json keeps transformers 5's layout (rope_parameters, layer_types, dtype)
T5_LAYOUT = ("tiny-llama-gqa", "tiny-gemma3")
GEMMA_NAMES = ("tiny-gemma3", "tiny-gemma2")
# Variants of tiny-qwen3, tiny-gemma2, tiny-gemma3 and tiny-phi3 whose every 2-D weight reads a
# whole number of 256-weight super-blocks (hidden 256, 4 heads of 64, feed-forward 256, vocab
# 256), so that a true Q4_K GGUF file of each can be made (tests/gguf/gen_models.py, which also
# makes their references: transformers on gguf-py's dequantization of the Q4_K blocks). Only the
# checkpoints are made here (--only tiny-qwen3-256 ...): no references of the bf16/f16 weights.
K256_NAMES = ("tiny-qwen3-256", "tiny-gemma2-256", "tiny-gemma3-256", "tiny-phi3-256")
ALL_NAMES = TRAINED_NAMES + RANDOM_NAMES + K256_NAMES


def setup_determinism():
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    np.random.seed(0)


def log(*args):
    print(*args, flush=True)


# --------------------------------------------------------------------------------------------
# config.json as the published checkpoints have it
# --------------------------------------------------------------------------------------------

def write_legacy_config(folder, extra=None):
    """transformers 5 writes `rope_parameters` (holding rope_theta and the scaling), `dtype` and
    `layer_types`; checkpoints published with transformers 4 (Llama 2/3, Mistral, Qwen2 on the
    hub) have top-level `rope_theta`, `rope_scaling` (absent or null for plain RoPE) and
    `torch_dtype`. This rewrites config.json in the older layout; transformers 5 reads both."""
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters")
    rp = dict(rp)
    cfg["rope_theta"] = rp.pop("rope_theta")
    if rp.get("rope_type", "default") != "default":
        cfg["rope_scaling"] = rp
    else:
        cfg["rope_scaling"] = None
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    cfg.pop("layer_types", None)
    if cfg.get("model_type") == "qwen3_moe":  # transformers 5 writes its attribute's name
        cfg["num_experts"] = cfg.pop("num_local_experts")
    cfg.update(extra or {})
    with open(path, "w") as f:
        json.dump(dict(sorted(cfg.items())), f, indent=2)
        f.write("\n")


def check_config_roundtrip(folder, original):
    """The folder's config, read back by transformers, means what the model was built with."""
    back = transformers.AutoConfig.from_pretrained(folder)
    for key in ("rope_parameters", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
                "rms_norm_eps", "tie_word_embeddings", "sliding_window", "layer_types",
                "max_position_embeddings", "attention_bias"):
        a = getattr(original, key, None)
        b = getattr(back, key, None)
        assert a == b, f"{folder}: config {key} reads back as {b!r}, built with {a!r}"


# --------------------------------------------------------------------------------------------
# The King James Bible
# --------------------------------------------------------------------------------------------

def kjv_verses():
    """Every verse of the KJV, one string each, from Debian's bible-kjv-text data file
    (/usr/lib/bible.data) through the `bible` program of package bible-kjv."""
    if shutil.which("bible") is None:
        sys.exit("gen_models.py: needs the `bible` program: apt-get install bible-kjv")
    out = subprocess.run(["bible", "-l", "100000", "gen1:1-rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    verses = []
    for line in out.split("\n"):
        m = re.match(r"^\s+(\d+) (.*\S)\s*$", line)
        if m:
            verses.append(m.group(2))
        elif line.strip() and not re.match(r"^\S.* \d+$", line):
            raise RuntimeError(f"unexpected line from bible: {line!r}")
    assert len(verses) == 31102, len(verses)
    return verses


def train_tokenizer(text_lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(text_lines, trainer=trainer)
    bos = tok.token_to_id("<s>")
    assert bos == 0 and tok.token_to_id("</s>") == 1
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return tok


def make_kjv_llama(name, steps):
    folder = os.path.join(MODELS, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)

    verses = kjv_verses()
    lines = [v + "\n" for v in verses]
    n_train = int(len(lines) * (1 - KJV_HELDOUT_FRACTION))
    train_lines, held_lines = lines[:n_train], lines[n_train:]
    excerpt = ""
    for line in held_lines:
        if len(excerpt) + len(line) > KJV_HELDOUT_BYTES:
            break
        excerpt += line
    with open(os.path.join(folder, "heldout.txt"), "w") as f:
        f.write(excerpt)
    full = "".join(lines)
    log(f"{name}: text {len(full)} bytes (sha256 {hashlib.sha256(full.encode()).hexdigest()}), "
        f"{len(verses)} verses; training on the first {n_train}, held back from "
        f"{held_lines[0][:40]!r}")

    tok = train_tokenizer(train_lines)
    tok.save(os.path.join(folder, "tokenizer.json"))
    # As published checkpoints have it (transformers 5 would write its own class name,
    # TokenizersBackend, which transformers 4 does not know).
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
                   "clean_up_tokenization_spaces": False, "eos_token": "</s>",
                   "model_max_length": 512, "tokenizer_class": "PreTrainedTokenizerFast"},
                  f, indent=2)
        f.write("\n")
    fast = transformers.AutoTokenizer.from_pretrained(folder)
    for text in ("In the beginning", train_lines[0] + train_lines[1]):
        assert fast(text)["input_ids"] == tok.encode(text).ids, text
        assert fast(text)["input_ids"][0] == 0

    # One stream of tokens; verse starts are where training windows begin.
    enc = tok.encode_batch(train_lines, add_special_tokens=False)
    starts, ids = [], []
    for e in enc:
        starts.append(len(ids))
        ids.extend(e.ids)
    ids = torch.tensor(ids, dtype=torch.long)
    starts = torch.tensor([s for s in starts if s + KJV_SEQ - 1 <= len(ids)], dtype=torch.long)
    log(f"{name}: {len(ids)} training tokens ({len(''.join(train_lines)) / len(ids):.2f} bytes each)")

    config = LlamaConfig(
        vocab_size=1024, **KJV_SHAPES[name], rms_norm_eps=1e-5,
        rope_theta=10000.0, max_position_embeddings=512, tie_word_embeddings=False,
        bos_token_id=0, eos_token_id=1, pad_token_id=None, initializer_range=0.02)
    torch.manual_seed(1234)
    model = LlamaForCausalLM._from_config(config, attn_implementation="sdpa",
                                          dtype=torch.float32)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    peak_lr, warmup = 3e-3, 30
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=peak_lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(42)
    bos = torch.zeros((KJV_BATCH, 1), dtype=torch.long)
    offs = torch.arange(KJV_SEQ - 1)
    t0 = time.time()
    losses = []
    for step in range(steps):
        lr = peak_lr * min(1.0, (step + 1) / warmup)
        if step >= warmup:
            frac = (step - warmup) / max(1, steps - warmup)
            lr = peak_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        pick = starts[torch.randint(len(starts), (KJV_BATCH,), generator=gen)]
        batch = torch.cat([bos, ids[pick[:, None] + offs[None, :]]], dim=1)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            log(f"{name}: step {step} loss {loss.item():.4f} lr {lr:.2e} "
                f"{time.time() - t0:.0f}s")
    train_s = time.time() - t0
    model.eval()

    # Held-out loss: the excerpt in windows of KJV_SEQ tokens, each starting with <s>.
    held_ids = tok.encode(excerpt, add_special_tokens=False).ids
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(held_ids), KJV_SEQ - 1):
            chunk = [0] + held_ids[i:i + KJV_SEQ - 1]
            if len(chunk) < 2:
                continue
            x = torch.tensor([chunk])
            logits = model(input_ids=x).logits[0, :-1].float()
            nll = torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="sum")
            total += nll.item()
            count += len(chunk) - 1
    held_loss = total / count
    summary = {
        "steps": steps, "batch": KJV_BATCH, "seq": KJV_SEQ,
        "train_seconds": round(train_s, 1),
        "train_loss_last50": round(float(np.mean(losses[-50:])), 4),
        "heldout_loss": round(held_loss, 4), "heldout_tokens": count,
        "train_tokens": len(ids), "tokens_seen": steps * KJV_BATCH * KJV_SEQ,
    }
    log(f"{name}: {summary}")

    model.generation_config.bos_token_id = 0
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = None
    model.to(KJV_SAVE_DTYPE[name])
    model.save_pretrained(folder, safe_serialization=True)
    write_legacy_config(folder)
    check_config_roundtrip(folder, model.config)
    with open(os.path.join(folder, "training.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


# --------------------------------------------------------------------------------------------
# Random-weight models
# --------------------------------------------------------------------------------------------

COMMON = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=128, max_position_embeddings=256, rms_norm_eps=1e-5,
              initializer_range=0.2, bos_token_id=1, eos_token_id=2, pad_token_id=None)


def random_spec(name):
    if name in K256_NAMES:  # the same model at 256-wide shapes (head_dim 64: 4 x 64 = 256)
        return random_spec_of(name[:-len("-256")], dict(COMMON, vocab_size=256, hidden_size=256,
                                                         intermediate_size=256), 64)
    return random_spec_of(name, COMMON, 32)


def random_spec_of(name, COMMON, head_dim):  # noqa: N803 (the shapes the specs below read)
    if name == "tiny-llama-gqa":
        cfg = LlamaConfig(**COMMON, num_key_value_heads=2, head_dim=32, rope_theta=100000.0,
                          tie_word_embeddings=False)
        return LlamaForCausalLM, cfg, torch.float32
    if name == "tiny-llama3":
        cfg = LlamaConfig(**COMMON, num_key_value_heads=2, rope_theta=500000.0,
                          rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 64},
                          tie_word_embeddings=True)
        return LlamaForCausalLM, cfg, torch.bfloat16
    if name == "tiny-mistral":
        cfg = MistralConfig(**COMMON, num_key_value_heads=1, rope_theta=1000000.0,
                            sliding_window=32, tie_word_embeddings=False)
        return MistralForCausalLM, cfg, torch.float16
    if name == "tiny-qwen2":
        cfg = Qwen2Config(**COMMON, num_key_value_heads=2, rope_theta=1000000.0,
                          tie_word_embeddings=True, use_sliding_window=False,
                          sliding_window=32, max_window_layers=1)
        return Qwen2ForCausalLM, cfg, torch.float32
    if name == "tiny-qwen3":
        # q/k norms per head, an explicit head_dim (32, not 64 / 4), use_sliding_window with
        # max_window_layers 1: layer 0 attends to every key, layer 1 to the last 32; yarn rope
        # scaling (factor 4 from 64 positions: pairs 0-3 blended, the others interpolated, cos and
        # sin times 1 + 0.1 ln 4), as Qwen3's long-context configs have it
        cfg = Qwen3Config(**COMMON, num_key_value_heads=2, head_dim=head_dim,
                          rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0,
                                           "factor": 4.0, "original_max_position_embeddings": 64},
                          tie_word_embeddings=False, use_sliding_window=True, sliding_window=32,
                          max_window_layers=1)
        return Qwen3ForCausalLM, cfg, torch.bfloat16
    if name == "tiny-phi3":
        # fused qkv_proj and gate_up_proj; a partial rotary embedding (0.75: 12 of the 16 dims of
        # a head rotate, as Phi-4-mini's); longrope with short and long factors: a sequence of
        # more than original_max_position_embeddings (32) tokens takes the long ones (the 33- and
        # 100-token prompts, and the greedy run from step 26 on), and cos/sin are scaled by
        # sqrt(1 + ln(256 / 32) / ln(32)); a sliding window of 48 on every layer
        half = int(COMMON["hidden_size"] // COMMON["num_attention_heads"] * 0.75) // 2
        rp = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
              "short_factor": [1.0 + 0.25 * i for i in range(half)],
              "long_factor": [1.5 + 2.0 * i for i in range(half)],
              "original_max_position_embeddings": 32}
        cfg = Phi3Config(**COMMON, num_key_value_heads=2, rope_parameters=rp,
                         original_max_position_embeddings=32, sliding_window=48,
                         tie_word_embeddings=False)
        return Phi3ForCausalLM, cfg, torch.float16
    if name == "tiny-gemma3":
        # (1 + w) norms, sandwich norms, q/k norms, the embedding times 8, GeGLU; layer 0 local
        # (window 16, rope base 10000), layer 1 global (base 1e6 with linear scaling 2);
        # query_pre_attn_scalar 24 (not head_dim 32); tied embeddings
        cfg = Gemma3TextConfig(**COMMON, num_key_value_heads=1, head_dim=head_dim,
                               query_pre_attn_scalar=24, sliding_window=16,
                               layer_types=["sliding_attention", "full_attention"],
                               rope_parameters={
                                   "sliding_attention": {"rope_type": "default",
                                                         "rope_theta": 10000.0},
                                   "full_attention": {"rope_type": "linear", "factor": 2.0,
                                                      "rope_theta": 1000000.0}},
                               tie_word_embeddings=True)
        cfg.architectures = ["Gemma3ForCausalLM"]
        return Gemma3ForCausalLM, cfg, torch.bfloat16
    if name == "tiny-gemma2":
        # Gemma 2: soft-capped attention scores and logits, with caps (6 and 8, where published
        # models have 50 and 30) small enough for the scores (up to about 8) and the logits (a
        # standard deviation of about 4.5) of these weights to feel them (check_softcap); layer
        # 0 local (window 16), layer 1 global; query_pre_attn_scalar 24; tied embeddings
        cfg = Gemma2Config(**COMMON, num_key_value_heads=2, head_dim=head_dim,
                           query_pre_attn_scalar=24, sliding_window=16,
                           attn_logit_softcapping=6.0, final_logit_softcapping=8.0,
                           tie_word_embeddings=True)
        return Gemma2ForCausalLM, cfg, torch.float16
    if name == "tiny-mixtral":
        # 4 experts of intermediate 128 (w1 gate, w3 up, w2 down), 2 per token: softmax over the
        # 4 router logits, the top 2 renormalized; Mixtral's rope base 1e6, no window
        cfg = MixtralConfig(**COMMON, num_key_value_heads=2, num_local_experts=4,
                            num_experts_per_tok=2, rope_parameters={"rope_type": "default",
                                                                    "rope_theta": 1000000.0},
                            sliding_window=None, tie_word_embeddings=False)
        return MixtralForCausalLM, cfg, torch.float32
    if name == "tiny-qwen2-moe":
        # 3 layers: 0 and 2 sparse (8 experts of intermediate 32, 2 per token, not renormalized:
        # norm_topk_prob false, and the shared expert of intermediate 96 times
        # sigmoid(shared_expert_gate x)), layer 1 in mlp_only_layers: a dense MLP of
        # intermediate_size 128; q/k/v biases; use_sliding_window with max_window_layers 3:
        # transformers 5 puts the window (32) on the layers i < 3 with (i + 1) odd (0 and 2)
        cfg = Qwen2MoeConfig(**dict(COMMON, num_hidden_layers=3), num_key_value_heads=2,
                             num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                             shared_expert_intermediate_size=96, mlp_only_layers=[1],
                             norm_topk_prob=False, use_sliding_window=True, sliding_window=32,
                             max_window_layers=3,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                             tie_word_embeddings=False)
        return Qwen2MoeForCausalLM, cfg, torch.bfloat16
    if name == "tiny-qwen3-moe":
        # q/k norms per head, head_dim 32; decoder_sparse_step 2: layer 0 a dense MLP, layer 1 8
        # experts of intermediate 32, 2 per token, renormalized (norm_topk_prob true, as
        # Qwen3-30B-A3B's config has it); tied embeddings
        cfg = Qwen3MoeConfig(**COMMON, num_key_value_heads=2, head_dim=32, num_experts=8,
                             num_experts_per_tok=2, moe_intermediate_size=32,
                             decoder_sparse_step=2, norm_topk_prob=True,
                             rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                             tie_word_embeddings=True)
        return Qwen3MoeForCausalLM, cfg, torch.float16
    raise KeyError(name)


# The random models are shaped so that transformers in float16 stays within HF_F16_MAX of float32
# (relative L2 of the logits), about as close as a trained model of this size, while attention
# still matters (see tests/llm/README.md, "Random weights for float16"):
#  - the residual stream lives mostly in a RANDOM_RANK-dimensional subspace U of the hidden space
#    (a random rotation, so every coordinate carries it): the shaping matrix M is 1 on U and
#    RANDOM_OFF on the rest; matrices that write the hidden state (embedding rows, o_proj,
#    down_proj) are multiplied by M on their output side, those that read it (q/k/v, gate/up,
#    lm_head) on their input side. f16 rounding errors spread over all 64 dimensions, and only a
#    fifth of them falls into U, where everything is read.
#  - the token embeddings dominate the residual stream (their part in U has norm sqrt(RANDOM_RANK),
#    the same for every token) and the blocks add less (o_proj and down_proj small), so the many
#    roundings inside the blocks are diluted; still, replacing everything before the last token
#    changes the last logits by 11-16% (relative L2), and the attention is far from flat (q and k
#    of RMS about 1.6: a mean entropy of about 0.5-0.6 of the uniform distribution's).
#  - projections are scaled random (semi-)orthogonal matrices, which amplify no error.
#  - tied models get negative final-norm weights: with the embedding dominating, positive ones
#    would make every token predict itself (x . E_t is largest for the token just read).
RANDOM_RANK = 12
RANDOM_OFF = 0.1
RANDOM_SCALES = {  # the RMS of the entries (before the shaping by M)
    "embed_tokens": 1.0, "lm_head": 0.2,
    "q_proj": 0.2, "k_proj": 0.2, "v_proj": 0.1, "o_proj": 0.03,
    "gate_proj": 0.1, "up_proj": 0.1, "down_proj": 0.03,
    "qkv_proj": 0.17, "gate_up_proj": 0.1,  # qkv: longrope scales the scores by 1.26^2
    # MoE: the router (its logits have a standard deviation of about 4, so the top 2 of 4 or 8
    # experts are well apart: check_moe_routing measures the gap), Qwen2-MoE's shared-expert gate
    "gate": 0.5, "shared_expert_gate": 0.1,
}
READS_HIDDEN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "lm_head", "qkv_proj",
                "gate_up_proj", "gate", "shared_expert_gate")
# Gemma's norms scale by (1 + w): their w is drawn as for the others and 1 subtracted, so that the
# scale is the same; its post-attention and post-feed-forward norms (which set the size of what a
# block adds, after o_proj and down_proj) get a small scale, as o_proj and down_proj have
GEMMA_POST_NORMS = ("post_attention_layernorm", "post_feedforward_layernorm")
WRITES_HIDDEN = ("o_proj", "down_proj")
HF_F16_MAX = 8e-4  # transformers f16 vs f32, relative L2 of the logits, at every reference row


def randomize(model, seed):
    """Explicit weights (nothing left at an identity-like default), as described above: layer
    norm weights uniform in [0.5, 1.5]; the final norm's in [2, 4], or in [-0.8, -0.4] for tied
    embeddings; biases N(0, 0.2^2); embeddings and lm_head Gaussian, projections scaled random
    orthogonal matrices, all shaped by M. Logits then have a standard deviation of about 4.5."""
    gen = torch.Generator().manual_seed(seed)
    cfg = model.config
    d = cfg.hidden_size
    f64 = torch.float64

    def orthogonal(n_out, n_in):
        """A random matrix with orthonormal rows or columns (the longer side), RMS 1."""
        q, r = torch.linalg.qr(torch.randn(max(n_out, n_in), min(n_out, n_in), generator=gen,
                                           dtype=f64))
        q = q * torch.sign(torch.diagonal(r))
        q = q if n_out >= n_in else q.T
        return q * math.sqrt(max(n_out, n_in))

    rot = orthogonal(d, d) / math.sqrt(d)
    gains = torch.full((d,), RANDOM_OFF, dtype=f64)
    gains[:RANDOM_RANK] = 1.0
    shape = (rot * gains) @ rot.T
    in_u = rot[:, :RANDOM_RANK] @ rot[:, :RANDOM_RANK].T
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            kind = pname.split(".")[-2]
            gemma = cfg.model_type.startswith("gemma")
            if pname == "model.norm.weight":
                v = torch.rand(p.shape, generator=gen, dtype=f64)
                v = -(0.4 + 0.4 * v) if cfg.tie_word_embeddings else 2.0 + 2.0 * v
                v = v - 1 if gemma else v
            elif kind in ("q_norm", "k_norm"):
                # the heads come out of these norms with an RMS of their weights: 1.3 to 2.1 keeps
                # the scores as far from flat as the other models' q and k of RMS 1.6 do
                v = 1.3 + 0.8 * torch.rand(p.shape, generator=gen, dtype=f64)
                v = v - 1 if gemma else v
            elif gemma and kind in GEMMA_POST_NORMS:
                v = 0.1 + 0.1 * torch.rand(p.shape, generator=gen, dtype=f64) - 1
            elif "norm" in pname:
                v = 0.5 + torch.rand(p.shape, generator=gen, dtype=f64)
                v = v - 1 if gemma else v
            elif pname.endswith(".bias"):
                v = 0.2 * torch.randn(p.shape, generator=gen, dtype=f64)
            elif kind == "embed_tokens":
                v = torch.randn(p.shape, generator=gen, dtype=f64) @ shape
                u = v @ in_u
                norm = RANDOM_SCALES[kind] * math.sqrt(RANDOM_RANK)
                v = v - u + u / u.norm(dim=1, keepdim=True) * norm
            elif kind in ("lm_head", "gate", "shared_expert_gate"):
                v = RANDOM_SCALES[kind] * torch.randn(p.shape, generator=gen, dtype=f64) @ shape
            elif p.dim() == 3:  # experts stacked [E, out, in] (gate_up_proj, down_proj)
                kind = pname.split(".")[-1]
                v = torch.stack([RANDOM_SCALES[kind] * orthogonal(*p.shape[1:])
                                 for _ in range(p.shape[0])])
                v = v @ shape if kind in READS_HIDDEN else shape @ v
            else:
                v = RANDOM_SCALES[kind] * orthogonal(*p.shape)
                if kind in READS_HIDDEN:
                    v = v @ shape
                else:
                    assert kind in WRITES_HIDDEN, pname
                    v = shape @ v
            assert v.shape == p.shape, pname
            p.copy_(v.to(p.dtype))


def make_random(name, seed):
    folder = os.path.join(MODELS, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    cls, cfg, file_dtype = random_spec(name)
    torch.manual_seed(seed)
    model = cls._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    randomize(model, seed)
    model.eval()
    kwargs = {}
    if name == "tiny-llama-gqa":
        total = sum(p.numel() * 4 for p in model.parameters())
        kwargs["max_shard_size"] = int(total * 0.6)
    model.to(file_dtype).save_pretrained(folder, safe_serialization=True, **kwargs)
    if name == "tiny-qwen2":
        # Published Qwen2 configs name a window that use_sliding_window=false turns off; the
        # Qwen2Config of transformers 5 drops it (None) when it builds, and again when it reads.
        write_legacy_config(folder, {"sliding_window": 32})
    elif name.removesuffix("-256") not in T5_LAYOUT:
        write_legacy_config(folder)
    check_config_roundtrip(folder, model.config)
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    if name == "tiny-llama-gqa":
        assert len(files) == 2 and os.path.exists(
            os.path.join(folder, "model.safetensors.index.json")), files
    else:
        assert files == ["model.safetensors"], files
    names = set()
    for fn in files:
        with safetensors.safe_open(os.path.join(folder, fn), "pt") as f:
            for k in f.keys():
                names.add(k)
                assert f.get_tensor(k).dtype == file_dtype, (name, k)
    assert ("lm_head.weight" in names) == (not cfg.tie_word_embeddings), (name, sorted(names))
    log(f"{name}: {sum(os.path.getsize(os.path.join(folder, f)) for f in files)} bytes "
        f"of weights in {files}")


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------

def load_f32(folder, **overrides):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager", **overrides)
    model.eval()
    return model


def top2_gap(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


@torch.no_grad()
def run_greedy(model, prompt, steps):
    """Prefill `prompt`, then `steps` decode steps with the cache, each feeding the argmax of
    the logits before it. Returns the prefill logits, the tokens fed, the logits after each
    step and the top-2 gap of each logits row that picked a token."""
    out = model(input_ids=torch.tensor([prompt]), use_cache=True)
    past = out.past_key_values
    logits = out.logits[0, -1].float()
    prefill = logits.clone()
    fed, rows, gaps = [], [], []
    for _ in range(steps):
        tok = int(torch.argmax(logits))
        gaps.append(top2_gap(logits))
        fed.append(tok)
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits = out.logits[0, -1].float()
        rows.append(logits.clone())
    return prefill, fed, torch.stack(rows), gaps


@torch.no_grad()
def check_against_no_cache(model, prompt, fed, rows):
    """The cached decode agrees with one forward over the whole sequence, without a cache."""
    full = model(input_ids=torch.tensor([prompt + fed]), use_cache=False).logits[0].float()
    err = (full[len(prompt):] - rows).abs().max().item()
    assert err < 1e-3, err
    return err


@torch.no_grad()
def check_sliding_window(folder, window, prompt):
    """transformers applies the window (eager attention): each query row has exactly
    min(p + 1, window) nonzero attention probabilities, in prefill and in cached decode, and
    the logits differ from the same weights without a window."""
    model = load_f32(folder)
    assert model.config.sliding_window == window
    # per-layer kinds (Qwen3's max_window_layers, Gemma's local and global layers): a global
    # layer attends to every earlier key
    kinds = getattr(model.config, "layer_types", None) or \
        ["sliding_attention"] * model.config.num_hidden_layers
    wins = [window if k == "sliding_attention" else 1 << 30 for k in kinds]
    out = model(input_ids=torch.tensor([prompt]), use_cache=True, output_attentions=True)
    for layer, att in enumerate(out.attentions):
        w = wins[layer]
        nz = (att[0] > 0).sum(-1)  # [heads, q]
        want = torch.clamp(torch.arange(len(prompt)) + 1, max=w)
        assert torch.equal(nz, want.expand_as(nz)), (layer, nz)
        # the keys attended are the last `window` ones: p - window + 1 .. p
        p = len(prompt) - 1
        if w < len(prompt):
            assert (att[0, :, p, : p - w + 1] == 0).all() and (att[0, :, p, p - w + 1:] > 0).all()
    tok = int(torch.argmax(out.logits[0, -1]))
    step = model(input_ids=torch.tensor([[tok]]), past_key_values=out.past_key_values,
                 use_cache=True, output_attentions=True)
    for layer, att in enumerate(step.attentions):
        # The cache may keep only the last keys: count what is attended.
        want = min(wins[layer], len(prompt) + 1)
        assert ((att[0, :, -1] > 0).sum(-1) == want).all(), (layer, att.shape)
    windowed = out.logits[0, -1]
    if any(k != "sliding_attention" for k in kinds):
        log(f"  sliding window {window} on layers {[i for i, k in enumerate(kinds) if k == 'sliding_attention']}: "
            f"their rows attend to min(p+1, {window}) keys, the other layers' to all (prefill "
            f"length {len(prompt)} and one cached decode step)")
        return None
    full_model = load_f32(folder, sliding_window=None)
    assert full_model.config.sliding_window is None
    full = full_model(input_ids=torch.tensor([prompt])).logits[0, -1]
    diff = (windowed - full).abs().max().item()
    short = full_model(input_ids=torch.tensor([prompt[:window]])).logits[0, -1]
    short_w = model(input_ids=torch.tensor([prompt[:window]])).logits[0, -1]
    same = (short - short_w).abs().max().item()
    assert diff > 1e-2 and same == 0.0, (diff, same)
    log(f"  sliding window {window}: every row attends to min(p+1, {window}) keys (prefill "
        f"length {len(prompt)} and one cached decode step); last-token logits differ from the "
        f"unwindowed model by up to {diff:.3f} at length {len(prompt)}, identical at length "
        f"{window}")
    return diff


@torch.no_grad()
def check_rope(model, name):
    """For tiny-llama3: the llama3 scaling changes some inverse frequencies, smoothly some."""
    rot = model.model.rotary_emb
    inv = rot.inv_freq.double()
    d = model.config.head_dim
    theta = model.config.rope_parameters["rope_theta"]
    base = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ratio = (base / inv).tolist()
    log(f"  {name}: inv_freq ratios default/scaled = {[round(r, 4) for r in ratio]}")
    assert any(abs(r - 1) < 1e-6 for r in ratio) and any(abs(r - 8) < 1e-5 for r in ratio)
    assert any(1.0 + 1e-3 < r < 8 - 1e-3 for r in ratio)


@torch.no_grad()
def check_longrope(model):
    """For tiny-phi3: the 33- and 100-token prompts take the long factors (their logits differ
    from those of the same model with the long factors set to the short ones), the 7-token prompt
    the short ones."""
    cfg = model.config
    rp = dict(cfg.rope_parameters)
    folder = os.path.join(MODELS, "tiny-phi3")
    same = load_f32(folder, rope_parameters=dict(rp, long_factor=rp["short_factor"]))
    for L, differs in ((7, False), (33, True)):
        ids = torch.tensor([list(range(3, 3 + L))])
        d = (model(input_ids=ids).logits - same(input_ids=ids).logits).abs().max().item()
        assert (d > 1e-3) == differs, (L, d)
    log("  tiny-phi3: longrope takes the long factors beyond 32 tokens, the short ones up to it")


@torch.no_grad()
def check_softcap(model, prompt):
    """For tiny-gemma2: each soft-cap changes the last logits of the prompt (the same weights
    without it give others)."""
    folder = os.path.join(MODELS, "tiny-gemma2")
    ids = torch.tensor([prompt])
    want = model(input_ids=ids).logits[0, -1]
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        other = load_f32(folder, **{key: None})(input_ids=ids).logits[0, -1]
        d = (want - other).abs().max().item()
        assert d > 0.1, (key, d)
        log(f"  tiny-gemma2: without {key} the last logits differ by up to {d:.3f}")


# The smallest gap between a token's k-th and (k+1)-th router logits that a reference may hold (in
# every sparse layer, at every prompt, decode step and greedy token): f16's rounding moves the
# logits (standard deviation about 4) by up to about 5e-3, and an expert chosen the other way would
# change that token's output entirely, so prompts are redrawn as for near-tied greedy tokens.
ROUTER_MIN_GAP = 1e-2


@torch.no_grad()
def router_gap(model, seqs):
    """The smallest gap between the k-th and the (k+1)-th router logit of any token of seqs in
    any sparse layer (transformers' router_logits, one forward per sequence)."""
    k = model.config.num_experts_per_tok
    gap = math.inf
    for ids in seqs:
        out = model(input_ids=torch.tensor([ids]), output_router_logits=True)
        for lg in out.router_logits:
            top = torch.topk(lg.float(), k + 1, -1).values
            gap = min(gap, float((top[:, k - 1] - top[:, k]).min()))
    return gap


@torch.no_grad()
def check_moe_routing(model, name, prompts, gap):
    """For the MoE models: that the 1-token prompt leaves experts without a token in every
    sparse layer, and each sparse layer's experts and weights at the 7-token prompt (tokens x k)
    as transformers routes them."""
    cfg = model.config
    E = getattr(cfg, "num_local_experts", None) or cfg.num_experts
    k = cfg.num_experts_per_tok
    renorm = cfg.model_type == "mixtral" or cfg.norm_topk_prob
    routes = {}
    for L in (1, GREEDY_PROMPT):
        out = model(input_ids=torch.tensor([prompts[L]]), output_router_logits=True)
        for i, lg in enumerate(out.router_logits):
            top = torch.topk(torch.softmax(lg.float(), -1), k, -1)
            if L == 1:
                assert len(set(top.indices.flatten().tolist())) < E, (name, i)
                continue
            w = top.values / top.values.sum(-1, keepdim=True) if renorm else top.values
            routes[str(i)] = {"experts": top.indices.tolist(),
                              "weights": [[sig(x, 6) for x in r] for r in w.tolist()]}
    log(f"  {name}: {len(routes)} sparse layers, {k} of {E} experts per token; the smallest gap "
        f"between a token's {k}th and next router logit {gap:.4f}")
    return {"experts": E, "top_k": k, "renormalized": bool(renorm), "router_min_gap": sig(gap),
            "routes_7": routes}


def prompts_for(name, model, attempt):
    """Prompts of every length: for a trained model, <s> and the held-out text from its verse
    `attempt` on; for a random model, pseudo-random ids (3 .. vocab-1) from a seed made of its
    name and `attempt`."""
    vocab = model.config.vocab_size
    if name in TRAINED_NAMES:
        folder = os.path.join(MODELS, name)
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "heldout.txt")) as f:
            lines = f.read().split("\n")
        ids = tok.encode("\n".join(lines[attempt:])).ids  # <s> first
        assert ids[0] == 0
        return {L: ids[:L] for L in PROMPT_LENGTHS}
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) + attempt
    rng = np.random.default_rng(seed)
    return {L: [int(t) for t in rng.integers(3, vocab, size=L)] for L in PROMPT_LENGTHS}


def file_dtype_of(folder):
    names = [f for f in os.listdir(folder) if f.endswith(".safetensors")]
    dts = set()
    for fn in names:
        with safetensors.safe_open(os.path.join(folder, fn), "pt") as f:
            for k in f.keys():
                dts.add(f.get_tensor(k).dtype)
    assert len(dts) == 1, dts
    return {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[dts.pop()]


def compute_refs(model, prompts):
    results = {}
    min_gap = math.inf
    for L in PROMPT_LENGTHS:
        prefill, fed, rows, gaps = run_greedy(model, prompts[L], DECODE_STEPS)
        err = check_against_no_cache(model, prompts[L], fed, rows)
        # the gaps of the rows that picked the tokens fed (the last row picks nothing)
        min_gap = min(min_gap, *gaps)
        results[L] = (prefill, fed, rows, err)
    _, toks, _, gaps = run_greedy(model, prompts[GREEDY_PROMPT], GREEDY_STEPS)
    assert toks[:DECODE_STEPS] == results[GREEDY_PROMPT][1]
    min_gap = min(min_gap, *gaps)
    return results, toks, gaps, min_gap


def dump_ref(ref):
    """JSON with one line per key (two levels deep): lists of ids stay on one line."""
    def one(v):
        return json.dumps(v, ensure_ascii=False)

    lines = []
    for k, v in ref.items():
        if isinstance(v, dict):
            inner = [f"  {one(k2)}: {one(v2)}" for k2, v2 in v.items()]
            lines.append(f" {one(k)}: {{\n" + ",\n".join(inner) + "\n }")
        else:
            lines.append(f" {one(k)}: {one(v)}")
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    assert json.loads(text) == ref
    return text


@torch.no_grad()
def hf_f16_errors(folder, prompts, results):
    """transformers in float16 (the same files, eager attention, on the CPU) against the f32
    references: relative L2 error ||f16 - f32|| / ||f32|| of the last-token logits after each
    prefill and after each of the decode steps, feeding the reference tokens with the KV cache."""
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float16,
                                                 attn_implementation="eager")
    model.eval()
    assert next(model.parameters()).dtype == torch.float16

    def rel(a, b):
        return float((a.double() - b.double()).norm() / b.double().norm())

    out = {"prefill": {}, "decode": {}}
    for L in PROMPT_LENGTHS:
        prefill, fed, rows, _ = results[L]
        res = model(input_ids=torch.tensor([prompts[L]]), use_cache=True)
        out["prefill"][str(L)] = rel(res.logits[0, -1].float(), prefill)
        errs = []
        for i, tok in enumerate(fed):
            res = model(input_ids=torch.tensor([[tok]]), past_key_values=res.past_key_values,
                        use_cache=True)
            errs.append(rel(res.logits[0, -1].float(), rows[i]))
        out["decode"][str(L)] = errs
    return out


@torch.no_grad()
def attention_entropy(model, prompt):
    """Mean entropy of the attention probabilities over the keys a query sees, divided by the
    entropy of the uniform distribution over those keys (1: flat attention), per layer: over
    every head and every query row that sees at least 2 keys."""
    out = model(input_ids=torch.tensor([prompt]), output_attentions=True)
    n = torch.arange(1, len(prompt) + 1, dtype=torch.float64)
    window = getattr(model.config, "sliding_window", None)
    if window is not None:
        n = n.clamp(max=window)
    ratios = []
    for att in out.attentions:  # [1, heads, queries, keys]
        a = att[0].double()
        ent = -(a * torch.log(torch.where(a > 0, a, 1.0))).sum(-1)  # [heads, queries]
        seen = n > 1
        ratios.append(float((ent[:, seen] / torch.log(n[seen])).mean()))
    return ratios


def sig(x, digits=4):
    return float(f"{x:.{digits}g}")


def make_refs(name):
    folder = os.path.join(MODELS, name)
    out_dir = os.path.join(REFS, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    model = load_f32(folder)
    cfg = model.config
    assert next(model.parameters()).dtype == torch.float32
    assert cfg.max_position_embeddings >= max(PROMPT_LENGTHS) + DECODE_STEPS
    assert cfg.max_position_embeddings >= GREEDY_PROMPT + GREEDY_STEPS
    window = getattr(cfg, "sliding_window", None)
    if name == "tiny-llama3":
        check_rope(model, name)
    # Prompts are redrawn (a fixed sequence of seeds; for kjv-llama, a later verse) until no
    # greedy choice is a near-tie: every chosen token leads the runner-up by at least MIN_GAP.
    for attempt in range(100):
        prompts = prompts_for(name, model, attempt)
        results, toks, gaps, min_gap = compute_refs(model, prompts)
        rgap = router_gap(model, [prompts[L] + results[L][1] for L in PROMPT_LENGTHS] +
                          [prompts[GREEDY_PROMPT] + toks]) if name in MOE_NAMES else math.inf
        if min_gap >= MIN_GAP and rgap >= ROUTER_MIN_GAP:
            break
        log(f"  {name}: prompts {attempt} have a top-2 gap of {min_gap:.4f}, a router gap of "
            f"{rgap:.4f}; next ones")
    else:
        raise RuntimeError(f"{name}: no prompts without near-ties")
    if window is not None:
        check_sliding_window(folder, window, prompts[100])
    if name == "tiny-phi3":
        check_longrope(model)
    if name == "tiny-gemma2":
        check_softcap(model, prompts[33])
    moe = check_moe_routing(model, name, prompts, rgap) if name in MOE_NAMES else None
    ref = {
        "model": name,
        "architecture": cfg.architectures[0],
        "file_dtype": file_dtype_of(folder),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "attn_implementation": "eager",
        "sliding_window": window,
        "prompts": {str(L): prompts[L] for L in PROMPT_LENGTHS},
        "prefill": {},
        "decode": {},
    }
    for L in PROMPT_LENGTHS:
        prefill, fed, rows, err = results[L]
        np.save(os.path.join(out_dir, f"prefill_{L}.npy"), prefill.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, f"decode_{L}.npy"), rows.numpy().astype(np.float32))
        ref["prefill"][str(L)] = f"prefill_{L}.npy"
        ref["decode"][str(L)] = {"tokens": fed, "logits": f"decode_{L}.npy"}
        log(f"  {name} L={L}: decode tokens {fed}, cached vs uncached {err:.2e}")
    ref["greedy"] = {"prompt": prompts[GREEDY_PROMPT], "tokens": toks,
                     "gaps": [round(g, 6) for g in gaps]}
    if moe:
        ref["moe"] = moe
    log(f"  {name}: greedy {toks}; smallest top-2 gap of any chosen token {min_gap:.4f}")
    if name in RANDOM_NAMES:
        f16 = hf_f16_errors(folder, prompts, results)
        worst = max(max(f16["prefill"].values()), max(max(v) for v in f16["decode"].values()))
        for L in PROMPT_LENGTHS:
            log(f"  {name} L={L}: transformers f16 vs f32, relative L2: prefill "
                f"{f16['prefill'][str(L)]:.2e}, decode "
                + " ".join(f"{e:.1e}" for e in f16["decode"][str(L)]))
        log(f"  {name}: largest f16 vs f32 error {worst:.2e} (at most {HF_F16_MAX:.0e})")
        assert worst <= HF_F16_MAX, (name, worst)
        ref["hf_f16_rel_l2"] = {
            "prefill": {k: sig(v) for k, v in f16["prefill"].items()},
            "decode": {k: [sig(e) for e in v] for k, v in f16["decode"].items()},
        }
        ref["hf_f16_rel_l2_max"] = sig(worst)
        ent = {str(L): [sig(r, 3) for r in attention_entropy(model, prompts[L])]
               for L in (33, 100)}
        log(f"  {name}: attention entropy / uniform, per layer: {ent}")
        # soft-capped scores (tiny-gemma2's cap 6) lie within +-6: a row over 100 keys cannot be
        # as peaked as an uncapped one
        limit = 0.9 if name == "tiny-gemma2" else 0.85
        assert all(r < limit for v in ent.values() for r in v), ent
        ref["attention_entropy_ratio"] = ent
    if name in TRAINED_NAMES:
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        ids = tok.encode(DEMO_PROMPT).ids
        _, cont, _, _ = run_greedy(model, ids, DEMO_STEPS)
        text = tok.decode(cont)
        ref["text"] = {"prompt": DEMO_PROMPT, "ids": ids, "continuation": text}
        log(f"  {name}: {DEMO_PROMPT!r} -> {text!r}")
    with open(os.path.join(REFS, f"{name}.json"), "w") as f:
        f.write(dump_ref(ref))
    return min_gap


# --------------------------------------------------------------------------------------------
# An independent check: the same logits from the committed files with NumPy in float64
# --------------------------------------------------------------------------------------------

# Straight from config.json (either layout) and the safetensors files, as an importer reads
# them: RMSNorm, rotate-half RoPE (llama3 scaling), grouped-query attention where query head h
# reads kv head h // (H / KVH), a causal mask, and a sliding window where position p sees keys
# p - window + 1 .. p (only when use_sliding_window is not false), SwiGLU, tied lm_head.

def np_weights(folder):
    w = {}
    for fn in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        with safetensors.safe_open(fn, "pt") as f:
            for k in f.keys():
                w[k] = f.get_tensor(k).to(torch.float64).numpy()  # numpy has no bf16
    return w


def np_rope_params(cfg, kind="full_attention"):
    """The rope parameters of a layer kind from either layout (Gemma 3's transformers 5 layout
    holds one object per kind; its older one rope_local_base_freq)."""
    rp = cfg.get("rope_parameters") or {}
    if "full_attention" in rp:
        rp = rp[kind]
    elif kind == "sliding_attention" and cfg["architectures"][0] == "Gemma3ForCausalLM":
        return {"rope_theta": cfg.get("rope_local_base_freq", 10000.0)}
    theta = cfg.get("rope_theta", rp.get("rope_theta"))
    scaling = cfg.get("rope_scaling") or (rp if rp.get("rope_type", "default") != "default"
                                          else None)
    return dict(scaling or {}, rope_theta=theta)


def np_inv_freq(cfg, d, kind="full_attention", seq_len=0):
    """Inverse frequencies and the factor of cos and sin: llama3, linear and longrope scaling
    (longrope's long factors for a sequence longer than original_max_position_embeddings)."""
    scaling = np_rope_params(cfg, kind)
    theta = scaling["rope_theta"]
    inv = 1.0 / theta ** (np.arange(0, d, 2) / d)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        return inv / scaling["factor"], 1.0
    if kind in ("longrope", "su"):
        old = scaling.get("original_max_position_embeddings") or \
            cfg["original_max_position_embeddings"]
        ext = scaling["long_factor"] if seq_len > old else scaling["short_factor"]
        factor = cfg["max_position_embeddings"] / old
        return inv / np.array(ext), math.sqrt(1 + math.log(factor) / math.log(old))
    if kind == "yarn":
        factor, dim = scaling["factor"], d
        old = scaling.get("original_max_position_embeddings") or cfg["max_position_embeddings"]

        def corr(rot):
            return dim * math.log(old / (rot * 2 * math.pi)) / (2 * math.log(theta))

        lo = max(math.floor(corr(scaling.get("beta_fast") or 32)), 0)
        hi = min(math.ceil(corr(scaling.get("beta_slow") or 1)), dim - 1)
        ramp = np.clip((np.arange(d // 2) - lo) / (hi - lo if hi > lo else 0.001), 0, 1)
        keep = 1 - ramp  # the original frequencies' share
        return inv / factor * (1 - keep) + inv * keep, 0.1 * math.log(factor) + 1
    if kind == "llama3":
        factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * np.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        out = np.where(wavelen > old / lo, inv / factor, inv)
        mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = np.where(mid, (1 - smooth) * inv / factor + smooth * inv, out)
    else:
        assert kind == "default", scaling
    return inv, 1.0


def np_layer_kinds(cfg):
    """Each layer's window (None: every earlier key), as each architecture's config says."""
    arch, n, win = cfg["architectures"][0], cfg["num_hidden_layers"], cfg.get("sliding_window")
    kinds = cfg.get("layer_types")
    if kinds is None and arch.startswith("Gemma"):
        period = 2 if arch.startswith("Gemma2") else cfg.get("sliding_window_pattern", 6)
        kinds = ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)]
    use = cfg.get("use_sliding_window", False)
    if kinds is None and arch == "Qwen3MoeForCausalLM":  # use_sliding_window: every layer
        kinds = ["sliding_attention" if use else "full_attention"] * n
    if kinds is None and arch == "Qwen2MoeForCausalLM":  # below max_window_layers, every other
        kinds = ["sliding_attention" if use and (i + 1) % 2 and i < cfg.get("max_window_layers", 28)
                 else "full_attention" for i in range(n)]
    if kinds is None and arch.startswith("Qwen"):
        use = cfg.get("use_sliding_window", False)
        kinds = ["sliding_attention" if use and i >= cfg.get("max_window_layers", 28)
                 else "full_attention" for i in range(n)]
        win = win if use else None
    if kinds is None:
        kinds = ["sliding_attention"] * n
    return [(win if k == "sliding_attention" else None, k) for k in kinds]


def np_moe(cfg, w, p, h, act):
    """A sparse layer from its per-expert tensors: softmax over the router's logits, the k
    largest (the lower index first among equals), renormalized for Mixtral and with
    norm_topk_prob, each token's experts' SwiGLU outputs summed with those weights; Qwen2-MoE's
    shared expert times sigmoid(shared_expert_gate h) added."""
    mix = p + "block_sparse_moe.gate.weight" in w
    pre = p + ("block_sparse_moe." if mix else "mlp.")
    names = ("w1", "w3", "w2") if mix else ("gate_proj", "up_proj", "down_proj")
    k = cfg["num_experts_per_tok"]
    lg = h @ w[pre + "gate.weight"].T
    probs = np.exp(lg - lg.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    top = np.argsort(-probs, -1, kind="stable")[:, :k]
    wt = np.take_along_axis(probs, top, -1)
    if mix or cfg.get("norm_topk_prob"):
        wt /= wt.sum(-1, keepdims=True)
    m = np.zeros_like(h)
    for t in range(h.shape[0]):
        for s in range(k):
            e = f"{pre}experts.{top[t, s]}."
            g, u = h[t] @ w[e + names[0] + ".weight"].T, h[t] @ w[e + names[1] + ".weight"].T
            m[t] += wt[t, s] * ((act(g) * u) @ w[e + names[2] + ".weight"].T)
    if pre + "shared_expert_gate.weight" in w:
        se = pre + "shared_expert."
        g, u = h @ w[se + "gate_proj.weight"].T, h @ w[se + "up_proj.weight"].T
        sg = 1 / (1 + np.exp(-(h @ w[pre + "shared_expert_gate.weight"].T)))
        m += sg * ((act(g) * u) @ w[se + "down_proj.weight"].T)
    return m


def np_forward(name, ids, decode_from=None):
    """The logits of every position of ids; decode_from: the positions from there on are fed one
    at a time after a prefill of the ones before (only longrope tells the two apart: each
    forward picks its factors by its sequence length)."""
    folder = os.path.join(MODELS, name)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    w = np_weights(folder)
    arch = cfg["architectures"][0]
    gemma = arch.startswith("Gemma")
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps = cfg["rms_norm_eps"]
    n = len(ids)
    pos = np.arange(n)
    prf = cfg.get("partial_rotary_factor") or np_rope_params(cfg).get("partial_rotary_factor", 1)
    R = int(D * prf)  # the rotary dims of a head, the others pass through
    tables = {}
    for kind in ("full_attention", "sliding_attention"):
        # each position's sequence length: the whole prompt's in prefill, its own + 1 in decode
        seq = np.full(n, decode_from or n) if decode_from else np.full(n, n)
        if decode_from:
            seq[decode_from:] = pos[decode_from:] + 1
        ang, af = [], 1.0
        for p in range(n):
            inv, af = np_inv_freq(cfg, R, kind, seq[p])
            ang.append(p * inv)
        ang = np.array(ang)
        tables[kind] = (np.cos(ang)[:, None] * af, np.sin(ang)[:, None] * af)

    def rope(x, kind):  # [n, heads, D], rotating the halves of the first R dims
        cos, sin = tables[kind]
        x1, x2, rest = x[..., :R // 2], x[..., R // 2:R], x[..., R:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], -1)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 + g if gemma else g)

    def act(g):
        if gemma:
            return 0.5 * g * (1 + np.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
        return g / (1 + np.exp(-g))

    scale = cfg.get("query_pre_attn_scalar", 256 if gemma else D) ** -0.5
    cap = cfg.get("attn_logit_softcapping", 50.0 if arch.startswith("Gemma2") else None)
    x = w["model.embed_tokens.weight"][ids]
    if gemma:
        x = x * math.sqrt(cfg["hidden_size"])
    for layer, (window, kind) in enumerate(np_layer_kinds(cfg)):
        masked = pos[None, :] > pos[:, None]
        if window:
            masked |= pos[None, :] <= pos[:, None] - window
        p = f"model.layers.{layer}."
        h = rms(x, w[p + "input_layernorm.weight"])

        def lin(m):
            y = h @ w[p + m + ".weight"].T
            return y + w[p + m + ".bias"] if p + m + ".bias" in w else y

        if p + "self_attn.qkv_proj.weight" in w:
            qkv = lin("self_attn.qkv_proj")
            q, k, v = np.split(qkv, [H * D, (H + KV) * D], -1)
        else:
            q, k, v = lin("self_attn.q_proj"), lin("self_attn.k_proj"), lin("self_attn.v_proj")
        q, k, v = q.reshape(n, H, D), k.reshape(n, KV, D), v.reshape(n, KV, D)
        if p + "self_attn.q_norm.weight" in w:
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k = rope(q, kind), rope(k, kind)
        o = np.zeros((n, H, D))
        for hq in range(H):
            hk = hq // (H // KV)
            s = q[:, hq] @ k[:, hk].T * scale
            if cap:
                s = np.tanh(s / cap) * cap
            s[masked] = -np.inf
            s = np.exp(s - s.max(-1, keepdims=True))
            o[:, hq] = (s / s.sum(-1, keepdims=True)) @ v[:, hk]
        o = o.reshape(n, H * D) @ w[p + "self_attn.o_proj.weight"].T
        if gemma:
            o = rms(o, w[p + "post_attention_layernorm.weight"])
            h = rms(x + o, w[p + "pre_feedforward_layernorm.weight"])
        else:
            h = rms(x + o, w[p + "post_attention_layernorm.weight"])
        x = x + o
        if p + "mlp.gate_up_proj.weight" in w:
            g, u = np.split(h @ w[p + "mlp.gate_up_proj.weight"].T, 2, -1)
            m = (act(g) * u) @ w[p + "mlp.down_proj.weight"].T
        elif p + "mlp.gate_proj.weight" in w:
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            m = (act(g) * u) @ w[p + "mlp.down_proj.weight"].T
        else:
            m = np_moe(cfg, w, p, h, act)
        if gemma:
            m = rms(m, w[p + "post_feedforward_layernorm.weight"])
        x = x + m
    x = rms(x, w["model.norm.weight"])
    logits = x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T
    fcap = cfg.get("final_logit_softcapping", 30.0 if arch.startswith("Gemma2") else None)
    return np.tanh(logits / fcap) * fcap if fcap else logits


def np_check(name):
    with open(os.path.join(REFS, f"{name}.json")) as f:
        ref = json.load(f)
    out_dir = os.path.join(REFS, name)
    worst = 0.0
    for L in PROMPT_LENGTHS:
        prompt, fed = ref["prompts"][str(L)], ref["decode"][str(L)]["tokens"]
        lg = np_forward(name, prompt + fed, decode_from=L)
        pre = np.load(os.path.join(out_dir, ref["prefill"][str(L)]))
        dec = np.load(os.path.join(out_dir, ref["decode"][str(L)]["logits"]))
        worst = max(worst, np.abs(lg[L - 1] - pre).max(), np.abs(lg[L:] - dec).max())
        assert [int(t) for t in np.argmax(lg[L - 1:-1], -1)] == fed, (name, L)
    g = ref["greedy"]
    lg = np_forward(name, g["prompt"] + g["tokens"], decode_from=len(g["prompt"]))
    assert [int(t) for t in np.argmax(lg[len(g["prompt"]) - 1:-1], -1)] == g["tokens"], name
    assert worst < 1e-3, (name, worst)
    log(f"  {name}: NumPy float64 from the files agrees, largest logit difference {worst:.1e}, "
        "same greedy tokens")


@torch.no_grad()
def sample_text(prompt, steps=120, temperature=0.8, seed=7):
    """A sampled continuation for the README (not a reference)."""
    folder = os.path.join(MODELS, "kjv-llama")
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    model = load_f32(folder)
    gen = torch.Generator().manual_seed(seed)
    ids = tok.encode(prompt).ids
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    past, logits, new = out.past_key_values, out.logits[0, -1], []
    for _ in range(steps):
        probs = torch.softmax(logits / temperature, -1)
        t = int(torch.multinomial(probs, 1, generator=gen))
        new.append(t)
        out = model(input_ids=torch.tensor([[t]]), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1]
    return tok.decode(new)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=ALL_NAMES + ("random",), action="append",
                    help="a model (repeatable); `random`: the random models, which leaves "
                         "the trained ones (several minutes each) alone")
    ap.add_argument("--refs-only", action="store_true", help="keep the models, redo references")
    ap.add_argument("--sample", action="store_true", help="print a sampled kjv-llama text")
    ap.add_argument("--kjv-steps", type=int,
                    help="training steps of each trained model (a quick trial; the committed "
                         f"ones take {KJV_MODEL_STEPS})")
    args = ap.parse_args()
    setup_determinism()
    only = set()
    for n in args.only or ALL_NAMES:
        only.update(RANDOM_NAMES if n == "random" else (n,))
    names = [n for n in ALL_NAMES if n in only]
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers "
        f"{tokenizers.__version__}, safetensors {safetensors.__version__}, numpy {np.__version__}")
    if not args.refs_only:
        for i, name in enumerate(ALL_NAMES):
            if name not in names:
                continue
            if name in TRAINED_NAMES:
                make_kjv_llama(name, args.kjv_steps or KJV_MODEL_STEPS[name])
            else:
                make_random(name, seed=1000 + i)
    os.makedirs(REFS, exist_ok=True)
    names = [n for n in names if n not in K256_NAMES]  # their references: tests/gguf
    for name in names:
        make_refs(name)
    for name in names:
        np_check(name)
    if args.sample:
        log("sample:", repr(sample_text(DEMO_PROMPT)))


if __name__ == "__main__":
    main()
