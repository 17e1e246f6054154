"""relaxc.llm: LLM artifacts (`relaxc compile HF_FOLDER`) from Python, over relaxc/llm.h.

    model = relaxc.llm.load("model.rxm")
    for tok in model.generate("In the beginning", max_tokens=32, temperature=0):
        print(tok, end="", flush=True)          # tok is a str (its text) with tok.id

generate() streams: rx_llm_generate runs on a worker thread (ctypes releases the GIL during the
call) and its on_token callback hands each token over a queue as it is sampled, so the first token
arrives while the rest are still being decoded. Leaving the loop early (break, close(), the
iterator collected) makes the callback answer false, which stops the generation at the next
token. One generation runs on a model at a time; a second waits for the first.
"""
from __future__ import annotations

import ctypes
import os
import queue
import threading
from ctypes import POINTER, byref, c_char_p, c_int32, c_size_t, c_void_p
from typing import Iterator, List, Optional, Sequence, Union

from . import _lib
from ._lib import InvalidError, check, lib

__all__ = ["load", "Model", "Generation", "Token"]

_ADD_SPECIAL = 1  # RX_TOKENIZER_ADD_SPECIAL
_SKIP_SPECIAL = 2  # RX_TOKENIZER_SKIP_SPECIAL


class Token(str):
    """A generated token: the str is its text (whole UTF-8 characters; may be empty while a
    character is incomplete), .id its id."""

    id: int

    def __new__(cls, text: str, id: int) -> "Token":
        t = super().__new__(cls, text)
        t.id = id
        return t

    def __repr__(self) -> str:
        return f"Token({str.__repr__(self)}, id={self.id})"


