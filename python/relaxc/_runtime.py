"""relaxc/_runtime.py: compiling (relaxc.compile) and running (relaxc.load, Module, Function)
through librelaxc's C API (relaxc/compiler.h, relaxc/runtime.h; docs/python.md).

Arguments: NumPy arrays, anything with __dlpack__ (read through numpy.from_dlpack: host memory
only) or __array__, and Python ints (i64 scalars). Zero-copy where the device allows
(docs/python.md, "Zero-copy"): each tensor argument's memory is imported in place
(rx_rt_tensor_import_host; a copy where the device cannot, or the pointer is not aligned as it
requires, which Module.last_imports reports), and each result is a NumPy view of its device
buffer (rx_rt_buffer_map) where the buffer is host-visible and its own (not a planned storage the
next call overwrites: rx_rt_buffer_kept), else a copy (rx_rt_tensor_read). load(...,
zero_copy=False) copies both ways.
"""
from __future__ import annotations

import ctypes
import os
import threading
from ctypes import POINTER, byref, c_int, c_int64, c_size_t, c_ubyte, c_void_p
from typing import Any, Optional, Union

import numpy as np

from . import _lib
from ._lib import InvalidError, NotFoundError, check, lib

# ---- compiling ----


def _source_text(source) -> tuple[str, Optional[bytes]]:
    """(name for messages, text) of a path or of the program text itself; text None for a model
    (a folder, or a file other than .rx: imported by rx_module_import)."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
        as_path = True
    elif isinstance(source, bytes):
        return "<text>", source
    elif isinstance(source, str):
        as_path = "\n" not in source and (os.path.exists(source) or
                                           source.endswith((".rx", ".onnx", ".gguf")))
    else:
        raise TypeError(f"relaxc.compile: expected a path or the program's text, got "
                        f"{type(source).__name__}")
    if not as_path:
        return "<text>", source.encode()
    if not os.path.exists(source):
        raise NotFoundError(f"{source}: no such file")
    if os.path.isdir(source) or not source.endswith(".rx"):
        return source, None
    with open(source, "rb") as f:
        return source, f.read()


def compile(source: Union[str, bytes, "os.PathLike[str]"], target: str = "vulkan", *,
            output: Optional[Union[str, "os.PathLike[str]"]] = None, no_fuse: bool = False,
            no_nvrtc: bool = False, dispatch: Optional[str] = None,
            dispatch_min_rows: int = 0, dtype: Optional[str] = None, max_seq_len: int = 0,
            max_batch: int = 0, no_weights: bool = False,
            quantize: Optional[str] = None) -> Union[bytes, str]:
    """Compiles a relaxc program (a .rx path, or its text) or a model (a Hugging Face folder, a
    GGUF file, an ONNX model: rx_module_import, as `relaxc compile` takes them) for target
    ("vulkan", "cuda", "metal", or several comma-separated). Returns the artifact's bytes, or
    writes it to output (weights streamed from their files) and returns that path. dtype,
    max_seq_len, max_batch, no_weights and quantize are the command line's options for Hugging
    Face folders and GGUF files. A program that does not parse or check raises InvalidError
    carrying every diagnostic ("file:line:col: error: ...")."""
    name, text = _source_text(source)
    model_opts = None
    if dtype or max_seq_len or max_batch or no_weights or quantize:
        model_opts = _lib.ImportOptions(dtype=_lib.dtype_code(dtype) if dtype else 0,
                                        max_seq_len=max_seq_len, max_batch=max_batch,
                                        no_weights=no_weights,
                                        quantize=quantize.encode() if quantize else None)
        if text is not None:
            raise InvalidError(f"{name}: dtype, max_seq_len, max_batch, no_weights and quantize "
                               "are for a model (a Hugging Face folder or a GGUF file)")
    req = _lib.CompileRequest(targets=target.encode(), no_fuse=no_fuse, no_nvrtc=no_nvrtc,
                              dispatch=dispatch.encode() if dispatch else None,
                              dispatch_min_rows=dispatch_min_rows)
    m = lib.rx_module_new()
    diag = lib.rx_diag_create()
    try:
        if text is None:
            s = lib.rx_module_import(m, name.encode(),
                                     byref(model_opts) if model_opts else None, diag)
        else:
            s = lib.rx_module_parse(m, name.encode(), text, len(text), diag)
        if not s:
            if output is not None:
                out = os.fspath(output)
                s = lib.rx_module_compile_to_file(m, byref(req), out.encode(), None, diag)
                if not s:
                    return out
            else:
                data = POINTER(c_ubyte)()
                n = c_size_t()
                s = lib.rx_module_compile(m, byref(req), diag, byref(data), byref(n))
                if not s:
                    try:
                        return ctypes.string_at(data, n.value)
                    finally:
                        lib.rx_free(data)
        detail = None
        if lib.rx_diag_error_count(diag) > 0:
            detail = (lib.rx_diag_text(diag) or b"").decode("utf-8", "replace").rstrip("\n")
        raise _lib.error_of(s, detail)
    finally:
        lib.rx_diag_destroy(diag)
        lib.rx_module_free(m)


# ---- running ----


class Module:
    """A loaded artifact on a device (relaxc.load). module["fn"] or module.fn is a Function."""

    def __init__(self, artifact: Union[bytes, str, "os.PathLike[str]"],
                 device: Optional[str] = None, zero_copy: bool = True):
        self._art = None
        self._dev = c_void_p()
        self.zero_copy = zero_copy
        # per tensor argument of the module's last call: how its memory reached the device
        # (rx_rt_import_name: "in place", "copied: not aligned as the device requires", ...)
        self.last_imports: list = []
        # RLock: a result view collected by the garbage collector inside a call on this thread
        # releases its value under the lock (_Held.__del__)
        self._lock = threading.RLock()
        check(lib.rx_rt_device_open(device.encode() if device else None, None, byref(self._dev)))
        art = c_void_p()
        try:
            if isinstance(artifact, (bytes, bytearray, memoryview)):
                data = bytes(artifact)
                check(lib.rx_rt_artifact_load_memory(self._dev, data, len(data), b"<bytes>",
                                                     byref(art)))
            else:
                check(lib.rx_rt_artifact_load(self._dev, os.fspath(artifact).encode(),
                                              byref(art)))
        except BaseException:
            lib.rx_rt_device_release(self._dev)
            self._dev = c_void_p()
            raise
        self._art = art
        info = lib.rx_rt_device_get_info(self._dev).contents
        self.device = (f"{lib.rx_rt_backend_name(info.backend).decode()}:{info.index} "
                       f"({info.name.decode('utf-8', 'replace')})")
        self.functions = [lib.rx_rt_artifact_function_name(art, i).decode()
                          for i in range(lib.rx_rt_artifact_function_count(art))]

    def close(self) -> None:
        """Releases the artifact and the device (also done when the Module is collected)."""
        if self._art:
            lib.rx_rt_artifact_release(self._art)
            self._art = None
        if self._dev:
            lib.rx_rt_device_release(self._dev)
            self._dev = c_void_p()

    def __del__(self):
        self.close()

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getitem__(self, name: str) -> "Function":
        if name not in self.functions:
            raise NotFoundError(f"no function '{name}' in the artifact (functions: "
                                f"{', '.join(self.functions)})")
        return Function(self, name)

    def __getattr__(self, name: str) -> "Function":
        # not set: a failed init
        if name.startswith("_") or name in ("functions", "device", "zero_copy", "last_imports"):
            raise AttributeError(name)
        try:
            return self[name]
        except NotFoundError as e:
            raise AttributeError(str(e)) from None

    def __repr__(self) -> str:
        return f"<relaxc.Module {', '.join(self.functions)} on {self.device}>"


class Function:
    """One graph function of a Module; calling it runs it and returns NumPy arrays."""

    def __init__(self, module: Module, name: str):
        self.module = module
        self.name = name
        self._index = module.functions.index(name)
        art = module._art
        self.params = []  # (name, expected struct info text, rx dtype code)
        for i in range(lib.rx_rt_artifact_function_param_count(art, self._index)):
            p = _lib.ParamInfo()
            lib.rx_rt_artifact_function_param(art, self._index, i, byref(p))
            self.params.append(((p.name or b"").decode(), (p.expected or b"?").decode(),
                                p.dtype))

    def __repr__(self) -> str:
        sig = ", ".join(f"{n}: {e}" for n, e, _ in self.params)
        return f"<relaxc.Function {self.name}({sig})>"

    def __call__(self, *args: Any) -> Any:
        m = self.module
        if not m._art:
            raise InvalidError(f"{self.name}: the module is closed")
        vals: list = []
        keep: list = []  # the arrays whose memory the arguments use in place
        imports: list = []
        try:
            for i, a in enumerate(args):
                vals.append(self._value(i, a, keep, imports))
            arr = (c_void_p * max(len(vals), 1))(*vals)
            out = c_void_p()
            with m._lock:
                check(lib.rx_rt_vm_call_values(m._art, self.name.encode(), arr, len(vals),
                                               byref(out)))
            m.last_imports = imports
            held = _Held(m, out.value, keep)  # releases the result with the last view of it
            return _result(out, held if m.zero_copy else None)
        finally:
            with m._lock:  # an imported argument's release waits for the work on its memory
                for v in vals:
                    lib.rx_rt_value_release(v)

    def _value(self, i: int, a: Any, keep: list, imports: list) -> int:
        """A new rx_rt_value of argument i."""
        pname = self.params[i][0] if i < len(self.params) else f"#{i}"
        v = c_void_p()
        if isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_)):
            check(lib.rx_rt_value_from_prim(_lib.dtype_code("i64"), int(a), byref(v)))
            return v.value
        want = self.params[i][2] if i < len(self.params) else 0
        arr = _as_host_array(a, f"{self.name}: parameter '{pname}'")
        dt = _dtype_of(arr, want, f"{self.name}: parameter '{pname}'")
        shape = (c_int64 * max(arr.ndim, 1))(*arr.shape)
        t = c_void_p()
        if self.module.zero_copy:
            kind = c_int()
            with self.module._lock:
                check(lib.rx_rt_tensor_import_host(self.module._dev, dt, arr.ndim, shape,
                                                   arr.ctypes.data_as(c_void_p), byref(t),
                                                   byref(kind)))
            keep.append(arr)
            imports.append(lib.rx_rt_import_name(kind.value).decode())
        else:
            check(lib.rx_rt_tensor_from_host(self.module._dev, dt, arr.ndim, shape,
                                             arr.ctypes.data_as(c_void_p), byref(t)))
            imports.append(lib.rx_rt_import_name(0).decode())
        try:
            check(lib.rx_rt_value_from_tensor(t, byref(v)))
        finally:
            lib.rx_rt_tensor_release(t)
        return v.value


def _as_host_array(a: Any, where: str) -> np.ndarray:
    """a as a C-contiguous NumPy array in host memory: a NumPy array as it is (when already
    contiguous), a DLPack tensor through numpy.from_dlpack (zero-copy for host memory), anything
    else through numpy.asarray."""
    if not isinstance(a, np.ndarray) and hasattr(a, "__dlpack__"):
        try:
            a = np.from_dlpack(a)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            dev = a.__dlpack_device__() if hasattr(a, "__dlpack_device__") else "?"
            raise InvalidError(f"{where}: a DLPack tensor NumPy cannot read (device {dev}: "
                               f"{e}); relaxc takes host memory: move it to the CPU first") from e
    return np.ascontiguousarray(a)


def _dtype_of(arr: np.ndarray, want: int, where: str) -> int:
    """The rx dtype code of arr (uint16 counts as bf16 where the parameter is bf16)."""
    if want == _lib.dtype_code("bf16") and arr.dtype == np.uint16:
        return want
    name = _lib.RX_OF_NUMPY.get(arr.dtype.name)
    if name is None:
        raise InvalidError(f"{where}: NumPy dtype {arr.dtype} has no relaxc dtype (relaxc "
                           f"takes {', '.join(_lib.NUMPY_OF.values())}; bf16 as uint16 bits)")
    return _lib.dtype_code(name)


_KIND_TENSOR, _KIND_TUPLE, _KIND_SHAPE, _KIND_PRIM = 0, 1, 2, 3


class _Held:
    """A call's result value (one reference), released when the last NumPy view of its buffers
    goes (or at once when nothing views it), with the arrays the call's arguments imported (a
    result may be an argument itself)."""

    def __init__(self, module: Module, value: int, arrays: list):
        self.module = module
        self.value = value
        self.arrays = arrays

    def __del__(self):
        if self.value:
            with self.module._lock:
                lib.rx_rt_value_release(self.value)
            self.value = None


def _view(t, shape: tuple, dtype, held: Optional[_Held]) -> Optional[np.ndarray]:
    """A NumPy view of tensor t's device buffer, in place, keeping held alive; None where the
    buffer is not host-visible or belongs to a planned storage (the next call overwrites it)."""
    buf = lib.rx_rt_tensor_buffer(t)
    if held is None or lib.rx_rt_buffer_kept(buf):
        return None
    ptr = c_void_p()
    s = lib.rx_rt_buffer_map(buf, byref(ptr))
    if s:  # RX_ERR_UNSUPPORTED: device memory (a discrete GPU): read with a copy
        lib.rx_status_free(s)
        return None
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    mem = (ctypes.c_ubyte * n).from_address(ptr.value)
    mem._held = held  # the view's base chain holds mem, mem holds the value
    return np.frombuffer(mem, dtype=dtype).reshape(shape)


def _result(v, held: Optional[_Held] = None) -> Any:
    """A result value as Python: a tensor as a NumPy array (a view of its buffer where
    _view can, else a new array), a tuple as a tuple, a shape as a tuple of ints, a scalar as an
    int."""
    kind = lib.rx_rt_value_kind_of(v)
    if kind == _KIND_TENSOR:
        t = lib.rx_rt_value_tensor(v)
        ndim = lib.rx_rt_tensor_ndim(t)
        sp = lib.rx_rt_tensor_shape(t)
        shape = tuple(sp[i] for i in range(ndim))
        name = _lib.dtype_name(lib.rx_rt_tensor_dtype(t))
        dtype = np.dtype(_lib.NUMPY_OF.get(name, "uint16"))
        if lib.rx_rt_tensor_bytes(t) > 0:
            out = _view(t, shape, dtype, held)
            if out is not None:
                return out
        out = np.empty(shape, dtype=dtype)
        check(lib.rx_rt_tensor_read(t, out.ctypes.data_as(c_void_p), out.nbytes))
        return out
    if kind == _KIND_TUPLE:
        return tuple(_result(lib.rx_rt_value_tuple_item(v, i), held)
                     for i in range(lib.rx_rt_value_tuple_size(v)))
    if kind == _KIND_SHAPE:
        dims = POINTER(c_int64)()
        n = lib.rx_rt_value_shape(v, byref(dims))
        return tuple(dims[i] for i in range(n))
    if kind == _KIND_PRIM:
        dt = c_int()
        return int(lib.rx_rt_value_prim(v, byref(dt)))
    raise _lib.UnsupportedError(f"a result of kind {kind} (a storage or a runtime object) has no "
                                "Python form")


def empty(shape: Union[int, tuple], dtype: Any = np.float32, align: int = 4096) -> np.ndarray:
    """An uninitialized C-contiguous NumPy array whose data starts at a multiple of align bytes (a
    power of two; the default, a page, suits every device that imports host memory). Such an
    argument is used in place (docs/python.md, "Zero-copy"); NumPy's own arrays are aligned to
    16 bytes only, below what a device may ask (lavapipe: 64), and are then copied."""
    if align <= 0 or align & (align - 1):
        raise InvalidError(f"relaxc.empty: align {align} is not a power of two")
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(n + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n].view(dt).reshape(shape)


def aligned(a: Any, align: int = 4096) -> np.ndarray:
    """a as a C-contiguous NumPy array aligned to align bytes: a itself when it already is one,
    else a copy in relaxc.empty's memory."""
    arr = np.asarray(a)
    if arr.flags.c_contiguous and arr.ctypes.data % align == 0:
        return arr
    out = empty(arr.shape, arr.dtype, align)
    out[...] = arr
    return out


def load(artifact: Union[bytes, str, "os.PathLike[str]"], device: Optional[str] = None,
         zero_copy: bool = True) -> Module:
    """Loads an artifact (its bytes, as relaxc.compile returns them, or an .rxm path) on device
    ("vulkan:0", "cuda:0", "metal:0"; None: $RX_DEVICE, else the first device present).
    zero_copy: arguments used in place and results viewed in place where the device allows
    (docs/python.md, "Zero-copy"); False copies both ways."""
    return Module(artifact, device, zero_copy)
