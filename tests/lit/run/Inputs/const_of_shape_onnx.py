"""Writes an .onnx model of four ConstantOfShape nodes of int64 values that a double cannot hold
(protobuf written by hand, no onnx package needed): const_of_shape_onnx.py OUT DIMS, DIMS the
constant shape, comma-separated (e.g. 2,3). Outputs y0..y3 int64[DIMS] filled with INT64_MAX,
INT64_MIN, 2^53 + 1 and -(2^53 + 1), at opset 13."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Inputs"))
from onnx_wire import INT64, ld, tensor_i64, model, vi  # noqa: E402


VALUES = [2**63 - 1, -2**63, 2**53 + 1, -(2**53 + 1)]


def value_info(name, dims):  # ValueInfoProto: name, tensor(int64)[dims]
    shape = b"".join(ld(1, vi(1, d)) for d in dims)
    return ld(1, name.encode()) + ld(2, ld(1, vi(1, INT64) + ld(2, shape)))


out, dims = sys.argv[1], [int(d) for d in sys.argv[2].split(",")]
nodes = b""
for k, v in enumerate(VALUES):  # NodeProto: input, output, name, op_type, attribute
    value = ld(1, b"value") + ld(5, tensor_i64("v%d" % k, [1], [v])) + vi(20, 4)  # TENSOR
    nodes += ld(1, ld(1, b"shape") + ld(2, b"y%d" % k) + ld(3, b"n%d" % k) +
                ld(4, b"ConstantOfShape") + ld(5, value))
inits = ld(5, tensor_i64("shape", [len(dims)], dims))
outs = b"".join(ld(12, value_info("y%d" % k, dims)) for k in range(len(VALUES)))
graph = nodes + ld(2, b"g") + inits + outs
data = model(graph, 13)
with open(out, "wb") as f:
    f.write(data)
