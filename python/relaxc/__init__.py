"""relaxc: compile ML programs with dynamic shapes and run them from Python (docs/python.md).

    import numpy as np, relaxc
    art = relaxc.compile("examples/mlp.rx", target="vulkan")    # the artifact's bytes
    mod = relaxc.load(art)                                       # on $RX_DEVICE or the first GPU
    y = mod.mlp(x, wg, wu, wd)                                   # NumPy in, NumPy out
    x = relaxc.empty(4096, "float32")        # page-aligned: an argument used in place

relaxc.llm runs LLM artifacts (streaming generation). Errors raise relaxc.Error (subclasses per
status code) with the library's message. The package reaches librelaxc through ctypes
(relaxc/_lib.py).
"""
from . import llm
from ._lib import (DeviceError, Error, InternalError, InvalidError, IoError, NotFoundError,
                   OutOfMemoryError, UnsupportedError, version)
from ._runtime import Function, Module, aligned, compile, empty, load

__version__ = version()
__all__ = ["compile", "load", "empty", "aligned", "Module", "Function", "llm", "version", "Error",
           "InvalidError", "UnsupportedError", "NotFoundError", "IoError", "OutOfMemoryError",
           "DeviceError", "InternalError"]
