"""tests/python/test_relaxc.py: the relaxc Python package's tests (plain unittest), run by
tests/python/run_test.py in the virtual environment where it installed the package's wheel.

Environment (run_test.py sets it): RX_PY_ROOT (the source tree: examples/mlp.rx),
RX_PY_RELAXC (the command line of the build's relaxc as JSON: the reference for generate),
RX_PY_LLM (the tiny Llama of tests/llm/models/kjv-llama compiled for Vulkan), and the Vulkan
environment of the runtime's tests (lavapipe).

References: NumPy (float64, or float32 with the program's float16 roundings) and `relaxc
generate`; tolerances are stated at each check.
"""
import json
import os
import subprocess
import sys
import unittest

import numpy as np

import relaxc

ROOT = os.environ["RX_PY_ROOT"]
RELAXC = json.loads(os.environ["RX_PY_RELAXC"])
LLM = os.environ["RX_PY_LLM"]

XYX = """graph_fn main(x: f32[n], y: f32[n]) -> f32[n] {
  a = multiply(x, y)
  b = add(a, x)
  return b
}
"""


class HostOnlyDLPack:
    """A tensor known only through the DLPack protocol (no __array__, no buffer protocol)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class DeviceDLPack:
    """A DLPack tensor on a CUDA device (kDLCUDA = 2), which NumPy cannot read."""

    def __dlpack__(self, **kw):
        raise BufferError("a CUDA tensor")

    def __dlpack_device__(self):
        return (2, 0)


class Compile(unittest.TestCase):
    def test_version(self):
        out = subprocess.run(RELAXC + ["--version"], capture_output=True, text=True, check=True)
        self.assertIn(relaxc.__version__, out.stdout)

    def test_text_bytes_and_path(self):
        art = relaxc.compile(XYX, target="vulkan")
        self.assertIsInstance(art, bytes)
        path = os.path.abspath("xyx.rxm")
        self.assertEqual(relaxc.compile(XYX, output=path), path)
        x = np.arange(7, dtype=np.float32)
        want = x * x + x
        for a in (art, path):
            with relaxc.load(a) as m:
                self.assertEqual(m.functions, ["main"])
                np.testing.assert_array_equal(m["main"](x, x), want)

    def test_bad_text(self):
        with self.assertRaises(relaxc.InvalidError) as cm:
            relaxc.compile("graph_fn main(x: f32[n]) -> f32[n] {\n  return y\n}\n")
        self.assertIn("<text>:2:10: error: undefined variable 'y'", str(cm.exception))
        self.assertIsInstance(cm.exception, relaxc.Error)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(cm.exception.code, 1)

    def test_missing_file_and_bad_target(self):
        with self.assertRaises(relaxc.NotFoundError):
            relaxc.compile("no/such/model.rx")
        with self.assertRaises(relaxc.Error) as cm:
            relaxc.compile(XYX, target="tpu")
        self.assertIn("tpu", str(cm.exception))


class CompileModels(unittest.TestCase):
    """relaxc.compile of models (rx_module_import, the command line's importer)."""

    def test_hf_folder_equals_cli(self):
        # the tiny Llama's folder compiles to the command line's artifact (RX_PY_LLM), byte for
        # byte, to a file and to bytes
        import tempfile
        model = os.path.join(ROOT, "tests", "llm", "models", "kjv-llama")
        with open(LLM, "rb") as f:
            want = f.read()
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "kjv.rxm")
            self.assertEqual(relaxc.compile(model, output=out), out)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), want)
        self.assertEqual(relaxc.compile(model), want)
        # the options of the command line change it (f32 weights: a larger artifact)
        self.assertGreater(len(relaxc.compile(model, dtype="f32", max_seq_len=64)), len(want))

    def test_onnx_and_gguf(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            onnx = os.path.join(tmp, "neg.onnx")  # Neg(x: float[2]), protobuf written by hand
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "lit", "onnx", "Inputs",
                                                         "one_node_onnx.py"), onnx, "Neg", "17"],
                           check=True)
            with relaxc.load(relaxc.compile(onnx)) as m:
                np.testing.assert_array_equal(m.main(np.array([1.5, -2], np.float32)),
                                              [-1.5, 2])
        gguf = os.path.join(ROOT, "tests", "gguf", "models", "kjv-llama-f16.gguf")
        with relaxc.load(relaxc.compile(gguf)) as m:
            self.assertIn("decode", m.functions)

    def test_model_errors(self):
        with self.assertRaises(relaxc.InvalidError) as cm:
            relaxc.compile(os.path.join(ROOT, "tests", "llm"))  # a folder without config.json
        self.assertIn("config.json", str(cm.exception))
        with self.assertRaises(relaxc.UnsupportedError) as cm:
            relaxc.compile(os.path.join(ROOT, "tests", "gguf", "models", "bad-arch.gguf"))
        self.assertIn("gptneox", str(cm.exception))
        with self.assertRaises(relaxc.NotFoundError):
            relaxc.compile(os.path.join(ROOT, "no", "such.onnx"))
        with self.assertRaises(relaxc.InvalidError) as cm:
            relaxc.compile(os.path.join(ROOT, "examples", "mlp.rx"), dtype="f16")
        self.assertIn("for a model", str(cm.exception))


