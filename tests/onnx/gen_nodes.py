#!/usr/bin/python3
"""Writes tests/onnx/nodes/: ONNX node test cases in the layout of the ONNX backend node tests
(<case>/model.onnx, <case>/test_data_set_N/{input,output}_K.pb) for what the suite's own cases
cannot reach (the suite's CumSum cases are all float64, which relaxc lacks; its Size, TopK, Pad
and Tile cases have static shapes). unit.test_onnx_nodes_rx
runs them with test_onnx_nodes (RX_ONNX_NODES=tests/onnx/nodes); every case must pass.

The protobuf messages are encoded here by hand (field numbers of onnx.proto), so the script needs
NumPy only. Run with Debian's python3:  /usr/bin/python3 tests/onnx/gen_nodes.py"""
import os
import shutil
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nodes")
ELEM = {np.dtype(np.float32): 1, np.dtype(np.int32): 6, np.dtype(np.int64): 7}


def varint(v):
    v &= (1 << 64) - 1
    b = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        b.append(c | (0x80 if v else 0))
        if not v:
            return bytes(b)


def f_int(field, v):
    return varint(field << 3) + varint(v)


def f_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def tensor(name, a):  # TensorProto: dims 1, data_type 2, name 8, raw_data 9
    a = np.array(a, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    return (b"".join(f_int(1, d) for d in a.shape) + f_int(2, ELEM[a.dtype]) + f_bytes(8, name)
            + f_bytes(9, a.astype(a.dtype.newbyteorder("<")).tobytes()))


def value_info(name, dtype, dims):  # ValueInfoProto: name 1, type 2 (TypeProto.tensor_type 1)
    shape = b"".join(f_bytes(1, f_bytes(2, d) if isinstance(d, str) else f_int(1, d)) for d in dims)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, f_int(1, ELEM[np.dtype(dtype)]) + f_bytes(2, shape)))


def node(op, ins, outs, **attrs):  # NodeProto: input 1, output 2, op_type 4, attribute 5
    b = b"".join(f_bytes(1, i) for i in ins) + b"".join(f_bytes(2, o) for o in outs) + f_bytes(4, op)
    for k, v in attrs.items():  # AttributeProto: name 1, i 3, type 20 (INT = 2)
        b += f_bytes(5, f_bytes(1, k) + f_int(3, v) + f_int(20, 2))
    return b


def save_case(name, nodes, inits, inputs, outputs, sets, opset):
    """inputs/outputs: (name, dtype, dims); sets: [(input arrays, output arrays)]"""
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    g += b"".join(f_bytes(5, tensor(k, v)) for k, v in inits)
    g += b"".join(f_bytes(11, value_info(*i)) for i in inputs)
    g += b"".join(f_bytes(12, value_info(*o)) for o in outputs)
    model = f_int(1, 8) + f_bytes(8, f_bytes(1, "") + f_int(2, opset)) + f_bytes(7, g)
    d = os.path.join(OUT, name)
    os.makedirs(d)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model)
    for s, (ins, outs) in enumerate(sets):
        sd = os.path.join(d, "test_data_set_%d" % s)
        os.makedirs(sd)
        for kind, arrs, decl in (("input", ins, inputs), ("output", outs, outputs)):
            for k, a in enumerate(arrs):
                with open(os.path.join(sd, "%s_%d.pb" % (kind, k)), "wb") as f:
                    f.write(tensor(decl[k][0], a))


def cumsum(x, ax, excl=False, rev=False):
    if rev:
        x = np.flip(x, ax)
    c = np.cumsum(x.astype(np.float64) if x.dtype.kind == "f" else x, ax)
    if excl:
        c = c - (x.astype(np.float64) if x.dtype.kind == "f" else x)
    return (np.flip(c, ax) if rev else c).astype(x.dtype)


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    rng = np.random.default_rng(17)
    # axis a constant (an initializer), a symbolic dim n run at two sizes
    sets = []
    for n in (3, 1):
        x = rng.standard_normal((n, 5)).astype(np.float32)
        sets.append(([x], [cumsum(x, 1, excl=True)]))
    save_case("test_rx_cumsum_const_axis_exclusive",
              [node("CumSum", ["x", "axis"], ["y"], exclusive=1)], [("axis", np.array(-1, np.int64))],
              [("x", np.float32, ["n", 5])], [("y", np.float32, ["n", 5])], sets, 14)
    # axis a graph input (a run-time value): the scan along every axis, chosen at run time
    sets = []
    for ax in (-2, 0, 2):
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        sets.append(([x, np.array(ax, np.int32)], [cumsum(x, ax, rev=True)]))
    save_case("test_rx_cumsum_input_axis_reverse",
              [node("CumSum", ["x", "axis"], ["y"], reverse=1)], [],
              [("x", np.float32, [2, 3, 4]), ("axis", np.int32, [])], [("y", np.float32, [2, 3, 4])],
              sets, 14)
    # int64, 1-D, both flags
    x = rng.integers(-50, 50, size=7).astype(np.int64)
    save_case("test_rx_cumsum_int64_1d_reverse_exclusive",
              [node("CumSum", ["x", "axis"], ["y"], exclusive=1, reverse=1)],
              [("axis", np.array([0], np.int32))], [("x", np.int64, [7])], [("y", np.int64, [7])],
              [([x], [cumsum(x, 0, True, True)])], 14)
    # Size of a tensor with a symbolic dim: the product n * 3 as a 0-d i64 graph output
    sets = [([np.zeros((n, 3), np.float32)], [np.array(n * 3, np.int64)]) for n in (1, 7)]
    save_case("test_rx_size_symbolic", [node("Size", ["x"], ["y"])], [],
              [("x", np.float32, ["n", 3])], [("y", np.int64, [])], sets, 13)
    # TopK over a symbolic row count, rows with ties (by the lower index, as a stable sort)
    sets = []
    for n in (4, 1):
        x = rng.integers(-3, 4, size=(n, 6)).astype(np.float32)
        i = np.argsort(-x, axis=1, kind="stable")[:, :3]
        sets.append(([x], [np.take_along_axis(x, i, 1), i.astype(np.int64)]))
    save_case("test_rx_topk_symbolic", [node("TopK", ["x", "k"], ["v", "i"], axis=1)],
              [("k", np.array([3], np.int64))], [("x", np.float32, ["n", 6])],
              [("v", np.float32, ["n", 3]), ("i", np.int64, ["n", 3])], sets, 11)
    # Pad (constant 0) and Tile of a symbolic dim: [n, 3] -> [n + 3, 4] and [2 n, 6]
    sets = []
    for n in (2, 1):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        sets.append(([x], [np.pad(x, ((1, 2), (0, 1))), np.tile(x, (2, 2))]))
    save_case("test_rx_pad_tile_symbolic",
              [node("Pad", ["x", "pads"], ["p"]), node("Tile", ["x", "reps"], ["t"])],
              [("pads", np.array([1, 0, 2, 1], np.int64)), ("reps", np.array([2, 2], np.int64))],
              [("x", np.float32, ["n", 3])],
              [("p", np.float32, ["np3", 4]), ("t", np.float32, ["n2", 6])], sets, 13)


if __name__ == "__main__":
    main()
