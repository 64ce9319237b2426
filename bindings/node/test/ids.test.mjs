// Session ids and cwds are JavaScript strings: a lone UTF-16 surrogate in
// one is kept exact by the WAL store (its header, its file name, every
// lookup), and refused by the SQLite store, whose TEXT cannot hold it —
// where upstream's SQLite store would silently write U+FFFD.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { mount, plainTurn, storePath } from './support.mjs'

const lone = { version: 0, id: 'lone\ud800id', createdAt: 1000, cwd: '/work/\udc00dir', agentPreset: 'x\ud83d' }

describe('session ids with lone UTF-16 surrogates', () => {
  it('round-trip exactly through a WAL store, and name their own session', async (t) => {
    const path = storePath(t, 'wal')
    const first = await mount(t, { path })
    await first.persistence.create(lone)
    await first.persistence.append(lone.id, plainTurn(0, 1))
    // The neighbouring surrogate, and the U+FFFD a lossy conversion writes,
    // are other sessions.
    await first.persistence.create({ ...lone, id: 'lone\ud801id' })
    await first.persistence.append('lone\ud801id', plainTurn(0, 1, 7))
    await first.dispose()

    assert.ok(existsSync(join(path, 'sessions', 'lone~ED~A0~80id.twal')))
    const second = await mount(t, { path })
    const loaded = await second.persistence.load(lone.id)
    assert.equal(JSON.stringify(loaded.meta), JSON.stringify({ ...lone, createdAt: 1000 }))
    assert.deepEqual(loaded.events, plainTurn(0, 1))
    assert.equal((await second.persistence.load('lone\ud801id')).events[0].time, 7)
    assert.deepEqual((await second.persistence.list()).map((h) => JSON.stringify(h.id)).sort(), ['"lone\\ud800id"', '"lone\\ud801id"'])
    await assert.rejects(second.persistence.load('lone\ufffdid'), /not found/)
    assert.deepEqual((await second.persistence.readFrom(lone.id, 5)).events, plainTurn(0, 1).slice(5))
  })

  it('are refused by a SQLite store, which names the field', async (t) => {
    const { persistence } = await mount(t, { path: storePath(t, 'sqlite') })
    await assert.rejects(
      (async () => {
        await persistence.create(lone)
        await persistence.append(lone.id, plainTurn(0, 1))
      })(),
      /session header field id "lone\\ud800id" holds a lone UTF-16 surrogate/,
    )
    assert.deepEqual(await persistence.list(), [])
  })
})
