// Hostile inputs through the binding (issue 29): each was an abort, a wedge
// or a leak before; each is now a typed answer.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { join } from 'node:path'
import { TurnwalError, storeKind } from '../index.js'
import { KINDS, mount, storePath, tempDir } from './support.mjs'

const turn = (n, seq) => [
  { type: 'turn/start', seq, time: 1, data: { turn: n } },
  { type: 'turn/end', seq: seq + 1, time: 1, data: { turn: n, reason: { kind: 'completed' } } },
]

describe('hostile inputs', () => {
  it('metadata over a WAL file header\'s 1 MiB is refused before anything is written', async (t) => {
    const path = storePath(t, 'wal')
    const { persistence } = await mount(t, { path })
    const cwd = `/${'c'.repeat(1_100_000)}`
    await persistence.create({ version: 0, id: 'wide', createdAt: 1, cwd })
    await assert.rejects(persistence.appendBatch({ version: 0, id: 'wide', createdAt: 1, cwd }, turn(1, 0), false), (error) => {
      assert.equal(error.code, 'INVALID_HEADER', String(error))
      assert.match(error.message, /over the 1048576 bytes a WAL log's file header holds \(rule max-header-json\); nothing was written/)
      assert.ok(error.message.length < 2000, 'the message quotes a bounded excerpt')
      return true
    })
    let files = []
    try { files = readdirSync(join(path, 'sessions')).filter((f) => !f.startsWith('.')) } catch {}
    assert.deepEqual(files.filter((f) => f.endsWith('.twal')), [], 'no half-created log')
    assert.deepEqual(await persistence.list(), [])
  })

  it('the store a path names is read as every turnwal tool reads it; a JSONL root is refused', async (t) => {
    const dir = tempDir(t)
    mkdirSync(join(dir, 'store.db'))
    writeFileSync(join(dir, 'plain'), 'not a database')
    const db = new DatabaseSync(join(dir, 'no-extension'))
    db.exec('CREATE TABLE t (x)')
    db.close()
    for (const [path, kind] of [
      [join(dir, 'new'), 'wal'],
      [join(dir, 'sessions.sqlite'), 'sqlite'],
      [join(dir, 'SESSIONS.DB'), 'sqlite'],
      [join(dir, 'store.db'), 'wal'],
      [join(dir, 'no-extension'), 'sqlite'],
      ['postgres://u@h/db', 'postgres'],
      ['postgresql://u@h/db', 'postgres'],
    ]) {
      assert.equal(storeKind(path), kind, path)
    }
    for (const path of [`jsonl:${dir}`, `jsonl+zstd:${dir}`, join(dir, 'plain'), '']) {
      assert.throws(() => storeKind(path), (error) => {
        assert.ok(error instanceof TurnwalError, String(error))
        assert.equal(error.code, 'INVALID_ARGUMENT', String(error))
        return true
      }, path)
    }
    await assert.rejects(async () => { await mount(t, { path: `jsonl:${dir}` }) }, (error) => {
      assert.match(String(error?.message ?? error), /JSONL root: turnwal-dsh stores sessions in a WAL directory/)
      return true
    })
  })

  it('busyTimeoutMs past SQLite\'s limit is refused, never wrapped or a panic', async (t) => {
    for (const busyTimeoutMs of [2 ** 31, 2 ** 32, 2 ** 53]) {
      await assert.rejects(async () => {
        const { persistence } = await mount(t, { path: join(tempDir(t), 's.sqlite'), busyTimeoutMs })
        await persistence.list()
      }, (error) => {
        assert.match(String(error?.message ?? error), /busyTimeoutMs|2147483647/)
        return true
      }, String(busyTimeoutMs))
    }
  })

  it('a non-string id is a TurnwalError, not napi\'s internals', async (t) => {
    const { persistence } = await mount(t, { path: storePath(t, 'wal') })
    for (const id of [42, null, { id: 's' }]) {
      await assert.rejects(persistence.loadStored(id), (error) => {
        assert.ok(error instanceof TurnwalError, `${String(id)}: ${error?.constructor?.name}: ${error?.message}`)
        assert.equal(error.code, 'INVALID_ARGUMENT')
        return true
      })
    }
  })

  it('a PostgreSQL password given as a query parameter is never repeated in errors', async (t) => {
    for (const path of ['postgres://u:hunter2@127.0.0.1:1/db', 'postgres://u@127.0.0.1:1/db?password=hunter2', 'postgresql://u@127.0.0.1:1/db?sslmode=disable&password=hunter2']) {
      const { persistence } = await mount(t, { path })
      assert.ok(!persistence.shown.includes('hunter2'), persistence.shown)
      await assert.rejects(persistence.list(), (error) => {
        assert.ok(!String(error.message).includes('hunter2'), error.message)
        return true
      })
    }
  })

  for (const kind of KINDS) {
    it(`data nested a thousand levels deep (as deep as upstream's coordinator hands over) is stored and read back, ${kind} store`, async (t) => {
      const path = storePath(t, kind)
      const { ctx, persistence, dispose } = await mount(t, { path })
      const deep = (d) => { let v = 'leaf'; for (let i = 0; i < d; i++) v = { k: v }; return v }
      let session
      const fiber = await ctx.plugin(Object.assign((inner) => { session = inner.sessions.create('live', { meta: { cwd: '/w' } }) }, { inject: ['sessions'] }))
      session.append('turn/start', { turn: 1 })
      session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
      await ctx.sessions.flush(session)
      session.append('turn/start', { turn: 2 })
      session.append('hook/result', { hook: 'ast-dump', output: deep(1000) })
      session.append('turn/end', { turn: 2, reason: { kind: 'completed' } })
      for (let n = 3; n <= 5; n++) {
        session.append('turn/start', { turn: n })
        session.append('turn/end', { turn: n, reason: { kind: 'completed' } })
      }
      await ctx.sessions.flush(session)
      const live = JSON.parse(JSON.stringify(session.events))
      await fiber.dispose()
      await dispose()
      const reader = await mount(t, { path })
      const loaded = await reader.persistence.load('live')
      assert.equal(loaded.events.length, live.length)
      assert.deepEqual(JSON.parse(JSON.stringify(loaded.events)), live)
    })
  }
})

