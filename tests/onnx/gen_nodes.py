#!/usr/bin/python3
"""Writes tests/onnx/nodes/: ONNX node test cases in the layout of the ONNX backend node tests
(<case>/model.onnx, <case>/test_data_set_N/{input,output}_K.pb) for what the suite's own cases
cannot reach (the suite's CumSum cases are all float64, which relaxc lacks; its Size, Shape,
Reshape, Expand, TopK, Pad and Tile cases have static shapes; its losses, window, channel and
Resize cases have static shapes too; its Slice, Squeeze, Unsqueeze and ReduceSum cases with axes
given at run time, and its NonZero, Compress and Unique cases, too: here symbolic dims, each run
at two sizes).
unit.test_onnx_nodes_rx runs them with test_onnx_nodes (RX_ONNX_NODES=tests/onnx/nodes); every
case must pass.

The protobuf messages are encoded here by hand (field numbers of onnx.proto), so the script needs
NumPy only. Run with Debian's python3:  /usr/bin/python3 tests/onnx/gen_nodes.py
(where onnxruntime is installed, signal_cases' expected outputs are also checked against it)."""
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
        elif isinstance(v, (list, tuple)) and v and isinstance(v[0], float):  # FLOATS = 6
            a = b"".join(varint(7 << 3 | 5) + struct.pack("<f", x) for x in v) + f_int(20, 6)
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


def np_slice(x, starts, ends, axes, steps):
    sl = [slice(None)] * x.ndim
    for b, e, a, st in zip(starts, ends, axes, steps):
        sl[a] = slice(b, e, st)
    return x[tuple(sl)]


