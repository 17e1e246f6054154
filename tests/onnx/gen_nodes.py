#!/usr/bin/python3
"""Writes tests/onnx/nodes/: ONNX node test cases in the layout of the ONNX backend node tests
(<case>/model.onnx, <case>/test_data_set_N/{input,output}_K.pb) for what the suite's own cases
cannot reach (the suite's CumSum cases are all float64, which relaxc lacks; its Size, Shape,
Reshape, Expand, TopK, Pad and Tile cases have static shapes; its losses, window, channel and
Resize cases have static shapes too: here symbolic dims, each run at two sizes).
unit.test_onnx_nodes_rx runs them with test_onnx_nodes (RX_ONNX_NODES=tests/onnx/nodes); every
case must pass.

The protobuf messages are encoded here by hand (field numbers of onnx.proto), so the script needs
NumPy only. Run with Debian's python3:  /usr/bin/python3 tests/onnx/gen_nodes.py"""
import os
import shutil
import struct

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nodes")
ELEM = {np.dtype(np.float32): 1, np.dtype(np.int32): 6, np.dtype(np.int64): 7,
        np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.uint16): 4,
        np.dtype(np.uint32): 12, np.dtype(np.uint64): 13}


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
    for k, v in attrs.items():  # AttributeProto: name 1, f 2, i 3, s 4, ints 8, type 20
        if isinstance(v, float):  # FLOAT = 1
            a = varint(2 << 3 | 5) + struct.pack("<f", v) + f_int(20, 1)
        elif isinstance(v, str):  # STRING = 3
            a = f_bytes(4, v) + f_int(20, 3)
        elif isinstance(v, (list, tuple)):  # INTS = 7
            a = b"".join(f_int(8, x) for x in v) + f_int(20, 7)
        else:  # INT = 2
            a = f_int(3, v) + f_int(20, 2)
        b += f_bytes(5, f_bytes(1, k) + a)
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


def window_view(x, k, s, pads, fill):
    """the windows of x [N, C, *sp] over its spatial dims: [N, C, *out, *k] (pads [begin..., end...])"""
    nd = len(k)
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)],
               constant_values=fill)
    w = np.lib.stride_tricks.sliding_window_view(x, k, axis=tuple(range(2, 2 + nd)))
    return w[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in s)]


def conv_transpose2d(x, w, s, pads, opad):
    """ONNX ConvTranspose (group 1): scatter each input element times the kernel"""
    n, c, h, wd = x.shape
    o, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    full = np.zeros((n, o, (h - 1) * s + kh + opad, (wd - 1) * s + kw + opad), np.float64)
    for i in range(h):
        for j in range(wd):
            full[:, :, i * s:i * s + kh, j * s:j * s + kw] += np.einsum("nc,cokl->nokl", x[:, :, i, j], w)
    return full[:, :, pads[0]:full.shape[2] - pads[2], pads[1]:full.shape[3] - pads[3]]


def resize_linear_half_pixel(x, axis, out):
    """ONNX Resize, mode linear, half_pixel, sizes: along one axis"""
    n = x.shape[axis]
    c = np.clip((np.arange(out) + 0.5) * n / out - 0.5, 0, n - 1)
    i0 = np.floor(c).astype(int)
    i1 = np.minimum(i0 + 1, n - 1)
    t = (c - i0).reshape([-1] + [1] * (x.ndim - axis - 1))
    return np.take(x, i0, axis) * (1 - t) + np.take(x, i1, axis) * t


