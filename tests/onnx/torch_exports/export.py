#!/usr/bin/env python3
"""PyTorch exports for the ONNX importer (issue 17): small models of the patterns real exports
use, exported with torch.onnx.export with dynamic axes, and their inputs and PyTorch outputs at
two shapes each, in the ONNX node tests' layout:

    test_torch_<name>/model.onnx
    test_torch_<name>/test_data_set_<k>/input_<i>.pb, output_<i>.pb   (TensorProto files)

ctest unit.test_onnx_torch runs them with tests/unit/test_onnx_nodes.c: each model compiled once
for Vulkan/lavapipe and run at both shapes, every output within relative L2 error 1e-4 of
PyTorch's. The files are committed, so the test needs no Python.

Models (TorchScript exporter, dynamo=False, unless marked dynamo):
  encoder_padmask     nn.TransformerEncoderLayer (batch_first) with a key-padding mask; dynamo:
                      the TorchScript export of nn.MultiheadAttention keeps the export-time
                      sequence length in a Reshape (onnxruntime fails at another length too)
  gqa_repeat_kv       grouped-query attention, Hugging Face's repeat_kv (expand + reshape:
                      Expand(x, Where(Equal(shape, -1), ones, shape)) in the export)
  gqa_repeat_interleave  the same with torch.repeat_interleave on the head dim; dynamo (Expand +
                      Reshape): the TorchScript export writes Tile, not imported on this branch
  kv_cache            attention over a KV cache passed in and returned (past ++ new keys and
                      values, symbolic past length, causal mask offset by it)
  mean_pool_normalize masked mean pooling of token states and F.normalize
  conv1d_stem         a Conv1d audio stem: two conv1d + GELU, stride 2, symbolic frames
  sampling_heads      LLM sampling heads over the logits of every position: torch.topk (values
                      and indices), greedy argmax, and Hugging Face's top-p warper (sort, softmax,
                      cumsum, the mask scattered back to vocabulary order, masked_fill) with the
                      probabilities after it; its own seeds (17), so the other files stay the same
  lstm                nn.LSTM (2 layers, bidirectional, batch_first) over a symbolic sequence
                      length and batch: outputs, final hidden and cell states
  gru                 nn.GRU (batch_first) over a symbolic sequence length, then a Linear head

Issue 29 (item 11), models as today's exporters write them, each with the TorchScript exporter
and with the dynamo one (suffix _dynamo), tiny configs built in code (nothing from a hub):
  bert_padmask        transformers BertModel (hidden 32, 2 layers) with an attention mask padding
                      the shorter rows: token types Expand([1, min(seq, 64)]) to [batch, seq], the
                      mask as Where(mask, 0, finfo.min) added to the scores
  t5_encoder          transformers T5EncoderModel (relative position buckets) with a padding mask
  gpt2_past           transformers GPT2LMHeadModel, one step over a KV cache passed in as
                      past_key_values.<i>.key / .value and returned as present.<i>.key / .value
  unet_odd            two UNet levels (max-pool down, bilinear up, pad to the skip, concat) at odd
                      H and W
  detect_nms          a detection postprocess with torchvision.ops.batched_nms (TorchScript only:
                      torchvision's nms has no dynamo translation): NonMaxSuppression with
                      max_output_boxes_per_class INT64_MAX inside an If

onnxruntime runs every model too: ort_check.txt records its relative L2 difference from PyTorch
per model and shape (it agrees within 1e-5 on all of them when this was run).

Run from the repository root (packages: requirements.txt):
    python3 tests/onnx/torch_exports/export.py             every model (rewrites ort_check.txt)
    python3 tests/onnx/torch_exports/export.py NAME...     the issue 29 models named (appends
                                                           their lines to ort_check.txt)
"""
import math
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)
rng = np.random.default_rng(0)
if hasattr(torch.backends, "mha"):
    # the eager fast path of TransformerEncoderLayer returns zeros at padded positions (nested
    # tensors); the export, like the reference here, computes them
    torch.backends.mha.set_fastpath_enabled(False)

D = 32  # model width


class EncoderPadMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=64, dropout=0.0,
                                                batch_first=True)

    def forward(self, x, pad):
        return self.layer(x, src_key_padding_mask=pad)


def repeat_kv(hidden_states, n_rep):
    """Hugging Face transformers' repeat_kv (models/llama/modeling_llama.py)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep,
                                                           slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class GQA(nn.Module):
    """Causal grouped-query attention: 4 query heads over 2 key/value heads."""

    def __init__(self, interleave):
        super().__init__()
        self.h, self.kvh, self.hd = 4, 2, 8
        self.interleave = interleave
        self.q = nn.Linear(D, self.h * self.hd, bias=False)
        self.k = nn.Linear(D, self.kvh * self.hd, bias=False)
        self.v = nn.Linear(D, self.kvh * self.hd, bias=False)
        self.o = nn.Linear(self.h * self.hd, D, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v(x).view(b, s, self.kvh, self.hd).transpose(1, 2)
        n_rep = self.h // self.kvh
        if self.interleave:
            k = torch.repeat_interleave(k, n_rep, dim=1)
            v = torch.repeat_interleave(v, n_rep, dim=1)
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        scores = q @ k.transpose(2, 3) / math.sqrt(self.hd)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, self.h * self.hd))


class KVCache(nn.Module):
    """Attention of s new tokens over p cached ones and themselves; the cache comes in as
    past_k, past_v [b, h, p, d] and goes out with the new keys and values appended."""

    def __init__(self):
        super().__init__()
        self.h, self.hd = 2, 16
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)

    def forward(self, x, past_k, past_v):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(b, s, self.h, self.hd).transpose(1, 2) for t in (q, k, v))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        p = past_k.shape[2]
        scores = q @ k.transpose(2, 3) / math.sqrt(self.hd)
        rows = torch.arange(s, device=x.device).unsqueeze(1) + p
        cols = torch.arange(p + s, device=x.device).unsqueeze(0)
        scores = scores.masked_fill(cols > rows, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, D)
        return self.o(y), k, v


class MeanPoolNormalize(nn.Module):
    """Sentence-embedding pooling: a projection, the mean over unmasked tokens, unit length."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(D, D)

    def forward(self, h, attention_mask):
        h = torch.tanh(self.proj(h))
        m = attention_mask.unsqueeze(-1).expand(h.size()).float()
        pooled = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
        return F.normalize(pooled, p=2, dim=1)


