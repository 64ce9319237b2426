// readFrom through turnwal-dsh's seek (the backend's loadStoredFrom hook,
// over Store::read_from) on both stores, and the storage records loadStored
// and loadStoredFrom hand over: runs of chunk deltas packed as upstream's
// JSONL packs them and expanded by upstream's decodeStorageRecord, so every
// event comes back byte for byte.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { DatabaseSync } from 'node:sqlite'
import { KINDS, image, meta, mount, storePath, tearTail } from './support.mjs'

const delta = (seq, time, chunk, data = {}) => ({ type: 'assistant/chunk', seq, time, data: { turn: 1, step: 1, ...data, chunk } })
const text = (seq, time, t) => delta(seq, time, { type: 'text-delta', index: 0, text: t })

/** A closed turn of packable runs (text, reasoning, tool-call deltas) and deltas that must not pack. */
function closedTurn() {
  return [
    { type: 'turn/start', seq: 0, time: 100, data: { turn: 1 } },
    { type: 'step/start', seq: 1, time: 101, data: { turn: 1, step: 1 } },
    // A text run with a negative dt and escapes: one packed row.
    ...['a', 'b "q"', 'lone \ud800', '𝄞', 'e\n', 'f'].map((t, i) => text(2 + i, 102 + i - (i === 3 ? 5 : 0), t)),
    ...['r1', 'r2', 'r3'].map((t, i) => delta(8 + i, 110 + i, { type: 'reasoning-delta', index: 0, text: t })),
    // Key order other than the packed form's: stays verbatim.
    { type: 'assistant/chunk', seq: 11, time: 113, data: { step: 1, turn: 1, chunk: { type: 'text-delta', index: 0, text: 'x' } } },
    ...['{"pa', 'th":', '"a"}'].map((a, i) => delta(12 + i, 114 + i, { type: 'tool-call-delta', index: 0, id: 'c1', name: 'read', argumentsDelta: a })),
    { type: 'step/end', seq: 15, time: 117, data: { turn: 1, step: 1 } },
    { type: 'turn/end', seq: 16, time: 118, data: { turn: 1, reason: { kind: 'completed' } } },
  ]
}

/** An open turn: started, streaming, never ended. */
const openTurn = () => [
  { type: 'turn/start', seq: 17, time: 120, data: { turn: 2 } },
  { type: 'step/start', seq: 18, time: 121, data: { turn: 2, step: 1 } },
  ...['o1', 'o2', 'o3', 'o4'].map((t, i) => ({ ...text(19 + i, 122 + i, t), data: { turn: 2, step: 1, chunk: { type: 'text-delta', index: 0, text: t } } })),
  { type: 'session/note', seq: 23, time: 130, data: { note: 'a plugin event' }, ignorable: true },
]

/** The suffix a seek must return: the stored events with seq >= from, each byte for byte. */
function assertSuffix(actual, log, from, message) {
  const expected = log.filter((e) => e.seq >= from)
  assert.deepEqual(actual, expected, message)
  assert.equal(JSON.stringify(actual), JSON.stringify(expected), `${message}: byte for byte, key order included`)
}