def runtime_axes_cases(rng):
    """Squeeze, Unsqueeze, Slice, ReduceSum and a window whose axes, starts, ends, steps or size
    are graph inputs (run-time values), over symbolic dims, each run at two or three sizes"""
    sets = []
    for n, axes in ((3, [0, -1]), (1, [2, 1]), (2, [-4, 1])):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        y = x
        for a in sorted(a % 4 for a in axes):
            y = np.expand_dims(y, a)
        z = np.squeeze(y, tuple(a % 4 for a in axes))
        sets.append(([x, np.array(axes, np.int64)], [y, z]))
    save_case("test_rx_unsqueeze_squeeze_runtime_axes",
              [node("Unsqueeze", ["x", "axes"], ["y"]), node("Squeeze", ["y", "axes"], ["z"])], [],
              [("x", np.float32, ["n", 4]), ("axes", np.int64, [2])],
              [("y", np.float32, ["a", "b", "c", "d"]), ("z", np.float32, ["n", 4])], sets, 13)
    sets = []
    for n, st, en, ax, sp in ((7, [1, -1], [100, -7], [0, -1], [2, -2]),
                              (3, [-2, 0], [3, 5], [1, 0], [1, 1]),
                              (2, [5, 0], [-100, 2], [0, 1], [-1, 3])):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        args = [np.array(v, np.int64) for v in (st, en, ax, sp)]
        sets.append(([x] + args, [np_slice(x, st, en, [a % 2 for a in ax], sp)]))
    save_case("test_rx_slice_runtime_axes_steps",
              [node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])], [],
              [("x", np.float32, ["n", 6]), ("starts", np.int64, [2]), ("ends", np.int64, [2]),
               ("axes", np.int64, [2]), ("steps", np.int64, [2])],
              [("y", np.float32, ["a", "b"])], sets, 13)
    sets = []
    for n, axes in ((3, [0, 2]), (2, [-1, 1]), (1, [1, 0])):
        x = rng.standard_normal((n, 3, 4)).astype(np.float32)
        ax = tuple(a % 3 for a in axes)
        sets.append(([x, np.array(axes, np.int64)],
                     [x.sum(ax, keepdims=True), x.mean(ax)]))
    save_case("test_rx_reduce_runtime_axes",
              [node("ReduceSum", ["x", "axes"], ["s"]), node("ReduceMean", ["x", "axes"], ["m"], keepdims=0)],
              [], [("x", np.float32, ["n", 3, 4]), ("axes", np.int64, [2])],
              [("s", np.float32, ["a", "b", "c"]), ("m", np.float32, ["d"])], sets, 18)
    sets = []
    for size in (5, 8):
        i = np.arange(size)
        w = 0.42 - 0.5 * np.cos(2 * np.pi * i / (size - 1)) + 0.08 * np.cos(4 * np.pi * i / (size - 1))
        sets.append(([np.array(size, np.int64)], [w.astype(np.float32)]))
    save_case("test_rx_blackman_runtime_size", [node("BlackmanWindow", ["size"], ["y"], periodic=0)],
              [], [("size", np.int64, [])], [("y", np.float32, ["n"])], sets, 17)
    # data-dependent counts: NonZero, Compress along a symbolic axis, Unique (sorted, 4 outputs)
    sets = []
    for n in (4, 2):
        x = rng.integers(-1, 2, size=(n, 3)).astype(np.int64)
        c = rng.integers(0, 2, size=n).astype(np.int64)
        f = np.round(rng.standard_normal(2 * n), 0).astype(np.float32)
        u, ui, uv, uc = np.unique(f, return_index=True, return_inverse=True, return_counts=True)
        sets.append(([x, c, f], [np.array(np.nonzero(x), np.int64), x[c != 0], u,
                                 ui.astype(np.int64), uv.reshape(-1).astype(np.int64),
                                 uc.astype(np.int64)]))
    save_case("test_rx_nonzero_compress_unique",
              [node("NonZero", ["x"], ["nz"]), node("Cast", ["c"], ["cb"], to=9),
               node("Compress", ["x", "cb"], ["cx"], axis=0),
               node("Unique", ["f"], ["u", "ui", "uv", "uc"])], [],
              [("x", np.int64, ["n", 3]), ("c", np.int64, ["n"]), ("f", np.float32, ["m"])],
              [("nz", np.int64, [2, "k"]), ("cx", np.int64, ["p", 3]), ("u", np.float32, ["q"]),
               ("ui", np.int64, ["q"]), ("uv", np.int64, ["m"]), ("uc", np.int64, ["q"])], sets, 13)


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
    signal_cases(np.random.default_rng(29))
    scatter_einsum_cases(np.random.default_rng(1717))
    runtime_axes_cases(np.random.default_rng(1717))
    quant_cases(np.random.default_rng(171))



def nms_ref(boxes, scores, max_out, iou, score_thr, center):
    """ONNX NonMaxSuppression's selection, as the reference's loops"""
    out = []
    for b in range(boxes.shape[0]):
        bx = boxes[b].astype(np.float32)
        if center:
            bx = np.stack([bx[:, 1] - bx[:, 3] / 2, bx[:, 0] - bx[:, 2] / 2,
                           bx[:, 1] + bx[:, 3] / 2, bx[:, 0] + bx[:, 2] / 2], 1)
        y0, y1 = np.minimum(bx[:, 0], bx[:, 2]), np.maximum(bx[:, 0], bx[:, 2])
        x0, x1 = np.minimum(bx[:, 1], bx[:, 3]), np.maximum(bx[:, 1], bx[:, 3])
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = [i for i in np.argsort(-s, kind="stable") if s[i] > score_thr]
            kept = []
            for i in order:
                if len(kept) >= max_out:
                    break
                ok = True
                for k in kept:
                    iw = min(x1[i], x1[k]) - max(x0[i], x0[k])
                    ih = min(y1[i], y1[k]) - max(y0[i], y0[k])
                    if iw <= 0 or ih <= 0:
                        continue
                    inter = iw * ih
                    un = (x1[i] - x0[i]) * (y1[i] - y0[i]) + (x1[k] - x0[k]) * (y1[k] - y0[k]) - inter
                    if un > 0 and inter / un > iou:
                        ok = False
                        break
                if ok:
                    kept.append(i)
                    out.append([b, c, i])
    return np.array(out, np.int64).reshape(-1, 3)