def window_cases(rng):
    """1-D Conv and MaxPool, 3-D AveragePool and 2-D ConvTranspose over symbolic spatial dims, run
    at two sizes each (the importer's 1-D and 3-D forms of relaxc's 2-D ops)"""
    w = rng.standard_normal((4, 1, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    sets = []
    for ln in (11, 6):
        x = rng.standard_normal((2, 2, ln)).astype(np.float32)
        v = window_view(x.astype(np.float64), [5], [2], [1, 2], 0.0)[..., ::2]  # dilation 2
        y = np.stack([np.einsum("nlk,ok->nol", v[:, g], w[2 * g:2 * g + 2, 0]) for g in range(2)], 1)
        sets.append(([x], [(y.reshape(2, 4, -1) + b[:, None]).astype(np.float32)]))
    save_case("test_rx_conv_1d_symbolic",
              [node("Conv", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 2], dilations=[2], group=2)],
              [("w", w), ("b", b)], [("x", np.float32, [2, 2, "l"])], [("y", np.float32, [2, 4, "m"])],
              sets, 13)
    sets = []
    for ln in (9, 4):
        x = rng.standard_normal((1, 3, ln)).astype(np.float32)
        y = window_view(x, [3], [2], [2, 2], -np.inf).max(-1)
        sets.append(([x], [y]))
    save_case("test_rx_maxpool_1d_symbolic_big_pads",
              [node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[2, 2])], [],
              [("x", np.float32, [1, 3, "l"])], [("y", np.float32, [1, 3, "m"])], sets, 12)
    sets = []
    for d, h in ((4, 5), (3, 2)):
        x = rng.standard_normal((1, 2, d, h, 3)).astype(np.float32)
        v = window_view(x.astype(np.float64), [2, 2, 2], [2, 1, 2], [1, 0, 1, 0, 1, 1], np.nan)
        y = np.nanmean(v.reshape(v.shape[:5] + (-1,)), -1)
        sets.append(([x], [y.astype(np.float32)]))
    save_case("test_rx_averagepool_3d_symbolic",
              [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 1, 2],
                    pads=[1, 0, 1, 0, 1, 1])], [],
              [("x", np.float32, [1, 2, "d", "h", 3])], [("y", np.float32, [1, 2, "e", "g", 2])],
              sets, 11)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    sets = []
    for h, wd in ((3, 4), (2, 2)):
        x = rng.standard_normal((1, 2, h, wd)).astype(np.float32)
        y = conv_transpose2d(x.astype(np.float64), w.astype(np.float64), 2, [1, 1, 1, 1], 1)
        sets.append(([x], [y.astype(np.float32)]))
    save_case("test_rx_convtranspose_symbolic",
              [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                    output_padding=[1, 1])], [("w", w)],
              [("x", np.float32, [1, 2, "h", "w"])], [("y", np.float32, [1, 3, "p", "q"])], sets, 11)


