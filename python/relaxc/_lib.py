"""relaxc/_lib.py: the ctypes bindings of librelaxc (include/relaxc/*.h), and the exceptions.

The library is opened from the package's own _lib/ folder (python/package.cmake puts it there),
or from $RELAXC_LIBRARY when set (a build tree's librelaxc.so, for development). ctypes, not a C
extension: the package then depends on no Python version's ABI (one py3-none wheel per
platform), and every call releases the GIL while the library runs (CDLL does), so a generation
can stream from a worker thread (relaxc.llm). Each structure below mirrors its C declaration
field for field; tests/python checks the results they carry against the command line's.
"""
from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float,
                    c_int, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p)

# ---- exceptions: one per rx_status_code (relaxc/types.h) ----


class Error(Exception):
    """An error of the relaxc library; str() is the library's message, .code its rx_status_code."""

    code = 0

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidError(Error, ValueError):
    """RX_ERR_INVALID: bad input (text IR, model, arguments: a wrong shape names the parameter)."""
    code = 1


class UnsupportedError(Error):
    """RX_ERR_UNSUPPORTED: valid but not supported (an op, a target, a feature)."""
    code = 2


class NotFoundError(Error, LookupError):
    """RX_ERR_NOT_FOUND: a missing file, function, kernel or driver."""
    code = 3


class IoError(Error):
    """RX_ERR_IO: reading or writing a file failed."""
    code = 4


class OutOfMemoryError(Error):
    """RX_ERR_OUT_OF_MEMORY: host or device memory ran out."""
    code = 5


class DeviceError(Error):
    """RX_ERR_DEVICE: a driver reported an error."""
    code = 6


class InternalError(Error):
    """RX_ERR_INTERNAL: a bug of relaxc."""
    code = 7


_BY_CODE = {c.code: c for c in (InvalidError, UnsupportedError, NotFoundError, IoError,
                                OutOfMemoryError, DeviceError, InternalError)}

# ---- dtypes (relaxc/types.h RX_DTYPES, numbered from 1) and their NumPy names ----
DTYPES = ["f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", "f64", "u16", "u32",
          "u64"]
NUMPY_OF = {"f32": "float32", "f16": "float16", "i64": "int64", "i32": "int32", "i16": "int16",
            "i8": "int8", "u8": "uint8", "bool": "bool", "f64": "float64", "u16": "uint16",
            "u32": "uint32", "u64": "uint64"}  # bf16: no NumPy dtype, read as its uint16 bits
RX_OF_NUMPY = {v: k for k, v in NUMPY_OF.items()}


def dtype_code(name: str) -> int:
    return DTYPES.index(name) + 1


def dtype_name(code: int) -> str:
    return DTYPES[code - 1] if 1 <= code <= len(DTYPES) else "any"


# ---- structures ----
MAX_NDIM = 16


class CompileRequest(Structure):  # rx_compile_request
    _fields_ = [("targets", c_char_p), ("no_fuse", c_bool), ("no_nvrtc", c_bool),
                ("dispatch", c_char_p), ("dispatch_min_rows", c_int64)]


class ImportOptions(Structure):  # rx_import_options
    _fields_ = [("dtype", c_int), ("max_seq_len", c_int64), ("max_batch", c_int64),
                ("no_weights", c_bool), ("quantize", c_char_p), ("quantize_embeddings", c_bool),
                ("tensor_parallel", c_int), ("tensor_rank", c_int)]


class DeviceInfo(Structure):  # rx_rt_device_info
    _fields_ = [("backend", c_int), ("index", c_int), ("name", c_char * 256),
                ("memory_bytes", c_uint64), ("subgroup_size", c_uint32),
                ("shared_memory_bytes", c_uint32), ("push_constant_bytes", c_uint32),
                ("max_threads_per_block", c_uint32), ("fp16", c_bool), ("int8", c_bool),
                ("timestamps", c_bool), ("unified_memory", c_bool),
                ("host_import_alignment", c_uint64)]


class ParamInfo(Structure):  # rx_rt_param_info
    _fields_ = [("name", c_char_p), ("expected", c_char_p), ("dtype", c_int), ("ndim", c_int)]


