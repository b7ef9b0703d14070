"""Client audio pipeline for huddles (huddle.md §10), headless-capable, no network code.

One job per module; none of them opens a socket or an audio device:

- `opus`: libopus through PyAV, 48 kHz mono 20 ms packets (§10.2, §10.3).
- `sender`: capture PCM → v2 client frames (level, DTX flag, seq/ts stamping, §6.1, §10.2).
- `jitter`: per-peer reorder buffer and the 10 ms playout clock, driven by a clock value (§10.3).
- `roster`: the client's `peer_index` → pubkey map from `joined`/`left` (§5.5, §6.5).
- `receiver`: relay frames → per-peer decoded 10 ms buffers and speaking flags (§6.5, §10.3).
- `vad`, `stt`: 48 → 16 kHz, WebRTC VAD, utterance flushing, the recogniser (§10.4, §10.5 guard).
- `echo`: STT suppression while TTS plays, local and remote barge-in, cooldown (§10.7).
- `tts`, `espeak`: text preparation, chunking and shaping; the eSpeak NG engine (§10.6).
- `models`: the model-bundle presence check shared by the engines (§10.4 "Model files").
- `wav`: WAV files as microphone input and per-peer output; `pcm`: sample conversions.

Heavy imports (av, soxr, webrtcvad, pocketsphinx, eSpeak) happen only in the module that needs them.
"""