def channel_cases(rng):
    """the losses, DepthToSpace/SpaceToDepth, InstanceNormalization, LRN, PRelu and Resize over a
    symbolic batch (and spatial) dims, run at two sizes each"""
    wt = np.array([0.5, 2.0, 1.0], np.float32)
    sets = []
    for n in (4, 2):
        x = rng.standard_normal((n, 3, 2)).astype(np.float32)
        t = rng.integers(0, 3, size=(n, 2)).astype(np.int64)
        t[0, 1] = -1  # ignore_index
        tc = np.where(t < 0, 0, t)
        g = np.take_along_axis(x, tc[:, None], 1)[:, 0]
        wv = np.where(t < 0, 0, wt[tc])
        sets.append(([x, t], [np.array((-g * wv).sum() / wv.sum(), np.float32)]))
    save_case("test_rx_nllloss_symbolic_weight_ii",
              [node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], ignore_index=-1)],
              [("w", wt)], [("x", np.float32, ["n", 3, 2]), ("t", np.int64, ["n", 2])],
              [("y", np.float32, [])], sets, 13)
    sets = []
    for n in (5, 1):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        t = rng.integers(0, 4, size=n).astype(np.int64)
        lp = x - np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True))
        sets.append(([x, t], [(-lp[np.arange(n), t]).astype(np.float32), lp.astype(np.float32)]))
    save_case("test_rx_sce_symbolic_none_log_prob",
              [node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"], reduction="none")], [],
              [("x", np.float32, ["n", 4]), ("t", np.int64, ["n"])],
              [("y", np.float32, ["n"]), ("lp", np.float32, ["n", 4])], sets, 13)
    sets = []
    for n, h, w in ((2, 3, 2), (1, 1, 4)):
        x = rng.standard_normal((n, 8, h, w)).astype(np.float32)
        y = x.reshape(n, 2, 2, 2, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, 2, 2 * h, 2 * w)
        z = y.reshape(n, 2, h, 2, w, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, 8, h, w)
        sets.append(([x], [y, z]))
    save_case("test_rx_depth_space_symbolic",
              [node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD"),
               node("SpaceToDepth", ["y"], ["z"], blocksize=2)], [],
              [("x", np.float32, ["n", 8, "h", "w"])],
              [("y", np.float32, ["n", 2, "p", "q"]), ("z", np.float32, ["n", 8, "h", "w"])],
              sets, 13)
    sc = rng.standard_normal(3).astype(np.float32)
    bi = rng.standard_normal(3).astype(np.float32)
    sl = rng.standard_normal((3, 1, 1)).astype(np.float32)
    sets = []
    for n, h in ((2, 5), (1, 2)):
        x = rng.standard_normal((n, 3, h, 4)).astype(np.float32)
        x64 = x.astype(np.float64)
        m = x64.mean((2, 3), keepdims=True)
        v = ((x64 - m) ** 2).mean((2, 3), keepdims=True)
        inorm = (x64 - m) / np.sqrt(v + 1e-3) * sc[:, None, None] + bi[:, None, None]
        sq = np.pad(x64 ** 2, [(0, 0), (1, 1), (0, 0), (0, 0)])
        ssum = sq[:, :3] + sq[:, 1:4] + sq[:, 2:5]
        lrn = x64 / (2.0 + 1e-2 / 3 * ssum) ** 0.5
        prelu = np.where(x < 0, x * sl, x)
        sets.append(([x], [inorm.astype(np.float32), lrn.astype(np.float32), prelu]))
    save_case("test_rx_norms_symbolic",
              [node("InstanceNormalization", ["x", "sc", "bi"], ["a"], epsilon=1e-3),
               node("LRN", ["x"], ["b"], size=3, alpha=1e-2, beta=0.5, bias=2.0),
               node("PRelu", ["x", "sl"], ["c"])], [("sc", sc), ("bi", bi), ("sl", sl)],
              [("x", np.float32, ["n", 3, "h", 4])],
              [("a", np.float32, ["n", 3, "h", 4]), ("b", np.float32, ["n", 3, "h", 4]),
               ("c", np.float32, ["n", 3, "h", 4])], sets, 13)
    sets = []
    for h, w in ((3, 2), (1, 4)):
        x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
        y = resize_linear_half_pixel(resize_linear_half_pixel(x.astype(np.float64), 2, 2 * h), 3, 3 * w)
        sets.append(([x], [y.astype(np.float32)]))
    save_case("test_rx_resize_symbolic_scales",
              [node("Resize", ["x", "", "s"], ["y"], mode="linear")],
              [("s", np.array([1, 1, 2, 3], np.float32))],
              [("x", np.float32, [1, 2, "h", "w"])], [("y", np.float32, [1, 2, "p", "q"])], sets, 13)
    sets = []  # fractional constant scales: output dims (h * 1) // 2 and (w * 3) // 2
    for h, w in ((5, 3), (4, 2)):
        x = rng.standard_normal((1, 1, h, w)).astype(np.float32)
        y = x
        for ax, sc in ((2, 0.5), (3, 1.5)):
            n = x.shape[ax]
            c = (np.arange(int(np.floor(n * sc))) + 0.5) / sc - 0.5
            y = np.take(y, np.clip(np.ceil(c - 0.5), 0, n - 1).astype(int), ax)
        sets.append(([x], [y]))
    save_case("test_rx_resize_nearest_fraction_scales",
              [node("Resize", ["x", "", "s"], ["y"], mode="nearest")],
              [("s", np.array([1, 1, 0.5, 1.5], np.float32))],
              [("x", np.float32, [1, 1, "h", "w"])], [("y", np.float32, [1, 1, "p", "q"])], sets, 13)


def conv3d_case(rng):
    """3-D Conv (as 2-D convs over depth slices) with strides, asymmetric pads, a depth dilation
    and groups over symbolic depth and height, run at two sizes"""
    w3 = rng.standard_normal((4, 1, 2, 3, 2)).astype(np.float32)
    b3 = rng.standard_normal(4).astype(np.float32)
    sets = []
    for d, h in ((5, 4), (2, 3)):
        x = rng.standard_normal((1, 2, d, h, 5)).astype(np.float32)
        v = window_view(x.astype(np.float64), [3, 3, 2], [2, 1, 2], [1, 1, 0, 1, 1, 1], 0.0)
        v = v[..., ::2, :, :]  # depth dilation 2: taps 0 and 2 of a 3-window
        y = np.concatenate([np.einsum("ncdhwijk,ocijk->nodhw", v[:, g:g + 1], w3[2 * g:2 * g + 2])
                            for g in range(2)], 1) + b3[None, :, None, None, None]
        sets.append(([x], [y.astype(np.float32)]))
    save_case("test_rx_conv_3d_symbolic",
              [node("Conv", ["x", "w", "b"], ["y"], strides=[2, 1, 2], pads=[1, 1, 0, 1, 1, 1],
                    dilations=[2, 1, 1], group=2)], [("w", w3), ("b", b3)],
              [("x", np.float32, [1, 2, "d", "h", 5])], [("y", np.float32, [1, 4, "e", "g", 3])],
              sets, 11)


def conv_transpose3d_case(rng):
    """3-D ConvTranspose (group 2, strides, pads, output_padding) over a symbolic depth, run at
    two sizes: each input element scatters its kernel"""
    w = rng.standard_normal((4, 1, 2, 3, 2)).astype(np.float32)
    s, pads, opad = (2, 1, 2), (1, 0, 1, 0, 1, 0), (1, 0, 0)
    sets = []
    for d in (3, 1):
        x = rng.standard_normal((1, 4, d, 3, 2)).astype(np.float64)
        full = np.zeros((1, 2, (d - 1) * 2 + 2 + 1, 3 - 1 + 3, (2 - 1) * 2 + 2), np.float64)
        for i in range(d):
            for j in range(3):
                for k in range(2):
                    for g in range(2):
                        full[:, g:g + 1, i * 2:i * 2 + 2, j:j + 3, k * 2:k * 2 + 2] += np.einsum(
                            "nc,coklm->noklm", x[:, 2 * g:2 * g + 2, i, j, k],
                            w[2 * g:2 * g + 2])
        y = full[:, :, pads[0]:full.shape[2] - pads[3], pads[1]:full.shape[3] - pads[4],
                 pads[2]:full.shape[4] - pads[5]]
        sets.append(([x.astype(np.float32)], [y.astype(np.float32)]))
    save_case("test_rx_convtranspose_3d_symbolic",
              [node("ConvTranspose", ["x", "w"], ["y"], strides=list(s), pads=list(pads),
                    output_padding=list(opad), group=2)], [("w", w)],
              [("x", np.float32, [1, 4, "d", 3, 2])], [("y", np.float32, [1, 2, "e", 4, 3])],
              sets, 11)


def lp_pool_case(rng):
    """LpPool (p = 3, pads, strides) over symbolic spatial dims, run at two sizes"""
    sets = []
    for h, w in ((5, 4), (2, 3)):
        x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
        v = window_view(np.abs(x.astype(np.float64)), [2, 3], [2, 1], [1, 1, 0, 1], 0.0)
        y = ((v ** 3).sum((-1, -2))) ** (1 / 3)
        sets.append(([x], [y.astype(np.float32)]))
    save_case("test_rx_lppool_symbolic",
              [node("LpPool", ["x"], ["y"], kernel_shape=[2, 3], strides=[2, 1], pads=[1, 1, 0, 1], p=3)],
              [], [("x", np.float32, [1, 2, "h", "w"])], [("y", np.float32, [1, 2, "p", "q"])],
              sets, 11)


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
    # Shape of a tensor with symbolic dims as a graph output: an i64 tensor made at run time
    sets = [([np.zeros((n, 3, m), np.float32)], [np.array([n, 3, m], np.int64)])
            for n, m in ((2, 5), (1, 1))]
    save_case("test_rx_shape_symbolic", [node("Shape", ["x"], ["y"])], [],
              [("x", np.float32, ["n", 3, "m"])], [("y", np.int64, [3])], sets, 15)
    # Reshape to a shape given at run time holding 0 (copy the input's dim) and -1 (inferred),
    # the input's first dim symbolic
    sets = []
    for n, shp in ((3, [0, -1, 3]), (2, [0, 0, -1]), (1, [-1, 2, 0])):
        x = rng.standard_normal((n, 4, 6)).astype(np.float32)
        tgt = [x.shape[i] if v == 0 else v for i, v in enumerate(shp)]
        sets.append(([x, np.array(shp, np.int64)], [x.reshape(tgt)]))
    save_case("test_rx_reshape_runtime_zero_neg", [node("Reshape", ["x", "shape"], ["y"])], [],
              [("x", np.float32, ["n", 4, 6]), ("shape", np.int64, [3])],
              [("y", np.float32, ["a", "b", "c"])], sets, 14)
    # Expand to a shape given at run time: x's 3 stays, its 1s broadcast to the shape's dims
    sets = []
    for shp in ([2, 3, 4], [1, 3, 1], [2, 1, 5]):
        x = rng.standard_normal((3, 1)).astype(np.float32)
        sets.append(([x, np.array(shp, np.int64)], [x * np.ones(shp, np.float32)]))
    save_case("test_rx_expand_runtime_shape", [node("Expand", ["x", "shape"], ["y"])], [],
              [("x", np.float32, [3, 1]), ("shape", np.int64, [3])],
              [("y", np.float32, ["a", 3, "c"])], sets, 13)
    # a comparison of shape values as data: Where(Size(x) == 6, x, -x), the condition a bool
    # computed from the symbolic n when the program runs
    sets = []
    for n in (2, 1):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        sets.append(([x], [x if n * 3 == 6 else -x]))
    save_case("test_rx_where_shape_compare",
              [node("Size", ["x"], ["size"]), node("Equal", ["size", "six"], ["c"]),
               node("Neg", ["x"], ["nx"]), node("Where", ["c", "x", "nx"], ["y"])],
              [("six", np.array(6, np.int64))], [("x", np.float32, ["n", 3])],
              [("y", np.float32, ["n", 3])], sets, 13)
    # LayerNormalization's Mean and InvStdDev over the last two dims, a symbolic batch
    w = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    sets = []
    for n in (3, 1):
        x = rng.standard_normal((n, 4, 5)).astype(np.float32)
        mu = x.mean(axis=(1, 2), keepdims=True)
        inv = 1 / np.sqrt(((x - mu) ** 2).mean(axis=(1, 2), keepdims=True) + 1e-5)
        sets.append(([x], [((x - mu) * inv * w + b).astype(np.float32), mu.astype(np.float32),
                           inv.astype(np.float32)]))
    save_case("test_rx_layer_norm_stats", [node("LayerNormalization", ["x", "w", "b"],
                                                ["y", "mean", "inv_std"], axis=1)],
              [("w", w), ("b", b)], [("x", np.float32, ["n", 4, 5])],
              [("y", np.float32, ["n", 4, 5]), ("mean", np.float32, ["n", 1, 1]),
               ("inv_std", np.float32, ["n", 1, 1])], sets, 17)
    window_cases(rng)
    channel_cases(rng)
    conv3d_case(np.random.default_rng(3))
    conv_transpose3d_case(np.random.default_rng(4))
    lp_pool_case(np.random.default_rng(5))
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
    quant_cases(np.random.default_rng(171))


def rint_sat(v, dt):
    """round half to even, saturated to dt's range, as dt (ONNX's QuantizeLinear)"""
    i = np.iinfo(dt)
    return np.clip(np.rint(v), i.min, i.max).astype(dt)


def conv2d_i32(x, w, pads):
    """x [N, C, H, W] conv w [O, C, kh, kw] in int64 (exact), zero padding"""
    v = window_view(x.astype(np.int64), list(w.shape[2:]), [1, 1], pads, 0)
    return np.einsum("nchwij,ocij->nohw", v, w.astype(np.int64)).astype(np.int32)


def quant_cases(rng):
    """the quantization operators, Pow of mixed dtypes and BitShift over symbolic dims, each run
    at two sizes (the suite's cases have static shapes)"""
    # QuantizeLinear per axis to u8 (ties at .5 round to even, values past the range saturate),
    # then DequantizeLinear back
    sc = np.array([0.5, 0.25, 2.0], np.float32)
    zp = np.array([128, 3, 250], np.uint8)
    sets = []
    for n in (4, 1):
        x = (rng.integers(-400, 400, size=(n, 3)) / 8).astype(np.float32)
        q = rint_sat(x / sc + zp.astype(np.float32), np.uint8)
        y = ((q.astype(np.int32) - zp.astype(np.int32)).astype(np.float32) * sc)
        sets.append(([x], [q, y]))
    save_case("test_rx_quantize_dequantize_axis_symbolic",
              [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
               node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
              [("s", sc), ("z", zp)], [("x", np.float32, ["n", 3])],
              [("q", np.uint8, ["n", 3]), ("y", np.float32, ["n", 3])], sets, 13)
    # DynamicQuantizeLinear: the scale and zero point from min(x, 0) and max(x, 0)
    sets = []
    for n in (3, 1):
        x = (rng.standard_normal((n, 4)) * 3).astype(np.float32)
        hi, lo = np.float32(max(0, x.max())), np.float32(min(0, x.min()))
        s = np.float32(hi - lo) / np.float32(255)
        z = np.rint(np.clip(np.float32(0) - lo / s, 0, 255))
        sets.append(([x], [rint_sat(np.rint(x / s) + z, np.uint8), np.array(s, np.float32),
                           np.array(z, np.uint8)]))
    save_case("test_rx_dynamic_quantize_symbolic",
              [node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], [],
              [("x", np.float32, ["n", 4])],
              [("y", np.uint8, ["n", 4]), ("s", np.float32, []), ("z", np.uint8, [])], sets, 11)
    # MatMulInteger (a per-tensor zero point, b per column) and QLinearMatMul, K = 300: sums
    # up to 300 * 255 * 255, beyond f32's 2^24, exact in i32
    b = rng.integers(0, 256, size=(300, 3)).astype(np.uint8)
    bz = np.array([7, 200, 128], np.uint8)
    az = np.array(9, np.uint8)
    ys, yz = np.array(40.0, np.float32), np.array(100, np.uint8)
    as_, bs = np.array(0.02, np.float32), np.array([0.01, 0.03, 0.005], np.float32)
    sets = []
    for n in (2, 1):
        a = rng.integers(0, 256, size=(n, 300)).astype(np.uint8)
        c = (a.astype(np.int64) - az) @ (b.astype(np.int64) - bz)
        m = np.float32(as_ * bs) / ys
        sets.append(([a], [c.astype(np.int32),
                           rint_sat(c.astype(np.float32) * m + np.float32(yz), np.uint8)]))
    save_case("test_rx_matmul_integer_qlinear_symbolic",
              [node("MatMulInteger", ["a", "b", "az", "bz"], ["c"]),
               node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["q"])],
              [("b", b), ("az", az), ("bz", bz), ("as", as_), ("bs", bs), ("ys", ys),
               ("yz", yz)], [("a", np.uint8, ["n", 300])],
              [("c", np.int32, ["n", 3]), ("q", np.uint8, ["n", 3])], sets, 10)
    # ConvInteger and QLinearConv (i8 weights, a zero point per output channel, an i32 bias),
    # symbolic spatial dims, pads 1
    w = rng.integers(-128, 128, size=(3, 2, 2, 2)).astype(np.int8)
    wz = np.array([0, -3, 5], np.int8)
    xz = np.array(120, np.uint8)
    bias = rng.integers(-1000, 1000, size=3).astype(np.int32)
    xs, ws = np.array(0.05, np.float32), np.array([0.01, 0.02, 0.04], np.float32)
    ys, yz = np.array(2.5, np.float32), np.array(-10, np.int8)
    sets = []
    for h, wd in ((4, 3), (2, 5)):
        x = rng.integers(0, 256, size=(1, 2, h, wd)).astype(np.uint8)
        c = conv2d_i32(x.astype(np.int32) - 120, w.astype(np.int32) - wz.reshape(3, 1, 1, 1),
                       [1, 1, 1, 1])
        m = (np.float32(xs * ws) / ys).reshape(1, 3, 1, 1)
        r = (c + bias.reshape(1, 3, 1, 1)).astype(np.float32) * m + np.float32(yz)
        sets.append(([x], [c, rint_sat(r, np.int8)]))
    save_case("test_rx_conv_integer_qlinear_symbolic",
              [node("ConvInteger", ["x", "w", "xz", "wz"], ["c"], pads=[1, 1, 1, 1]),
               node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["q"],
                    pads=[1, 1, 1, 1])],
              [("w", w), ("wz", wz), ("xz", xz), ("bias", bias), ("xs", xs), ("ws", ws),
               ("ys", ys), ("yz", yz)], [("x", np.uint8, [1, 2, "h", "w"])],
              [("c", np.int32, [1, 3, "p", "q"]), ("q", np.int8, [1, 3, "p", "q"])], sets, 10)
    # Pow: i64 ^ i64 exactly (past 2^53), i32 ^ i64 and f32 ^ i32 (the exponent cast to the
    # base's dtype)
    sets = []
    for n in (5, 2):
        x = rng.integers(-7, 8, size=n).astype(np.int64)
        e = rng.integers(0, 21, size=n).astype(np.int64)
        x[0], e[0] = 3, 39  # 3^39 > 2^53
        xi = x.astype(np.int32)
        ei = np.minimum(e, 10)
        f = rng.standard_normal(n).astype(np.float32)
        sets.append(([x, e, f], [x ** e, xi ** ei.astype(np.int32),
                                  (f.astype(np.float64) ** ei).astype(np.float32)]))
    save_case("test_rx_pow_mixed_symbolic",
              [node("Pow", ["x", "e"], ["y"]), node("Cast", ["x"], ["xi"], to=6),
               node("Clip", ["e", "lo", "hi"], ["ec"]), node("Pow", ["xi", "ec"], ["yi"]),
               node("Cast", ["ec"], ["ei"], to=6), node("Pow", ["f", "ei"], ["yf"])],
              [("lo", np.array(0, np.int64)), ("hi", np.array(10, np.int64))],
              [("x", np.int64, ["n"]), ("e", np.int64, ["n"]), ("f", np.float32, ["n"])],
              [("y", np.int64, ["n"]), ("yi", np.int32, ["n"]), ("yf", np.float32, ["n"])],
              sets, 15)
    # BitShift of u8 (wrapping on the left) and u64 (shifts up to 63)
    sets = []
    for n in (4, 1):
        x = rng.integers(0, 256, size=n).astype(np.uint8)
        s = rng.integers(0, 8, size=n).astype(np.uint8)
        X = rng.integers(0, 2 ** 63, size=n, dtype=np.uint64)
        S = rng.integers(0, 64, size=n).astype(np.uint64)
        sets.append(([x, s, X, S], [np.left_shift(x, s), np.right_shift(x, s),
                                    np.left_shift(X, S), np.right_shift(X, S)]))
    save_case("test_rx_bitshift_symbolic",
              [node("BitShift", ["x", "s"], ["l"], direction="LEFT"),
               node("BitShift", ["x", "s"], ["r"], direction="RIGHT"),
               node("BitShift", ["X", "S"], ["L"], direction="LEFT"),
               node("BitShift", ["X", "S"], ["R"], direction="RIGHT")], [],
              [("x", np.uint8, ["n"]), ("s", np.uint8, ["n"]), ("X", np.uint64, ["n"]),
               ("S", np.uint64, ["n"])],
              [("l", np.uint8, ["n"]), ("r", np.uint8, ["n"]), ("L", np.uint64, ["n"]),
               ("R", np.uint64, ["n"])], sets, 11)


if __name__ == "__main__":
    main()
