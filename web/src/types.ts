// Shapes shared by the modules: NIP-01 events and the signer the workspace uses.
export type Tag = string[]
export type Template = { kind: number; created_at: number; tags: Tag[]; content: string }
export type NEvent = Template & { id: string; pubkey: string; sig: string }

/** A local key or a NIP-07 extension; nip44 is absent when the extension has none. */
export interface Signer {
  readonly pubkey: string
  readonly source: 'memory' | 'extension'
  sign(t: Template): Promise<NEvent>
  nip44Encrypt?(peer: string, plaintext: string): Promise<string>
  nip44Decrypt?(peer: string, payload: string): Promise<string>
}

export const now = (): number => Math.floor(Date.now() / 1000)

export function firstTag(ev: { tags: Tag[] }, name: string): string | undefined {
  return ev.tags.find((t) => t[0] === name && t.length >= 2)?.[1]
}
