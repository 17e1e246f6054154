"""Writes a one-node .onnx model whose op takes a value from data (protobuf written by hand, no
onnx package needed): data_index_onnx.py OUT KIND, KIND one of
  gather  Gather(data float[10, 4], idx int64[m], axis 0) -> y float[m, 4]
  gatherc Gather(data float[10, 4], idx int64[2] = [3, 12] (a constant), axis 0) -> y
  topk    TopK(x float[2, 5], k int64[1], axis 1) -> values float[2, k], indices int64[2, k]
  topkc   TopK(x float[2, 5], k int64[1] = [7] (a constant), axis 1)
  range   Range(start, limit, delta: int64 scalars) -> y int64[n]
  rangec  Range(start 0, limit 5, delta 0: constants) -> y int64[n]
at opset 13."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Inputs"))
from onnx_wire import FLOAT, INT64, ld, tensor_i64, value_info, model, vi  # noqa: E402


def attr_int(name, v):  # AttributeProto: name, i, type INT
    return ld(5, ld(1, name.encode()) + vi(3, v) + vi(20, 2))


def node(op, inputs, outputs, attrs=b""):
    n = b"".join(ld(1, i.encode()) for i in inputs) + b"".join(ld(2, o.encode()) for o in outputs)
    return ld(1, n + ld(3, b"n0") + ld(4, op.encode()) + attrs)


out, kind = sys.argv[1], sys.argv[2]
inits, ins = b"", []
if kind in ("gather", "gatherc"):
    g = node("Gather", ["data", "idx"], ["y"], attr_int("axis", 0))
    ins = [value_info("data", FLOAT, [10, 4])]
    if kind == "gather":
        ins.append(value_info("idx", INT64, ["m"]))
    else:
        inits = ld(5, tensor_i64("idx", [2], [3, 12]))
    outs = [value_info("y", FLOAT, ["m" if kind == "gather" else 2, 4])]
elif kind in ("topk", "topkc"):
    g = node("TopK", ["x", "k"], ["values", "indices"], attr_int("axis", 1))
    ins = [value_info("x", FLOAT, [2, 5])]
    if kind == "topk":
        ins.append(value_info("k", INT64, [1]))
    else:
        inits = ld(5, tensor_i64("k", [1], [7]))
    outs = [value_info("values", FLOAT, [2, "k"]), value_info("indices", INT64, [2, "k"])]
else:
    g = node("Range", ["start", "limit", "delta"], ["y"])
    if kind == "range":
        ins = [value_info(n, INT64, []) for n in ("start", "limit", "delta")]
    else:
        inits = b"".join(ld(5, tensor_i64(n, [], [v])) for n, v in (("start", 0), ("limit", 5),
                                                                    ("delta", 0)))
    outs = [value_info("y", INT64, ["n"])]
graph = g + ld(2, b"g") + inits + b"".join(ld(11, i) for i in ins) + b"".join(ld(12, o) for o in outs)
data = model(graph, 13)
with open(out, "wb") as f:
    f.write(data)
