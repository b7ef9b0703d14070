"""The encrypted local cache of memory embeddings, so repeated searches do not re-embed.

One file per (reader, agent) under `$XDG_CACHE_HOME/buzz/recall/` (default `~/.cache`), named
by a hash of the two public keys so the name reveals neither. Sealed with ChaCha20-Poly1305
under a key derived by HKDF-SHA256 from the reader's secret key (info names this cache and the
agent); the file name is the associated data, so a file copied to another name fails to open.
Vectors are keyed by the SHA-256 of the memory's plaintext and tagged with the model name, so
a changed head (new text) or a new model misses and is re-embedded; entries whose text is no
longer a head are dropped on save. A file that is missing, too large, fails to decrypt or does
not parse is treated as empty (fail closed: it is rewritten, never trusted).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from buzz.recall import embed

CACHE_MAX_BYTES = 64 * 1024 * 1024  # a file larger than this is ignored, not read
_INFO = b"buzz recall cache v1 "
_NONCE = 12


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/buzz/recall`, default `~/.cache/buzz/recall`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "buzz" / "recall"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def derive_key(secret_hex: str, agent_hex: str) -> bytes:
    """32-byte cache key: HKDF-SHA256(secret key, salt none, info "buzz recall cache v1 " ‖ agent)."""
    kdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO + bytes.fromhex(agent_hex))
    return kdf.derive(bytes.fromhex(secret_hex))


def cache_path(reader_hex: str, agent_hex: str, root: Path | None = None) -> Path:
    name = hashlib.sha256(f"{reader_hex}:{agent_hex}".encode()).hexdigest()[:32]
    return (root or cache_dir()) / f"{name}.bin"


@dataclass
class VectorCache:
    """Vectors by plaintext hash for one (reader, agent).

    `hits`, `misses` and `dropped` (stale entries removed) count the last `vectors_for`;
    `changed` says whether `save` is worth calling.
    """

    path: Path
    key: bytes
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    dropped: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.misses or self.dropped)

    @classmethod
    def load(cls, path: Path, key: bytes) -> VectorCache:
        cache = cls(path, key)
        try:
            if path.stat().st_size > CACHE_MAX_BYTES:
                return cache
            blob = path.read_bytes()
            plain = ChaCha20Poly1305(key).decrypt(blob[:_NONCE], blob[_NONCE:], path.name.encode())
            data = orjson.loads(plain)
            if data.get("model") != embed.MODEL_NAME:
                return cache
            matrix = np.frombuffer(bytes.fromhex(data["vectors"]), dtype=np.float32)
            matrix = matrix.reshape(len(data["hashes"]), embed.DIMENSIONS)
            cache.vectors = {h: matrix[i] for i, h in enumerate(data["hashes"])}
        except (OSError, ValueError, KeyError, TypeError, InvalidTag, orjson.JSONDecodeError):
            cache.vectors = {}
        return cache

    def vectors_for(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for `texts` (shape (n, DIMENSIONS)), embedding only the ones not cached.

        Afterwards the cache holds exactly these texts' vectors (stale entries dropped).
        """
        hashes = [text_hash(t) for t in texts]
        missing = [i for i, h in enumerate(hashes) if h not in self.vectors]
        self.misses, self.hits = len(missing), len(texts) - len(missing)
        fresh = embed.encode([texts[i] for i in missing])
        kept = {h: self.vectors[h] for h in hashes if h in self.vectors}
        self.dropped = len(self.vectors) - len(kept)
        kept.update({hashes[i]: fresh[row] for row, i in enumerate(missing)})
        self.vectors = kept
        if not texts:
            return np.zeros((0, embed.DIMENSIONS), dtype=np.float32)
        return np.stack([kept[h] for h in hashes]).astype(np.float32)

    def save(self) -> None:
        """Seal and write atomically (temp file + rename, mode 0600)."""
        hashes = list(self.vectors)
        matrix = np.stack([self.vectors[h] for h in hashes]) if hashes else np.zeros((0, 0))
        plain = orjson.dumps(
            {
                "model": embed.MODEL_NAME,
                "hashes": hashes,
                "vectors": matrix.astype(np.float32).tobytes().hex(),
            }
        )
        nonce = os.urandom(_NONCE)
        blob = nonce + ChaCha20Poly1305(self.key).encrypt(nonce, plain, self.path.name.encode())
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(blob)
        os.replace(tmp, self.path)
