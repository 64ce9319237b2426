// store.follow through turnwal-dsh (issue 34): an async iterator over a
// session's stored events from a seq, each once and in order, then each new
// one as another mount appends it; stopped by an AbortSignal (rejecting with
// its reason, promptly), by a `break`, and by the store's close; on the WAL,
// SQLite and PostgreSQL stores.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { KINDS, meta, mount, plainTurn, storePath } from './support.mjs'
import { startCluster } from './pg.mjs'

/** Collects `n` events from `iterator`. */
async function take(iterator, n) {
  const events = []
  for await (const event of iterator) {
    events.push(event)
    if (events.length === n) break
  }
  return events
}

for (const kind of [...KINDS, 'postgres']) {
  describe(`follow on a ${kind} store`, () => {
    const place = (t) => (kind === 'postgres' ? startCluster(t).url() : storePath(t, kind))

    it('serves every event from any seq, in order, each once, as another mount appends; break ends it', async (t) => {
      const path = place(t)
      const writer = (await mount(t, { path })).persistence
      const reader = (await mount(t, { path })).persistence
      await writer.create(meta('s', '/w'))
      const log = plainTurn(0, 1)
      await writer.append('s', log)
      const turns = 10
      const followers = [0, 4, 6, 20].map((fromSeq) => take(reader.follow('s', { fromSeq }), 6 * (turns + 1) - fromSeq))
      for (let n = 2; n <= turns + 1; n++) {
        const turn = plainTurn(6 * (n - 1), n)
        await writer.append('s', turn)
        log.push(...turn)
        await sleep(20)
      }
      const results = await Promise.all(followers)
      for (const [i, fromSeq] of [0, 4, 6, 20].entries()) {
        assert.deepEqual(results[i], log.slice(fromSeq), `from ${fromSeq}`)
      }
    })

    it('an AbortSignal stops a waiting follower promptly, rejecting with its reason', async (t) => {
      const path = place(t)
      const { persistence } = await mount(t, { path })
      await persistence.create(meta('s', '/w'))
      await persistence.append('s', plainTurn(0, 1))
      const controller = new AbortController()
      const seen = []
      const done = (async () => {
        for await (const event of persistence.follow('s', { signal: controller.signal })) seen.push(event)
      })()
      while (seen.length < 6) await sleep(5)
      const reason = new Error('enough')
      const asked = Date.now()
      controller.abort(reason)
      await assert.rejects(done, (error) => error === reason)
      assert.ok(Date.now() - asked < 1000, `${Date.now() - asked} ms to stop`)
      assert.deepEqual(seen, plainTurn(0, 1))
      // Already aborted: refused before anything is read.
      await assert.rejects(persistence.follow('s', { signal: controller.signal }).next(), (error) => error === reason)
    })

    it('closing the store ends its followers; a session with nothing stored is NOT_FOUND', async (t) => {
      const path = place(t)
      const { persistence } = await mount(t, { path })
      await persistence.create(meta('s', '/w'))
      await persistence.append('s', plainTurn(0, 1))
      const iterator = persistence.follow('s', { fromSeq: 6 })
      const pending = iterator.next()
      await sleep(50)
      await persistence.close()
      assert.deepEqual(await pending, { value: undefined, done: true })
      const other = (await mount(t, { path })).persistence
      await assert.rejects(other.follow('missing').next(), (error) => error.code === 'NOT_FOUND')
      await assert.rejects(other.follow('s', { fromSeq: -1 }).next(), (error) => error.code === 'INVALID_ARGUMENT')
    })
  })
}
