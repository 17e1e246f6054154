#!/usr/bin/env python3
"""Fixtures of relaxc's tokenizer (runtime/llm/, checked by tests/unit/test_tokenizer.c).

Makes, without network access, one small tokenizer.json per family that the runtime supports,
each trained by Hugging Face's `tokenizers` (pinned in requirements.txt) on corpus.txt and
configured the way that family's real file is, then cases.json: the test texts, the ids that
`tokenizers` gives for each text with and without the post-processor's special tokens, the
decoded strings (with and without the special tokens; every string the C test compares is
also written as the hex of its UTF-8), and extra id sequences to decode (bytes
that split a character, invalid UTF-8, unknown ids, random ids) with their decoded strings.

  python3 -m pip install -r tests/llm/tokenizers/requirements.txt
  python3 tests/llm/tokenizers/gen.py          # rewrites *.tokenizer.json and cases.json here

The library's BPE trainer breaks ties in an order that varies from run to run, so running this
again gives other (equally valid) files; cases.json always goes with the files written with it.

The families (file: what it copies):
  gpt2:       GPT-2: ByteLevel pre-tokenizer (its own regex), ByteLevel decoder and post-processor;
              added tokens with lstrip (<mask>, as RoBERTa's) and single_word ([WORD]).
  llama3:     Llama 3: Split with Llama 3's regex, then ByteLevel without regex or prefix space;
              BPE with ignore_merges; a template adding <|begin_of_text|>; specials after the vocab.
  qwen2:      Qwen2: NFC normalizer, Split with Qwen2's regex, ByteLevel; a normalized added token
              (written decomposed, matched composed) and one with rstrip.
  llama2:     Llama 2 / Mistral v0.1: SentencePiece-style BPE with byte_fallback (<0x00>..<0xFF>),
              normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, decoder Replace,
              ByteFallback, Fuse, Strip; <unk> <s> </s>; a template adding <s>.
  mistral:    the newer conversion of the same: no normalizer, Metaspace pre-tokenizer
              (prepend_scheme "first", split false); [INST] [/INST] special tokens.
  spm_digits: Metaspace (prepend_scheme "always", split true) then Digits(individual_digits),
              Metaspace decoder, no byte fallback (unknown characters give a fused <unk>), a
              template adding <s> before and </s> after.
The last three are not families but the options the families leave out:
  byte_level_prefix: gpt2 with Digits (contiguous) then ByteLevel with add_prefix_space; an
              added token with single_word, lstrip and rstrip, a normalized special one.
  split_mix:  llama3 without ignore_merges; NFC then Replace; Splits on a string
              (MergedWithPrevious, Contiguous) and on the regex inverted (MergedWithNext).
  metaspace_never: Metaspace with prepend_scheme "never" (pre-tokenizer and decoder), <unk>
              not fused, no post-processor.
"""
import json
import os
import random
import sys

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))

# The Split regexes of the real files, as their tokenizer.json carry them.
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

BYTE_LEVEL_VOCAB = 600  # 256 byte symbols, the specials and ~340 merges: small files
SPM_VOCAB = 420         # before the 256 byte tokens are added
SPM_ALPHABET = 90       # characters kept by the trainer: rarer ones fall back to bytes / <unk>


def corpus_lines():
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f if not l.startswith("#")]


def train(tok, vocab_size, specials, alphabet=None, limit=None):
    kw = dict(vocab_size=vocab_size, min_frequency=2, special_tokens=specials, show_progress=False)
    if alphabet is not None:
        kw["initial_alphabet"] = alphabet
    if limit is not None:
        kw["limit_alphabet"] = limit
    tok.train_from_iterator(corpus_lines(), trainers.BpeTrainer(**kw))
    return tok


def reload(tok_or_dict):
    """The tokenizer as its JSON gives it back (what the C side will read)."""
    text = tok_or_dict if isinstance(tok_or_dict, str) else json.dumps(tok_or_dict, ensure_ascii=False)
    return Tokenizer.from_str(text)


def byte_level_base(model, split_regex):
    tok = Tokenizer(model)
    if split_regex is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    return tok


