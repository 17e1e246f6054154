#!/usr/bin/env python3
"""Fixtures of the GGUF tokenizers (frontends/gguf/model.c rewrites tokenizer.ggml.* as a
tokenizer.json; tests/unit/test_gguf_tok.c and tests/lit/run/gguf_spm.test check them).

  python3 -m pip install -r tests/gguf/tokenizers/requirements.txt
  python3 tests/gguf/tokenizers/gen.py      # rewrites the files below

Writes, with PyPI's `gguf` (llama.cpp's gguf-py) writing every file:
  spm.gguf: a SentencePiece BPE model trained here by PyPI's `sentencepiece` on
    tests/llm/tokenizers/corpus.txt, configured as Llama's (identity normalizer, extra spaces kept,
    a dummy prefix, byte_fallback, digits split, <unk> <s> </s>), written as llama.cpp's
    converter writes it: tokenizer.ggml.model "llama", tokens, scores, token types (normal 1,
    unknown 2, control 3, byte 6), bos/eos/unknown ids, add_bos_token true, add_eos_token false,
    add_space_prefix true; with the llama.* keys of a tiny model and no tensors.
  llama-bpe.gguf, qwen2.gguf: the byte-level BPE tokenizers tests/llm/tokenizers/llama3 and qwen2
    (trained by `tokenizers`) as llama.cpp's converter writes them: tokenizer.ggml.model "gpt2",
    pre "llama-bpe" / "qwen2", tokens, token types (special added tokens 3, other added 4),
    merges, bos id and add_bos_token as the tokenizer.json's template says.
  cases.json: for each file, every text of texts() below with the ids the
    reference library gives (sentencepiece for spm.gguf; `tokenizers` on the original
    tokenizer.json for the others) with the BOS token ("ids") and without ("plain"), and the
    plain ids decoded by the reference ("text_hex"). Texts left out, as reasons in the file:
    spm.gguf: those holding <s>, </s> or <unk> (sentencepiece reads them as plain text, relaxc
    and Hugging Face as the control tokens); qwen2.gguf: those whose ids hold the fixture's two
    non-special added tokens (<R> with rstrip, a normalized "Zürich"), options GGUF cannot carry.
  kjv-spm-f16.gguf: a random 1-layer llama (hidden 64, 2 heads of 32, 1 kv head, feed-forward
    128) over spm.gguf's vocabulary and tokenizer (the output rows of byte, control and unknown
    tokens zero, so that the greedy tokens are whole pieces), 2-D weights in F16 (attn_q/attn_k rows
    permuted as llama.cpp's converter permutes them), and kjv-spm.json: the prompt's ids by
    sentencepiece (with <s>), the 12 greedy tokens of a NumPy forward pass in f32 over the same
    (f16-rounded) weights, and their text decoded by sentencepiece after the prompt's.
  gemma-spm.gguf: Gemma's tokenizer as llama.cpp's converter writes it (gemma_file below): a
    SentencePiece BPE model trained here without the dummy prefix, <pad> <eos> <bos> <unk> at
    Gemma's ids 0 to 3, its turn markers user-defined (type 4), add_space_prefix false,
    add_bos_token true, eot_token_id; cases as spm.gguf's, texts with turn markers appended.
  bad-pre/scores/dup/type/model.gguf: tokenizers the rewrite refuses (see refused()), and
    ../../fuzz/corpus/gguf/spm_tokenizer.gguf: a seed of fuzz_gguf, a SentencePiece tokenizer of
    6 tokens.
CI uses the committed outputs; sentencepiece's training is deterministic with one thread."""
import io
import json
import os
import sys

import numpy as np
import gguf
import sentencepiece as spm
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
TOK = os.path.join(HERE, "..", "..", "llm", "tokenizers")
sys.path.insert(0, os.path.join(HERE, ".."))
from gen_models import finish, forward, permute  # noqa: E402

CONTROL = ("<s>", "</s>", "<unk>")


