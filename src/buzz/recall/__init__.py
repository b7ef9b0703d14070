"""Client-side recall over decrypted engrams (issue 16): BM25 + static sentence embeddings.

Nothing here touches the relay or the network; callers hand in plaintext `(slug, text)` pairs
that they decrypted themselves. `rank` holds the fusion rule, `embed` the packaged model.
"""