def make_gpt2():
    tok = byte_level_base(models.BPE(), None)
    train(tok, BYTE_LEVEL_VOCAB, ["<|endoftext|>"], pre_tokenizers.ByteLevel.alphabet())
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    tok.add_tokens([AddedToken("[WORD]", single_word=True, normalized=False, special=False)])
    return reload(tok.to_str())


def make_llama3():
    tok = byte_level_base(models.BPE(ignore_merges=True), LLAMA3_REGEX)
    train(tok, BYTE_LEVEL_VOCAB, [], pre_tokenizers.ByteLevel.alphabet())
    d = json.loads(tok.to_str())
    # Whole words in the vocab with no merges leading to them: ignore_merges takes them as one
    # token, merging would not (the test texts hold both words).
    for word in ("Ġtokenizer", "Ġworks"):
        d["model"]["vocab"].setdefault(word, len(d["model"]["vocab"]))
    tok = reload(d)
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return reload(tok.to_str())


def make_qwen2():
    tok = byte_level_base(models.BPE(), QWEN2_REGEX)
    tok.normalizer = normalizers.NFC()
    train(tok, BYTE_LEVEL_VOCAB, [], pre_tokenizers.ByteLevel.alphabet())
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True)
                            for s in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])
    tok.add_tokens([AddedToken("<R>", rstrip=True, normalized=False, special=False),
                    AddedToken("Zu\u0308rich", normalized=True, special=False)])
    return reload(tok.to_str())


SPM_SPECIALS = ["<unk>", "<s>", "</s>"]


