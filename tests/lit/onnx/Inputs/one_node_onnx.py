"""Writes an .onnx model of one node, OP(x) -> y with x, y float[2], at opset OPSET (protobuf
written by hand, no onnx package needed): one_node_onnx.py OUT OP OPSET."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Inputs"))
from onnx_wire import ld, model, vi  # noqa: E402


def value_info(name):  # ValueInfoProto: name, type = tensor(float)[2]
    dim = ld(1, vi(1, 2))  # TensorShapeProto.dim { dim_value: 2 }
    tensor = vi(1, 1) + ld(2, dim)  # elem_type FLOAT, shape
    return ld(1, name.encode()) + ld(2, ld(1, tensor))


out, op, opset = sys.argv[1], sys.argv[2], int(sys.argv[3])
node = ld(1, b"x") + ld(2, b"y") + ld(3, b"n0") + ld(4, op.encode())
graph = ld(1, node) + ld(2, b"g") + ld(11, value_info("x")) + ld(12, value_info("y"))
data = model(graph, opset)
with open(out, "wb") as f:
    f.write(data)
