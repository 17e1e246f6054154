# Writes a Llama-style decoder of N layers in the text format (the layer of tests/e2e/decoder.rx:
# RMSNorm, two attention heads of 32 with an additive causal mask, residuals, a SwiGLU MLP), each
# layer with weights of its own, to stdout.
#   python3 decoder_layers.py LAYERS [DTYPE]     (DTYPE: f32, the default, or f16)
import sys

layers = int(sys.argv[1])
dt = sys.argv[2] if len(sys.argv) > 2 else "f32"
weights = [("an", "[64]"), ("wq", "[64, 64]"), ("wk", "[64, 64]"), ("wv", "[64, 64]"),
           ("wo", "[64, 64]"), ("mn", "[64]"), ("wg", "[64, 128]"), ("wu", "[64, 128]"),
           ("wd", "[128, 64]")]
params = ["x: %s[s, 64]" % dt, "mask: %s[s, s]" % dt]
for l in range(layers):
    params += ["l%d_%s: %s%s" % (l, w, dt, shape) for w, shape in weights]
print("graph_fn main(%s) -> %s[s, 64] where s <= 256 {" % (", ".join(params), dt))
print("  dataflow {")
x = "x"
for l in range(layers):
    p = "l%d_" % l
    print("""    {p}h = rms_norm({x}, {p}an, axes=[-1], epsilon=1e-5)
    {p}q = permute(reshape(matmul({p}h, {p}wq), [s, 2, 32]), axes=[1, 0, 2])
    {p}k = permute(reshape(matmul({p}h, {p}wk), [s, 2, 32]), axes=[1, 2, 0])
    {p}v = permute(reshape(matmul({p}h, {p}wv), [s, 2, 32]), axes=[1, 0, 2])
    {p}scores = add(multiply(matmul({p}q, {p}k), 0.17677669529663687), mask)
    {p}p = softmax({p}scores, axis=-1)
    {p}o = reshape(permute(matmul({p}p, {p}v), axes=[1, 0, 2]), [s, 64])
    {p}x1 = add({x}, matmul({p}o, {p}wo))
    {p}h2 = rms_norm({p}x1, {p}mn, axes=[-1], epsilon=1e-5)
    {p}act = multiply(silu(matmul({p}h2, {p}wg)), matmul({p}h2, {p}wu))
    {p}y = add({p}x1, matmul({p}act, {p}wd))""".format(p=p, x=x))
    x = p + "y"
print("  }")
print("  return %s" % x)
print("}")