class Conv1dStem(nn.Module):
    """Whisper-style audio stem: conv1d + GELU, then a stride-2 conv1d + GELU."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(8, D, kernel_size=3, padding=1)
        self.c2 = nn.Conv1d(D, D, kernel_size=3, stride=2, padding=1)

    def forward(self, mel):
        return F.gelu(self.c2(F.gelu(self.c1(mel))))


class SamplingHeads(nn.Module):
    """Sampling heads over logits [b, s, V]: top-k, argmax, top-p filtered probabilities."""

    def __init__(self, vocab=48, k=5, top_p=0.9):
        super().__init__()
        self.proj = nn.Linear(D, vocab)
        self.k, self.top_p = k, top_p

    def forward(self, h):
        logits = self.proj(h)
        top_v, top_i = torch.topk(logits, self.k, dim=-1)
        greedy = torch.argmax(logits, dim=-1)
        sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cum <= (1 - self.top_p)
        remove = remove_sorted.scatter(-1, sorted_idx, remove_sorted)
        probs = logits.masked_fill(remove, -math.inf).softmax(dim=-1)
        return top_v, top_i, greedy, probs
class LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.rnn(x)
        return y, h, c


# ---- issue 29 (item 11): models as today's exporters write them from transformers and
# torchvision, tiny configs built in code (nothing from a hub) ----


def hf_bert():
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    return BertModel(cfg, add_pooling_layer=False)


class BertPadMask(nn.Module):
    """transformers BertModel with an attention mask that pads the shorter rows: the mask goes
    through the embedding's token types (Expand of [1, min(seq, 64)]) and Where(mask, 0,
    finfo.min) added to the scores."""

    def __init__(self):
        super().__init__()
        self.m = hf_bert()

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class T5Encoder(nn.Module):
    """transformers T5EncoderModel (relative position buckets, RMS norm) with a padding mask."""

    def __init__(self):
        super().__init__()
        from transformers import T5Config, T5EncoderModel
        cfg = T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                       relative_attention_num_buckets=8, relative_attention_max_distance=16,
                       dropout_rate=0.0)
        self.m = T5EncoderModel(cfg)

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


GPT2_LAYERS, GPT2_HEADS, GPT2_HD = 2, 2, 16


class GPT2Past(nn.Module):
    """transformers GPT2LMHeadModel, one step over a KV cache: the cache comes in as graph inputs
    past_key_values.<layer>.key / .value (the names Hugging Face's exports give them) and goes
    out as present.<layer>.key / .value."""

    def __init__(self):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(vocab_size=96, n_positions=64, n_embd=GPT2_HEADS * GPT2_HD,
                         n_layer=GPT2_LAYERS, n_head=GPT2_HEADS, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0)
        self.m = GPT2LMHeadModel(cfg)

    def forward(self, input_ids, attention_mask, k0, v0, k1, v1):  # GPT2_LAYERS: not *past,
        from transformers import DynamicCache  # which the dynamo exporter's axes cannot name
        past = (k0, v0, k1, v1)
        cache = DynamicCache()
        for i in range(GPT2_LAYERS):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                     use_cache=True)
        pkv = out.past_key_values
        present = []
        for i in range(GPT2_LAYERS):
            layer = pkv.layers[i] if hasattr(pkv, "layers") else None
            k, v = (layer.keys, layer.values) if layer is not None else pkv[i]
            present += [k, v]
        return (out.logits, *present)


class DetectPost(nn.Module):
    """A detection head's postprocess as torchvision writes it: box decoding, a score threshold
    by masking, then torchvision.ops.batched_nms (NonMaxSuppression with
    max_output_boxes_per_class = INT64_MAX in the export); the kept indices and their scores."""

    def __init__(self, classes=3):
        super().__init__()
        self.head = nn.Linear(8, 4 + classes)
        self.classes = classes

    def forward(self, feats):
        import torchvision
        out = self.head(feats)                      # [n, 4 + C]
        cx, cy = out[:, 0] * 4, out[:, 1] * 4
        w, h = out[:, 2].exp(), out[:, 3].exp()
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1)
        probs = out[:, 4:].softmax(-1)
        scores, labels = probs.max(-1)
        keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.3)
        return keep, scores[keep]


class UNetOdd(nn.Module):
    """Two UNet levels (milesial/Pytorch-UNet's blocks): conv, max-pool down, bilinear up, pad to
    the skip's size (odd H, W: the upsampled side is one short), concat, conv."""

    def __init__(self, c=4):
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(2, c, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU())
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = nn.Sequential(nn.Conv2d(3 * c, c, 3, padding=1), nn.ReLU())
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.up(self.down(x1))
        dy, dx = x1.size(2) - x2.size(2), x1.size(3) - x2.size(3)
        x2 = F.pad(x2, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.out(self.conv(torch.cat([x1, x2], dim=1)))


class GRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y, h = self.rnn(x)
        return self.head(y), h


def pad_mask(b, s):
    """A key-padding mask (True: padding) with a different valid length per row, never 0."""
    lens = rng.integers(1, s + 1, size=b)
    lens[0] = s
    return torch.from_numpy(np.arange(s)[None, :] >= lens[:, None])


def randn(*shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    den = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / (den if den > 0 else 1.0))


def export(name, model, sets, input_names, output_names, dynamic_axes, opset, log,
           prefix="test_torch_", dynamo=False):
    """Exports model with the first set's inputs; writes every set's inputs and PyTorch
    outputs, and checks onnxruntime against them."""
    model.eval()
    case = os.path.join(HERE, prefix + name)
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(case)
    path = os.path.join(case, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, tuple(sets[0]), path, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          opset_version=opset, dynamo=dynamo)
    m = onnx.load(path)  # the dynamo exporter writes the weights to model.onnx.data: inline
    for node in m.graph.node:  # and a stack trace and names per node: dropped (files 3x smaller)
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.save(m, path, save_as_external_data=False)
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.checker.check_model(onnx.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for k, inputs in enumerate(sets):
        with torch.no_grad():
            outs = model(*inputs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        d = os.path.join(case, "test_data_set_%d" % k)
        os.makedirs(d)
        feeds = {}
        for i, t in enumerate(inputs):
            a = t.numpy()
            feeds[input_names[i]] = a
            with open(os.path.join(d, "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(a, input_names[i]).SerializeToString())
        for i, t in enumerate(outs):
            with open(os.path.join(d, "output_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(t.numpy(), output_names[i]).SerializeToString())
        got = sess.run(output_names, feeds)
        errs = [rel_l2(g, t.numpy()) for g, t in zip(got, outs)]
        shapes = " ".join("x".join(map(str, t.shape)) for t in inputs)
        line = "%s opset %d inputs %s: onnxruntime relative L2 %s" % (
            prefix + name, opset, shapes, " ".join("%.1e" % e for e in errs))
        print(line)
        log.append(line)
        assert max(errs) <= 1e-5, line


def ids_mask(b, s, vocab=96):
    """Token ids and an attention mask (1: token, 0: padding) padding every row but the first."""
    ids = torch.from_numpy(rng.integers(0, vocab, size=(b, s)))
    return ids, (~pad_mask(b, s)).long()


def issue29(log, only):
    """The models of issue 29 (item 11), each with the TorchScript exporter and the dynamo one
    (name suffix _dynamo); their own seeds, so the cases above keep their data."""
    global rng
    b_s = [(2, 7), (3, 12)]
    both = ((False, "", 17), (True, "_dynamo", 18))
    for name, cls in (("bert_padmask", BertPadMask), ("t5_encoder", T5Encoder)):
        for dyn, suffix, opset in both:
            if only and name + suffix not in only:
                continue
            torch.manual_seed(29)
            rng = np.random.default_rng(29)
            ax = {0: "batch", 1: "seq"}
            export(name + suffix, cls(), [ids_mask(b, s) for b, s in b_s],
                   ["input_ids", "attention_mask"], ["y"],
                   {"input_ids": ax, "attention_mask": ax, "y": ax}, opset, log, dynamo=dyn)
    names = ["input_ids", "attention_mask"]
    outs = ["logits"]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "seq"}}
    for i in range(GPT2_LAYERS):
        for kv in ("key", "value"):
            names.append("past_key_values.%d.%s" % (i, kv))
            outs.append("present.%d.%s" % (i, kv))
            axes[names[-1]] = {0: "batch", 2: "past"}
            axes[outs[-1]] = {0: "batch", 2: "total"}
    for dyn, suffix, opset in both:
        if only and "gpt2_past" + suffix not in only:
            continue
        torch.manual_seed(29)
        rng = np.random.default_rng(29)
        sets = []
        for b, s, p in ((1, 3, 5), (2, 1, 9)):
            ids = torch.from_numpy(rng.integers(0, 96, size=(b, s)))
            mask = torch.ones(b, p + s, dtype=torch.long)
            past = [randn(b, GPT2_HEADS, p, GPT2_HD) for _ in range(2 * GPT2_LAYERS)]
            sets.append((ids, mask, *past))
        export("gpt2_past" + suffix, GPT2Past(), sets, names, outs, axes, opset, log, dynamo=dyn)
    for dyn, suffix, opset in both:
        if only and "unet_odd" + suffix not in only:
            continue
        torch.manual_seed(29)
        rng = np.random.default_rng(29)
        export("unet_odd" + suffix, UNetOdd(),
               [(randn(b, 2, h, w),) for b, h, w in ((1, 9, 11), (2, 13, 7))], ["x"], ["y"],
               {"x": {0: "batch", 2: "h", 3: "w"}, "y": {0: "batch", 2: "h", 3: "w"}}, opset, log,
               dynamo=dyn)
    if not only or "detect_nms" in only:  # torchvision's nms has a TorchScript symbolic only
        torch.manual_seed(29)
        rng = np.random.default_rng(29)
        export("detect_nms", DetectPost(), [(randn(n, 8),) for n in (12, 30)], ["feats"],
               ["keep", "scores"], {"feats": {0: "n"}, "keep": {0: "kept"}, "scores": {0: "kept"}},
               17, log)


def main():
    only = sys.argv[1:]  # model names (test_torch_<name>): export only those
    log = []
    if only:
        issue29(log, only)
        with open(os.path.join(HERE, "ort_check.txt"), "a") as f:
            f.write("\n".join(log) + "\n")
        return
    b_s = [(2, 7), (3, 12)]
    export("encoder_padmask", EncoderPadMask(),
           [(randn(b, s, D), pad_mask(b, s)) for b, s in b_s], ["x", "pad"], ["y"],
           {"x": {0: "batch", 1: "seq"}, "pad": {0: "batch", 1: "seq"},
            "y": {0: "batch", 1: "seq"}}, 17, log, dynamo=True)
    # repeat_interleave: the TorchScript exporter writes Tile, the dynamo exporter an Expand
    for name, inter, opset, dyn in (("gqa_repeat_kv", False, 14, False),
                                    ("gqa_repeat_interleave", True, 17, True)):
        export(name, GQA(inter), [(randn(b, s, D),) for b, s in b_s], ["x"], ["y"],
               {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}, opset, log,
               dynamo=dyn)
    export("kv_cache", KVCache(),
           [(randn(b, s, D), randn(b, 2, p, 16), randn(b, 2, p, 16))
            for b, s, p in ((1, 3, 5), (2, 1, 9))],
           ["x", "past_k", "past_v"], ["y", "k", "v"],
           {"x": {0: "batch", 1: "seq"}, "past_k": {0: "batch", 2: "past"},
            "past_v": {0: "batch", 2: "past"}, "y": {0: "batch", 1: "seq"},
            "k": {0: "batch", 2: "total"}, "v": {0: "batch", 2: "total"}}, 17, log)
    export("mean_pool_normalize", MeanPoolNormalize(),
           [(randn(b, s, D), (~pad_mask(b, s)).long()) for b, s in b_s],
           ["h", "attention_mask"], ["emb"],
           {"h": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "emb": {0: "batch"}}, 15, log)
    export("conv1d_stem", Conv1dStem(), [(randn(b, 8, t),) for b, t in ((1, 16), (2, 37))],
           ["mel"], ["y"], {"mel": {0: "batch", 2: "frames"}, "y": {0: "batch", 2: "out"}},
           13, log)
    torch.manual_seed(17)  # its own seeds: the models and inputs above do not move
    rng17 = np.random.default_rng(17)
    export("sampling_heads", SamplingHeads(),
           [(torch.from_numpy(rng17.standard_normal((b, s, D)).astype(np.float32)),)
            for b, s in ((1, 3), (2, 6))],
           ["h"], ["top_v", "top_i", "greedy", "probs"],
           {"h": {0: "batch", 1: "seq"}, "top_v": {0: "batch", 1: "seq"},
            "top_i": {0: "batch", 1: "seq"}, "greedy": {0: "batch", 1: "seq"},
            "probs": {0: "batch", 1: "seq"}}, 17, log)
    # the recurrences (added later): their own seeds, so the cases above keep their data
    global rng
    torch.manual_seed(17)
    rng = np.random.default_rng(17)
    b_t = [(2, 5), (3, 11)]
    export("lstm", LSTM(), [(randn(b, t, 8),) for b, t in b_t], ["x"], ["y", "h_n", "c_n"],
           {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}, "h_n": {1: "batch"},
            "c_n": {1: "batch"}}, 14, log)
    export("gru", GRU(), [(randn(b, t, 8),) for b, t in b_t], ["x"], ["y", "h_n"],
           {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}, "h_n": {1: "batch"}}, 14,
           log)
    issue29(log, None)
    with open(os.path.join(HERE, "ort_check.txt"), "w") as f:
        f.write("# written by export.py: onnxruntime (CPU) against PyTorch, per model and shape\n")
        f.write("# torch %s, onnx %s, onnxruntime %s\n" % (torch.__version__, onnx.__version__,
                                                          ort.__version__))
        f.write("\n".join(log) + "\n")


if __name__ == "__main__":
    main()
