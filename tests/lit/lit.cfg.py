# lit configuration for relaxc's text-level tests.
import os
import lit.formats

config.name = "relaxc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".rx", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.relaxc_bin_dir, "tests", "lit-out")

config.environment["PATH"] = os.pathsep.join(
    [config.relaxc_bin_dir, config.llvm_bin_dir, config.environment.get("PATH", "")])
# `relaxc compile` keeps kernels in a cache under $HOME by default: the tests neither read nor
# leave one (each run compiles as if cold); tests of the cache pass --cache-dir %t/... instead.
config.environment["RELAXC_NO_CACHE"] = "1"
config.substitutions.append(
    ("%relaxc", getattr(config, "relaxc_run_prefix", "") + os.path.join(config.relaxc_bin_dir, "relaxc")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# `%limit_vm KIB;` in a test's `sh -c`: `ulimit -v KIB` where a test shows that memory stays
# bounded (tests/lit/cli/read_limits.test); nothing in a sanitized build, whose shadow memory
# reserves terabytes of address space.
config.substitutions.append(
    ("%limit_vm", "true" if getattr(config, "relaxc_sanitize", False) else "ulimit -v"))
# `REQUIRES: onnx`: relaxc was built with the ONNX frontend (frontends/onnx/onnx.cmake)
if getattr(config, "relaxc_onnx", False):
    config.available_features.add("onnx")
# `REQUIRES: serve`: relaxc was built with libmicrohttpd, so it has `relaxc serve`
# (tools/serve/serve.cmake)
if getattr(config, "relaxc_serve", False):
    config.available_features.add("serve")
