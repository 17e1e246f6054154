#!/usr/bin/env python3
"""tests/python/run_test.py: ctest python.package (tests/python/python.cmake), the relaxc Python
package built, packed and tested as a user gets it. Python's standard library only.

  run_test.py --root SRC --build BUILD --relaxc RELAXC (--lib LIBRELAXC | --from-source)
              [--prefix PREFIX]

1. BUILD/venv-python (scripts/python-venv.sh: scikit-build-core, its dependencies and NumPy,
   pinned in tests/python/requirements.txt; made here when missing or stale).
2. `pip install ./python` into it (--no-build-isolation, so the pinned backend is used and
   nothing is downloaded), then `import relaxc` outside the source tree. With --lib (ctest's
   python.package, the build tree's librelaxc) the package takes that library as it is
   (-C cmake.define.RX_PY_PREBUILT_LIB, python/package.cmake): scikit-build-core configures the
   project in a fresh BUILD/python-pkg-prebuilt and compiles nothing. With --from-source (the
   manual check of docs/python.md) scikit-build-core compiles librelaxc in Release as a plain
   `pip install ./python` does, in BUILD/python-pkg-src, kept, so a second run recompiles only
   what changed (minutes on 2 cores the first time).
3. `pip wheel ./python` into BUILD/python-wheel (the same build folder: no recompiling), the
   wheel checked: one py3-none-<platform> wheel holding relaxc/_lib/librelaxc.so.MAJOR (an ELF
   shared library whose dynamic symbols include the C API; with --lib, byte for byte
   LIBRELAXC), the headers, the Python sources, the stubs and py.typed; then the wheel installed
   over step 2's install.
4. The tiny Llama of tests/llm/models/kjv-llama compiled for Vulkan with RELAXC (reused while
   newer than relaxc and the model).
5. tests/python/test_relaxc.py run by the venv's Python in BUILD/tests/python (not the source
   tree, so that `import relaxc` is the installed wheel).
Any step failing fails the test, with its output.
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import zipfile


def fail(msg, out=None):
    if out:
        print(out[-8000:], flush=True)
    print(f"run_test.py: FAILED: {msg}", flush=True)
    sys.exit(1)


def run(cmd, what, env=None, cwd=None):
    print(f"run_test.py: {what}: {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                       cwd=cwd)
    print(f"run_test.py: {what}: {time.monotonic() - t0:.1f} s", flush=True)
    if r.returncode:
        fail(f"{what} exited with status {r.returncode}", r.stdout)
    return r.stdout


def check_wheel(path, lib, prebuilt):
    name = os.path.basename(path)
    parts = name[:-4].split("-")
    if len(parts) != 5 or parts[2:4] != ["py3", "none"] or not parts[4].startswith("linux"):
        fail(f"{name}: expected relaxc-VERSION-py3-none-linux_ARCH.whl (ctypes: no Python ABI)")
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        want = {"relaxc/__init__.py", "relaxc/_lib.py", "relaxc/_runtime.py", "relaxc/llm.py",
                "relaxc/__init__.pyi", "relaxc/llm.pyi", "relaxc/py.typed",
                f"relaxc/_lib/{lib}"} | {f"relaxc/_lib/include/relaxc/{h}.h" for h in
                                          ("runtime", "llm", "types", "compiler", "autobatch")}
        missing = sorted(want - names)
        if missing:
            fail(f"{name} lacks {', '.join(missing)} (it holds: {', '.join(sorted(names))})")
        data = z.read(f"relaxc/_lib/{lib}")
    if data[:4] != b"\x7fELF" or len(data) < 1 << 20:
        fail(f"{name}: relaxc/_lib/{lib} is not the library ({len(data)} bytes)")
    if prebuilt:
        with open(prebuilt, "rb") as f:
            if f.read() != data:
                fail(f"{name}: its relaxc/_lib/{lib} is not {prebuilt} (RX_PY_PREBUILT_LIB)")
    tmp = path + ".lib"
    with open(tmp, "wb") as f:
        f.write(data)
    syms = subprocess.run(["nm", "-D", "--defined-only", tmp], capture_output=True, text=True)
    os.unlink(tmp)
    for s in ("rx_module_compile", "rx_rt_vm_call_values", "rx_llm_generate"):
        if syms.returncode == 0 and f" {s}\n" not in syms.stdout:
            fail(f"{name}: its {lib} does not export {s}")
    print(f"run_test.py: {name}: {len(names)} files, {lib} {len(data)} bytes", flush=True)


def llm_artifact(relaxc, root, work):
    model = os.path.join(root, "tests", "llm", "models", "kjv-llama")
    out = os.path.join(work, "kjv.rxm")
    inputs = [relaxc[-1]] + glob.glob(os.path.join(model, "*"))
    if os.path.exists(out) and os.path.getmtime(out) > max(os.path.getmtime(p) for p in inputs):
        return out
    run(relaxc + ["compile", model, "--target", "vulkan", "-o", out + ".tmp"],
        "compiling the tiny Llama")
    os.replace(out + ".tmp", out)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--relaxc", required=True)
    ap.add_argument("--prefix", default="")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--lib", help="package this librelaxc (a build tree's) instead of compiling")
    how.add_argument("--from-source", action="store_true",
                     help="compile librelaxc as a plain `pip install ./python` does")
    a = ap.parse_args()
    root, build = os.path.abspath(a.root), os.path.abspath(a.build)
    relaxc = shlex.split(a.prefix) + [os.path.abspath(a.relaxc)]
    work = os.path.join(build, "tests", "python")
    os.makedirs(work, exist_ok=True)

    run(["bash", os.path.join(root, "scripts", "python-venv.sh"), build], "the venv")
    py = os.path.join(build, "venv-python", "bin", "python")
    env = dict(os.environ)
    for k in ("RELAXC_LIBRARY", "PYTHONPATH", "LD_PRELOAD"):
        env.pop(k, None)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    if a.lib:
        pkg_build = os.path.join(build, "python-pkg-prebuilt")
        shutil.rmtree(pkg_build, ignore_errors=True)  # configured afresh, as in CI
        cfg = ["-C", f"cmake.define.RX_PY_PREBUILT_LIB={os.path.abspath(a.lib)}"]
    else:
        pkg_build = os.path.join(build, "python-pkg-src")
        cfg = []
    cfg += ["--no-build-isolation", "--no-deps", "-C", f"build-dir={pkg_build}"]
    pkg = os.path.join(root, "python")
    run(pip + ["install", "--force-reinstall"] + cfg + [pkg], "pip install ./python", env)
    out = run([py, "-c", "import relaxc, sys; print(relaxc.__file__, relaxc.__version__)"],
              "import relaxc", env, work)
    if not out.startswith(os.path.join(build, "venv-python")):
        fail(f"import relaxc found {out.strip()}, not the venv's")

    wheels = os.path.join(build, "python-wheel")
    shutil.rmtree(wheels, ignore_errors=True)
    run(pip + ["wheel", "-w", wheels] + cfg + [pkg], "pip wheel ./python", env)
    found = glob.glob(os.path.join(wheels, "relaxc-*.whl"))
    if len(found) != 1:
        fail(f"pip wheel left {found} in {wheels}, expected one relaxc wheel")
    check_wheel(found[0], "librelaxc.so.0", a.lib)
    run(pip + ["install", "--force-reinstall", "--no-deps", found[0]], "installing the wheel",
        env)

    env.update(RX_PY_ROOT=root, RX_PY_RELAXC=json.dumps(relaxc),
               RX_PY_LLM=llm_artifact(relaxc, root, work))
    test = os.path.join(root, "tests", "python", "test_relaxc.py")
    t0 = time.monotonic()
    r = subprocess.run([py, test], env=env, cwd=work)
    print(f"run_test.py: test_relaxc.py: {time.monotonic() - t0:.1f} s", flush=True)
    if r.returncode:
        fail(f"tests/python/test_relaxc.py exited with status {r.returncode}")
    print("run_test.py: passed", flush=True)


if __name__ == "__main__":
    main()
