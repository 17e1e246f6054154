"""Writes the models of tests/unit/test_onnx_loops.c into tests/onnx/loops (committed there; run
with a python3 that has the packages of tests/onnx/loops/requirements.txt:
python3 tests/onnx/gen_loop_models.py). CI does not run it. The test computes the expected
values in closed form; the models are as small as a Loop or Scan can be:
  loop_cond.onnx   Loop with a trip count M and a condition computed from data (k + 1 < L, the
                   first from 0 < L): runs min(M, L) steps (none when L <= 0); carries
                   s += x, scan output s after each step
  loop_while.onnx  the same without a trip count: the condition alone ends it (L steps)
  loop_nested.onnx a Loop of M1 steps whose body is a Loop of M2 steps (s += x, its scan output
                   unused): M1 * M2 steps of s += x
  scan_dirs.onnx   Scan over x: f32[t, n] read forward and reversed: a state s += x[k], scan
                   outputs: s after each step (forward), the reversed row written reversed (x
                   again) and written forward (x upside down)
(loop_count.onnx, a Loop of M steps with no condition, is tests/lit/onnx/Inputs/loop_count.onnx
of gen_cflow_models.py.)
"""
import os

from onnx import TensorProto, checker, helper, save

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loops")
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def loop(name, with_m):
    one = helper.make_tensor("one", I64, [], [1])
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]),
         helper.make_node("Add", ["i", "one"], ["i1"]),
         helper.make_node("Less", ["i1", "L"], ["cond_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("s_in", F, ["n"])],
        [vi("cond_out", B, []), vi("s_out", F, ["n"]), vi("scan", F, ["n"])], [one])
    zero = helper.make_tensor("zero", I64, [], [0])
    nodes = [helper.make_node("Less", ["zero", "L"], ["c0"]),
             helper.make_node("Loop", ["M" if with_m else "", "c0", "s0"], ["s", "scans"],
                              body=body)]
    inputs = ([vi("M", I64, [])] if with_m else []) + [
        vi("L", I64, []), vi("s0", F, ["n"]), vi("x", F, ["n"])]
    g = helper.make_graph(nodes, name, inputs, [vi("s", F, ["n"]), vi("scans", F, ["k", "n"])],
                          [zero])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    checker.check_model(m)
    save(m, os.path.join(HERE, name + ".onnx"))


def nested():
    inner = helper.make_graph(
        [helper.make_node("Add", ["t_in", "x"], ["t_out"]),
         helper.make_node("Identity", ["ci"], ["co"]),
         helper.make_node("Identity", ["t_out"], ["sc"])],
        "inner", [vi("j", I64, []), vi("ci", B, []), vi("t_in", F, ["n"])],
        [vi("co", B, []), vi("t_out", F, ["n"]), vi("sc", F, ["n"])])
    outer = helper.make_graph(
        [helper.make_node("Loop", ["M2", "", "s_in"], ["s_out", "scans"], body=inner),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "outer", [vi("i", I64, []), vi("c_in", B, []), vi("s_in", F, ["n"])],
        [vi("c_out", B, []), vi("s_out", F, ["n"])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M1", "", "s0"], ["s"], body=outer)], "loop_nested",
        [vi("M1", I64, []), vi("M2", I64, []), vi("s0", F, ["n"]), vi("x", F, ["n"])],
        [vi("s", F, ["n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    checker.check_model(m)
    save(m, os.path.join(HERE, "loop_nested.onnx"))


def scan():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xf"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y1"]),
         helper.make_node("Identity", ["xr"], ["y2"]),
         helper.make_node("Identity", ["xr"], ["y3"])],
        "body", [vi("s_in", F, ["n"]), vi("xf", F, ["n"]), vi("xr", F, ["n"])],
        [vi("s_out", F, ["n"]), vi("y1", F, ["n"]), vi("y2", F, ["n"]), vi("y3", F, ["n"])])
    node = helper.make_node("Scan", ["s0", "x", "x"], ["s", "y1", "y2", "y3"], body=body,
                            num_scan_inputs=2, scan_input_directions=[0, 1],
                            scan_output_directions=[0, 1, 0])
    g = helper.make_graph([node], "scan_dirs", [vi("s0", F, ["n"]), vi("x", F, ["t", "n"])],
                          [vi("s", F, ["n"]), vi("y1", F, ["t", "n"]), vi("y2", F, ["t", "n"]),
                           vi("y3", F, ["t", "n"])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    checker.check_model(m)
    save(m, os.path.join(HERE, "scan_dirs.onnx"))


os.makedirs(HERE, exist_ok=True)
loop("loop_cond", True)
loop("loop_while", False)
nested()
scan()