def spm_trained(byte_fallback, fuse_unk=True):
    """A SentencePiece-style BPE: trained on words that start with ▁, then (byte_fallback) the
    256 byte tokens <0x00>..<0xFF> put after the specials, as in Llama 2's vocab."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=byte_fallback, fuse_unk=fuse_unk))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    train(tok, SPM_VOCAB, SPM_SPECIALS, limit=SPM_ALPHABET)
    d = json.loads(tok.to_str())
    if byte_fallback:
        old = sorted(d["model"]["vocab"].items(), key=lambda kv: kv[1])
        vocab = {t: i for i, t in enumerate(SPM_SPECIALS)}
        for b in range(256):
            vocab["<0x%02X>" % b] = len(vocab)
        for t, _ in old:
            if t not in vocab:
                vocab[t] = len(vocab)
        d["model"]["vocab"] = vocab
        d["added_tokens"] = [dict(a, id=vocab[a["content"]]) for a in d["added_tokens"]]
    return d


def spm_template(d, with_eos):
    vocab = d["model"]["vocab"]
    single = [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]
    pair = single + [{"SpecialToken": {"id": "<s>", "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}]
    special = {"<s>": {"id": "<s>", "ids": [vocab["<s>"]], "tokens": ["<s>"]}}
    if with_eos:
        single = single + [{"SpecialToken": {"id": "</s>", "type_id": 0}}]
        special["</s>"] = {"id": "</s>", "ids": [vocab["</s>"]], "tokens": ["</s>"]}
    d["post_processor"] = {"type": "TemplateProcessing", "single": single, "pair": pair,
                           "special_tokens": special}


def sentencepiece_decoder():
    return {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def make_llama2():
    d = spm_trained(byte_fallback=True)
    d["pre_tokenizer"] = None  # the normalizer does Prepend and Replace, as in Llama 2's file
    d["decoder"] = sentencepiece_decoder()
    spm_template(d, with_eos=False)
    tok = reload(d)
    tok.add_tokens([AddedToken("God said", normalized=True, special=False)])
    return reload(tok.to_str())


def make_mistral():
    d = spm_trained(byte_fallback=True)
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False}
    d["decoder"] = sentencepiece_decoder()
    spm_template(d, with_eos=False)
    tok = reload(d)
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True)
                            for s in ("[INST]", "[/INST]")])
    return reload(tok.to_str())


def make_spm_digits():
    d = spm_trained(byte_fallback=False)
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        {"type": "Digits", "individual_digits": True}]}
    d["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                    "split": True}
    spm_template(d, with_eos=True)
    return reload(d)


def make_byte_level_prefix():
    d = json.loads(make_gpt2().to_str())
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
    tok = reload(d)
    tok.add_tokens([AddedToken(" x", single_word=True, lstrip=True, rstrip=True, normalized=False),
                    AddedToken("<e>", rstrip=True, normalized=True, special=True)])
    return reload(tok.to_str())


def make_split_mix():
    d = json.loads(make_llama3().to_str())
    d["model"]["ignore_merges"] = False
    d["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFC"}, {"type": "Replace", "pattern": {"String": "ab"}, "content": "X"}]}
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "\n"}, "behavior": "MergedWithPrevious",
         "invert": False},
        {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "MergedWithNext",
         "invert": True},
        {"type": "Split", "pattern": {"String": "e"}, "behavior": "Contiguous", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    return reload(d)


def make_metaspace_never():
    d = spm_trained(byte_fallback=False, fuse_unk=False)
    d["normalizer"] = None
    d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never",
                          "split": True}
    d["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never",
                    "split": True}
    d["post_processor"] = None
    return reload(d)


KINDS = [("gpt2", make_gpt2), ("llama3", make_llama3), ("qwen2", make_qwen2),
         ("llama2", make_llama2), ("mistral", make_mistral), ("spm_digits", make_spm_digits),
         ("byte_level_prefix", make_byte_level_prefix), ("split_mix", make_split_mix),
         ("metaspace_never", make_metaspace_never)]

TEXTS = [
    "",
    "Hello world",
    "In the beginning God created the heaven and the earth.",
    " leading space", "trailing space ", "  two leading spaces", " ", "   ", "\n", "\n\n\n",
    "a\nb", "a \n b", "line one\r\nline two\r\n", "tabs\there\t\tand\t", "multiple   spaces    here",
    "end with newline\n", "x  \n\n  y", "!\n\n", "word.\r\n\r\nnext",
    "Numbers: 1 12 123 1234 12345 1234567890 3.14159 1,000,000 2024-01-01",
    "punctuation!!! ... ??? --- (a) [b] {c} <d> \"quoted\" 'single' `tick`",
    "I'm you're he's we've they'll she'd it't DON'T I'M 'S 'T 'Re 'LL '\u017f 'K",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 Z\u00fcrich S\u00e3o Paulo \u0141\u00f3d\u017a Zu\u0308rich",
    "\u1f18\u03bd \u1f00\u03c1\u03c7\u1fc7 \u1f10\u03c0\u03bf\u03af\u03b7\u03c3\u03b5\u03bd \u1f41 \u03b8\u03b5\u1f78\u03c2",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0421\u043f\u0430\u0441\u0438\u0431\u043e.",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8d77\u521d\u795e\u521b\u9020\u5929\u5730\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca",
    "\ud55c\uad6d\uc5b4 \uc548\ub155\ud558\uc138\uc694",
    "Emoji \U0001F600\U0001F44D\U0001F3FD \U0001F1EB\U0001F1F7 \U0001F468\u200d\U0001F469\u200d\U0001F467 \u2728",
    # combining marks: composable, a singleton (Angstrom sign), Hangul jamo, marks to reorder
    "e\u0301 a\u0300 o\u0308\u0304 A\u030a \u212b \u1100\u1161\u11a8 \uac00\u11a8",
    "n\u0303o\u0323\u0302 q\u0307\u0323 \u0301lone mark \u1e0b\u0323",
    "\u00a0nbsp\u00a0 and\u3000ideographic\u2003em space\u2028line sep\u0085nel\x0bvt\x0cff",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "control \x01\x02\x7f chars",
    "<s>", "</s>", "<s>Hello</s>", "Hello <s> world </s>", "<unk> token", " <s> ",
    "<|endoftext|>", "text<|endoftext|>more", "<|endoftext|><|endoftext|>",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
    "[INST] What is this? [/INST] An answer.",
    " <mask> and   <mask>x <mask>", "a [WORD] b [WORD]c x[WORD] [WORD]",
    "go <R>   next <R>", "And God said, Let there be light",
    "the tokenizer works", "tokenizer works",
    "\ufffd replacement char",
    "\U0001d518\U0001d52b\U0001d526\U0001d520 math \U0001d7cf\U0001d7d0\U0001d7d1",
    "\u216b \u00bd \u00b2 \u2460 \u0663\u0664",
    "long" * 30,
    "def f(x):\n    return x**2  # square\n\n\n",
    "mixedCASE snake_case kebab-case CamelCase",
    "mail@example.com https://example.org/path?q=1&r=2",
    "\U00031350\U0002ebf0 new CJK",
]

# Pieces random texts are made of: the hard parts of the regexes and normalizers.
POOL = ["a", "Z", "word", " ", "  ", "\t", "\n", "\r\n", "\r", "'s", "'LL", "'", "1", "22", "333",
        "4444", ".", ",", "!?", "--", "\u00e9", "e\u0301", "\u0301", "\u03a9", "\u0436", "\u4e2d",
        "\u3042", "\U0001F600", "\u00a0", "\u3000", "\u2028", "\u0085", "<s>", "</s>",
        "<|endoftext|>", "<mask>", "[WORD]", "_", "\u00bd", "\u0663", "\u017f", "\ufeff", "\u212b",
        "\uac00", "\u1100\u1161", "\U0001F1EB\U0001F1F7", "\x00", "\u2003", "\u1f00"]
RANDOM_TEXTS = 40
RANDOM_DECODES = 12


def random_texts():
    rng = random.Random(12)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 14))) for _ in range(RANDOM_TEXTS)]


def bytes_to_unicode():
    """GPT-2's byte -> character table (the one pre_tokenizers.ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BROKEN_BYTES = [[0xC3], [0xE2, 0x82], [0xC3, 0x41], [0xFF], [0x61, 0xF0, 0x9F, 0x98, 0x80],
                [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF], [0xE0, 0x80],
                [0xF0, 0x9F, 0x78], [0xE2, 0x82, 0xAC, 0x80, 0x41]]


