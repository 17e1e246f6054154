#!/usr/bin/env python3
"""Exports the small PyTorch models of the ONNX frontend's tests, with dynamic axes, and writes
their inputs and PyTorch outputs at two values of each dynamic axis (tests/unit/test_onnx.c).

Run with Debian's python3-torch and python3-onnx (from the repository root):
    env -i PATH=/usr/bin:/bin /usr/bin/python3 tests/onnx/export.py

Models: an MLP, a self-attention block, a GPT-style causal block, a Llama-style RMSNorm + SwiGLU
block and a small CNN with a symbolic batch.

Writes tests/onnx/MODEL.onnx, tests/onnx/data/*.npy and tests/onnx/data/manifest.txt, one line
per case: model|dims|input files (graph inputs only; weights are in the model)|output file.
The generated files are committed so that the tests need no Python."""
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
OPSET = 17


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = nn.functional.gelu(self.fc2(h))
        return torch.tanh(self.fc3(h)) + torch.sigmoid(h).mean(dim=-1, keepdim=True)


class Attention(nn.Module):
    """Self-attention + layer norm; the head reshapes depend on the batch and sequence length."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        b, s, d = x.shape
        def heads(t):
            return t.view(b, s, self.heads, self.hd).transpose(1, 2)
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd)
        p = torch.softmax(scores, dim=-1)
        o = torch.matmul(p, v).transpose(1, 2).reshape(b, s, d)
        return self.ln(x + self.o(o))


class GPTBlock(nn.Module):
    """A GPT-style pre-norm block: learned positions sliced to the sequence length, fused QKV
    split into three, causal attention whose mask (tril of ones(s, s)) and head reshapes depend
    on the sequence length, and a GELU MLP."""

    def __init__(self, dim=32, heads=4, max_seq=64):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.pos = nn.Parameter(torch.randn(max_seq, dim) * 0.1)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        x = x + self.pos[:s]
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, s, self.heads, self.hd).transpose(1, 2)
        v = v.view(b, s, self.heads, self.hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        mask = torch.tril(torch.ones(s, s))
        scores = scores.masked_fill(mask == 0, float("-inf"))
        o = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(o)
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


class LlamaBlock(nn.Module):
    """Llama-style RMSNorm + SwiGLU feed-forward with a fused gate/up projection (chunked)."""

    def __init__(self, dim=32, hidden=64, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.gate_up = nn.Linear(dim, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def rms_norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def forward(self, x):
        gate, up = self.gate_up(self.rms_norm(x)).chunk(2, dim=-1)
        return x + self.down(nn.functional.silu(gate) * up)


class CNN(nn.Module):
    """A small CNN: conv + ReLU6 (Clip), max pooling, batch norm, a strided conv with LeakyReLU,
    padded average pooling, global average pooling, flatten and a linear classifier."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)
        with torch.no_grad():  # running statistics that are not the identity
            self.bn.running_mean.copy_(0.1 * torch.randn(8))
            self.bn.running_var.copy_(0.5 + torch.rand(8))
            self.bn.weight.copy_(1.0 + 0.1 * torch.randn(8))
            self.bn.bias.copy_(0.1 * torch.randn(8))

    def forward(self, x):
        # batch norm after the pooling, so that the exporter cannot fold it into the conv
        h = self.bn(nn.functional.max_pool2d(nn.functional.relu6(self.c1(x)), 2))
        h = nn.functional.leaky_relu(self.c2(h), 0.1)
        h = nn.functional.avg_pool2d(h, 3, stride=1, padding=1, count_include_pad=False)
        h = torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1)
        return self.fc(h)


def export(model, name, example, dynamic_axes, cases):
    model.eval()
    path = os.path.join(HERE, name + ".onnx")
    torch.onnx.export(model, example, path, input_names=["x"], output_names=["y"],
                      dynamic_axes=dynamic_axes, opset_version=OPSET, do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))
    lines = []
    for dims in cases:
        tag = "_".join(str(d) for d in dims.values())
        x = torch.randn(*[dims.get(a, a) for a in example_shape(example, dynamic_axes["x"], dims)])
        with torch.no_grad():
            y = model(x)
        xf, yf = f"{name}_{tag}_x.npy", f"{name}_{tag}_y.npy"
        np.save(os.path.join(DATA, xf), x.numpy().astype(np.float32))
        np.save(os.path.join(DATA, yf), y.numpy().astype(np.float32))
        lines.append(f"{name}|{','.join(f'{k}={v}' for k, v in dims.items())}|{xf}|{yf}")
    return lines


