"""eSpeak NG through ctypes on the library of the `espeakng-loader` wheel (huddle.md §10.6).

eSpeak NG keeps one global synthesiser per process, so all engines share one initialised library
behind a lock. `espeak_Initialize` in synchronous mode returns its sample rate (22 050 Hz); the
synth callback collects int16 samples, which are resampled to 24 kHz float32.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from buzz.core.huddle_wire import TTS_SAMPLE_RATE
from buzz.voice.models import check_model_bundle

AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_DONT_EXIT = 0x8000
CHARS_UTF8 = 1
POS_CHARACTER = 1
PARAM_RATE = 1  # espeakRATE, words per minute
DEFAULT_RATE_WPM = 175  # eSpeak NG's own default
EE_OK = 0
ESPEAK_DATA_FILES = ("phontab", "phonindex", "phondata", "intonations", "en_dict", "lang/gmw/en-US")

_SynthCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)
_lock = threading.Lock()
_library: _Library | None = None


class EspeakError(RuntimeError):
    """eSpeak NG refused a call; the message names the call and its error code."""


class _Library:
    """The process-wide initialised eSpeak NG. Use only while holding `_lock`."""

    def __init__(self, library_path: str, data_path: Path) -> None:
        lib = ctypes.CDLL(library_path)
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        rate = lib.espeak_Initialize(
            AUDIO_OUTPUT_SYNCHRONOUS, 0, str(data_path).encode(), INITIALIZE_DONT_EXIT
        )
        if rate <= 0:
            raise EspeakError(f"espeak_Initialize failed ({rate})")
        self.lib = lib
        self.sample_rate = rate
        self._chunks: list[np.ndarray] = []
        self._callback = _SynthCallback(self._collect)  # keep a reference: C holds the pointer
        lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, wav: ctypes._Pointer[ctypes.c_short], count: int, _events: int | None) -> int:
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        return 0  # continue

    def synth(self, text: str, voice: bytes, rate_wpm: int) -> np.ndarray:
        if (err := self.lib.espeak_SetVoiceByName(voice)) != EE_OK:
            raise EspeakError(f"espeak_SetVoiceByName({voice!r}) failed ({err})")
        self.lib.espeak_SetParameter(PARAM_RATE, rate_wpm, 0)
        data = text.encode() + b"\0"
        self._chunks = []
        if (
            err := self.lib.espeak_Synth(data, len(data), 0, POS_CHARACTER, 0, CHARS_UTF8, None, None)
        ) != EE_OK:
            raise EspeakError(f"espeak_Synth failed ({err})")
        self.lib.espeak_Synchronize()
        chunks, self._chunks = self._chunks, []
        return np.concatenate(chunks) if chunks else np.zeros(0, np.int16)


def _shared_library() -> _Library:
    global _library
    if _library is None:
        import espeakng_loader

        data = check_model_bundle(espeakng_loader.get_data_path(), ESPEAK_DATA_FILES)
        _library = _Library(espeakng_loader.get_library_path(), data)
    return _library


def set_random_seed(seed: int) -> None:
    """Seed eSpeak NG's own random generator (`espeak_ng_SetRandSeed`; it is seeded from the
    clock otherwise). The synthesiser carries state from one utterance to the next, so the same
    seed followed by the same calls gives the same samples: what a benchmark corpus needs."""
    with _lock:
        library = _shared_library()
        library.lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        library.lib.espeak_ng_SetRandSeed(seed)


class EspeakNgEngine:
    """Offline default TTS engine: `synthesize(text)` → float32 mono at 24 000 Hz.

    `voice` is an eSpeak NG voice name, `rate_wpm` the speaking rate in words per minute (set
    on every call: the synthesiser is shared). Raises IncompleteModelBundle when a data file is missing, EspeakError on refusal.
    """

    def __init__(self, voice: str = "en-us", rate_wpm: int = DEFAULT_RATE_WPM) -> None:
        self.voice = voice.encode()
        self.rate_wpm = rate_wpm
        with _lock:
            self.native_rate = _shared_library().sample_rate

    def synthesize(self, text: str) -> np.ndarray:
        import soxr

        if not text.strip():
            return np.zeros(0, np.float32)
        with _lock:
            pcm = _shared_library().synth(text, self.voice, self.rate_wpm)
        if pcm.size == 0:
            return np.zeros(0, np.float32)
        return soxr.resample(pcm.astype(np.float32) / 32768.0, self.native_rate, TTS_SAMPLE_RATE).astype(
            np.float32, copy=False
        )
