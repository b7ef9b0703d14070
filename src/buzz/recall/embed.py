"""Sentence embeddings from the model that the PyPI package `tokenlearn-static-model` ships.

The model (model2vec-style static embeddings: 10,000 quantised token vectors, 64 dimensions,
int8, L2-normalised output) sits inside the wheel (`static_model/model/`); it is never
downloaded. Encoding is a token lookup and a mean, so it needs no PyTorch and no onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MODEL_NAME = "tokenlearn-static-model 0.1.1 (10k/64d/int8)"
DIMENSIONS = 64


class EmbeddingUnavailable(RuntimeError):
    """The packaged model is not installed (install the `agent` extra)."""


def encode(texts: Sequence[str]) -> np.ndarray:
    """Embed `texts` → float32 array of shape (len(texts), DIMENSIONS), rows L2-normalised.

    Raises EmbeddingUnavailable when the model package is missing.
    """
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    try:
        from static_model import get_embeddings
    except ImportError as exc:  # the extra is optional for relay-only installs
        raise EmbeddingUnavailable("tokenlearn-static-model is not installed") from exc
    vectors = np.asarray(get_embeddings([str(t) for t in texts]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