def example_shape(example, axes, dims):
    shape = list(example.shape)
    for i, a in axes.items():
        shape[i] = dims[a]
    return shape


def unsupported():
    """A model with unsupported operators around supported ones: Bernoulli (and CumSum and TopK,
    which relaxc has imported since, as Det, which stood where Bernoulli is; test_onnx checks that
    only Bernoulli is listed)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    k = helper.make_tensor("k", TensorProto.INT64, [1], [2])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu0"),
        helper.make_node("CumSum", ["r", "axis"], ["c"], name="cumsum0"),
        helper.make_node("TopK", ["c", "k"], ["t", "i"], name="topk0"),
        helper.make_node("Bernoulli", ["t"], ["d"], name="bern0"),
        helper.make_node("Neg", ["d"], ["y"], name="neg0"),
    ]
    g = helper.make_graph(nodes, "unsupported", [x], [y], [axis, k])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save(m, os.path.join(HERE, "unsupported.onnx"))


# ---- single-operator models, built with onnx.helper, checked against NumPy ----

def save_op_model(name, nodes, inits, x_shape, y_shape, ref, cases):
    """One graph input x (dims named in x_shape), one output y; ref(x) is NumPy's answer."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)
    g = helper.make_graph(nodes, name, [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))
    rng = np.random.default_rng(len(name))
    lines = []
    for dims in cases:
        shape = [dims[d] if isinstance(d, str) else d for d in x_shape]
        xv = rng.standard_normal(shape).astype(np.float32)
        tag = "_".join(str(v) for v in dims.values())
        xf, yf = f"{name}_{tag}_x.npy", f"{name}_{tag}_y.npy"
        np.save(os.path.join(DATA, xf), xv)
        np.save(os.path.join(DATA, yf), ref(xv).astype(np.float32))
        lines.append(f"{name}|{','.join(f'{k}={v}' for k, v in dims.items())}|{xf}|{yf}")
    return lines


