#!/usr/bin/python3
"""Writes the end-to-end fixtures of tests/e2e: for each model (mlp.rx, decoder.rx, convnet.rx)
its parameters at several values of its symbolic dimension, and the NumPy reference output,
computed in float64 from the float32 inputs, as .npy files under tests/e2e/data/, plus
tests/e2e/data/manifest.txt, one case per line:
    MODEL|DIMS|INPUT FILES (in parameter order, comma-separated)|OUTPUT FILE
Run with Debian's python3-numpy:  python3 tests/e2e/gen_e2e.py
The files are committed, so the tests need no Python."""
import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")
rng = np.random.default_rng(20261122)


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def erf(x):
    return np.vectorize(math.erf)(x)


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def rms_norm(x, w, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def mlp(x, w1, b1, w2, b2):
    return gelu(x @ w1 + b1) @ w2 + b2


def decoder(x, mask, an, wq, wk, wv, wo, mn, wg, wu, wd):
    s = x.shape[0]
    h = rms_norm(x, an)
    q = (h @ wq).reshape(s, 2, 32).transpose(1, 0, 2)
    k = (h @ wk).reshape(s, 2, 32).transpose(1, 2, 0)
    v = (h @ wv).reshape(s, 2, 32).transpose(1, 0, 2)
    p = softmax((q @ k) * 0.17677669529663687 + mask)
    o = (p @ v).transpose(1, 0, 2).reshape(s, 64)
    x1 = x + o @ wo
    h2 = rms_norm(x1, mn)
    return x1 + (silu(h2 @ wg) * (h2 @ wu)) @ wd


def conv2d_pad1(x, w):
    n, c, hh, ww = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, hh + 2, ww + 2))
    xp[:, :, 1:-1, 1:-1] = x
    out = np.zeros((n, o, hh, ww))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + hh, j:j + ww], w[:, :, i, j])
    return out


def convnet(x, w1, b1, w2, b2):
    c = np.maximum(conv2d_pad1(x, w1) + b1, 0.0)
    b = x.shape[0]
    p = c.reshape(b, 8, 8, 2, 8, 2).max(axis=(3, 5))
    return p.reshape(b, 512) @ w2.T + b2


def main():
    os.makedirs(OUT, exist_ok=True)
    lines = []

    def case(model, dims, inputs, fn, nshared):
        """The last nshared inputs are the model's weights, the same for every size: one file."""
        tag = model + "_" + "_".join(f"{k}{v}" for k, v in dims.items())
        names = []
        for i, a in enumerate(inputs):
            shared = i >= len(inputs) - nshared
            name = f"{model}_w{i}.npy" if shared else f"{tag}_in{i}.npy"
            np.save(os.path.join(OUT, name), a)
            names.append(name)
        ref = fn(*[a.astype(np.float64) for a in inputs]).astype(np.float32)
        np.save(os.path.join(OUT, f"{tag}_out.npy"), ref)
        d = " ".join(f"{k}={v}" for k, v in dims.items())
        lines.append(f"{model}|{d}|{','.join(names)}|{tag}_out.npy")

    w_mlp = [rand(32, 64, scale=0.2), rand(64, scale=0.1), rand(64, 16, scale=0.2), rand(16, scale=0.1)]
    for n in (1, 7, 33, 1024):
        case("mlp", {"n": n}, [rand(n, 32)] + w_mlp, mlp, len(w_mlp))

    w_dec = [rand(64, scale=0.3) + 1.0] + [rand(64, 64, scale=0.15) for _ in range(4)] + \
        [rand(64, scale=0.3) + 1.0, rand(64, 128, scale=0.15), rand(64, 128, scale=0.15),
         rand(128, 64, scale=0.1)]
    for s in (1, 7, 33, 256):
        mask = np.triu(np.full((s, s), -1e9, dtype=np.float32), k=1)
        case("decoder", {"s": s}, [rand(s, 64), mask] + w_dec, decoder, len(w_dec))

    w_cnn = [rand(8, 3, 3, 3, scale=0.3), rand(1, 8, 1, 1, scale=0.1), rand(10, 512, scale=0.05),
             rand(10, scale=0.1)]
    for b in (1, 3, 10):
        case("convnet", {"b": b}, [rand(b, 3, 16, 16)] + w_cnn, convnet, len(w_cnn))

    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
