// A huddle in the browser (huddle.md §2–§6, §10): the audio socket at /huddle/<channel>/audio,
// challenge → auth (a kind 22242 signed here) → joined/left rosters; the microphone through an
// AudioWorklet at 48 kHz into WebCodecs AudioEncoder (Opus, mono, 20 ms, 32 kbit/s, no DTX) and
// out as v2 frames ([seq u16][ts_48k u32][level i8][flags u8][opus]); each peer's frames
// through its own AudioDecoder into the playout worklet's jitter buffer. Speaking indicators
// come from the decoded audio's level, not from the sender's header. An AnalyserNode after the
// playout worklet measures what actually goes to the speakers (the "Playback level" meter).
import workletUrl from './huddle-worklet.ts?worker&url'
import type { Signer } from './types'

const FRAME = 960
const SPEAKING_DBOV = -45
const SPEAKING_HOLD_MS = 400
const MAX_OUTBOX = 10 // 200 ms

export type HuddlePeer = { index: number; pubkey: string; decoded: number; speakingUntil: number }

export function levelDbov(pcm: Float32Array): number {
  let sum = 0
  for (let i = 0; i < pcm.length; i++) sum += pcm[i] * pcm[i]
  const rms = Math.sqrt(sum / Math.max(1, pcm.length))
  return rms <= 0 ? -127 : Math.max(-127, Math.min(0, Math.round(20 * Math.log10(rms))))
}

export class HuddleCall {
  state: 'connecting' | 'joined' | 'left' | 'failed' = 'connecting'
  error = ''
  muted = false
  self: number | null = null
  peers = new Map<number, HuddlePeer>()
  sent = 0
  /** The playout worklet's output level (dBov, -127 = silence) over the last ~85 ms, and the
   * loudest since joining: measured after the worklet, on the way to the speakers. */
  playbackDbov = -127
  playbackPeakDbov = -127
  onchange: () => void = () => {}
  private ws: WebSocket | null = null
  private ctx: AudioContext | null = null
  private stream: MediaStream | null = null
  private encoder: AudioEncoder | null = null
  private decoders = new Map<number, AudioDecoder>()
  private playout: AudioWorkletNode | null = null
  private analyser: AnalyserNode | null = null
  private analysed: Float32Array<ArrayBuffer> | null = null
  private ticks = 0
  private seq = 0
  private ts = 0
  private levels = new Map<number, number>() // input timestamp (µs) -> level, for the frame header
  private speakingSelfUntil = 0
  // Encoded frames wait here and leave one per 20 ms: the audio thread can hand over several
  // at once after a stall, and a burst overflows the relay's 8-frame queue per listener (§7.2).
  private outbox: Uint8Array[] = []
  private nextSend = 0
  private pump = 0

  /** `channel`: the room's channel (an ephemeral huddle channel or a permanent one); `parent`:
   * the channel whose 48100 links an ephemeral one (§3.6 item 2), null for a permanent room. */
  constructor(readonly channel: string, private signer: Signer, readonly parent: string | null = null) {}

  get speakingSelf(): boolean {
    return !this.muted && Date.now() < this.speakingSelfUntil
  }

