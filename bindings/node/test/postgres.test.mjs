// turnwal-dsh on a PostgreSQL store (docs/POSTGRES.md): the plugin's `path`
// is a connection URL; a throwaway cluster is started for the test. The
// harness writes through the published SessionStore, a second context (the
// session resumed on another host) reads it back, a crashed turn is closed
// once, and a second host taking the session over leaves the first refused.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { Session } from '@deepseek-ai/dsh-session'
import { listedRevision, liveSession, mount, plainTurn, toolTurn, turnUntilToolCall } from './support.mjs'
import { startCluster } from './pg.mjs'

describe('turnwal-dsh on a postgres store', () => {
  it('sessions written on one host resume on another; a crashed turn is closed once', async (t) => {
    const cluster = startCluster(t)
    const path = cluster.url()
    const first = await mount(null, { path })
    const { session, fiber } = await liveSession(first.ctx, 'pg-session', { meta: { cwd: '/work' } })
    toolTurn(session, 1)
    toolTurn(session, 2, 'lone \ud800 surrogate, 𝄞 and "quotes"')
    const written = structuredClone(session.events)
    await first.ctx.sessions.flush(session)
    const callSeq = turnUntilToolCall(session, 3)
    await first.ctx.sessions.flush(session)
    const open = structuredClone(session.events)
    await fiber.dispose() // turn 3 stays open: what a crash leaves
    await first.dispose()

    // Another "host": a new context over the same database.
    const second = await mount(t, { path })
    assert.deepEqual((await second.persistence.list()).map((h) => h.id), ['pg-session'])
    const before = await listedRevision(second.persistence, 'pg-session')
    const inspected = await second.persistence.inspect('pg-session')
    assert.deepEqual(inspected.events.slice(0, open.length), open)
    assert.equal(await listedRevision(second.persistence, 'pg-session'), before, 'inspect writes nothing')
    const stored = await second.persistence.loadStored('pg-session')
    assert.equal(JSON.stringify(stored.events), JSON.stringify(open), 'the stored events, byte for byte')
    const loaded = await second.persistence.load('pg-session')
    assert.equal(JSON.stringify(loaded.events.slice(0, written.length)), JSON.stringify(written))
    const [result, stepEnd, turnEnd] = loaded.events.slice(-3)
    assert.deepEqual(result.sourceEventSeqs, [callSeq])
    assert.deepEqual(stepEnd.data, { turn: 3, step: 1 })
    assert.deepEqual(turnEnd.data, { turn: 3, reason: { kind: 'interrupted' } })
    const after = await listedRevision(second.persistence, 'pg-session')
    assert.notEqual(after, before, 'the repair moved the revision')
    await second.persistence.load('pg-session')
    assert.equal(await listedRevision(second.persistence, 'pg-session'), after, 'repaired once')
    const resumed = Session.create('pg-session', loaded.events, loaded.meta)
    assert.ok(resumed.deriveMessages().length >= 8)
    const suffix = await second.persistence.readFrom('pg-session', written.length)
    assert.deepEqual(suffix.events.map((e) => e.seq), loaded.events.slice(written.length).map((e) => e.seq))
  })

  it('a host is refused a session another host holds live; one that steals it makes the first host refused, naming the holder', async (t) => {
    const cluster = startCluster(t)
    const path = cluster.url()
    const a = await mount(t, { path })
    const { session: sa } = await liveSession(a.ctx, 'shared', {})
    toolTurn(sa, 1)
    await a.ctx.sessions.flush(sa)
    // Host A's lease is live: host B is refused at load, naming A.
    const b = await mount(t, { path })
    await assert.rejects(b.persistence.load('shared'), (error) => {
      assert.equal(error.code, 'LOCKED')
      assert.match(error.message, /is held by a live writer \(.*pid \d+.*writer epoch 1\) whose lease expires in/)
      return true
    })
    // B steals it on purpose and appends a turn: it now holds it.
    const resumed = await b.persistence.steal('shared')
    assert.equal(JSON.stringify(resumed.events), JSON.stringify(sa.events))
    const turn2 = plainTurn(resumed.events.length, 2)
    await b.persistence.append('shared', turn2)
    const byB = [...resumed.events, ...turn2]
    // Host A's next turn is refused; the log holds B's turn.
    toolTurn(sa, 2, 'from host a')
    await assert.rejects(a.ctx.sessions.flush(sa), (error) => {
      assert.match(String(error?.message ?? error), /taken over by another writer \(.*pid \d+.*writer epoch \d+\)/)
      return true
    })
    const c = await mount(t, { path })
    const stored = await c.persistence.inspect('shared')
    assert.equal(JSON.stringify(stored.events), JSON.stringify(byB))
  })
})