def texts():
    """tests/llm/tokenizers/cases.json's 100 texts, the 178 lines of kjv-llama's held-back text,
    and 200 strings of 1 to 24 characters drawn (seeded) from the corpus's characters, spaces,
    newlines and a few outside it (pairs of pieces that merge into one piece in different ways)."""
    out = json.load(open(os.path.join(TOK, "cases.json"), encoding="utf-8"))["texts"]
    held = os.path.join(HERE, "..", "..", "llm", "models", "kjv-llama", "heldout.txt")
    out += [l.rstrip("\n") for l in open(held, encoding="utf-8")]
    corpus = open(os.path.join(TOK, "corpus.txt"), encoding="utf-8").read()
    chars = sorted(set(corpus)) + [" "] * 20 + list("\u00e9\u4e2d\U0001f600\t")
    rng = np.random.default_rng(7)
    for _ in range(200):
        out.append("".join(chars[i] for i in rng.integers(0, len(chars), rng.integers(1, 25))))
    return out


def model_keys(w, vocab, hidden=32, heads=2, kv=2, ff=64, layers=1):
    for k, v in (("context_length", 128), ("embedding_length", hidden), ("block_count", layers),
                 ("feed_forward_length", ff), ("attention.head_count", heads),
                 ("attention.head_count_kv", kv), ("vocab_size", vocab)):
        w.add_uint32(f"llama.{k}", v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)


def train_spm():
    lines = [l.rstrip("\n") for l in open(os.path.join(TOK, "corpus.txt"), encoding="utf-8")
             if not l.startswith("#")]
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=m, model_type="bpe", vocab_size=560,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=True, character_coverage=0.99, hard_vocab_limit=False,
        allow_whitespace_only_pieces=True, num_threads=1, minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=m.getvalue())


def spm_tokenizer(w, sp):
    n = sp.get_piece_size()
    types = []
    for i in range(n):
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 1)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)


def spm_cases(sp):
    out, skipped = [], []
    for k, t in enumerate(texts()):
        if any(c in t for c in CONTROL):
            skipped.append(k)
            continue
        plain = sp.encode(t)
        out.append({"text": k, "ids": [sp.bos_id()] + plain, "plain": plain,
                    "text_hex": sp.decode(plain).encode("utf-8").hex()})
    return {"reference": f"sentencepiece {spm.__version__}", "cases": out, "skipped": skipped,
            "skipped_why": "the text holds <s>, </s> or <unk>: sentencepiece reads them as text"}


def bpe_file(kind, pre):
    src = json.load(open(os.path.join(TOK, f"{kind}.tokenizer.json"), encoding="utf-8"))
    vocab = dict(src["model"]["vocab"])
    added = {a["id"]: a for a in src["added_tokens"]}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    for i, a in added.items():
        tokens[i] = a["content"]
    types = [3 if i in added and added[i]["special"] else 4 if i in added else 1 for i in range(n)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in src["model"]["merges"]]
    post = json.dumps(src.get("post_processor"))
    bos = next((a["id"] for a in src["added_tokens"] if a["content"] in post and a["special"]), None)
    w = gguf.GGUFWriter(os.path.join(HERE, f"{pre}.gguf"), "llama")
    model_keys(w, n)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(bos)
    w.add_add_bos_token(bos is not None)
    finish(w)
    tok = Tokenizer.from_file(os.path.join(TOK, f"{kind}.tokenizer.json"))
    odd = {i for i, a in added.items() if not a["special"]}
    out, skipped = [], []
    for k, t in enumerate(texts()):
        ids = tok.encode(t).ids
        plain = tok.encode(t, add_special_tokens=False).ids
        if odd & set(ids):
            skipped.append(k)
            continue
        out.append({"text": k, "ids": ids, "plain": plain,
                    "text_hex": tok.decode(plain, skip_special_tokens=False).encode("utf-8").hex()})
    import tokenizers
    return {"reference": f"tokenizers {tokenizers.__version__} on tests/llm/tokenizers/"
                         f"{kind}.tokenizer.json", "cases": out, "skipped": skipped,
            "skipped_why": "the ids hold an added token with options GGUF cannot carry"}


