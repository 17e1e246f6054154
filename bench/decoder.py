# Writes a Llama-style decoder of N layers in the text format to stdout: per layer RMSNorm,
# multi-head attention with an additive causal mask (q, k, v, o projections), a residual, RMSNorm,
# a SwiGLU MLP and a residual; each layer with weights of its own (parameters, no data). The
# decoder of the compile-time benchmark (bench/RESULTS.md, issue 16) and of the tests
# (tests/lit/compile/dedup_layers.test, parallel_cache.test).
#   python3 bench/decoder.py LAYERS [DTYPE] [--shape tiny|7b] [--layout in-out|hf]
# DTYPE: f32 (the default) or f16. --shape tiny (the default): hidden 64, 2 heads of 32, MLP 128,
# s <= 256; 7b: Llama-2-7B's hidden 4096, 32 heads of 128, MLP 11008, s <= 4096.
# --layout in-out (the default): weights [in, out], y = x @ W; hf: Hugging Face's [out, in],
# y = x @ W^T (matmul of a permute).
import argparse
import math

SHAPES = {
    "tiny": dict(hidden=64, heads=2, head_dim=32, inter=128, max_s=256),
    "7b": dict(hidden=4096, heads=32, head_dim=128, inter=11008, max_s=4096),
}

ap = argparse.ArgumentParser(description="a Llama-style decoder in relaxc's text format")
ap.add_argument("layers", type=int)
ap.add_argument("dtype", nargs="?", default="f32", choices=["f32", "f16"])
ap.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
ap.add_argument("--layout", default="in-out", choices=["in-out", "hf"])
a = ap.parse_args()
sh = SHAPES[a.shape]
dt, hid, nh, hd, inter = a.dtype, sh["hidden"], sh["heads"], sh["head_dim"], sh["inter"]
hf = a.layout == "hf"


def w(i, o):  # the shape of a weight from i to o features
    return "[%d, %d]" % ((o, i) if hf else (i, o))


def mm(x, wname):  # x @ W in the chosen layout
    return "matmul(%s, permute(%s, axes=[1, 0]))" % (x, wname) if hf else \
        "matmul(%s, %s)" % (x, wname)


weights = [("an", "[%d]" % hid), ("wq", w(hid, hid)), ("wk", w(hid, hid)), ("wv", w(hid, hid)),
           ("wo", w(hid, hid)), ("mn", "[%d]" % hid), ("wg", w(hid, inter)),
           ("wu", w(hid, inter)), ("wd", w(inter, hid))]
params = ["x: %s[s, %d]" % (dt, hid), "mask: %s[s, s]" % dt]
for l in range(a.layers):
    params += ["l%d_%s: %s%s" % (l, n, dt, shape) for n, shape in weights]
print("graph_fn main(%s) -> %s[s, %d] where s <= %d {" % (", ".join(params), dt, hid, sh["max_s"]))
print("  dataflow {")
x = "x"
for l in range(a.layers):
    p = "l%d_" % l
    print("""    {p}h = rms_norm({x}, {p}an, axes=[-1], epsilon=1e-5)
    {p}q = permute(reshape({q}, [s, {nh}, {hd}]), axes=[1, 0, 2])
    {p}k = permute(reshape({k}, [s, {nh}, {hd}]), axes=[1, 2, 0])
    {p}v = permute(reshape({v}, [s, {nh}, {hd}]), axes=[1, 0, 2])
    {p}scores = add(multiply(matmul({p}q, {p}k), {scale!r}), mask)
    {p}p = softmax({p}scores, axis=-1)
    {p}o = reshape(permute(matmul({p}p, {p}v), axes=[1, 0, 2]), [s, {hid}])
    {p}x1 = add({x}, {o})
    {p}h2 = rms_norm({p}x1, {p}mn, axes=[-1], epsilon=1e-5)
    {p}act = multiply(silu({g}), {u})
    {p}y = add({p}x1, {d})""".format(
        p=p, x=x, nh=nh, hd=hd, hid=hid, scale=1 / math.sqrt(hd), q=mm(p + "h", p + "wq"),
        k=mm(p + "h", p + "wk"), v=mm(p + "h", p + "wv"), o=mm(p + "o", p + "wo"),
        g=mm(p + "h2", p + "wg"), u=mm(p + "h2", p + "wu"), d=mm(p + "act", p + "wd")))
    x = p + "y"
print("  }")
print("  return %s" % x)
print("}")