class Stubs(unittest.TestCase):
    def test_stubs_name_the_api(self):
        # every public name the installed modules define is in their .pyi, and the reverse
        import ast
        here = os.path.dirname(relaxc.__file__)
        for mod, stub in ((relaxc, "__init__.pyi"), (relaxc.llm, "llm.pyi")):
            with open(os.path.join(here, stub)) as f:
                tree = ast.parse(f.read())
            names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            names |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign)
                      for t in [n.target]}
            public = set(getattr(mod, "__all__", [])) - {"llm"}
            self.assertEqual(public - names, set(), stub)
            self.assertEqual({n for n in names if not n.startswith("_")} - public, set(), stub)
        self.assertTrue(os.path.exists(os.path.join(here, "py.typed")))


class Run(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.mod = relaxc.load(relaxc.compile(XYX))

    @classmethod
    def tearDownClass(cls):
        cls.mod.close()

    def test_ragged(self):
        # f32 x*y + x: one rounding of the product and one of the sum against float64: within
        # 2 ulp (rtol 2.5e-7 of |x*y| + |x| < 2^-21 relative of the largest term)
        rng = np.random.default_rng(1)
        for n in (1, 7, 33, 100, 1000):
            x = rng.standard_normal(n).astype(np.float32)
            y = rng.standard_normal(n).astype(np.float32)
            got = self.mod.main(x, y)
            self.assertEqual(got.shape, (n,))
            self.assertEqual(got.dtype, np.float32)
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            bound = 2.5e-7 * (np.abs(x64 * y64) + np.abs(x64))
            self.assertTrue(np.all(np.abs(got - (x64 * y64 + x64)) <= bound), f"n={n}")

    def test_dlpack(self):
        x = np.linspace(-3, 3, 33, dtype=np.float32)
        y = np.linspace(1, 2, 33, dtype=np.float32)
        got = self.mod.main(HostOnlyDLPack(x), HostOnlyDLPack(y))
        np.testing.assert_allclose(got, x * y + x, rtol=1e-6)
        # a non-contiguous view and a plain list are accepted too (copied contiguous)
        xs = np.arange(66, dtype=np.float32)[::2]
        np.testing.assert_allclose(self.mod.main(xs, list(xs)), xs * xs + xs, rtol=1e-6)
        # the result is a NumPy array, so DLPack consumers read it
        back = np.from_dlpack(got)
        self.assertTrue(np.shares_memory(back, got))
        with self.assertRaises(relaxc.InvalidError) as cm:
            self.mod.main(DeviceDLPack(), y)
        self.assertIn("parameter 'x'", str(cm.exception))
        self.assertIn("host memory", str(cm.exception))

    def test_wrong_arguments(self):
        x = np.zeros(7, np.float32)
        with self.assertRaises(relaxc.InvalidError) as cm:
            self.mod.main(x, np.zeros(6, np.float32))
        self.assertIn("main: parameter 'y': expected f32[n], got f32[6]", str(cm.exception))
        with self.assertRaises(relaxc.InvalidError) as cm:
            self.mod.main(x, np.zeros(7, np.float64))
        self.assertIn("parameter 'y'", str(cm.exception))
        with self.assertRaises(relaxc.InvalidError) as cm:
            self.mod.main(x, np.zeros((7, 1), np.float32))
        self.assertIn("parameter 'y'", str(cm.exception))
        with self.assertRaises(relaxc.InvalidError) as cm:
            self.mod.main(x, np.zeros(7, np.complex64))
        self.assertIn("parameter 'y'", str(cm.exception))
        with self.assertRaises(relaxc.Error):
            self.mod.main(x)
        with self.assertRaises(relaxc.NotFoundError):
            self.mod["nosuch"]
        with self.assertRaises(AttributeError):
            self.mod.nosuch

    def test_bad_artifact_and_device(self):
        with self.assertRaises(relaxc.Error):
            relaxc.load(b"not an artifact")
        with self.assertRaises(relaxc.NotFoundError):
            relaxc.load("no/such/file.rxm")
        with self.assertRaises(relaxc.Error) as cm:
            relaxc.load(relaxc.compile(XYX), device="nosuch:0")
        self.assertIn("nosuch", str(cm.exception))


IDENTITY = """graph_fn main(x: f32[n]) -> f32[n] {
  return x
}
"""


class ZeroCopy(unittest.TestCase):
    """Arguments used in place and results viewed in place (docs/python.md, "Zero-copy") on
    lavapipe, which imports host memory (VK_EXT_external_memory_host)."""

    @classmethod
    def setUpClass(cls):
        art = relaxc.compile(XYX)
        cls.mod = relaxc.load(art)
        cls.copying = relaxc.load(art, zero_copy=False)
        cls.ident = relaxc.load(relaxc.compile(IDENTITY))

    @classmethod
    def tearDownClass(cls):
        for m in (cls.mod, cls.copying, cls.ident):
            m.close()

    def test_in_place_equals_copying(self):
        # aligned arguments are imported in place; the results equal the copying path's bit for
        # bit and float64 within 2 ulp (as test_ragged)
        rng = np.random.default_rng(2)
        for n in (1, 7, 33, 100, 1000):
            x, y = relaxc.empty(n), relaxc.empty(n)
            x[:] = rng.standard_normal(n)
            y[:] = rng.standard_normal(n)
            got = self.mod.main(x, y)
            self.assertEqual(self.mod.last_imports, ["in place", "in place"], f"n={n}")
            self.assertFalse(got.flags.owndata, "a result is a view of its device buffer")
            want = self.copying.main(x, y)
            self.assertEqual(self.copying.last_imports, ["not imported"] * 2)
            self.assertTrue(want.flags.owndata)
            np.testing.assert_array_equal(got, want, f"n={n}")
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            bound = 2.5e-7 * (np.abs(x64 * y64) + np.abs(x64))
            self.assertTrue(np.all(np.abs(got - (x64 * y64 + x64)) <= bound), f"n={n}")

    def test_shares_memory(self):
        # main(x) = x: the result is the argument's own memory, imported and viewed in place
        x = relaxc.empty(100)
        x[:] = np.arange(100)
        z = self.ident.main(x)
        self.assertEqual(self.ident.last_imports, ["in place"])
        self.assertTrue(np.shares_memory(z, x))
        x[3] = -7
        self.assertEqual(z[3], -7)
        # a DLPack-only tensor over the same memory: the same
        z2 = self.ident.main(HostOnlyDLPack(x))
        self.assertEqual(self.ident.last_imports, ["in place"])
        self.assertTrue(np.shares_memory(z2, x))
        # one element off the alignment: a copy, reported, with the same values
        off = x[1:]
        z3 = self.ident.main(off)
        self.assertEqual(len(self.ident.last_imports), 1)
        self.assertTrue(self.ident.last_imports[0].startswith("copied"),
                        self.ident.last_imports)
        self.assertFalse(np.shares_memory(z3, x))
        np.testing.assert_array_equal(z3, off)
        # zero_copy=False: never the caller's memory
        with relaxc.load(relaxc.compile(IDENTITY), zero_copy=False) as m:
            z4 = m.main(x)
            self.assertFalse(np.shares_memory(z4, x))
            np.testing.assert_array_equal(z4, x)
        del z, z2, z3, z4

    def test_results_stay(self):
        # a result's buffer is its own: the next call does not change it, and it outlives the
        # module's close (the view holds the result, which holds the device)
        x, y = relaxc.aligned(np.arange(33, dtype=np.float32)), relaxc.empty(33)
        y[:] = 2
        art = relaxc.compile(XYX)
        m = relaxc.load(art)
        r1 = m.main(x, y)
        keep = r1.copy()
        r2 = m.main(y, x)
        np.testing.assert_array_equal(r1, keep)
        np.testing.assert_array_equal(r2, y * x + y)
        m.close()
        import gc
        gc.collect()
        np.testing.assert_array_equal(r1, x * y + x)
        self.assertEqual(relaxc.aligned(x).ctypes.data, x.ctypes.data)  # already aligned
        with self.assertRaises(relaxc.InvalidError):
            relaxc.empty(4, align=48)


def f16(a):
    return a.astype(np.float16).astype(np.float32)


def f16_weights(rng, shape):
    """Random f16 weights made from random bits (a normal draw of 45 M values takes seconds
    here): random sign and mantissa, exponent 7 or 8, so |w| in [2^-8, 2^-6)."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    return ((bits & 0x87FF) | 0x1C00).view(np.float16)


class Mlp(unittest.TestCase):
    """examples/mlp.rx (f16 SwiGLU MLP of Llama's sizes) on Vulkan against NumPy. Its fact
    n <= 8192 plans a 180 MB intermediate, more than lavapipe's maxStorageBufferRange (128 MiB):
    the test compiles the same text with n <= 64 (what relaxc.compile of the file itself gives
    is checked too)."""

    def test_mlp(self):
        path = os.path.join(ROOT, "examples", "mlp.rx")
        self.assertIsInstance(relaxc.compile(path), bytes)
        with open(path) as f:
            text = f.read()
        self.assertIn("where n <= 8192", text)
        mod = relaxc.load(relaxc.compile(text.replace("where n <= 8192", "where n <= 64")))
        rng = np.random.default_rng(7)
        wg, wu, wd = (f16_weights(rng, s) for s in ((11008, 4096), (11008, 4096), (4096, 11008)))
        wg32, wu32, wd32 = (w.astype(np.float32) for w in (wg, wu, wd))
        for n in (1, 7, 33):
            x = rng.standard_normal((n, 4096), np.float32).astype(np.float16)
            got = mod.mlp(x, wg, wu, wd)
            self.assertEqual((got.shape, got.dtype), ((n, 4096), np.float16))
            # the reference: float32 sums, rounded to float16 where the program stores f16
            # (g, u, h); the kernels sum in their own order with f32 accumulators and round
            # the output to f16, so |got - ref| <= 3e-3 * max|ref| (3 ulp of f16 at the output's
            # scale; lavapipe measured 5e-4)
            g = f16(x.astype(np.float32) @ wg32.T)
            u = f16(x.astype(np.float32) @ wu32.T)
            h = f16(g / (1 + np.exp(-g)) * u)
            ref = h @ wd32.T
            err = np.max(np.abs(got.astype(np.float32) - ref))
            self.assertLessEqual(err, 3e-3 * np.max(np.abs(ref)), f"n={n}: max error {err}")
        mod.close()


def cli_generate(args):
    """`relaxc generate LLM ARGS --print-ids`: (text, ids)."""
    r = subprocess.run(RELAXC + ["generate", LLM, "--print-ids"] + args, capture_output=True,
                       text=True)
    if r.returncode:
        raise AssertionError(f"relaxc generate {args} failed: {r.stderr}")
    text, ids, _ = r.stdout.rsplit("\n", 2)
    return text, [int(i) for i in ids.split(",")]


class Llm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = relaxc.llm.load(LLM)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_greedy_equals_cli(self):
        want_text, want_ids = cli_generate(["--prompt", "In the beginning", "--temperature", "0",
                                            "--max-tokens", "16"])
        g = self.model.generate("In the beginning", max_tokens=16, temperature=0)
        toks = list(g)
        self.assertEqual([t.id for t in toks], want_ids)
        self.assertEqual("".join(toks), want_text)
        self.assertEqual(g.ids, want_ids)
        self.assertEqual(g.stats["new_tokens"], len(want_ids))
        # the same from the prompt's ids
        ids = self.model.encode("In the beginning")
        self.assertEqual([t.id for t in self.model.generate(ids, max_tokens=16, temperature=0)],
                         want_ids)
        self.assertEqual(self.model.decode(want_ids), want_text)

    def test_sampled_equals_cli(self):
        # the sampler's parameters cross ctypes intact: seed, temperature, top_k, top_p
        args = ["--temperature", "0.9", "--seed", "11", "--top-k", "20", "--top-p", "0.9"]
        want_text, want_ids = cli_generate(["--prompt", "And God said", "--max-tokens", "12"] +
                                           args)
        g = self.model.generate("And God said", max_tokens=12, temperature=0.9, seed=11,
                                top_k=20, top_p=0.9)
        self.assertEqual([t.id for t in g], want_ids)
        self.assertEqual(g.ids, want_ids)

    def test_stream_stops_early(self):
        g = self.model.generate("In the beginning", max_tokens=64, temperature=0)
        first = [next(g) for _ in range(3)]
        # streamed: the tokens came while the library was still decoding (64 tokens take
        # seconds on lavapipe), not after rx_llm_generate returned
        self.assertTrue(g._thread.is_alive())
        g.close()
        self.assertLess(len(g.ids), 64)
        self.assertEqual(g.ids[:3], [t.id for t in first])
        with self.assertRaises(StopIteration):
            next(g)
        # the model is free again
        g = self.model.generate("In", max_tokens=4, temperature=0)
        self.assertEqual(len(g.text()) > 0 and len(g.ids), 4)

    def test_errors(self):
        with self.assertRaises(relaxc.InvalidError) as cm:
            self.model.generate("In", temperature=-1)
        self.assertIn("temperature", str(cm.exception))
        with self.assertRaises(relaxc.InvalidError):
            self.model.generate("In", max_tokens=0)
        with self.assertRaises(relaxc.InvalidError) as cm:
            relaxc.llm.load(relaxc.compile(XYX, output=os.path.abspath("not-llm.rxm")))
        self.assertIn("LLM", str(cm.exception))
        with self.assertRaises(relaxc.NotFoundError):
            relaxc.llm.load("no/such/model.rxm")


if __name__ == "__main__":
    unittest.main(verbosity=2)
