"""ONNX protobuf written by hand, for the lit tests' model writers that need no onnx package
(tests/lit/*/Inputs/*_onnx.py import it): the wire format's varint, length-delimited and varint
fields, and the few messages the writers share (field numbers of onnx.proto)."""
import struct

FLOAT, INT64 = 1, 7  # TensorProto.DataType


def varint(v):
    v &= (1 << 64) - 1  # negative int64 fields: two's complement, ten bytes
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


def value_info(name, elem, dims):  # ValueInfoProto: name, tensor(elem)[dims], a dim int or str
    shape = b"".join(ld(1, vi(1, d) if isinstance(d, int) else ld(2, d.encode())) for d in dims)
    tensor = vi(1, elem) + ld(2, shape)
    return ld(1, name.encode()) + ld(2, ld(1, tensor))


def tensor_i64(name, dims, values):  # TensorProto: dims, data_type, name, raw_data
    t = b"".join(vi(1, d) for d in dims) + vi(2, INT64) + ld(8, name.encode())
    return t + ld(9, b"".join(struct.pack("<q", v) for v in values))


def model(graph, opset):  # ModelProto: ir_version 8, the graph, the default domain's opset
    return vi(1, 8) + ld(7, graph) + ld(8, ld(1, b"") + vi(2, opset))
