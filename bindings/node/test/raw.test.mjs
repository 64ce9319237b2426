// The session export (issue 32): turnwal-dsh declares raw artifacts, and
// `readRaw` gives each session as the upstream JSONL backend's own text —
// byte for byte what that backend's `readRaw` returns for the same events
// appended in one batch (header line, chunk runs packed) — on every store,
// sealed or not, with an open turn as stored; and that text, put where
// upstream's JSONL backend keeps a log, loads back through it as the same
// events. The store path's `~` is the home directory.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { expandHome } from '../index.js'
import { KINDS, meta, mount, plainTurn, storePath, tempDir } from './support.mjs'
import { BATCH, workload } from './workload.mjs'

const CWD = '/work/project'

/** The first `n` workload events (turns of streamed text-delta runs, a tool call each). */
const events = (n) => workload().slice(0, n)

/** What upstream's JSONL backend (`compression`) returns from `readRaw` after one append of `batch`. */
async function upstreamRaw(t, id, batch, compression) {
  const root = join(tempDir(t), 'jsonl')
  const jsonl = await mount(t, { root, compression }, JsonlSessionPersistence)
  await jsonl.persistence.create(meta(id, CWD))
  await jsonl.persistence.append(id, batch)
  await jsonl.dispose()
  const reader = await mount(t, { root, compression }, JsonlSessionPersistence)
  return reader.persistence.readRaw(id)
}

for (const kind of KINDS) {
  describe(`readRaw, ${kind} store`, () => {
    it('is upstream JSONL text byte for byte, and upstream reads it back as the same events', async (t) => {
      const id = 'exported'
      const batch = events(500)
      const { persistence, dispose } = await mount(t, { path: storePath(t, kind) })
      assert.equal(persistence.supportsRawArtifacts, true)
      await persistence.create(meta(id, CWD))
      // Appended as a harness streams it, in write-behind batches.
      for (let i = 0; i < batch.length; i += BATCH) await persistence.append(id, batch.slice(i, i + BATCH))
      const raw = await persistence.readRaw(id)
      for (const compression of ['none', 'zstd']) {
        const upstream = await upstreamRaw(t, id, batch, compression)
        assert.equal(raw.content, upstream.content, `the text upstream's ${compression} backend holds`)
        assert.deepEqual(raw.meta, upstream.meta)
        assert.equal(raw.filename, upstream.filename)
      }
      // Runs of streamed deltas are packed, as upstream packs them.
      const lines = raw.content.trimEnd().split('\n')
      assert.equal(JSON.parse(lines[0]).type, 'session')
      assert.equal(lines.filter((line) => line.startsWith('{"type":"text-chunks"')).length, 20)
      assert.equal(lines.length, 1 + batch.length - 20 * 16)

      // The artifact where upstream's JSONL backend keeps a log: it loads it.
      const root = join(tempDir(t), 'jsonl-import')
      const located = await mount(t, { root, compression: 'none' }, JsonlSessionPersistence)
      const { path } = located.persistence.locate(raw.meta)
      mkdirSync(join(path, '..'), { recursive: true })
      writeFileSync(path, raw.content)
      const loaded = await located.persistence.load(id)
      assert.deepEqual(loaded.events, batch, 'upstream reads every event back')
      await dispose()
    })

    it('gives an open turn as stored, without closers, and nothing for an absent session', async (t) => {
      const id = 'open'
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta(id, CWD))
      const stored = [...plainTurn(0, 1), ...plainTurn(6, 2).slice(0, 3)]
      await persistence.append(id, stored)
      const raw = await persistence.readRaw(id)
      const lines = raw.content.trimEnd().split('\n')
      assert.deepEqual(lines.slice(1).map((line) => JSON.parse(line)), stored)
      assert.equal(raw.content, (await upstreamRaw(t, id, stored, 'none')).content)
      assert.equal(await persistence.readRaw('never-created'), undefined)
    })
  })
}

describe('readRaw, a sealed WAL session', () => {
  it('reads the sealed turns (archive and live file) as the same text', async (t) => {
    const path = storePath(t, 'wal')
    const id = 'sealed'
    const batch = events(2_000)
    const first = await mount(t, { path })
    await first.persistence.create(meta(id, CWD))
    for (let i = 0; i < batch.length; i += BATCH) await first.persistence.append(id, batch.slice(i, i + BATCH))
    const live = await first.persistence.readRaw(id)
    // Closing the store seals the session at rest.
    await first.dispose()
    const second = await mount(t, { path })
    const sealed = await second.persistence.readRaw(id)
    assert.equal(sealed.content, live.content)
    assert.equal(sealed.content, (await upstreamRaw(t, id, batch, 'zstd')).content)
  })
})

describe('the store path', () => {
  it('expands a leading ~ to the home directory and refuses ~user', async (t) => {
    assert.equal(expandHome('~'), homedir())
    assert.equal(expandHome('~/.dsh/sessions.turnwal'), join(homedir(), '.dsh/sessions.turnwal'))
    assert.equal(expandHome('relative/store'), 'relative/store')
    assert.equal(expandHome('/abs/~/store'), '/abs/~/store')
    assert.throws(() => expandHome('~bob/store'), { name: 'TypeError', message: /only ~ and ~\/… are expanded/ })
    const home = tempDir(t)
    const saved = process.env.HOME
    process.env.HOME = home
    t.after(() => {
      if (saved === undefined) delete process.env.HOME
      else process.env.HOME = saved
    })
    const { persistence } = await mount(t, { path: '~/.dsh/sessions.turnwal' })
    assert.equal(persistence.path, join(home, '.dsh/sessions.turnwal'))
    await persistence.create(meta('s', CWD))
    await persistence.append('s', plainTurn(0, 1))
    assert.equal(persistence.locate({ id: 's' }).path.startsWith(join(home, '.dsh/sessions.turnwal')), true)
  })
})
