// Audio worklet processors for huddles (loaded by huddle.ts with audioWorklet.addModule):
// - "buzz-capture": posts the microphone's 48 kHz mono samples to the page in 20 ms blocks;
// - "buzz-playout": per-peer jitter buffers fed with decoded PCM, mixed to the speakers. Each
//   peer starts after JITTER_START samples are buffered and re-buffers after an underrun, so
//   network jitter becomes a short, bounded delay instead of clicks.
declare const sampleRate: number
declare function registerProcessor(name: string, ctor: unknown): void
declare class AudioWorkletProcessor {
  readonly port: MessagePort
}

const FRAME = 960 // 20 ms at 48 kHz
const JITTER_START = 2880 // 60 ms
const JITTER_MAX = 9600 // 200 ms: older audio is dropped

class Capture extends AudioWorkletProcessor {
  private buf = new Float32Array(FRAME)
  private fill = 0
  process(inputs: Float32Array[][]): boolean {
    const input = inputs[0]?.[0]
    if (!input) return true
    let i = 0
    while (i < input.length) {
      const n = Math.min(FRAME - this.fill, input.length - i)
      this.buf.set(input.subarray(i, i + n), this.fill)
      this.fill += n
      i += n
      if (this.fill === FRAME) {
        this.port.postMessage(this.buf, [this.buf.buffer])
        this.buf = new Float32Array(FRAME)
        this.fill = 0
      }
    }
    return true
  }
}

type Peer = { chunks: Float32Array[]; offset: number; queued: number; playing: boolean }

class Playout extends AudioWorkletProcessor {
  private peers = new Map<number, Peer>()
  constructor() {
    super()
    this.port.onmessage = (m: MessageEvent) => {
      const { peer, pcm, drop } = m.data as { peer: number; pcm?: Float32Array; drop?: boolean }
      if (drop) {
        this.peers.delete(peer)
        return
      }
      if (!pcm) return
      let p = this.peers.get(peer)
      if (!p) this.peers.set(peer, (p = { chunks: [], offset: 0, queued: 0, playing: false }))
      p.chunks.push(pcm)
      p.queued += pcm.length
      while (p.queued - p.offset > JITTER_MAX && p.chunks.length > 1) {
        p.queued -= p.chunks[0].length
        p.chunks.shift()
        p.offset = 0
      }
      if (!p.playing && p.queued - p.offset >= JITTER_START) p.playing = true
    }
  }
  process(_inputs: Float32Array[][], outputs: Float32Array[][]): boolean {
    const out = outputs[0]?.[0]
    if (!out) return true
    out.fill(0)
    for (const p of this.peers.values()) {
      if (!p.playing) continue
      let i = 0
      while (i < out.length && p.chunks.length) {
        const c = p.chunks[0]
        const n = Math.min(out.length - i, c.length - p.offset)
        for (let k = 0; k < n; k++) out[i + k] += c[p.offset + k]
        i += n
        p.offset += n
        if (p.offset === c.length) {
          p.chunks.shift()
          p.queued -= c.length
          p.offset = 0
        }
      }
      if (!p.chunks.length) p.playing = false // underrun: buffer again before playing
    }
    for (let k = 1; k < outputs[0].length; k++) outputs[0][k].set(out)
    return true
  }
}

registerProcessor('buzz-capture', Capture)
registerProcessor('buzz-playout', Playout)
void sampleRate