def tfidf_ref(x, pool, counts, indexes, min_g, max_g, skip, weights, mode):
    """TfIdfVectorizer over an integer pool: each gram counted per skip distance (unigrams once)"""
    rows = x.reshape(-1, x.shape[-1])
    size = max(indexes) + 1
    y = np.zeros((rows.shape[0], size), np.float32)
    grams, g = [], 0
    for lv, start in enumerate(counts):
        n = lv + 1
        end = counts[lv + 1] if lv + 1 < len(counts) else len(pool)
        for at in range(start, end - n + 1, n):
            if min_g <= n <= max_g:
                grams.append((indexes[g], pool[at:at + n]))
            g += 1
    for r, row in enumerate(rows):
        for o, gram in grams:
            n = len(gram)
            for d in range(1, (skip + 2) if n > 1 else 2):
                for i in range(len(row) - (n - 1) * d):
                    y[r, o] += all(row[i + k * d] == gram[k] for k in range(n))
    w = np.array(weights, np.float32) if weights else None
    if mode == "IDF":
        y = (y > 0).astype(np.float32) * (w if w is not None else 1)
    elif mode == "TFIDF" and w is not None:
        y = y * w
    return y.reshape(x.shape[:-1] + (size,))


def roi_align_ref(x, rois, bidx, oh, ow, sr, scale, mode, half):
    """ONNX RoiAlign, as the reference's loops"""
    r_n, ch, hh, ww = len(rois), x.shape[1], x.shape[2], x.shape[3]
    y = np.zeros((r_n, ch, oh, ow), np.float32)
    for r in range(r_n):
        off = 0.5 if half else 0.0
        sw, sh, ew, eh = [np.float32(v) * np.float32(scale) - np.float32(off) for v in rois[r]]
        rw, rh = ew - sw, eh - sh
        if not half:
            rw, rh = max(rw, np.float32(1)), max(rh, np.float32(1))
        bh, bw = rh / np.float32(oh), rw / np.float32(ow)
        gh = sr if sr > 0 else int(np.ceil(rh / oh))
        gw = sr if sr > 0 else int(np.ceil(rw / ow))
        for c in range(ch):
            img = x[bidx[r], c]
            for ph in range(oh):
                for pw in range(ow):
                    vals = []
                    for iy in range(gh):
                        yy = sh + ph * bh + (iy + np.float32(0.5)) * bh / np.float32(gh)
                        for ix in range(gw):
                            xx = sw + pw * bw + (ix + np.float32(0.5)) * bw / np.float32(gw)
                            if yy < -1 or yy > hh or xx < -1 or xx > ww:
                                vals.append(0.0)
                                continue
                            yv, xv = max(yy, 0), max(xx, 0)
                            yl, xl = int(yv), int(xv)
                            if yl >= hh - 1:
                                yl = yh = hh - 1
                                yv = yl
                            else:
                                yh = yl + 1
                            if xl >= ww - 1:
                                xl = xh = ww - 1
                                xv = xl
                            else:
                                xh = xl + 1
                            ly, lx = yv - yl, xv - xl
                            t = [(1 - ly) * (1 - lx) * img[yl, xl], (1 - ly) * lx * img[yl, xh],
                                 ly * (1 - lx) * img[yh, xl], ly * lx * img[yh, xh]]
                            vals.append(max(t) if mode == "max" else sum(t))
                    y[r, c, ph, pw] = max(vals) if mode == "max" else sum(vals) / max(gh * gw, 1)
    return y


def check_ort(name, model_path, feeds, want, rtol=1e-4, atol=1e-5):
    """the case's expected outputs against onnxruntime's, where onnxruntime is installed"""
    try:
        import onnxruntime as ort
    except ImportError:
        return
    got = ort.InferenceSession(model_path).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and np.allclose(g, w, rtol=rtol, atol=atol), (name, g, w)