def i64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def op_models():
    big, small = 2**63 - 1, -(2**63)
    lines = []
    # Trilu (upper, k = 1) then lower with k = -1 of the result's transpose-free slice
    def trilu_ref(x):
        return np.tril(np.triu(x, 1) + x, -1) + np.triu(x, 1)
    lines += save_op_model("op_trilu", [
        helper.make_node("Trilu", ["x", "k1"], ["u"], upper=1),
        helper.make_node("Add", ["u", "x"], ["s"]),
        helper.make_node("Trilu", ["s", "km1"], ["l"], upper=0),
        helper.make_node("Add", ["l", "u"], ["y"]),
    ], [helper.make_tensor("k1", TensorProto.INT64, [], [1]),
        helper.make_tensor("km1", TensorProto.INT64, [], [-1])],
        ["n", "m"], ["n", "m"], trilu_ref, [{"n": 1, "m": 1}, {"n": 5, "m": 3}, {"n": 7, "m": 33}])
    # Slice: every other row from 1, columns reversed (INT64_MIN end), then a fixed window
    def slice_ref(x):
        return x[1::2, ::-1][:, 1:5]
    lines += save_op_model("op_slice", [
        helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["a"]),
        helper.make_node("Slice", ["a", "st2", "en2", "ax2"], ["y"]),
    ], [i64("st", [1, -1]), i64("en", [big, small]), i64("ax", [0, 1]), i64("sp", [2, -1]),
        i64("st2", [1]), i64("en2", [5]), i64("ax2", [1])],
        ["n", 6], ["h", 4], slice_ref, [{"n": 2}, {"n": 7}, {"n": 34}])
    # Split: equal halves, constant sizes, and sizes [1, m - 1] computed from the shape
    def split_ref(x):
        a, b = x[:, :4], x[:, 4:]
        c, d, e = x[:, :1], x[:, 1:4], x[:, 4:]
        return np.concatenate([a - b, e, c, d], axis=1)
    lines += save_op_model("op_split", [
        helper.make_node("Split", ["x"], ["a", "b"], axis=1),
        helper.make_node("Split", ["x", "sz"], ["c", "d", "e"], axis=1),
        helper.make_node("Sub", ["a", "b"], ["ab"]),
        helper.make_node("Concat", ["ab", "e", "c", "d"], ["y"], axis=1),
    ], [i64("sz", [1, 3, 4])], ["n", 8], ["n", 16], split_ref,
        [{"n": 1}, {"n": 3}, {"n": 40}])
    def split_sym_ref(x):
        return x[:, :1] * np.sum(x[:, 1:], axis=1, keepdims=True)
    lines += save_op_model("op_split_sym", [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "one"], ["m"], axis=0),
        helper.make_node("Sub", ["m", "one"], ["m1"]),
        helper.make_node("Concat", ["one", "m1"], ["sizes"], axis=0),
        helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
        helper.make_node("ReduceSum", ["b", "axes1"], ["bs"], keepdims=1),
        helper.make_node("Mul", ["a", "bs"], ["y"]),
    ], [i64("one", [1]), i64("axes1", [1])], ["n", "m"], ["n", 1], split_sym_ref,
        [{"n": 1, "m": 2}, {"n": 4, "m": 7}, {"n": 9, "m": 65}])
    # Clip with one bound, LeakyRelu, Clip with both (ReLU6-like)
    def clip_ref(x):
        a = np.maximum(x, -0.5)
        b = np.where(a >= 0, a, 0.2 * a)
        return np.clip(b * 4, 0.0, 6.0) + b
    lines += save_op_model("op_clip", [
        helper.make_node("Clip", ["x", "lo"], ["a"]),
        helper.make_node("LeakyRelu", ["a"], ["b"], alpha=0.2),
        helper.make_node("Mul", ["b", "four"], ["b4"]),
        helper.make_node("Clip", ["b4", "zero", "six"], ["c"]),
        helper.make_node("Add", ["c", "b"], ["y"]),
    ], [helper.make_tensor(k, TensorProto.FLOAT, [], [v])
        for k, v in [("lo", -0.5), ("four", 4.0), ("zero", 0.0), ("six", 6.0)]],
        ["n", 5], ["n", 5], clip_ref, [{"n": 1}, {"n": 11}])
    # pooling: padded strided max, average counting the pads, global max
    def pool_ref(x):
        t = torch.from_numpy(x)
        a = nn.functional.max_pool2d(t, 3, stride=2, padding=1)
        b = nn.functional.avg_pool2d(a, 2, stride=1, padding=1, count_include_pad=True)
        return (b + torch.amax(b, dim=(2, 3), keepdim=True)).numpy()
    lines += save_op_model("op_pool", [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["b"], kernel_shape=[2, 2], strides=[1, 1],
                         pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("GlobalMaxPool", ["b"], ["g"]),
        helper.make_node("Add", ["b", "g"], ["y"]),
    ], [], ["n", 2, 9, 9], ["n", 2, 6, 6], pool_ref, [{"n": 1}, {"n": 3}])
    return lines


