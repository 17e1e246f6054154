#!/usr/bin/env python3
"""Writes the small ONNX models of tests/lit/onnx/export_checks.test (issue 29, items 9 and 11):
shapes as today's exporters write them, and broken sizes the importer must refuse.

Run from the repository root (packages: tests/onnx/torch_exports/requirements.txt):
    python3 tests/onnx/gen_export_checks.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lit", "onnx", "Inputs")


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(HERE, name + ".onnx"))


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def i64(name, vals):
    return numpy_helper.from_array(np.array(vals, np.int64), name)


def main():
    N = helper.make_node
    # item 9: Split sizes over the axis extent (6): constant, then as data
    save("split_over", [N("Split", ["x", "sp"], ["a", "b"], axis=1, name="split0")],
         [vi("x", T.FLOAT, [4, 6])], [vi("a", T.FLOAT, None), vi("b", T.FLOAT, None)],
         [i64("sp", [4, 4])])
    save("split_data", [N("Split", ["x", "sp"], ["a", "b"], axis=1, name="split0")],
         [vi("x", T.FLOAT, [4, 6]), vi("sp", T.INT64, [2])],
         [vi("a", T.FLOAT, None), vi("b", T.FLOAT, None)])
    # item 9: negative dims
    save("neg_input", [N("Relu", ["x"], ["y"], name="relu0")], [vi("x", T.FLOAT, [2, -3])],
         [vi("y", T.FLOAT, None)])
    w = onnx.TensorProto()
    w.name, w.data_type = "w", T.FLOAT
    w.dims.extend([-1, 2])
    save("neg_init", [N("Add", ["x", "w"], ["y"], name="add0")], [vi("x", T.FLOAT, [2])],
         [vi("y", T.FLOAT, None)], [w])
    save("neg_reshape", [N("Reshape", ["x", "s"], ["y"], name="reshape0")],
         [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, None)], [i64("s", [-2, 3])])
    save("neg_cos", [N("ConstantOfShape", ["s"], ["y"], name="cos0",
                       value=numpy_helper.from_array(np.array([1.0], np.float32)))],
         [], [vi("y", T.FLOAT, None)], [i64("s", [3, -2])])
    save("neg_expand", [N("Expand", ["x", "s"], ["y"], name="expand0")],
         [vi("x", T.FLOAT, [1, 3])], [vi("y", T.FLOAT, None)], [i64("s", [-4, 3])])
    # item 11 b: Expand of a value the importer holds as shape values (a small integer
    # ConstantOfShape, as torch exports ones(...).expand(...)) to a shape computed at run time
    save("expand_rt", [
        N("ConstantOfShape", ["one"], ["c"], name="ones0",
          value=numpy_helper.from_array(np.array([1], np.int64))),
        N("Cast", ["n"], ["nl"], to=T.INT64, name="cast0"),
        N("ReduceMax", ["nl"], ["m"], keepdims=1, name="max0"),
        N("Concat", ["m", "three"], ["shp"], axis=0, name="cat0"),
        N("Expand", ["c", "shp"], ["y"], name="expand0")],
        [vi("n", T.INT32, [1])], [vi("y", T.INT64, None)],
        [i64("one", [1]), i64("three", [3])])
    # item 11 c: Reshape with -1 where the divisibility holds only at run time
    save("reshape_rt", [N("Reshape", ["x", "s"], ["y"], name="reshape0")],
         [vi("x", T.FLOAT, ["n"])], [vi("y", T.FLOAT, None)], [i64("s", [-1, 2])])
    # item 11 d: Concat of dims equal only at run time (a UNet's upsampled odd size)
    save("concat_rt", [N("Concat", ["a", "b"], ["y"], axis=1, name="concat0")],
         [vi("a", T.FLOAT, ["n", 2]), vi("b", T.FLOAT, ["m", 3])], [vi("y", T.FLOAT, None)])
    # item 11 e: NonMaxSuppression with max_output_boxes_per_class = INT64_MAX (torchvision)
    save("nms_max", [N("NonMaxSuppression", ["boxes", "scores", "mo", "iou"], ["sel"],
                       name="nms0")],
         [vi("boxes", T.FLOAT, [1, "n", 4]), vi("scores", T.FLOAT, [1, 1, "n"])],
         [vi("sel", T.INT64, None)],
         [i64("mo", [2**63 - 1]), numpy_helper.from_array(np.array([0.5], np.float32), "iou")])
    # item 11 f: graph inputs and outputs with dots in their names (Hugging Face's past)
    save("dotted", [N("Add", ["past_key_values.0.key", "x"], ["present.0.key"], name="add0")],
         [vi("past_key_values.0.key", T.FLOAT, [2]), vi("x", T.FLOAT, [2])],
         [vi("present.0.key", T.FLOAT, [2])])
    # item 11 a: Hugging Face's attention mask (BERT, dynamo export): scores + Where(mask, 0,
    # finfo(f32).min), then Softmax; a padded or fully masked row must not give NaN
    save("softmax_finfo", [
        N("Cast", ["mask"], ["mb"], to=T.BOOL, name="cast0"),
        N("Where", ["mb", "zero", "fmin"], ["w"], name="where0"),
        N("Add", ["x", "w"], ["s"], name="add0"),
        N("Softmax", ["s"], ["y"], axis=-1, name="softmax0")],
        [vi("x", T.FLOAT, ["b", "s"]), vi("mask", T.INT64, ["b", "s"])],
        [vi("y", T.FLOAT, ["b", "s"])],
        [numpy_helper.from_array(np.array(0, np.float32), "zero"),
         numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "fmin")])


if __name__ == "__main__":
    main()
