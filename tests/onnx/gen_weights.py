#!/usr/bin/env python3
"""Writes the models of the ONNX weight tests (tests/unit/test_onnx_weights.c and
tests/lit/run/onnx_weights.test) into tests/onnx/weights/. Every value follows a formula the C
test repeats, so the test needs no Python; the generated files are committed.

Run with Debian's python3-onnx and python3-numpy (from the repository root):
    env -i PATH=/usr/bin:/bin /usr/bin/python3 tests/onnx/gen_weights.py

Models:
  ext.onnx + ext.data  y = Gather(MatMul(x, W) + Cast(H, FLOAT), idx, axis=1), x: f32[batch, 8],
                       W: f32[8, 6], H: f16[6], idx: i64[20]; every tensor in the external file
                       ext.data (onnx.save_model with save_as_external_data, all_tensors_to_one_file and
                       size_threshold=0).
                       ext_x.npy (batch 3) and ext_y.npy its output, computed with NumPy.
  escape.onnx          ext.onnx with W's location '../weights/ext.data' (leaves the directory)
  abs.onnx             ext.onnx with W's location '/dev/null' (absolute)
  typed.onnx           inline weights of every supported type, in raw_data and in the typed
                       fields, small integer tensors that fold, and Constant tensors
  double.onnx          a DOUBLE initializer [1.0, 2.0] (read as f64)
  complex.onnx         a COMPLEX64 initializer (no relaxc dtype)
  typed_wide.onnx      DOUBLE, UINT16, UINT32 and UINT64 initializers in their typed fields
                       (double_data, int32_data, uint64_data)"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights")
OPSET = 17


def ext_values():
    w = np.array([((k % 11) - 5) * 0.25 for k in range(48)], np.float32).reshape(8, 6)
    h = np.array([j * 0.5 - 1 for j in range(6)], np.float16)
    idx = np.array([(k * 7) % 6 for k in range(20)], np.int64)
    return w, h, idx


def ext_graph():
    w, h, idx = ext_values()
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"]),
        helper.make_node("Cast", ["H"], ["hc"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["mm", "hc"], ["s"]),
        helper.make_node("Gather", ["s", "idx"], ["y"], axis=1),
    ]
    g = helper.make_graph(
        nodes, "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 20])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(h, "H"),
         numpy_helper.from_array(idx, "idx")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def set_location(path, out, tensor, location):
    m = onnx.load(path, load_external_data=False)
    for t in m.graph.initializer:
        if t.name == tensor:
            for e in t.external_data:
                if e.key == "location":
                    e.value = location
    onnx.save_model(m, out)


def typed_model():
    inits = [
        numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1,
                                "layer.0.w"),                                   # raw_data
        helper.make_tensor("f32_typed", TensorProto.FLOAT, [4],
                           [k + 0.25 for k in range(4)]),                       # float_data
        helper.make_tensor("f16_typed", TensorProto.FLOAT16, [3],
                           np.array([1.5, -2, 0.25], np.float16)),              # int32_data bits
        helper.make_tensor("bf16_typed", TensorProto.BFLOAT16, [3], [1.5, -2, 0.25]),
        helper.make_tensor("i8_typed", TensorProto.INT8, [5], [-3, -2, -1, 0, 1]),
        numpy_helper.from_array(np.array([0, 100, 200, 255], np.uint8), "u8_raw"),
        helper.make_tensor("bool_typed", TensorProto.BOOL, [2, 2], [1, 0, 0, 1]),
        numpy_helper.from_array(np.arange(18, dtype=np.int32) - 9, "i32_raw"),  # > 16: weight
        helper.make_tensor("i64_small", TensorProto.INT64, [2], [4, -1]),       # folds
        numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.int64), "i64_mat"),  # rank 2
        helper.make_tensor("i64_17", TensorProto.INT64, [17],
                           [k * 1000000007 for k in range(17)]),                # int64_data
        helper.make_tensor("i32_small", TensorProto.INT32, [3], [1, 2, 3]),     # folds
    ]
    nodes = [
        helper.make_node("Constant", [], ["cs"], value=helper.make_tensor(
            "cs", TensorProto.FLOAT, [], [2.5])),                               # folds
        helper.make_node("Constant", [], ["cf"], value=helper.make_tensor(
            "cf", TensorProto.FLOAT, [3], [0.5, 1.5, 2.5])),
        helper.make_node("Constant", [], ["ci"], value=numpy_helper.from_array(
            np.arange(20, dtype=np.int64) * -3, "ci")),
        helper.make_node("Constant", [], ["ch"], value=helper.make_tensor(
            "ch", TensorProto.FLOAT16, [], np.array([3.0], np.float16))),       # f16: a weight
        helper.make_node("Identity", ["layer.0.w"], ["y"]),
    ]
    g = helper.make_graph(nodes, "typed", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def double_model():
    g = helper.make_graph(
        [helper.make_node("Identity", ["d"], ["y"])], "double", [],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])],
        [numpy_helper.from_array(np.array([1.0, 2.0]), "d")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def complex_model():
    g = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["y"])], "complex", [],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])],
        [numpy_helper.from_array(np.array([1 + 2j, 3 - 4j], dtype=np.complex64), "c")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def typed_wide_model():
    inits = [
        helper.make_tensor("d_typed", TensorProto.DOUBLE, [3], [0.1, -2.5, 1e300]),
        helper.make_tensor("u16_typed", TensorProto.UINT16, [3], [0, 40000, 65535]),
        helper.make_tensor("u32_typed", TensorProto.UINT32, [2], [4000000000, 7]),
        helper.make_tensor("u64_typed", TensorProto.UINT64, [2],
                           [18446744073709551615, 9223372036854775808]),
    ]
    nodes = [helper.make_node("Identity", [t.name], [t.name + "_y"]) for t in inits]
    outs = [helper.make_tensor_value_info(t.name + "_y", t.data_type, list(t.dims)) for t in inits]
    g = helper.make_graph(nodes, "typed_wide", [], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])


def main():
    os.makedirs(HERE, exist_ok=True)
    for f in ("ext.onnx", "ext.data"):
        if os.path.exists(os.path.join(HERE, f)):
            os.remove(os.path.join(HERE, f))
    m = ext_graph()
    onnx.checker.check_model(m)
    ext = os.path.join(HERE, "ext.onnx")
    onnx.save_model(m, ext, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.data", size_threshold=0)
    set_location(ext, os.path.join(HERE, "escape.onnx"), "W", "../weights/ext.data")
    set_location(ext, os.path.join(HERE, "abs.onnx"), "W", "/dev/null")

    w, h, idx = ext_values()
    x = (np.arange(24, dtype=np.float32).reshape(3, 8) % 5 - 2) * 0.375
    y = ((x @ w) + h.astype(np.float32))[:, idx]
    np.save(os.path.join(HERE, "ext_x.npy"), x)
    np.save(os.path.join(HERE, "ext_y.npy"), np.ascontiguousarray(y, np.float32))

    onnx.save_model(typed_model(), os.path.join(HERE, "typed.onnx"))
    onnx.save_model(double_model(), os.path.join(HERE, "double.onnx"))
    onnx.save_model(complex_model(), os.path.join(HERE, "complex.onnx"))
    onnx.save_model(typed_wide_model(), os.path.join(HERE, "typed_wide.onnx"))


if __name__ == "__main__":
    main()
