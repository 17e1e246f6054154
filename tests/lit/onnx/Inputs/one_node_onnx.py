"""Writes an .onnx model of one node, OP(x) -> y with x, y float[2], at opset OPSET (protobuf
written by hand, no onnx package needed): one_node_onnx.py OUT OP OPSET."""
import sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field, payload):  # a length-delimited field
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, v):  # a varint field
    return varint(field << 3) + varint(v)


def value_info(name):  # ValueInfoProto: name, type = tensor(float)[2]
    dim = ld(1, vi(1, 2))  # TensorShapeProto.dim { dim_value: 2 }
    tensor = vi(1, 1) + ld(2, dim)  # elem_type FLOAT, shape
    return ld(1, name.encode()) + ld(2, ld(1, tensor))


out, op, opset = sys.argv[1], sys.argv[2], int(sys.argv[3])
node = ld(1, b"x") + ld(2, b"y") + ld(3, b"n0") + ld(4, op.encode())
graph = ld(1, node) + ld(2, b"g") + ld(11, value_info("x")) + ld(12, value_info("y"))
model = vi(1, 8) + ld(7, graph) + ld(8, ld(1, b"") + vi(2, opset))
with open(out, "wb") as f:
    f.write(model)