class SamplerParams(Structure):  # rx_sampler_params
    _fields_ = [("temperature", c_float), ("top_k", c_int32), ("top_p", c_float),
                ("repetition_penalty", c_float), ("seed", c_uint64),
                ("presence_penalty", c_float), ("frequency_penalty", c_float),
                ("biases", c_void_p), ("nbiases", c_size_t)]


class LogitBias(Structure):  # rx_logit_bias
    _fields_ = [("id", c_int32), ("bias", c_float)]


ON_TOKEN = CFUNCTYPE(c_bool, c_void_p, c_int32, POINTER(c_char), c_size_t)


class GenerateParams(Structure):  # rx_llm_generate_params
    _fields_ = [("sampling", SamplerParams), ("max_tokens", c_int64), ("on_token", ON_TOKEN),
                ("user", c_void_p), ("stop", POINTER(c_char_p)), ("nstop", c_size_t),
                ("on_token_info", c_void_p), ("top_logprobs", c_int32), ("grammar", c_void_p)]


class GenerateStats(Structure):  # rx_llm_generate_stats
    _fields_ = [("prompt_tokens", c_size_t), ("new_tokens", c_size_t), ("prefill_ms", c_double),
                ("decode_ms", c_double), ("stopped_by_eos", c_bool),
                ("stopped_by_string", c_bool)]


class ModelOptions(Structure):  # rx_llm_model_options
    _fields_ = [("device", c_char_p), ("capacity", c_int64), ("max_sequences", c_int64),
                ("max_seq_len", c_int64), ("comm", c_void_p)]  # comm: NULL, one process


