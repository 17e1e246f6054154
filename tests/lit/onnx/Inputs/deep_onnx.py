"""Writes an .onnx model whose types or subgraphs nest LEVELS wrappers deep (protobuf written by
hand, no onnx package needed): deep_onnx.py OUT types|graphs LEVELS.
types:  the graph input's type is sequence(sequence(...(tensor(float))...)), LEVELS sequences
        (two messages each: TypeProto and TypeProto.Sequence).
graphs: an If node whose then_branch holds an If node whose then_branch ..., LEVELS graphs
        (three messages each: GraphProto, NodeProto, AttributeProto)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Inputs"))
from onnx_wire import ld, vi  # noqa: E402


out, kind, levels = sys.argv[1], sys.argv[2], int(sys.argv[3])
tensor_type = ld(1, vi(1, 1))  # TypeProto{tensor_type: {elem_type: FLOAT}}
graph = ld(2, b"g")
if kind == "types":
    t = tensor_type
    for _ in range(levels):
        t = ld(4, ld(1, t))  # TypeProto{sequence_type: Sequence{elem_type: t}}
    graph += ld(11, ld(1, b"x") + ld(2, t))  # input: ValueInfoProto{name, type}
else:
    graph += ld(11, ld(1, b"x") + ld(2, tensor_type))
    g = ld(2, b"leaf")
    for _ in range(levels):
        attr = ld(1, b"then_branch") + vi(20, 5) + ld(6, g)  # AttributeProto{name, type GRAPH, g}
        g = ld(2, b"b") + ld(1, ld(4, b"If") + ld(5, attr))  # GraphProto{name, node{op_type, attr}}
    graph += ld(1, ld(4, b"If") + ld(1, b"x") + ld(2, b"y") +
                ld(5, ld(1, b"then_branch") + vi(20, 5) + ld(6, g)))
model = vi(1, 8) + ld(7, graph) + ld(8, vi(2, 17))  # ir_version, graph, opset_import{version}
with open(out, "wb") as f:
    f.write(model)