def decode_cases(tok):
    vocab = tok.get_vocab()
    size = max(vocab.values()) + 1
    table = bytes_to_unicode()
    if "<0x41>" in vocab:
        byte_id = lambda b: vocab["<0x%02X>" % b]
    elif all(c in vocab for c in table.values()):
        byte_id = lambda b: vocab[table[b]]
    else:  # no byte tokens (spm_digits): letters instead
        byte_id = lambda b: vocab.get(chr(b), vocab["<unk>"])
    seqs = [[byte_id(b) for b in bs] for bs in BROKEN_BYTES]
    specials = [i for t, i in sorted(vocab.items()) if t in ("<s>", "<|endoftext|>", "<|im_end|>",
                                                             "<|begin_of_text|>")]
    if specials:
        seqs.append([specials[0], byte_id(0xC3), specials[0], byte_id(0xA9)])
    seqs.append([byte_id(0x41), 10 ** 6, byte_id(0x42)])  # an unknown id is skipped
    rng = random.Random(size)
    for _ in range(RANDOM_DECODES):
        seqs.append([rng.randrange(size) for _ in range(rng.randint(1, 16))])
    return [{"ids": s, "text": hexed(tok.decode(s, skip_special_tokens=False)),
             "text_skip": hexed(tok.decode(s, skip_special_tokens=True))} for s in seqs]


def hexed(s):
    """Strings the C test compares as hex of their UTF-8 (cJSON cuts strings at a NUL)."""
    return s.encode("utf-8").hex()


def main():
    if tokenizers.__version__ != "0.23.3":
        sys.exit("gen.py: tokenizers %s found; requirements.txt pins 0.23.3" % tokenizers.__version__)
    texts = TEXTS + random_texts()
    out = {"tokenizers_version": tokenizers.__version__, "texts": texts,
           "texts_hex": [hexed(t) for t in texts], "kinds": {}}
    for name, make in KINDS:
        tok = make()
        fname = name + ".tokenizer.json"
        with open(os.path.join(HERE, fname), "w", encoding="utf-8") as f:
            f.write(tok.to_str())
        cases = []
        for t in texts:
            ids = tok.encode(t, add_special_tokens=True).ids
            plain = tok.encode(t, add_special_tokens=False).ids
            cases.append({"ids": ids, "plain": plain,
                          "text": hexed(tok.decode(ids, skip_special_tokens=False)),
                          "text_skip": hexed(tok.decode(ids, skip_special_tokens=True))})
        out["kinds"][name] = {"file": fname, "vocab_size": tok.get_vocab_size(True),
                              "encode": cases, "decode": decode_cases(tok)}
    with open(os.path.join(HERE, "cases.json"), "w", encoding="ascii") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
