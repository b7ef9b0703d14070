declare module '*?worker&url' {
  const url: string
  export default url
}

declare module 'markdown-it-emoji/lib/data/full.mjs' {
  const table: Record<string, string>
  export default table
}
