import type { ComponentChildren } from 'preact'

/** A side panel: role complementary with the given name, a heading and a Close button. */
export function Panel({ name, title, onClose, children }: { name: string; title?: string; onClose: () => void; children: ComponentChildren }) {
  return (
    <aside class="panel" aria-label={name}>
      <header class="panel-head">
        <h2>{title ?? name}</h2>
        <button type="button" class="quiet" aria-label={`Close ${name.toLowerCase()}`} onClick={onClose}>✕</button>
      </header>
      <div class="panel-body">{children}</div>
    </aside>
  )
}