def spm_model(sp):
    """kjv-spm-f16.gguf and its greedy reference."""
    V, H, F = sp.get_piece_size(), 64, 128
    cfg = {"hidden": H, "heads": 2, "kv_heads": 1, "head_dim": 32}
    rng = np.random.default_rng(1515)

    def f16(x):
        return x.astype(np.float16).astype(np.float32)

    W = {"token_embd": f16(rng.standard_normal((V, H)).astype(np.float32))}
    shapes = {"attn_q": (H, H), "attn_k": (32, H), "attn_v": (32, H), "attn_output": (H, H),
              "ffn_gate": (F, H), "ffn_up": (F, H), "ffn_down": (H, F), "output": (V, H)}
    for n, shp in shapes.items():
        W[n] = f16((rng.standard_normal(shp) * (3.0 if n == "output" else 1.0) / np.sqrt(shp[1]))
                   .astype(np.float32))
    normal = np.array([not (sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i)) for i in range(V)])
    W["output"][~normal] = 0  # logits 0: the greedy tokens are pieces, not bytes of a character
    for n in ("attn_norm", "ffn_norm", "output_norm"):
        W[n] = (1 + 0.1 * rng.standard_normal(H)).astype(np.float32)
    w = gguf.GGUFWriter(os.path.join(HERE, "kjv-spm-f16.gguf"), "llama")
    model_keys(w, V, hidden=H, heads=2, kv=1, ff=F)
    spm_tokenizer(w, sp)
    w.add_tensor("token_embd.weight", W["token_embd"].astype(np.float16))
    for n in shapes:
        x = W[n]
        if n in ("attn_q", "attn_k"):
            x = permute(x, 2 if n == "attn_q" else 1)
        w.add_tensor(("output" if n == "output" else "blk.0." + n) + ".weight",
                     np.ascontiguousarray(x.astype(np.float16)))
    for n in ("attn_norm", "ffn_norm"):
        w.add_tensor(f"blk.0.{n}.weight", W[n])
    w.add_tensor("output_norm.weight", W["output_norm"])
    finish(w)
    prompt = "In the beginning God"
    ids = [sp.bos_id()] + sp.encode(prompt)
    n0, margin = len(ids), np.inf
    for _ in range(12):
        logits = forward(W, ids, cfg)[-1]
        top = np.sort(logits)[-2:]
        margin = min(margin, float(top[1] - top[0]))
        ids.append(int(np.argmax(logits)))
    full, head = sp.decode(ids[1:]), sp.decode(ids[1:n0])
    assert full.startswith(head)
    json.dump({"prompt": prompt, "prompt_ids": ids[:n0], "greedy": ids[n0:],
               "text": full[len(head):], "min_margin": margin},
              open(os.path.join(HERE, "kjv-spm.json"), "w"), ensure_ascii=False)
    print("spm greedy", ids[n0:], repr(full[len(head):]), "margin", margin)


def refused():
    """bad-*.gguf: tokenizers the rewrite refuses (tests/unit/test_tokenizer.c)."""
    toks = ["<unk>", "<s>", "</s>", "a", "ab", "b"]

    def one(name, model="llama", pre="default", tokens=toks, types=(2, 3, 3, 1, 1, 1), scores=True,
            path=None):
        w = gguf.GGUFWriter(path or os.path.join(HERE, f"bad-{name}.gguf"), "llama")
        model_keys(w, len(tokens))
        w.add_tokenizer_model(model)
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(list(types))
        if scores:
            w.add_token_scores([0.0] * len(tokens))
        if model == "gpt2":
            w.add_token_merges(["a b"])
        finish(w)

    one("pre", model="gpt2", pre="falcon")  # a pre-tokenizer whose regex relaxc does not know
    one("scores", scores=False)              # SentencePiece without tokenizer.ggml.scores
    one("dup", tokens=toks[:5] + ["ab"])     # two tokens with one text
    one("type", types=(2, 3, 7, 1, 1, 1))    # a token type outside llama.cpp's 1..6
    one("model", model="bert")               # a tokenizer model relaxc does not read
    one("", path=os.path.join(HERE, "..", "..", "fuzz", "corpus", "gguf", "spm_tokenizer.gguf"))