# ---- the library ----
_P = c_void_p
_PP = POINTER(c_void_p)
_PROTOS = {
    # types.h
    "rx_status_code_of": (c_int, [_P]),
    "rx_status_message": (c_char_p, [_P]),
    "rx_status_free": (None, [_P]),
    "rx_version_string": (c_char_p, []),
    # compiler.h
    "rx_free": (None, [_P]),
    "rx_diag_create": (_P, []),
    "rx_diag_destroy": (None, [_P]),
    "rx_diag_text": (c_char_p, [_P]),
    "rx_diag_error_count": (c_int, [_P]),
    "rx_module_new": (_P, []),
    "rx_module_free": (None, [_P]),
    "rx_module_parse": (_P, [_P, c_char_p, c_char_p, c_size_t, _P]),
    "rx_module_compile": (_P, [_P, POINTER(CompileRequest), _P, POINTER(POINTER(ctypes.c_ubyte)),
                               POINTER(c_size_t)]),
    "rx_module_compile_to_file": (_P, [_P, POINTER(CompileRequest), c_char_p, c_char_p, _P]),
    "rx_module_import": (_P, [_P, c_char_p, POINTER(ImportOptions), _P]),
    # runtime.h
    "rx_rt_backend_name": (c_char_p, [c_int]),
    "rx_rt_device_open": (_P, [c_char_p, _P, _PP]),
    "rx_rt_device_release": (None, [_P]),
    "rx_rt_device_get_info": (POINTER(DeviceInfo), [_P]),
    "rx_rt_device_synchronize": (_P, [_P]),
    "rx_rt_artifact_load": (_P, [_P, c_char_p, _PP]),
    "rx_rt_artifact_load_memory": (_P, [_P, c_char_p, c_size_t, c_char_p, _PP]),
    "rx_rt_artifact_release": (None, [_P]),
    "rx_rt_artifact_function_count": (c_size_t, [_P]),
    "rx_rt_artifact_function_name": (c_char_p, [_P, c_size_t]),
    "rx_rt_artifact_function_param_count": (c_size_t, [_P, c_size_t]),
    "rx_rt_artifact_function_param": (c_bool, [_P, c_size_t, c_size_t, POINTER(ParamInfo)]),
    "rx_rt_artifact_targets": (c_char_p, [_P]),
    "rx_rt_tensor_from_host": (_P, [_P, c_int, c_int, POINTER(c_int64), c_void_p, _PP]),
    "rx_rt_tensor_import_host": (_P, [_P, c_int, c_int, POINTER(c_int64), c_void_p, _PP,
                                      POINTER(c_int)]),
    "rx_rt_import_name": (c_char_p, [c_int]),
    "rx_rt_tensor_buffer": (_P, [_P]),
    "rx_rt_buffer_map": (_P, [_P, POINTER(c_void_p)]),
    "rx_rt_buffer_kept": (c_bool, [_P]),
    "rx_rt_tensor_release": (None, [_P]),
    "rx_rt_tensor_dtype": (c_int, [_P]),
    "rx_rt_tensor_ndim": (c_int, [_P]),
    "rx_rt_tensor_shape": (POINTER(c_int64), [_P]),
    "rx_rt_tensor_bytes": (c_size_t, [_P]),
    "rx_rt_tensor_read": (_P, [_P, c_void_p, c_size_t]),
    "rx_rt_value_kind_of": (c_int, [_P]),
    "rx_rt_value_tensor": (_P, [_P]),
    "rx_rt_value_tuple_size": (c_size_t, [_P]),
    "rx_rt_value_tuple_item": (_P, [_P, c_size_t]),
    "rx_rt_value_shape": (c_int, [_P, POINTER(POINTER(c_int64))]),
    "rx_rt_value_prim": (c_int64, [_P, POINTER(c_int)]),
    "rx_rt_value_release": (None, [_P]),
    "rx_rt_value_from_tensor": (_P, [_P, _PP]),
    "rx_rt_value_from_prim": (_P, [c_int, c_int64, _PP]),
    "rx_rt_vm_call_values": (_P, [_P, c_char_p, _PP, c_size_t, _PP]),
    # llm.h
    "rx_llm_free": (None, [_P]),
    "rx_tokenizer_encode": (_P, [_P, c_char_p, c_size_t, c_int, POINTER(POINTER(c_int32)),
                                 POINTER(c_size_t)]),
    "rx_tokenizer_decode": (_P, [_P, POINTER(c_int32), c_size_t, c_int, POINTER(c_void_p),
                                 POINTER(c_size_t)]),
    "rx_sampler_default_params": (SamplerParams, []),
    "rx_sampler_create": (_P, [POINTER(SamplerParams), _PP]),
    "rx_sampler_free": (None, [_P]),
    "rx_llm_model_load": (_P, [c_char_p, POINTER(ModelOptions), _PP]),
    "rx_llm_model_free": (None, [_P]),
    "rx_llm_model_tokenizer": (_P, [_P]),
    "rx_llm_model_vocab_size": (c_int32, [_P]),
    "rx_llm_model_max_seq_len": (c_int64, [_P]),
    "rx_llm_model_device_name": (c_char_p, [_P]),
    "rx_llm_generate": (_P, [_P, c_int64, POINTER(c_int32), c_size_t, POINTER(GenerateParams),
                             POINTER(c_int32), POINTER(GenerateStats)]),
}


def _library_path() -> str:
    env = os.environ.get("RELAXC_LIBRARY")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")
    name = "librelaxc.0.dylib" if sys.platform == "darwin" else "librelaxc.so.0"
    return os.path.join(here, name)


def _open():
    path = _library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"relaxc: cannot open its library {path}: {e} (reinstall the package: "
                          "pip install ./python from the relaxc source tree)") from e
    for name, (res, args) in _PROTOS.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


lib = _open()


def check(status) -> None:
    """Raises the exception of a non-NULL rx_status (freeing it), with the library's message."""
    if not status:
        return
    code = lib.rx_status_code_of(status)
    msg = (lib.rx_status_message(status) or b"").decode("utf-8", "replace")
    lib.rx_status_free(status)
    raise _BY_CODE.get(code, Error)(msg)


def error_of(status, detail: str | None = None) -> Error:
    """The exception of a non-NULL status (freed), its message replaced by detail when given."""
    code = lib.rx_status_code_of(status)
    msg = (lib.rx_status_message(status) or b"").decode("utf-8", "replace")
    lib.rx_status_free(status)
    return _BY_CODE.get(code, Error)(detail or msg)


def version() -> str:
    return lib.rx_version_string().decode()