def error_models():
    """Supported operators with attributes or inputs that are not: each import must fail with an
    error naming the node and what is not supported (tests/unit/test_onnx.c)."""
    def save(name, x_shape, node, inits=()):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        g = helper.make_graph([node], name, [x], [y], list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        onnx.save(m, os.path.join(HERE, name + ".onnx"))
    w4 = helper.make_tensor("w", TensorProto.FLOAT, [4, 2, 3, 3, 3, 3], [0.0] * 648)
    save("err_conv4d", ["n", 2, 5, 5, 5, 5], helper.make_node("Conv", ["x", "w"], ["y"],
                                                              name="conv4d"), [w4])
    save("err_ceil", ["n", 2, "h", "w"], helper.make_node(
        "MaxPool", ["x"], ["y"], name="pool_ceil", kernel_shape=[2, 2], strides=[2, 2],
        ceil_mode=1))
    save("err_same", ["n", 2, "h", "w"], helper.make_node(
        "AveragePool", ["x"], ["y"], name="pool_same", kernel_shape=[3, 3], strides=[2, 2],
        auto_pad="SAME_UPPER"))
    # two failing nodes, each reported once; the nodes using their outputs are not reported
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, "h", "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], name="pool_a", kernel_shape=[2, 2], ceil_mode=1),
        helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
        helper.make_node("AveragePool", ["x"], ["c"], name="pool_c", kernel_shape=[3, 3],
                         strides=[2, 2], auto_pad="SAME_LOWER"),
        helper.make_node("Add", ["b", "c"], ["y"], name="add_y"),
    ]
    g = helper.make_graph(nodes, "err_multi", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save(m, os.path.join(HERE, "err_multi.onnx"))


def dynshape_model():
    """Data-dependent shapes: the Reshape target and the ConstantOfShape shape are a runtime
    input s (int64[2]) and the Range bound a runtime scalar k, so the importer binds fresh
    variables at run time (tensor_to_shape + match_cast) instead of folding them."""
    name = "op_dynshape"
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("ConstantOfShape", ["s"], ["c"],
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("Mul", ["r", "c"], ["rc"]),
        helper.make_node("Softmax", ["rc"], ["sm"], axis=-1),
        helper.make_node("Range", ["zero", "k", "one"], ["rg"]),
        helper.make_node("Cast", ["rg"], ["rgf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["rgf"], ["tot"], keepdims=0),
        helper.make_node("Add", ["sm", "tot"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
              helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [])]
    inits = [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
             helper.make_tensor("one", TensorProto.INT64, [], [1])]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])
    g = helper.make_graph(nodes, name, inputs, [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, name + ".onnx"))
    rng = np.random.default_rng(7)
    lines = []
    for n, shape, k in [(6, [2, 3], 4), (6, [6, 1], 1), (1, [1, 1], 0), (35, [5, 7], 9)]:
        x = rng.standard_normal(n).astype(np.float32)
        r = x.reshape(shape) * np.float32(0.5)
        e = np.exp(r - r.max(axis=-1, keepdims=True))
        want = e / e.sum(axis=-1, keepdims=True) + np.float32(sum(range(k)))
        tag = f"{n}_{'x'.join(str(v) for v in shape)}_{k}"
        files = [f"{name}_{tag}_{v}.npy" for v in ("x", "s", "k", "y")]
        for f, a in zip(files, [x, np.array(shape, np.int64), np.array(k, np.int64),
                               want.astype(np.float32)]):
            np.save(os.path.join(DATA, f), a)
        lines.append(f"{name}|n={n},s={shape[0]}x{shape[1]},k={k}|{','.join(files[:3])}|{files[3]}")
    return lines


def keyword_names():
    """ONNX names that are keywords or dtype names of relaxc's text format (an input `out` with a
    dim `for`, an output `f32`): the import renames them (tests/lit/onnx/keywords.test)."""
    x = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["for", 4])
    y = helper.make_tensor_value_info("f32", TensorProto.FLOAT, ["for", 4])
    g = helper.make_graph([helper.make_node("Relu", ["out"], ["where"]),
                           helper.make_node("Neg", ["where"], ["f32"])], "keywords", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save(m, os.path.join(HERE, "keywords.onnx"))


def main():
    os.makedirs(DATA, exist_ok=True)
    torch.manual_seed(0)
    lines = []
    lines += export(MLP(), "mlp", torch.randn(3, 16), {"x": {0: "batch"}, "y": {0: "batch"}},
                    [{"batch": 3}, {"batch": 7}])
    lines += export(Attention(), "attention", torch.randn(2, 5, 16),
                    {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                    [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 9}])
    lines += export(GPTBlock(), "gpt", torch.randn(2, 7, 32),
                    {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                    [{"batch": 1, "seq": 1}, {"batch": 1, "seq": 7}, {"batch": 3, "seq": 33}])
    lines += export(LlamaBlock(), "llama", torch.randn(2, 5, 32),
                    {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                    [{"batch": 1, "seq": 1}, {"batch": 2, "seq": 13}, {"batch": 1, "seq": 64}])
    lines += export(CNN(), "cnn", torch.randn(2, 3, 16, 16),
                    {"x": {0: "batch"}, "y": {0: "batch"}},
                    [{"batch": 1}, {"batch": 5}])
    lines += op_models()
    lines += dynshape_model()
    error_models()
    keyword_names()
    unsupported()
    with open(os.path.join(DATA, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