# Gemma's tokenizer as llama.cpp's converter writes it (Gemma2Model/Gemma3Model.set_vocab:
# _set_vocab_sentencepiece, add_space_prefix False; add_bos_token from tokenizer_config.json):
# a SentencePiece BPE model without the dummy prefix, Gemma's ids of <pad> <eos> <bos> <unk>
# (0 to 3) and its user-defined turn markers (token type 4), trained here.
GEMMA_USER = ("<start_of_turn>", "<end_of_turn>")
GEMMA_CONTROL = ("<pad>", "<eos>", "<bos>", "<unk>")
GEMMA_TEXTS = ("<start_of_turn>user\nIn the beginning<end_of_turn>\n<start_of_turn>model\n",
               "  two  spaces<end_of_turn>", "<start_of_turn><end_of_turn> x")


def train_gemma_spm():
    lines = [l.rstrip("\n") for l in open(os.path.join(TOK, "corpus.txt"), encoding="utf-8")
             if not l.startswith("#")]
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=m, model_type="bpe", vocab_size=560,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=False, split_digits=True, character_coverage=0.99, hard_vocab_limit=False,
        allow_whitespace_only_pieces=True, num_threads=1, minloglevel=2, pad_id=0, eos_id=1,
        bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
        unk_piece="<unk>", user_defined_symbols=list(GEMMA_USER))
    return spm.SentencePieceProcessor(model_proto=m.getvalue())


def gemma_file(cases):
    """gemma-spm.gguf (architecture gemma2, the keys of a tiny model, no tensors) and its cases
    (sentencepiece's ids; texts holding a control token left out, as for spm.gguf), with
    GEMMA_TEXTS appended to the texts (turn markers)."""
    sp = train_gemma_spm()
    n = sp.get_piece_size()
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
             else 5 if sp.is_unused(i) else 4 if sp.id_to_piece(i) in GEMMA_USER else 1
             for i in range(n)]
    w = gguf.GGUFWriter(os.path.join(HERE, "gemma-spm.gguf"), "gemma2")
    for k, v in (("context_length", 128), ("embedding_length", 32), ("block_count", 1),
                 ("feed_forward_length", 64), ("attention.head_count", 2),
                 ("attention.head_count_kv", 2), ("vocab_size", n)):
        w.add_uint32(f"gemma2.{k}", v)
    w.add_float32("gemma2.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_pad_token_id(sp.pad_id())
    w.add_eot_token_id(sp.piece_to_id("<end_of_turn>"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    finish(w)
    base = [bytes.fromhex(h).decode("utf-8") for h in cases["texts_hex"]]
    all_texts = base + [t for t in GEMMA_TEXTS if t not in base]
    cases["texts_hex"] = [t.encode("utf-8").hex() for t in all_texts]
    out, skipped = [], []
    for k, t in enumerate(all_texts):
        if any(c in t for c in GEMMA_CONTROL):
            skipped.append(k)
            continue
        plain = sp.encode(t)
        out.append({"text": k, "ids": [sp.bos_id()] + plain, "plain": plain,
                    "text_hex": sp.decode(plain).encode("utf-8").hex()})
    cases["files"]["gemma-spm.gguf"] = {
        "reference": f"sentencepiece {spm.__version__}", "cases": out, "skipped": skipped,
        "skipped_why": "the text holds <pad>, <eos>, <bos> or <unk>: sentencepiece reads them as "
                       "text"}


def main():
    sp = train_spm()
    w = gguf.GGUFWriter(os.path.join(HERE, "spm.gguf"), "llama")
    model_keys(w, sp.get_piece_size())
    spm_tokenizer(w, sp)
    finish(w)
    cases = {"texts_hex": [t.encode("utf-8").hex() for t in texts()],
             "files": {"spm.gguf": spm_cases(sp),
                       "llama-bpe.gguf": bpe_file("llama3", "llama-bpe"),
                       "qwen2.gguf": bpe_file("qwen2", "qwen2")}}
    gemma_file(cases)
    json.dump(cases, open(os.path.join(HERE, "cases.json"), "w"), ensure_ascii=False)
    spm_model(sp)
    refused()


if __name__ == "__main__":
    if sys.argv[1:] == ["--gemma"]:  # gemma-spm.gguf alone, added to the committed cases.json
        path = os.path.join(HERE, "cases.json")
        c = json.load(open(path, encoding="utf-8"))
        gemma_file(c)
        json.dump(c, open(path, "w"), ensure_ascii=False)
    else:
        main()