def save_checked(name, nodes, inits, inputs, outputs, sets, opset):
    save_case(name, nodes, inits, inputs, outputs, sets, opset)
    for ins, outs in sets:
        check_ort(name, os.path.join(OUT, name, "model.onnx"),
                  {decl[0]: a for decl, a in zip(inputs, ins)}, outs)


def signal_cases(rng):
    """NonMaxSuppression, TfIdfVectorizer, DFT, STFT and RoiAlign over symbolic dims, each run at
    two sizes (the suite's cases have static shapes)"""
    # NMS: n boxes (corners, and centers), a run-time count of selected rows
    for center in (0, 1):
        sets = []
        for n in (7, 3):
            xy = rng.uniform(0, 4, size=(1, n, 2)).astype(np.float32)
            wh = rng.uniform(0.5, 3, size=(1, n, 2)).astype(np.float32)
            boxes = (np.concatenate([xy, wh], 2) if center
                     else np.concatenate([xy, xy + wh], 2)[:, :, [0, 1, 3, 2]])
            scores = rng.integers(0, 8, size=(1, 2, n)).astype(np.float32) / 8
            sets.append(([boxes, scores], [nms_ref(boxes, scores, 3, 0.3, 0.1, center)]))
        save_checked("test_rx_nms_symbolic%s" % ("_center" if center else ""),
                     [node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "st"], ["sel"],
                           center_point_box=center)],
                     [("max_out", np.array([3], np.int64)), ("iou", np.array([0.3], np.float32)),
                      ("st", np.array([0.1], np.float32))],
                     [("boxes", np.float32, [1, "n", 4]), ("scores", np.float32, [1, 2, "n"])],
                     [("sel", np.int64, ["k", 3])], sets, 11)
    # TfIdfVectorizer: rows and their length symbolic, uni- and bigrams with a skip, TFIDF weights
    pool, counts, idx = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7], [0, 4], [0, 1, 2, 3, 4, 5, 6]
    wts = [0.5, 1.0, 2.0, 0.25, 1.5, 3.0, 0.75]
    sets = []
    for b, l in ((2, 9), (1, 4)):
        x = rng.integers(2, 9, size=(b, l)).astype(np.int32)
        sets.append(([x], [tfidf_ref(x, pool, counts, idx, 1, 2, 1, wts, "TFIDF")]))
    save_checked("test_rx_tfidf_symbolic",
                 [node("TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=1,
                       max_gram_length=2, max_skip_count=1, ngram_counts=counts, ngram_indexes=idx,
                       pool_int64s=pool, weights=wts)],
                 [], [("x", np.int32, ["b", "l"])], [("y", np.float32, ["b", 7])], sets, 9)
    # DFT of a complex signal of symbolic length (forward, and inverse), and a onesided real one
    # with a constant dft_length longer than the signal (zero-padded)
    for inv in (0, 1):
        sets = []
        for n in (8, 5):
            x = rng.standard_normal((2, n, 2)).astype(np.float32)
            c = x[..., 0] + 1j * x[..., 1].astype(np.float64)
            f = np.fft.ifft(c, axis=1) if inv else np.fft.fft(c, axis=1)
            sets.append(([x], [np.stack([f.real, f.imag], -1).astype(np.float32)]))
        save_checked("test_rx_dft_symbolic%s" % ("_inverse" if inv else ""),
                     [node("DFT", ["x"], ["y"], axis=1, inverse=inv)], [],
                     [("x", np.float32, [2, "n", 2])], [("y", np.float32, [2, "n", 2])], sets, 17)
    sets = []
    for n in (6, 3):
        x = rng.standard_normal((1, n, 1)).astype(np.float32)
        f = np.fft.rfft(x[..., 0].astype(np.float64), n=10, axis=1)
        sets.append(([x], [np.stack([f.real, f.imag], -1).astype(np.float32)]))
    save_checked("test_rx_dft_onesided_length",
                 [node("DFT", ["x", "len"], ["y"], axis=1, onesided=1)],
                 [("len", np.array(10, np.int64))], [("x", np.float32, [1, "n", 1])],
                 [("y", np.float32, [1, 6, 2])], sets, 17)
    # STFT of a signal of symbolic length with a window: the frame count symbolic
    win = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(8) / 8)).astype(np.float32)
    sets = []
    for t in (20, 11):
        x = rng.standard_normal((1, t, 1)).astype(np.float32)
        fr = np.stack([x[0, f * 3:f * 3 + 8, 0] * win for f in range((t - 8) // 3 + 1)])
        s = np.fft.rfft(fr.astype(np.float64), axis=1)[None]
        sets.append(([x], [np.stack([s.real, s.imag], -1).astype(np.float32)]))
    save_checked("test_rx_stft_symbolic", [node("STFT", ["x", "step", "win"], ["y"])],
                 [("step", np.array(3, np.int64)), ("win", win)], [("x", np.float32, [1, "t", 1])],
                 [("y", np.float32, [1, "f", 5, 2])], sets, 17)
    # RoiAlign over a symbolic image and region count, adaptive sampling, avg and max
    for mode in ("avg", "max"):
        sets = []
        for h, w, r in ((6, 7, 3), (4, 5, 2)):
            x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
            p = rng.uniform(0, min(h, w) - 1, size=(r, 2))
            rois = np.concatenate([p, p + rng.uniform(0.5, 3, size=(r, 2))], 1).astype(np.float32)
            bi = rng.integers(0, 2, size=r).astype(np.int64)
            sets.append(([x, rois, bi], [roi_align_ref(x, rois, bi, 2, 3, 0, 0.5, mode, True)]))
        save_checked("test_rx_roialign_symbolic_%s" % mode,
                     [node("RoiAlign", ["x", "rois", "bi"], ["y"], mode=mode, output_height=2,
                           output_width=3, sampling_ratio=0, spatial_scale=0.5)], [],
                     [("x", np.float32, [2, 3, "h", "w"]), ("rois", np.float32, ["r", 4]),
                      ("bi", np.int64, ["r"])], [("y", np.float32, ["r", 3, 2, 3])], sets, 16)


def scatter_einsum_cases(rng):
    """ScatterElements (duplicates combined by add and max, negative indices), ScatterND (mul),
    Einsum, ReverseSequence, MaxUnpool, GridSample, Det, MaxPool's Indices and
    BatchNormalization's training mode over symbolic dims, each run at two sizes"""
    def scatter(x, idx, upd, axis, red):
        y = x.copy()
        for j in np.ndindex(*idx.shape):
            t = list(j)
            t[axis] = idx[j] % x.shape[axis]
            t = tuple(t)
            y[t] = {"add": y[t] + upd[j], "max": max(y[t], upd[j]), "mul": y[t] * upd[j]}[red]
        return y
    for red, axis, opset in (("add", 0, 16), ("max", 1, 18)):
        sets = []
        for n, m in ((4, 6), (2, 3)):
            x = rng.standard_normal((n, 5) if axis == 0 else (5, n)).astype(np.float32)
            shp = (m, 5) if axis == 0 else (5, m)
            idx = rng.integers(-n, n, size=shp).astype(np.int64)
            upd = rng.standard_normal(shp).astype(np.float32)
            sets.append(([x, idx, upd], [scatter(x, idx, upd, axis, red)]))
        dims = (["n", 5], ["m", 5]) if axis == 0 else ([5, "n"], [5, "m"])
        save_case("test_rx_scatter_elements_%s_symbolic" % red,
                  [node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis, reduction=red)], [],
                  [("x", np.float32, dims[0]), ("i", np.int64, dims[1]),
                   ("u", np.float32, dims[1])], [("y", np.float32, dims[0])], sets, opset)
    sets = []
    for n, k in ((3, 5), (2, 1)):
        x = rng.standard_normal((n, 3, 4)).astype(np.float32)
        idx = rng.integers(-n, n, size=(k, 1)).astype(np.int64)
        upd = rng.standard_normal((k, 3, 4)).astype(np.float32)
        y = x.copy()
        for j in range(k):
            y[idx[j, 0]] *= upd[j]
        sets.append(([x, idx, upd], [y]))
    save_case("test_rx_scatternd_mul_symbolic",
              [node("ScatterND", ["x", "i", "u"], ["y"], reduction="mul")], [],
              [("x", np.float32, ["n", 3, 4]), ("i", np.int64, ["k", 1]),
               ("u", np.float32, ["k", 3, 4])], [("y", np.float32, ["n", 3, 4])], sets, 16)
    sets = []
    for b, i in ((2, 3), (1, 1)):
        a = rng.standard_normal((b, i, 4)).astype(np.float32)
        c = rng.standard_normal((b, 4, 5)).astype(np.float32)
        sets.append(([a, c], [np.einsum("bij,bjk->bik", a, c), np.einsum("...ij->...j", a)]))
    save_case("test_rx_einsum_symbolic",
              [node("Einsum", ["a", "c"], ["y"], equation="bij, bjk -> bik"),
               node("Einsum", ["a"], ["s"], equation="...ij->...j")], [],
              [("a", np.float32, ["b", "i", 4]), ("c", np.float32, ["b", 4, 5])],
              [("y", np.float32, ["b", "i", 5]), ("s", np.float32, ["b", 4])], sets, 12)
    sets = []
    for t in (5, 2):
        x = rng.standard_normal((3, t, 2)).astype(np.float32)
        lens = rng.integers(1, t + 1, size=3).astype(np.int64)
        y = x.copy()
        for b in range(3):
            y[b, :lens[b]] = x[b, :lens[b]][::-1]
        sets.append(([x, lens], [y]))
    save_case("test_rx_reverse_sequence_symbolic",
              [node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=0, time_axis=1)], [],
              [("x", np.float32, [3, "t", 2]), ("lens", np.int64, [3])],
              [("y", np.float32, [3, "t", 2])], sets, 10)
    sets = []
    for n in (2, 1):  # one position per 2x2 window of the [n, 2, 4, 4] default output
        x = rng.standard_normal((n, 2, 2, 2)).astype(np.float32)
        r, c = rng.integers(0, 2, size=(2, n, 2, 2, 2))
        pos = np.zeros((n, 2, 2, 2), np.int64)
        y = np.zeros((n, 2, 4, 4), np.float32)
        for j in np.ndindex(n, 2, 2, 2):
            h, w = 2 * j[2] + r[j], 2 * j[3] + c[j]
            pos[j] = ((j[0] * 2 + j[1]) * 4 + h) * 4 + w
            y[j[0], j[1], h, w] = x[j]
        sets.append(([x, pos], [y]))
    save_case("test_rx_maxunpool_symbolic",
              [node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], [],
              [("x", np.float32, ["n", 2, 2, 2]), ("i", np.int64, ["n", 2, 2, 2])],
              [("y", np.float32, ["n", 2, 4, 4])], sets, 11)
    # GridSample, bilinear with border padding, over symbolic N, H, W and output dims
    sets = []
    for n, h, w, ho, wo in ((2, 3, 4, 2, 5), (1, 5, 2, 3, 1)):
        x = rng.standard_normal((n, 2, h, w)).astype(np.float32)
        grid = rng.uniform(-1.3, 1.3, size=(n, ho, wo, 2)).astype(np.float32)
        px = np.clip(((grid[..., 0] + 1) * w - 1) / 2, 0, w - 1)
        py = np.clip(((grid[..., 1] + 1) * h - 1) / 2, 0, h - 1)
        x0, y0 = np.floor(px).astype(int), np.floor(py).astype(int)
        fx, fy = px - x0, py - y0
        y = np.zeros((n, 2, ho, wo), np.float64)
        for dy, wy in ((0, 1 - fy), (1, fy)):
            for dx, wx in ((0, 1 - fx), (1, fx)):
                yi, xi = np.minimum(y0 + dy, h - 1), np.minimum(x0 + dx, w - 1)
                for b in range(n):
                    y[b] += (wy * wx)[b] * x[b][:, yi[b], xi[b]]
        sets.append(([x, grid], [y.astype(np.float32)]))
    save_case("test_rx_gridsample_border_symbolic",
              [node("GridSample", ["x", "grid"], ["y"], padding_mode="border")], [],
              [("x", np.float32, ["n", 2, "h", "w"]), ("grid", np.float32, ["n", "p", "q", 2])],
              [("y", np.float32, ["n", 2, "p", "q"])], sets, 16)
    # Det of [b, 5, 5] matrices (pivoting: a zero on the diagonal) over a symbolic batch
    sets = []
    for b in (3, 1):
        x = rng.standard_normal((b, 5, 5)).astype(np.float32)
        x[:, 0, 0] = 0
        sets.append(([x], [np.linalg.det(x.astype(np.float64)).astype(np.float32)]))
    save_case("test_rx_det_symbolic", [node("Det", ["x"], ["y"])], [],
              [("x", np.float32, ["b", 5, 5])], [("y", np.float32, ["b"])], sets, 11)
    # MaxPool's Indices (3x3 windows, stride 2, pads 1) over symbolic H and W, both orders
    for order in (0, 1):
        sets = []
        for h, w in ((5, 6), (3, 4)):
            x = rng.standard_normal((1, 2, h, w)).astype(np.float32)
            oh, ow = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1
            yv, yi = np.zeros((1, 2, oh, ow), np.float32), np.zeros((1, 2, oh, ow), np.int64)
            for c, i, j in np.ndindex(2, oh, ow):
                best = None
                for a, b in np.ndindex(3, 3):
                    r, q = 2 * i - 1 + a, 2 * j - 1 + b
                    if 0 <= r < h and 0 <= q < w and (best is None or x[0, c, r, q] > best[0]):
                        best = (x[0, c, r, q], (c * w + q) * h + r if order else (c * h + r) * w + q)
                yv[0, c, i, j], yi[0, c, i, j] = best
            sets.append(([x], [yv, yi]))
        save_case("test_rx_maxpool_indices_order%d_symbolic" % order,
                  [node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2],
                        pads=[1, 1, 1, 1], storage_order=order)], [],
                  [("x", np.float32, [1, 2, "h", "w"])],
                  [("y", np.float32, [1, 2, "p", "q"]), ("i", np.int64, [1, 2, "p", "q"])], sets, 12)
    sc, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    mean, var = rng.standard_normal(3).astype(np.float32), rng.random(3).astype(np.float32) + 0.5
    sets = []
    for n, h in ((2, 5), (1, 3)):
        x = rng.standard_normal((n, 3, h)).astype(np.float32)
        mu, v = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
        y = (x - mu[:, None]) / np.sqrt(v[:, None] + 1e-5) * sc[:, None] + bias[:, None]
        sets.append(([x], [y.astype(np.float32), (mean * 0.8 + mu * 0.2).astype(np.float32),
                           (var * 0.8 + v * 0.2).astype(np.float32)]))
    save_case("test_rx_batchnorm_training_symbolic",
              [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                    momentum=0.8, training_mode=1)],
              [("s", sc), ("b", bias), ("m", mean), ("v", var)], [("x", np.float32, ["n", 3, "h"])],
              [("y", np.float32, ["n", 3, "h"]), ("rm", np.float32, [3]), ("rv", np.float32, [3])],
              sets, 15)


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
