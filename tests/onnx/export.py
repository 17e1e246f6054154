#!/usr/bin/env python3
"""Exports the small PyTorch models of the ONNX frontend's tests, with dynamic axes, and writes
their inputs and PyTorch outputs at two values of each dynamic axis (tests/unit/test_onnx.c).

Run with Debian's python3-torch and python3-onnx (from the repository root):
    env -i PATH=/usr/bin:/bin /usr/bin/python3 tests/onnx/export.py

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
    """A model with two unsupported operators (CumSum, TopK) around supported ones."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    k = helper.make_tensor("k", TensorProto.INT64, [1], [2])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu0"),
        helper.make_node("CumSum", ["r", "axis"], ["c"], name="cumsum0"),
        helper.make_node("TopK", ["c", "k"], ["t", "i"], name="topk0"),
        helper.make_node("Neg", ["t"], ["y"], name="neg0"),
    ]
    g = helper.make_graph(nodes, "unsupported", [x], [y], [axis, k])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.save(m, os.path.join(HERE, "unsupported.onnx"))


def main():
    os.makedirs(DATA, exist_ok=True)
    torch.manual_seed(0)
    lines = []
    lines += export(MLP(), "mlp", torch.randn(3, 16), {"x": {0: "batch"}, "y": {0: "batch"}},
                    [{"batch": 3}, {"batch": 7}])
    lines += export(Attention(), "attention", torch.randn(2, 5, 16),
                    {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
                    [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 9}])
    unsupported()
    with open(os.path.join(DATA, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