class Model:
    """An LLM artifact loaded on a device with its KV cache (rx_llm_model_load)."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], device: Optional[str] = None,
                 max_seq_len: int = 0, kv_capacity: int = 0):
        self._m = c_void_p()
        self._lock = threading.Lock()
        opts = _lib.ModelOptions(device=device.encode() if device else None,
                                 capacity=kv_capacity, max_sequences=1, max_seq_len=max_seq_len)
        check(lib.rx_llm_model_load(os.fspath(path).encode(), byref(opts), byref(self._m)))
        self.path = os.fspath(path)
        self.vocab_size = int(lib.rx_llm_model_vocab_size(self._m))
        self.max_seq_len = int(lib.rx_llm_model_max_seq_len(self._m))
        self.device = (lib.rx_llm_model_device_name(self._m) or b"").decode()

    def close(self) -> None:
        """Frees the model (also done when it is collected); waits for a running generation."""
        with self._lock:
            if self._m:
                lib.rx_llm_model_free(self._m)
                self._m = c_void_p()

    def __del__(self):
        if getattr(self, "_m", None):
            lib.rx_llm_model_free(self._m)
            self._m = c_void_p()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _tokenizer(self):
        tok = lib.rx_llm_model_tokenizer(self._m) if self._m else None
        if not tok:
            raise InvalidError(f"{self.path} has no tokenizer (its model folder had no "
                               "tokenizer.json): give the prompt as a list of token ids")
        return tok

    def encode(self, text: str, add_special: bool = True) -> List[int]:
        """The token ids of text, with what the tokenizer adds (BOS, ...) unless add_special is
        false."""
        b = text.encode("utf-8")
        ids = POINTER(c_int32)()
        n = c_size_t()
        check(lib.rx_tokenizer_encode(self._tokenizer(), b, len(b),
                                      _ADD_SPECIAL if add_special else 0, byref(ids), byref(n)))
        try:
            return [ids[i] for i in range(n.value)]
        finally:
            lib.rx_llm_free(ids)

    def decode(self, ids: Sequence[int], skip_special: bool = False) -> str:
        """The text of ids (ids outside the vocabulary are skipped, as the tokenizers library
        does)."""
        arr = (c_int32 * max(len(ids), 1))(*ids)
        out = c_void_p()
        n = c_size_t()
        check(lib.rx_tokenizer_decode(self._tokenizer(), arr, len(ids),
                                      _SKIP_SPECIAL if skip_special else 0, byref(out), byref(n)))
        try:
            return ctypes.string_at(out, n.value).decode("utf-8", "replace")
        finally:
            lib.rx_llm_free(out)

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 128,
                 temperature: Optional[float] = None, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, repetition_penalty: Optional[float] = None,
                 presence_penalty: float = 0.0, frequency_penalty: float = 0.0, seed: int = 0,
                 stop: Optional[Sequence[str]] = None) -> "Generation":
        """Starts generating from prompt (text, tokenized with BOS as `relaxc generate --prompt`
        does, or token ids) and returns the streaming iterator of the new tokens. Sampling
        defaults are transformers' GenerationConfig's (rx_sampler_default_params: temperature 1,
        top_k 50, top_p 1); temperature=0 is greedy. Stops at an end-of-sequence token,
        max_tokens, the model's maximum length or a stop string (never handed out). Bad
        parameters raise InvalidError here, before anything runs."""
        if not self._m:
            raise InvalidError(f"{self.path}: the model is closed")
        ids = self.encode(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
        if not ids:
            raise InvalidError("the prompt has no tokens")
        if max_tokens <= 0:
            raise InvalidError(f"max_tokens: expected > 0, got {max_tokens}")
        sp = lib.rx_sampler_default_params()
        for name, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p),
                        ("repetition_penalty", repetition_penalty)):
            if v is not None:
                setattr(sp, name, v)
        sp.presence_penalty = presence_penalty
        sp.frequency_penalty = frequency_penalty
        sp.seed = seed
        smp = c_void_p()  # the library's checks of the sampling parameters, now
        check(lib.rx_sampler_create(byref(sp), byref(smp)))
        lib.rx_sampler_free(smp)
        return Generation(self, ids, sp, max_tokens, list(stop or []))


class Generation(Iterator[Token]):
    """The tokens of one generation as they come (Model.generate). After the last, .ids holds
    every new id and .stats the library's figures (prompt_tokens, new_tokens, prefill_ms,
    decode_ms, stopped_by_eos, stopped_by_string)."""

    _DONE = object()

    def __init__(self, model: Model, prompt: List[int], sp, max_tokens: int,
                 stop: List[str]):
        self._model = model
        self._q: "queue.Queue[object]" = queue.Queue()
        self._halt = threading.Event()
        self._finished = False
        self.ids: List[int] = []
        self.stats: Optional[dict] = None
        self._prompt = (c_int32 * len(prompt))(*prompt)
        self._nprompt = len(prompt)
        self._out = (c_int32 * max_tokens)()
        self._stop_bytes = [s.encode("utf-8") for s in stop]
        self._stop = (c_char_p * max(len(stop), 1))(*self._stop_bytes)
        self._cb = _lib.ON_TOKEN(self._on_token)  # kept alive as long as the generation
        self._params = _lib.GenerateParams(sampling=sp, max_tokens=max_tokens, on_token=self._cb,
                                           user=None,
                                           stop=ctypes.cast(self._stop, POINTER(c_char_p)), nstop=len(stop),
                                           on_token_info=None, top_logprobs=0, grammar=None)
        self._thread = threading.Thread(target=self._run, name="relaxc.llm.generate",
                                        daemon=True)
        self._thread.start()

    def _on_token(self, user, id, text, n) -> bool:
        s = ctypes.string_at(text, n).decode("utf-8", "replace") if n else ""
        self._q.put(Token(s, id))
        return not self._halt.is_set()

    def _run(self) -> None:
        st = _lib.GenerateStats()
        err: Optional[BaseException] = None
        with self._model._lock:
            if not self._model._m:
                err = InvalidError(f"{self._model.path}: the model is closed")
            else:
                s = lib.rx_llm_generate(self._model._m, 0, self._prompt, self._nprompt,
                                        byref(self._params), self._out, byref(st))
                if s:
                    err = _lib.error_of(s)
        self.stats = {f: getattr(st, f) for f, _ in _lib.GenerateStats._fields_}
        self.ids = list(self._out[:st.new_tokens])
        self._q.put(err if err is not None else self._DONE)

    def __iter__(self) -> "Generation":
        return self

    def __next__(self) -> Token:
        if self._finished:
            raise StopIteration
        item = self._q.get()
        if isinstance(item, Token):
            return item
        self._finished = True
        self._thread.join()
        if isinstance(item, BaseException):
            raise item
        raise StopIteration

    def close(self) -> None:
        """Stops the generation (at the next token) and waits for the library to return."""
        self._halt.set()
        while not self._finished:
            item = self._q.get()
            if not isinstance(item, Token):
                self._finished = True
        self._thread.join()

    def text(self) -> str:
        """Every remaining token's text, joined (waits for the end)."""
        return "".join(self)

    def __del__(self):
        if not self._finished and self._thread.is_alive():
            self.close()


def load(path: Union[str, "os.PathLike[str]"], device: Optional[str] = None,
         max_seq_len: int = 0, kv_capacity: int = 0) -> Model:
    """Loads an LLM artifact (relaxc compile of a Hugging Face folder; docs/llm.md) on device
    (None: $RX_DEVICE, else the first present): its weights, a KV cache of kv_capacity tokens
    (0: the model's max_seq_len) and a warm-up."""
    return Model(path, device, max_seq_len, kv_capacity)
