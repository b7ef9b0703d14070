import { useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { jumpTo, parseLink } from '../navigate'
import { onLoaded } from '../render/lazy'
import type { Msg, Workspace } from '../workspace'
import { lastChannel } from '../workspace'
import { UiContext, type Ui } from './context'
import { ProfileCard } from './ProfileCard'
import { act, useWorkspace } from './hooks'
import { Sidebar } from './Sidebar'
import { Conversation } from './Conversation'
import { ThreadPanel } from './Thread'
import { MembersPanel } from './Members'
import { SearchPanel } from './Search'
import { ProfileDialog } from './Profile'
import { NewChannelDialog } from './NewChannel'
import { BrowsePanel } from './Browse'
import { AgentsPanel } from './Agents'
import { HuddlePanel } from './Huddle'
import { PrivateConversation } from './PrivateDms'
import { InboxPanel } from './Inbox'
import { JumpTo, ThemeSwitch, useShortcuts } from './Comfort'
import { WorkflowsPanel } from './Workflows'
import { DirectoryPanel } from './Directory'
import { Toast } from './Toast'

export type Panel = 'thread' | 'members' | 'search' | 'browse' | 'agents' | 'huddle' | 'inbox' | 'workflows' | 'directory' | null

export function Shell({ ws, fresh }: { ws: Workspace; fresh: boolean }) {
  useWorkspace(ws)
  const [panel, setPanel] = useState<Panel>(null)
  const [menu, setMenu] = useState(false)
  const [profile, setProfile] = useState(fresh)
  const [creating, setCreating] = useState(false)
  const [query, setQuery] = useState('')

  const [card, setCard] = useState<string | null>(null)
  const [jumping, setJumping] = useState(false)
  useShortcuts(() => setJumping(true), () => setPanel(null))
  const [priv, setPriv] = useState<string[] | null>(null) // an open end-to-end encrypted DM
  const openPrivate = (peers: string[]) => {
    setMenu(false)
    if (panel === 'thread' || panel === 'members' || panel === 'huddle') setPanel(null)
    setPriv(peers)
  }

  // Messages render again when the highlighter or the emoji table arrives.
  useEffect(() => onLoaded(() => ws.changed()), [ws])

  const open = (id: string) => {
    setMenu(false)
    setPriv(null)
    if (panel === 'thread' || panel === 'members') setPanel(null)
    // The channel on screen stays as it is (its "New messages" divider too, until it is left).
    if (id === ws.active && ws.timeline(id).loaded) return
    void act(ws, () => ws.openChannel(id))
  }

  const openThread = (id: string) => {
    setPanel('thread')
    void act(ws, () => ws.openThread(id))
  }

  /** `#<channel>` opens it; `#<channel>/<event>` opens it at that message (or its thread). */
  const go = (hash: string) => {
    const link = parseLink(hash)
    if (!link) return
    if (!link.event) {
      if (link.channel !== ws.active) open(link.channel)
      return
    }
    setMenu(false)
    if (panel === 'thread' || panel === 'members') setPanel(null)
    void act(ws, async () => {
      const root = await jumpTo(ws, link.channel, link.event as string)
      if (root) openThread(root)
    })
  }
  // The context's `go` calls the latest `go` (it closes over the panel state).
  const latestGo = useRef(go)
  latestGo.current = go
  const ui: Ui = useMemo(() => ({ openProfile: setCard, go: (hash: string) => latestGo.current(hash) }), [])

  // A #<channel id> link opens that channel; otherwise my first channel once the list arrives.
  useEffect(() => {
    if (!ws.active && ws.channelsLoaded) {
      if (parseLink(location.hash)) {
        go(location.hash)
        return
      }
      // Where this browser was last, else the first channel by name (a DM only when there is none).
      const mine = ws.myChannels().filter((c) => !c.ttl)
      const last = lastChannel(ws.me.pubkey)
      const first = mine.find((c) => c.id === last) ?? mine.sort((a, b) => Number(a.type === 'dm') - Number(b.type === 'dm') || a.name.localeCompare(b.name))[0]
      if (first) void ws.openChannel(first.id)
    }
  }, [ws.channelsLoaded, ws.channels])

  // Editing the #<channel id> of an open tab (or following such a link) switches channel too.
  useEffect(() => {
    const onHash = () => go(location.hash)
    window.addEventListener('hashchange', onHash)
    return () => window.removeEventListener('hashchange', onHash)
  })
  const jump = (m: Msg) => go(`#${m.channel}/${m.ev.id}`)
  const toggle = (p: Panel) => setPanel(panel === p ? null : p)
  const channel = ws.active ? ws.channels.get(ws.active) ?? null : null

  return (
    <UiContext.Provider value={ui}>
    <div class={`shell ${menu ? 'menu-open' : ''} ${panel ? 'panel-open' : ''}`}>
      <header class="top">
        <button type="button" class="menu-button" aria-expanded={menu} onClick={() => setMenu(!menu)}>Menu</button>
        <span class="brand">buzz</span>
        <form
          class="search"
          role="search"
          onSubmit={(e) => {
            e.preventDefault()
            if (query.trim()) setPanel('search')
          }}
        >
          <input type="search" aria-label="Search" placeholder="Search" value={query} onInput={(e) => setQuery(e.currentTarget.value)} />
        </form>
        <span class={`status ${ws.status}`} title={ws.statusDetail}>{ws.status === 'online' ? 'Connected' : ws.status === 'connecting' ? 'Connecting…' : 'Offline'}</span>
        <ThemeSwitch />
        <button type="button" class="quiet" onClick={() => setProfile(true)}>{ws.nameOf(ws.me.pubkey)}</button>
      </header>
      <Sidebar ws={ws} onOpen={open} onNew={() => setCreating(true)} onBrowse={() => { setMenu(false); toggle('browse'); void ws.loadChannels() }} onAgents={() => { setMenu(false); toggle('agents') }} onDirectory={() => { setMenu(false); toggle('directory') }} directory={panel === 'directory'} privateActive={priv} onPrivate={openPrivate} inbox={panel === 'inbox'} onInbox={() => { setMenu(false); toggle('inbox') }} />
      <main class="main">
        {priv ? (
          <PrivateConversation ws={ws} peers={priv} />
        ) : channel ? (
          <Conversation
            ws={ws}
            channel={channel}
            onThread={openThread}
            onMembers={() => toggle('members')}
            onHuddle={() => setPanel('huddle')}
            onWorkflows={() => toggle('workflows')}
            onPrivate={openPrivate}
          />
        ) : ws.active && ws.channelsLoaded ? (
          <div class="empty">
            <h2>Channel not available</h2>
            <p role="alert">{ws.refused.get(ws.active) ?? 'This channel does not exist, or it is private to its members.'}</p>
          </div>
        ) : (
          <div class="empty">
            <h2>No channel open</h2>
            <p>{ws.channelsLoaded ? 'Create a channel or browse the open ones to start.' : 'Loading channels…'}</p>
          </div>
        )}
      </main>
      {panel === 'thread' && ws.thread && <ThreadPanel ws={ws} root={ws.thread} onClose={() => setPanel(null)} />}
      {panel === 'members' && channel && <MembersPanel ws={ws} channel={channel} onClose={() => setPanel(null)} />}
      {panel === 'search' && <SearchPanel ws={ws} query={query} onClose={() => { setPanel(null); setQuery('') }} onJump={jump} />}
      {panel === 'browse' && <BrowsePanel ws={ws} onClose={() => setPanel(null)} onOpen={open} />}
      {panel === 'agents' && <AgentsPanel ws={ws} onClose={() => setPanel(null)} />}
      {panel === 'directory' && <DirectoryPanel ws={ws} onClose={() => setPanel(null)} />}
      {panel === 'inbox' && <InboxPanel ws={ws} onClose={() => setPanel(null)} onGo={(hash) => { setPanel(null); go(hash) }} onPrivate={openPrivate} />}
      {panel === 'workflows' && channel && <WorkflowsPanel ws={ws} channel={channel} onClose={() => setPanel(null)} />}
      {panel === 'huddle' && channel && <HuddlePanel ws={ws} channel={channel} onClose={() => setPanel(null)} />}
      {profile && <ProfileDialog ws={ws} fresh={fresh} onClose={() => setProfile(false)} />}
      {creating && <NewChannelDialog ws={ws} onClose={() => setCreating(false)} onCreated={(id) => { setCreating(false); open(id) }} />}
      {jumping && <JumpTo ws={ws} onClose={() => setJumping(false)} onOpen={open} onPrivate={openPrivate} />}
      {card && <ProfileCard ws={ws} pubkey={card} onClose={() => setCard(null)} onProfile={setCard} onOpen={open} />}
      {(priv || !channel) && <Toast ws={ws} floating />}
    </div>
    </UiContext.Provider>
  )
}