  async join(): Promise<void> {
    try {
      if (typeof AudioEncoder === 'undefined' || typeof AudioDecoder === 'undefined') throw new Error('This browser has no WebCodecs audio (AudioEncoder/AudioDecoder).')
      this.ctx = new AudioContext({ sampleRate: 48000, latencyHint: 'interactive' })
      await this.ctx.audioWorklet.addModule(workletUrl)
      this.playout = new AudioWorkletNode(this.ctx, 'buzz-playout', { numberOfInputs: 0, outputChannelCount: [1] })
      // fftSize 4096 is 85 ms at 48 kHz, read every 50 ms (drain): no stretch goes unmeasured.
      this.analyser = new AnalyserNode(this.ctx, { fftSize: 4096 })
      this.analysed = new Float32Array(this.analyser.fftSize)
      this.playout.connect(this.analyser)
      this.analyser.connect(this.ctx.destination)
      this.stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false, autoGainControl: false } })
      if (this.state !== 'connecting') {
        for (const t of this.stream.getTracks()) t.stop() // left meanwhile: release the microphone
        return
      }
      this.startEncoder()
      const source = this.ctx.createMediaStreamSource(this.stream)
      const capture = new AudioWorkletNode(this.ctx, 'buzz-capture', { numberOfOutputs: 0 })
      capture.port.onmessage = (m) => this.captured(m.data as Float32Array)
      source.connect(capture)
      await this.ctx.resume()
      if (this.state !== 'connecting') return // left while the microphone was being opened
      this.pump = window.setInterval(() => this.drain(), 5)
      this.connect()
    } catch (e) {
      if (this.state === 'left') return // torn down by leave() during an await above
      this.fail(e instanceof Error ? e.message : String(e))
    }
  }

  private startEncoder(): void {
    this.encoder = new AudioEncoder({
      output: (chunk) => this.sendChunk(chunk),
      error: (e) => this.fail(`audio encoder: ${e.message}`),
    })
    this.encoder.configure({
      codec: 'opus',
      sampleRate: 48000,
      numberOfChannels: 1,
      bitrate: 32000,
      // No DTX: one packet every 20 ms keeps the receivers' jitter buffers fed (huddle.md §10.2).
      opus: { frameDuration: 20000, application: 'voip', complexity: 5 },
    } as AudioEncoderConfig)
  }

  private captured(pcm: Float32Array): void {
    if (this.state !== 'joined' || !this.encoder || this.encoder.state !== 'configured') return
    const level = this.muted ? -127 : levelDbov(pcm)
    if (this.muted) pcm.fill(0)
    if (level > SPEAKING_DBOV) this.speakingSelfUntil = Date.now() + SPEAKING_HOLD_MS
    const timestamp = Math.round((this.ts * 1e6) / 48000)
    this.levels.set(timestamp, level)
    if (this.levels.size > 100) this.levels.delete(this.levels.keys().next().value as number)
    const data = new AudioData({ format: 'f32', sampleRate: 48000, numberOfFrames: FRAME, numberOfChannels: 1, timestamp, data: pcm as Float32Array<ArrayBuffer> })
    this.ts += FRAME
    this.encoder.encode(data)
    data.close()
  }

  private sendChunk(chunk: EncodedAudioChunk): void {
    const level = this.levels.get(chunk.timestamp) ?? -127
    this.levels.delete(chunk.timestamp)
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || chunk.byteLength === 0) return
    const frame = new Uint8Array(8 + chunk.byteLength)
    const view = new DataView(frame.buffer)
    view.setUint16(0, this.seq & 0xffff)
    view.setUint32(2, (this.seq * FRAME) >>> 0)
    view.setInt8(6, level)
    view.setUint8(7, chunk.byteLength <= 2 ? 0x01 : 0) // DTX flag for comfort-noise packets
    chunk.copyTo(frame.subarray(8))
    this.seq++
    this.outbox.push(frame)
    if (this.outbox.length > MAX_OUTBOX) this.outbox.shift() // bounded latency: drop the oldest
  }

  private drain(): void {
    if (++this.ticks % 10 === 0) this.measurePlayback()
    const now = performance.now()
    if (this.nextSend < now - 100) this.nextSend = now // after a long stall, do not catch up in a burst
    while (this.outbox.length && this.nextSend <= now) {
      const frame = this.outbox.shift()!
      if (this.ws?.readyState === WebSocket.OPEN) {
        this.ws.send(frame)
        this.sent++
      }
      this.nextSend += 20
    }
  }

  private measurePlayback(): void {
    if (!this.analyser || !this.analysed) return
    this.analyser.getFloatTimeDomainData(this.analysed)
    this.playbackDbov = levelDbov(this.analysed)
    this.playbackPeakDbov = Math.max(this.playbackPeakDbov, this.playbackDbov)
  }

  private connect(): void {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws'
    const ws = new WebSocket(`${scheme}://${location.host}/huddle/${this.channel}/audio`)
    ws.binaryType = 'arraybuffer'
    this.ws = ws
    ws.onmessage = (m) => (typeof m.data === 'string' ? void this.control(m.data) : this.media(new Uint8Array(m.data as ArrayBuffer)))
    ws.onclose = () => {
      if (this.state === 'joined' || this.state === 'connecting') {
        if (this.state === 'connecting' && !this.error) this.error = 'The relay closed the huddle socket.'
        this.state = this.state === 'connecting' ? 'failed' : 'left'
        this.teardown()
      }
    }
  }

  private async control(text: string): Promise<void> {
    let msg: Record<string, unknown>
    try {
      msg = JSON.parse(text)
    } catch {
      return
    }
    if (msg.type === 'challenge' && typeof msg.challenge === 'string') {
      const scheme = location.protocol === 'https:' ? 'wss' : 'ws'
      const event = await this.signer.sign({ kind: 22242, created_at: Math.floor(Date.now() / 1000), tags: [['relay', `${scheme}://${location.host}/`], ['challenge', msg.challenge]], content: '' })
      this.ws?.send(JSON.stringify({ type: 'auth', parent_channel_id: this.parent, protocol_version: 2, event }))
    } else if (msg.type === 'joined') {
      if (this.state === 'connecting' && msg.pubkey === this.signer.pubkey) {
        this.state = 'joined'
        this.self = Number(msg.peer_index)
      }
      const peers = Array.isArray(msg.peers) ? (msg.peers as { pubkey: string; peer_index: number }[]).slice(0, 256) : []
      const now = new Set<number>()
      for (const p of peers) {
        now.add(p.peer_index)
        if (!this.peers.has(p.peer_index)) this.peers.set(p.peer_index, { index: p.peer_index, pubkey: p.pubkey, decoded: 0, speakingUntil: 0 })
      }
      for (const i of [...this.peers.keys()]) if (!now.has(i)) this.dropPeer(i)
      this.onchange()
    } else if (msg.type === 'left') {
      this.dropPeer(Number(msg.peer_index))
      this.onchange()
    } else if (msg.type === 'error') {
      this.fail(String(msg.message ?? 'refused').slice(0, 240))
    }
  }

  private media(bytes: Uint8Array): void {
    if (this.state !== 'joined' || bytes.length <= 9) return
    const index = bytes[0]
    const peer = this.peers.get(index)
    if (!peer || index === this.self) return
    const view = new DataView(bytes.buffer, bytes.byteOffset)
    const ts = view.getUint32(3)
    let dec = this.decoders.get(index)
    if (!dec) {
      dec = new AudioDecoder({ output: (d) => this.decoded(index, d), error: () => this.decoders.delete(index) })
      dec.configure({ codec: 'opus', sampleRate: 48000, numberOfChannels: 1 })
      this.decoders.set(index, dec)
    }
    dec.decode(new EncodedAudioChunk({ type: 'key', timestamp: (ts * 1e6) / 48000, data: bytes.subarray(9) }))
  }

  private decoded(index: number, d: AudioData): void {
    const pcm = new Float32Array(d.numberOfFrames)
    d.copyTo(pcm, { planeIndex: 0, format: 'f32-planar' })
    d.close()
    const peer = this.peers.get(index)
    if (!peer) return
    peer.decoded++
    if (levelDbov(pcm) > SPEAKING_DBOV) peer.speakingUntil = Date.now() + SPEAKING_HOLD_MS
    this.playout?.port.postMessage({ peer: index, pcm }, [pcm.buffer])
    if (peer.decoded % 10 === 1) this.onchange()
  }

  private dropPeer(index: number): void {
    this.peers.delete(index)
    const dec = this.decoders.get(index)
    if (dec && dec.state !== 'closed') dec.close()
    this.decoders.delete(index)
    this.playout?.port.postMessage({ peer: index, drop: true })
  }

  setMuted(muted: boolean): void {
    this.muted = muted
    for (const t of this.stream?.getAudioTracks() ?? []) t.enabled = !muted
    this.onchange()
  }

  leave(): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'leave' }))
    this.state = 'left'
    this.ws?.close(1000)
    this.teardown()
  }

  private fail(message: string): void {
    this.error = message
    this.state = 'failed'
    this.ws?.close()
    this.teardown()
  }

  private teardown(): void {
    clearInterval(this.pump)
    this.outbox = []
    for (const t of this.stream?.getTracks() ?? []) t.stop()
    for (const d of this.decoders.values()) if (d.state !== 'closed') d.close()
    this.decoders.clear()
    if (this.encoder && this.encoder.state !== 'closed') this.encoder.close()
    void this.ctx?.close()
    this.ctx = null
    this.analyser = null
    this.playbackDbov = -127
    this.onchange()
  }
}
