"""Files on the relay (issue 26, media.md): Blossom uploads and reads, per-channel access,
content-addressed storage, `imeta` references and the collection of unreferenced blobs.

Pure core (no I/O): `auth` (kind 24242 checks), `sniff` (type tables and magic numbers),
`imeta` (ingest checks and references), `limits` (every number and the settings), `ranges`
(HTTP Range), `rates` (upload slots). Runner: `receive` (a body streamed to a temporary file
while hashed), `images` (Pillow under decompression-bomb limits), `blobs` (files or PostgreSQL
byte stores), `service` (uploads, access, references, collection). The relay's HTTP glue is
`buzz.relay.http.media`; the wire format clients share is `buzz.core.blossom` / `core.imeta`.
"""
