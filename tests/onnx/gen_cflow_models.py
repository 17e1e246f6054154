"""Writes the small models of tests/lit/onnx/control_flow.test into tests/lit/onnx/Inputs (committed
there; run with a python3 that has numpy and onnx: python3 tests/onnx/gen_cflow_models.py; it
lives outside tests/lit, whose Python files lit runs with Debian's python3, which has no numpy):
  lstm_seq.onnx      LSTM over a symbolic sequence length `seq` and batch `batch`, bidirectional
  lstm_relu.onnx     the same with activations Relu, Tanh, Tanh (refused by name)
  loop_count.onnx    Loop with a trip count given at run time, a carried sum and a scan output
  if_const.onnx      If on a shape check known at import (the rank of x is 1)
  if_data.onnx       If on a condition computed from data (any(x > 0)): exp(x) or -x
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lit", "onnx", "Inputs")
rng = np.random.default_rng(5)


def lstm(name, acts):
    H, I = 3, 2
    w = numpy_helper.from_array(rng.standard_normal((2, 4 * H, I)).astype(np.float32), "W")
    r = numpy_helper.from_array(rng.standard_normal((2, 4 * H, H)).astype(np.float32), "R")
    attrs = {"hidden_size": H, "direction": "bidirectional"}
    if acts:
        attrs["activations"] = acts
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Y_h"], **attrs)
    g = helper.make_graph(
        [node], "lstm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["seq", "batch", I])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["seq", 2, "batch", H]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [2, "batch", H])], [w, r])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]),
         os.path.join(HERE, name))


def loop():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, ["n"])])
    node = helper.make_node("Loop", ["M", "", "s0"], ["s", "scans"], body=body)
    g = helper.make_graph(
        [node], "loop",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("s0", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("scans", TensorProto.FLOAT, ["k", "n"])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
         os.path.join(HERE, "loop_count.onnx"))


def branch(name, op):
    return helper.make_graph([helper.make_node(op, ["x"], [name + "_o"])], name, [],
                             [helper.make_tensor_value_info(name + "_o", TensorProto.FLOAT,
                                                            ["n"])])


def if_model(name, cond_nodes):
    g = helper.make_graph(
        cond_nodes + [helper.make_node("If", ["c"], ["y"], then_branch=branch("t", "Exp"),
                                       else_branch=branch("e", "Neg"))],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
         os.path.join(HERE, name))


lstm("lstm_seq.onnx", None)
lstm("lstm_relu.onnx", ["Relu", "Tanh", "Tanh"] * 2)
loop()
one = helper.make_tensor("one", TensorProto.INT64, [], [1])
if_model("if_const.onnx", [helper.make_node("Shape", ["x"], ["s"]),
                           helper.make_node("Size", ["s"], ["r"]),
                           helper.make_node("Constant", [], ["one"], value=one),
                           helper.make_node("Equal", ["r", "one"], ["c"])])
zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
if_model("if_data.onnx", [helper.make_node("Constant", [], ["zero"], value=zero),
                          helper.make_node("Greater", ["x", "zero"], ["g"]),
                          helper.make_node("Cast", ["g"], ["gf"], to=TensorProto.FLOAT),
                          helper.make_node("ReduceMax", ["gf"], ["m"], keepdims=0),
                          helper.make_node("Cast", ["m"], ["c"], to=TensorProto.BOOL)])
