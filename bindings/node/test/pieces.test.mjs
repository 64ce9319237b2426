// Sessions of any size load in pieces (issue 29): the addon hands a stored
// prefix over as a head document and arrays of about 1 MiB of records,
// which JavaScript parses one at a time, the event loop running between
// them; no single string holds the session. Checked here on sessions of
// several pieces (and an event larger than a piece); a session past V8's
// string limit (over 512 MiB) loads too with TURNWAL_DSH_BIG=1 (slow).
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { KINDS, meta, mount, storePath } from './support.mjs'
import { workload } from './workload.mjs'

const native = createRequire(import.meta.url)(fileURLToPath(new URL('../turnwal.node', import.meta.url)))

/** `events` with one tool result made `bytes` long (larger than a piece). */
function withHugeResult(events, bytes) {
  const at = events.findIndex((e) => e.type === 'tool/result')
  const huge = structuredClone(events[at])
  huge.data.message.content[0].content[0].text = 'x'.repeat(bytes)
  return events.map((e, i) => (i === at ? huge : e))
}

for (const kind of KINDS) {
  describe(`a session of many pieces, ${kind} store`, () => {
    it('loads, reads from a seq and hands over exactly the events written', async (t) => {
      const path = storePath(t, kind)
      const id = 'big'
      const events = withHugeResult(workload().slice(0, 50_000), 5 << 20)
      const { persistence, dispose } = await mount(t, { path })
      await persistence.create(meta(id, '/work'))
      for (let i = 0; i < events.length; i += 1000) await persistence.append(id, events.slice(i, i + 1000))
      await dispose()

      const store = await native.openStore(path, { durability: 'batch' })
      const pieces = await store.loadStoredPieces(id)
      assert.ok(pieces.length >= 4, `${pieces.length} pieces: the head and at least three of records`)
      assert.ok(pieces.slice(1).every((p) => p.length < (1 << 20) + (6 << 20)), "each piece is bounded (one record may exceed 1 MiB alone)")
      const from = await store.loadStoredFromPieces(id, 30_000)
      assert.ok(from.length >= 2)
      await store.close()

      const reader = await mount(t, { path })
      const stored = await reader.persistence.loadStored(id)
      assert.equal(stored.events.length, events.length)
      assert.deepEqual(stored.events, events)
      const suffix = await reader.persistence.loadStoredFrom(id, 30_000)
      assert.deepEqual(suffix.events, events.slice(30_000))
      const loaded = await reader.persistence.load(id)
      assert.deepEqual(loaded.events, events)
    })

    it('a session past V8\'s string limit loads (TURNWAL_DSH_BIG=1)', { skip: process.env.TURNWAL_DSH_BIG !== '1' }, async (t) => {
      const path = storePath(t, kind)
      const id = 'huge'
      const { persistence, dispose } = await mount(t, { path })
      await persistence.create(meta(id, '/work'))
      // 600 MiB of tool results in 4 MiB events, in turns.
      const text = 'y'.repeat(4 << 20)
      let seq = 0
      for (let n = 1; n <= 150; n++) {
        const turn = [
          { type: 'turn/start', seq: seq++, time: n, data: { turn: n } },
          { type: 'step/start', seq: seq++, time: n, data: { turn: n, step: 1 } },
          { type: 'tool/call', seq: seq++, time: n, data: { turn: n, step: 1, callId: `c${n}`, name: 'dump' } },
          { type: 'tool/result', seq: seq++, time: n, data: { turn: n, step: 1, message: { id: `r${n}`, role: 'user', source: { kind: 'tool', callId: `c${n}` }, content: [{ type: 'tool-result', toolCallId: `c${n}`, isError: false, content: [{ type: 'text', text }] }] } }, sourceEventSeqs: [seq - 2] },
          { type: 'step/end', seq: seq++, time: n, data: { turn: n, step: 1 } },
          { type: 'turn/end', seq: seq++, time: n, data: { turn: n, reason: { kind: 'completed' } } },
        ]
        await persistence.append(id, turn)
      }
      await dispose()
      const reader = await mount(t, { path })
      const stored = await reader.persistence.loadStored(id)
      assert.equal(stored.events.length, seq)
      assert.equal(stored.events.at(-3).data.message.content[0].content[0].text.length, 4 << 20)
    })
  })
}
