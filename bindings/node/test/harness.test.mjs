// turnwal-dsh through a real cordis Context with the published SessionStore
// mounted, against both stores the plugin opens (a WAL directory and a SQLite
// database): the write path of live sessions, the read API, and the storage
// primitives the upstream PersistenceCoordinator relies on.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { appendFileSync, statSync } from 'node:fs'
import { Context } from '@deepseek-ai/cordis'
import { Session, SessionStore } from '@deepseek-ai/dsh-session'
import { TurnwalError, TurnwalSessionPersistence, isSqlitePath } from '../index.js'
import {
  KINDS, image, listedRevision, liveSession, meta, mount, plainTurn, storePath, tearTail, toolTurn, turnUntilToolCall,
} from './support.mjs'

for (const kind of KINDS) {
  describe(`turnwal-dsh on a ${kind} store`, () => {
    it('round trip: turns with tool calls through Session.append, flush, dispose, load back identically in a new context', async (t) => {
      const path = storePath(t, kind)
      const first = await mount(null, { path })
      const { session, fiber } = await liveSession(first.ctx, 'round-trip', { meta: { cwd: '/work' } })
      toolTurn(session, 1)
      await first.ctx.sessions.flush(session)
      // Lossless text: a lone surrogate, astral characters, escapes.
      toolTurn(session, 2, 'lone \ud800 surrogate, 𝄞 and "quotes"\n\ttabs')
      toolTurn(session, 3)
      const written = structuredClone(session.events)
      const header = structuredClone(session.header)
      await first.ctx.sessions.flush(session)
      await fiber.dispose()
      await first.dispose()

      const second = await mount(t, { path })
      const loaded = await second.persistence.load('round-trip')
      assert.deepEqual(loaded.events, written)
      assert.equal(JSON.stringify(loaded.events), JSON.stringify(written), 'the same JSON text, key order included')
      assert.deepEqual(loaded.meta, header)
      assert.equal(loaded.events.length, 3 * 14)
      assert.ok(Object.isFrozen(loaded.events[1].data), 'the coordinator freezes what it returns')
      // The surface derives the same model history.
      const resumed = Session.create('round-trip', loaded.events, loaded.meta)
      assert.equal(resumed.deriveMessages().length, 3 * 4)
      assert.deepEqual((await second.persistence.list()).map((h) => h.id), ['round-trip'])
    })

    it('inspect never changes the revision; load repairs once and changes it', async (t) => {
      const path = storePath(t, kind)
      const first = await mount(null, { path })
      const { session, fiber } = await liveSession(first.ctx, 'crashed', { meta: { cwd: '/work' } })
      toolTurn(session, 1)
      const callSeq = turnUntilToolCall(session, 2)
      await first.ctx.sessions.flush(session)
      await fiber.dispose() // the turn stays open: what a crash leaves
      await first.dispose()

      const { persistence } = await mount(t, { path })
      const before = await listedRevision(persistence, 'crashed')
      const bytes = image(path, kind, persistence, 'crashed')
      assert.equal(typeof before, 'string')
      const inspected = await persistence.inspect('crashed')
      await persistence.inspect('crashed')
      await persistence.readFrom('crashed', 0)
      assert.equal(await listedRevision(persistence, 'crashed'), before, 'reads never change the revision')
      assert.equal(await persistence.readStoredRevision('crashed'), before)
      assert.equal(image(path, kind, persistence, 'crashed'), bytes, 'inspect writes nothing')
      assert.deepEqual(inspected.events.slice(-3).map((e) => e.type), ['tool/result', 'step/end', 'turn/end'])

      const loaded = await persistence.load('crashed')
      assert.deepEqual(loaded.events, inspected.events)
      const after = await listedRevision(persistence, 'crashed')
      assert.notEqual(after, before, 'the repair changed the revision')
      assert.equal(await persistence.readStoredRevision('crashed'), after)
      const [result, stepEnd, turnEnd] = loaded.events.slice(-3)
      assert.equal(result.data.error.code, 'TOOL_OUTCOME_UNKNOWN')
      assert.deepEqual(result.sourceEventSeqs, [callSeq])
      assert.deepEqual(stepEnd.data, { turn: 2, step: 1 })
      assert.deepEqual(turnEnd.data, { turn: 2, reason: { kind: 'interrupted' } })
      // Nothing left to repair: a second load changes nothing.
      await persistence.load('crashed')
      assert.equal(await listedRevision(persistence, 'crashed'), after)
    })

    it('readFrom edges: whole log, suffix, at and past the end, an open turn as stored, absent id, invalid seqs', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('rf', '/work'))
      const log = plainTurn(0, 1)
      await persistence.append('rf', log)
      assert.deepEqual((await persistence.readFrom('rf', 0)).events, log)
      const suffix = await persistence.readFrom('rf', 3)
      assert.deepEqual(suffix.events, log.slice(3))
      assert.deepEqual(suffix.meta, meta('rf', '/work'))
      assert.deepEqual((await persistence.readFrom('rf', 6)).events, [])
      assert.deepEqual((await persistence.readFrom('rf', 106)).events, [])
      const open = [
        { type: 'turn/start', seq: 6, time: 7, data: { turn: 2 } },
        { type: 'step/start', seq: 7, time: 8, data: { turn: 2, step: 1 } },
      ]
      await persistence.append('rf', open)
      assert.deepEqual((await persistence.readFrom('rf', 6)).events, open, 'no closers: served as stored')
      await assert.rejects(persistence.readFrom('absent', 0), /not found/)
      await assert.rejects(persistence.readFrom('rf', -1), { name: 'TypeError', message: /non-negative safe integer/ })
      await assert.rejects(persistence.readFrom('rf', 1.5), { name: 'TypeError', message: /non-negative safe integer/ })
    })

    it('duplicate create is refused, in this backend and on disk', async (t) => {
      const path = storePath(t, kind)
      const first = await mount(null, { path })
      await first.persistence.create(meta('dup'))
      await assert.rejects(first.persistence.create(meta('dup')), /already exists in this backend/)
      await first.persistence.append('dup', plainTurn(0, 1))
      await assert.rejects(first.persistence.create(meta('dup')), /already exists/)
      await first.dispose()
      const { persistence } = await mount(t, { path })
      await assert.rejects(persistence.create(meta('dup')), /already has a persisted log on disk/)
    })

    it('list and listSnapshots exclude sessions that were created but never appended', async (t) => {
      const { ctx, persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('lazy'))
      ctx.sessions.create('lazy-live', { meta: { cwd: '/work' } }) // live, nothing appended
      await persistence.create(meta('kept'))
      await persistence.append('kept', plainTurn(0, 1))
      assert.deepEqual((await persistence.list()).map((h) => h.id), ['kept'])
      const snapshots = await persistence.listSnapshots()
      assert.deepEqual(snapshots.map((s) => s.header.id), ['kept'])
      assert.equal(snapshots[0].revision, await persistence.readStoredRevision('kept'))
      assert.equal(await persistence.readStoredRevision('lazy'), undefined)
      assert.equal(await persistence.loadStored('lazy'), undefined)
    })

    it('an already-aborted signal rejects with exactly signal.reason', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('s'))
      await persistence.append('s', plainTurn(0, 1))
      const controller = new AbortController()
      assert.equal((await persistence.listSnapshots(controller.signal)).length, 1)
      const reason = new Error('cancelled by the test')
      controller.abort(reason)
      const { signal } = controller
      for (const [name, op] of [
        ['list', () => persistence.list(signal)],
        ['listSnapshots', () => persistence.listSnapshots(signal)],
        ['inspect', () => persistence.inspect('s', signal)],
        ['readFrom', () => persistence.readFrom('s', 0, signal)],
        ['loadStored', () => persistence.loadStored('s', signal)],
        ['readStoredRevision', () => persistence.readStoredRevision('s', signal)],
      ]) {
        await assert.rejects(op(), (error) => {
          assert.equal(error, reason, `${name} rejects with the very reason object`)
          return true
        })
      }
      // A non-Error reason is passed through as it is too.
      const other = new AbortController()
      other.abort('just a string')
      await assert.rejects(persistence.list(other.signal), (error) => error === 'just a string')
    })

    it('appendBatch refuses a batch that does not start at the stored next seq, and leaves the log as it was', async (t) => {
      const path = storePath(t, kind)
      const { persistence } = await mount(t, { path })
      await persistence.create(meta('seq'))
      await persistence.append('seq', plainTurn(0, 1))
      const bytes = image(path, kind, persistence, 'seq')
      const revision = await persistence.readStoredRevision('seq')
      const header = meta('seq')
      for (const batch of [plainTurn(0, 1), plainTurn(7, 2), plainTurn(5, 2)]) {
        await assert.rejects(persistence.appendBatch(header, batch, true), (error) => {
          assert.ok(error instanceof TurnwalError)
          assert.equal(error.code, 'SEQ_MISMATCH')
          assert.match(error.message, /stored next seq is 6/)
          return true
        })
      }
      // A batch whose seqs skip one inside it: the one rule storage itself
      // needs (the coordinator checks the rest of the turn contract, and
      // what it hands over is stored as upstream's backends store it).
      await assert.rejects(
        persistence.appendBatch(header, [
          { type: 'turn/start', seq: 6, time: 1, data: { turn: 2 } },
          { type: 'turn/end', seq: 8, time: 2, data: { turn: 2, reason: { kind: 'completed' } } },
        ], true),
        (error) => {
          assert.equal(error.name, 'TurnwalError')
          assert.equal(error.code, 'CONTRACT_VIOLATION')
          assert.match(error.message, /rule seq-contiguous: expected seq 7, got 8/)
          return true
        },
      )
      assert.equal(image(path, kind, persistence, 'seq'), bytes)
      assert.equal(await persistence.readStoredRevision('seq'), revision)
      await persistence.appendBatch(header, plainTurn(6, 2), true)
      assert.equal((await persistence.load('seq')).events.length, 12)
    })

    it('commitRepair cuts a torn tail and appends the closers once; a stale marker is refused and changes nothing', async (t) => {
      const path = storePath(t, kind)
      const first = await mount(null, { path })
      await first.persistence.create(meta('torn', '/work'))
      await first.persistence.append('torn', plainTurn(0, 1))
      await first.persistence.append('torn', [
        { type: 'turn/start', seq: 6, time: 7, data: { turn: 2 } },
        { type: 'step/start', seq: 7, time: 8, data: { turn: 2, step: 1 } },
      ])
      await first.dispose()
      tearTail(path, kind, first.persistence, 'torn')

      const { persistence } = await mount(t, { path })
      const stored = await persistence.loadStored('torn')
      assert.equal(stored.events.length, 8, 'the kept events, no closers')
      assert.ok(stored.tornMarker, 'a torn marker for the tail to cut')
      assert.equal(stored.tornMarker.stored, 8)
      assert.equal(stored.revision, await persistence.readStoredRevision('torn'))
      const again = await persistence.loadStored('torn')
      assert.deepEqual(again, stored, 'loadStored changes nothing')

      const closers = [
        { type: 'step/end', seq: 8, time: 8, data: { turn: 2, step: 1 } },
        { type: 'turn/end', seq: 9, time: 8, data: { turn: 2, reason: { kind: 'interrupted' } } },
      ]
      // Closers other than the ones recovery derives are refused.
      await assert.rejects(persistence.commitRepair(stored.meta, stored.tornMarker, closers.slice(1)), { code: 'INVALID_ARGUMENT' })
      await persistence.commitRepair(stored.meta, stored.tornMarker, closers)
      const repaired = await persistence.loadStored('torn')
      assert.equal(repaired.tornMarker, undefined)
      assert.deepEqual(repaired.events.slice(8), closers)
      assert.notEqual(repaired.revision, stored.revision)
      const bytes = image(path, kind, persistence, 'torn')
      await assert.rejects(persistence.commitRepair(stored.meta, stored.tornMarker, closers), { code: 'STALE_REPAIR' })
      assert.equal(image(path, kind, persistence, 'torn'), bytes)
      assert.equal(await persistence.readStoredRevision('torn'), repaired.revision)
      // Through the coordinator: the repaired log loads, appends continue at 10.
      await persistence.append('torn', plainTurn(10, 3))
      assert.deepEqual((await persistence.load('torn')).events.map((e) => e.seq), [...Array(16).keys()])
    })

    it('a torn tail through the coordinator: load cuts it and closes the turn; the next append continues at 10', async (t) => {
      const path = storePath(t, kind)
      const first = await mount(null, { path })
      await first.persistence.create(meta('torn2', '/work'))
      await first.persistence.append('torn2', plainTurn(0, 1))
      await first.persistence.append('torn2', [
        { type: 'turn/start', seq: 6, time: 7, data: { turn: 2 } },
        { type: 'step/start', seq: 7, time: 8, data: { turn: 2, step: 1 } },
      ])
      await first.dispose()
      tearTail(path, kind, first.persistence, 'torn2')
      const { persistence } = await mount(t, { path })
      const loaded = await persistence.load('torn2')
      assert.deepEqual(loaded.events.map((e) => e.seq), [...Array(10).keys()])
      assert.deepEqual(loaded.events.at(-1).data.reason, { kind: 'interrupted' })
      await persistence.append('torn2', [
        { type: 'turn/start', seq: 10, time: 9, data: { turn: 3 } },
        { type: 'turn/end', seq: 11, time: 10, data: { turn: 3, reason: { kind: 'completed' } } },
      ])
      assert.deepEqual((await persistence.load('torn2')).events.map((e) => e.seq), [...Array(12).keys()])
    })

    it('a live session adopts its stored open turn after a backend reload and continues it (no closers)', async (t) => {
      const path = storePath(t, kind)
      const ctx = new Context()
      t.after(() => ctx.fiber.dispose())
      await ctx.plugin(SessionStore)
      // The live session lives in its own fiber, so it outlives the backend.
      const backend = await ctx.plugin(TurnwalSessionPersistence, { path })
      const { session } = await liveSession(ctx, 'hmr', { meta: { cwd: '/work' } })
      session.append('turn/start', { turn: 1 })
      session.append('step/start', { turn: 1, step: 1 })
      await ctx.sessions.flush(session)
      await backend.dispose() // the backend reloads; the live turn goes on
      await ctx.plugin(TurnwalSessionPersistence, { path })
      session.append('step/end', { turn: 1, step: 1 })
      session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
      await ctx.sessions.flush(session)
      const stored = await ctx.sessionPersistence.loadStored('hmr')
      assert.deepEqual(stored.events.map((e) => e.type), ['turn/start', 'step/start', 'step/end', 'turn/end'])
      assert.deepEqual(stored.events.at(-1).data.reason, { kind: 'completed' })
    })

    it('a 10 MB append runs off the JavaScript thread: timers keep firing while it is written', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('big'))
      // Incompressible text, so SQLite's zstd does real work too.
      const text = randomBytes(15 << 19).toString('base64') // 10 MiB
      const batch = (seq, id) => [
        { type: 'turn/start', seq, time: 1, data: { turn: seq / 3 + 1 } },
        { type: 'user/message', seq: seq + 1, time: 2, data: { id, role: 'user', source: { kind: 'user' }, content: [{ type: 'text', text }] }, surfaceOp: 'append' },
        { type: 'turn/end', seq: seq + 2, time: 3, data: { turn: seq / 3 + 1, reason: { kind: 'completed' } } },
      ]
      let ticks = 0
      let last = performance.now()
      let maxGap = 0
      const timer = setInterval(() => {
        const now = performance.now()
        maxGap = Math.max(maxGap, now - last)
        last = now
        ticks += 1
      }, 1)
      t.after(() => clearInterval(timer))
      const settle = () => new Promise((resolve) => setTimeout(resolve, 10))
      await settle()

      // Through the backend API: the JSON text of the batch is made on the
      // JavaScript thread (as any backend must), the rest is not.
      ticks = 0
      maxGap = 0
      last = performance.now()
      let started = performance.now()
      await persistence.appendBatch(meta('big'), batch(0, 'big-1'), false)
      const elapsed = performance.now() - started
      t.diagnostic(`${kind}: appendBatch of 10 MiB took ${elapsed.toFixed(1)} ms; the 1 ms timer fired ${ticks} times, longest gap ${maxGap.toFixed(1)} ms`)
      assert.ok(ticks >= 3, `the timer fired ${ticks} times during a ${elapsed.toFixed(0)} ms append`)
      assert.ok(maxGap < elapsed, 'no single stall covers the whole append')

      // The native call alone: parsing, validating, writing and syncing the
      // 10 MiB happen while the event loop keeps running.
      const store = await persistence.store()
      const lines = batch(3, 'big-2').map((e) => JSON.stringify(e)).join('\n')
      await settle()
      const pending = store.append('big', JSON.stringify(meta('big')), lines, true)
      const atCall = ticks
      started = performance.now()
      await pending
      const during = ticks - atCall
      t.diagnostic(`${kind}: the native append took ${(performance.now() - started).toFixed(1)} ms; the timer fired ${during} times meanwhile`)
      assert.ok(during >= 3, `the timer fired ${during} times while the native append ran`)
      clearInterval(timer)

      const loaded = await persistence.load('big')
      assert.equal(loaded.events.length, 6)
      assert.equal(loaded.events[4].data.content[0].text, text)
    })

    it('the store path selects the store; the config is checked when the plugin loads', async (t) => {
      const path = storePath(t, kind)
      assert.equal(isSqlitePath(path), kind === 'sqlite')
      const { persistence } = await mount(t, { root: path, durability: 'turn' })
      assert.equal(persistence.kind, kind)
      assert.equal(persistence.durability, 'turn')
      await persistence.create(meta('cfg', '/work'))
      await persistence.append('cfg', plainTurn(0, 1))
      const location = persistence.locate(meta('cfg', '/work'))
      if (kind === 'wal') {
        assert.equal(location.kind, 'turnwal-wal')
        assert.ok(statSync(location.path).isFile())
      } else {
        assert.equal(location, undefined)
        assert.ok(statSync(path).isFile())
      }
      assert.throws(() => new TurnwalSessionPersistence(new Context(), { durability: 'batch' }), /config.path/)
      assert.throws(() => new TurnwalSessionPersistence(new Context(), { path, durability: 'sometimes' }), /durability/)
      const file = `${path}.not-a-dir`
      appendFileSync(file, 'x')
      assert.throws(() => new TurnwalSessionPersistence(new Context(), { path: file }), /not a directory/)
    })
  })
}