for (const kind of KINDS) {
  describe(`readFrom by seek on a ${kind} store`, () => {
    it('loadStoredFrom and readFrom edges: 0, middle, inside a packed run, len, len+1, far past; loadStored never called', async (t) => {
      const path = storePath(t, kind)
      const { persistence } = await mount(t, { path })
      await persistence.create(meta('seek', '/work'))
      const log = closedTurn()
      await persistence.append('seek', log)
      if (kind === 'sqlite') {
        const db = new DatabaseSync(path, { readOnly: true })
        const rows = db.prepare("SELECT seq, type FROM events WHERE session_id = 'seek' ORDER BY seq").all()
        db.close()
        assert.deepEqual(rows.filter((r) => r.type.endsWith('-chunks')).map((r) => [r.seq, r.type]),
          [[2, 'text-chunks'], [8, 'reasoning-chunks'], [12, 'tool-call-chunks']], 'the runs are stored packed')
      }
      // The addon hands the runs over packed, as upstream's JSONL stores them.
      const native = await (await persistence.store()).loadStoredFrom('seek', 0)
      assert.match(native, /"packed":true/)
      assert.deepEqual([...native.matchAll(/"type":"([a-z-]+-chunks)","seq0":(\d+)/g)].map((m) => [m[1], +m[2]]),
        [['text-chunks', 2], ['reasoning-chunks', 8], ['tool-call-chunks', 12]])
      const loadStored = persistence.loadStored
      persistence.loadStored = () => assert.fail('readFrom read the whole log')
      try {
        // 4 and 9 fall inside packed runs; 13 inside the tool-call run.
        for (const from of [0, 1, 4, 9, 11, 13, 16, 17, 18, 1000]) {
          const suffix = await persistence.loadStoredFrom('seek', from)
          assert.deepEqual(suffix.meta, meta('seek', '/work'))
          assertSuffix(suffix.events, log, from, `loadStoredFrom ${from}`)
          const read = await persistence.readFrom('seek', from)
          assert.deepEqual(read.meta, meta('seek', '/work'))
          assertSuffix(read.events, log, from, `readFrom ${from}`)
        }
      } finally {
        persistence.loadStored = loadStored
      }
      // The whole prefix through loadStored: the same storage records, expanded.
      assertSuffix((await persistence.loadStored('seek')).events, log, 0, 'loadStored')
      // In a new context (a cold store, no live writer) too.
      const cold = await mount(t, { path })
      assertSuffix((await cold.persistence.readFrom('seek', 4)).events, log, 4, 'cold readFrom 4')
      assertSuffix((await cold.persistence.loadStoredFrom('seek', 0)).events, log, 0, 'cold loadStoredFrom 0')
    })

    it('an open turn and a torn tail: served as stored, nothing written, no closers, the tail left out', async (t) => {
      const path = storePath(t, kind)
      const first = await mount(null, { path })
      await first.persistence.create(meta('open', '/work'))
      const log = [...closedTurn(), ...openTurn()]
      await first.persistence.append('open', log.slice(0, 17))
      await first.persistence.append('open', log.slice(17))
      for (const from of [0, 17, 20, 23, 24, 25]) {
        assertSuffix((await first.persistence.loadStoredFrom('open', from)).events, log, from, `open turn, live, from ${from}`)
      }
      await first.dispose()
      tearTail(path, kind, first.persistence, 'open', log.length)

      const { persistence } = await mount(t, { path })
      const revision = await persistence.readStoredRevision('open')
      const bytes = image(path, kind, persistence, 'open')
      for (const from of [0, 9, 17, 21, 23, 24, 25]) {
        assertSuffix((await persistence.loadStoredFrom('open', from)).events, log, from, `torn, from ${from}`)
        assertSuffix((await persistence.readFrom('open', from)).events, log, from, `torn readFrom ${from}`)
      }
      assert.equal(await persistence.readStoredRevision('open'), revision, 'reads never change the revision')
      assert.equal(image(path, kind, persistence, 'open'), bytes, 'nothing written')
      const stored = await persistence.loadStored('open')
      assert.notEqual(stored.tornMarker, undefined, 'the tail is still there to repair')
      assertSuffix(stored.events, log, 0, 'loadStored keeps the prefix')
    })

    it('absent and never-appended sessions, invalid seqs', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('lazy'))
      assert.equal(await persistence.loadStoredFrom('absent', 0), undefined)
      assert.equal(await persistence.loadStoredFrom('lazy', 0), undefined)
      await assert.rejects(persistence.readFrom('absent', 3), /not found/)
      await assert.rejects(persistence.readFrom('lazy', 0), /not found/)
      await assert.rejects(persistence.loadStoredFrom('absent', -1), /non-negative safe integer/)
      await assert.rejects(persistence.loadStoredFrom('absent', 2 ** 53), /non-negative safe integer/)
      const aborted = AbortSignal.abort(new Error('stop'))
      await assert.rejects(persistence.loadStoredFrom('absent', 0, aborted), (e) => e === aborted.reason)
    })

    it('a stored event whose own type is a row tag is never mistaken for a packed row', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('tags'))
      const log = [
        ...closedTurn(),
        { type: 'text-chunks', seq: 17, time: 119, data: { turn: 1, step: 1, index: 0, dt: [], texts: ['not a row'] }, ignorable: true },
      ]
      await persistence.append('tags', log)
      const native = await (await persistence.store()).loadStoredFrom('tags', 0)
      assert.match(native, /"packed":false/)
      assert.doesNotMatch(native, /"seq0"/)
      assertSuffix((await persistence.loadStored('tags')).events, log, 0, 'loadStored')
      for (const from of [0, 5, 17, 18]) {
        assertSuffix((await persistence.loadStoredFrom('tags', from)).events, log, from, `loadStoredFrom ${from}`)
      }
      // After the plugin event, nothing tagged in the suffix: packed again.
      assertSuffix((await persistence.readFrom('tags', 2)).events, log, 2, 'readFrom 2')
    })
  })
}
