// What upstream's backends store and only its reader judges (issue 15),
// through the coordinator: logs of older harnesses are stored as handed
// over and load migrated; malformed events and foreign format versions are
// stored and refused when read, with upstream's error classes and texts.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { SessionFormatUnsupportedError } from '@deepseek-ai/dsh-session-persistence'
import { KINDS, meta, mount, storePath } from './support.mjs'

const turnEnd = (seq, turn, reason) => ({ type: 'turn/end', seq, time: seq + 1, data: { turn, reason } })

/** Before messages had ids: flat messages, and results `{callId, content, isError}`. */
function preIdentityLog() {
  return [
    { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
    {
      type: 'user/message', seq: 1, time: 2,
      data: { content: [{ type: 'text', text: 'count the lines' }], source: { kind: 'user' } },
      surfaceOp: 'append',
    },
    { type: 'step/start', seq: 2, time: 3, data: { turn: 1, step: 1 } },
    {
      type: 'assistant/message', seq: 3, time: 4,
      data: {
        turn: 1, step: 1,
        content: [{ type: 'tool-call', id: 'wc-1', name: 'wc', arguments: '{"file":"a"}' }],
        provenance: { provider: 'p', model: 'm' },
      },
      surfaceOp: 'append',
    },
    { type: 'tool/call', seq: 4, time: 5, data: { turn: 1, step: 1, callId: 'wc-1', name: 'wc', arguments: '{"file":"a"}' } },
    {
      type: 'tool/result', seq: 5, time: 6,
      data: { turn: 1, step: 1, callId: 'wc-1', content: [{ type: 'text', text: '42' }], isError: false },
      sourceEventSeqs: [4], surfaceOp: 'append',
    },
    {
      type: 'tool/result', seq: 6, time: 7,
      data: { turn: 1, step: 1, callId: 'wc-1', content: [{ type: 'text', text: '(elided)' }], isError: false },
      sourceEventSeqs: [5], surfaceOp: { op: 'replace', start: 5, end: 5 },
    },
    { type: 'step/end', seq: 7, time: 8, data: { turn: 1, step: 1 } },
    turnEnd(8, 1, { kind: 'completed' }),
  ]
}

/** Triggers, steering/message (flat form, with surfaceOp) and old turn/end reasons. */
function preReactLoopLog() {
  return [
    { type: 'turn/start', seq: 0, time: 1, data: { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } } },
    { type: 'step/start', seq: 1, time: 2, data: { turn: 1, step: 1 } },
    {
      type: 'steering/message', seq: 2, time: 3,
      data: { turn: 1, content: [{ type: 'text', text: 'use tabs' }], source: { kind: 'user' } },
      surfaceOp: 'append',
    },
    { type: 'step/end', seq: 3, time: 4, data: { turn: 1, step: 1 } },
    turnEnd(4, 1, { kind: 'error', step: 1, failure: { message: 'overloaded', code: 'SERVER' } }),
    { type: 'turn/start', seq: 5, time: 6, data: { turn: 2, trigger: { kind: 'retry' } } },
    turnEnd(6, 2, { kind: 'disposed' }),
  ]
}

for (const kind of KINDS) {
  describe(`turnwal-dsh stores what upstream stores (${kind})`, () => {
    it('a pre-identity log is stored as handed over and loads with legacy ids', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('old', '/w'))
      await persistence.append('old', preIdentityLog())
      const stored = await persistence.loadStored('old')
      assert.deepEqual(stored.events, preIdentityLog(), 'stored exactly')
      const { events } = await persistence.load('old')
      assert.equal(events.length, 9)
      assert.equal(events[1].data.id, 'legacy-message:old:1')
      assert.equal(events[1].data.role, 'user')
      assert.equal(events[3].data.message.id, 'legacy-message:old:3')
      assert.equal(events[3].data.message.source.kind, 'model')
      assert.equal(events[5].data.message.id, 'legacy-message:old:5')
      assert.equal(events[5].data.message.source.callId, 'wc-1')
      assert.equal(events[6].data.message.id, 'legacy-message:old:5', 'a replace inherits its target id')
      // The seek hands the suffix over as stored, as upstream's SQLite
      // backend does; the coordinator migrates it, and reads the prefix
      // only when the suffix needs it (the replace inherits seq 5's id).
      const raw = await persistence.loadStoredFrom('old', 6)
      assert.deepEqual(raw.events, preIdentityLog().slice(6), 'stored exactly, not migrated')
      const loadStored = persistence.loadStored
      let wholeReads = 0
      persistence.loadStored = (...args) => { wholeReads += 1; return loadStored.apply(persistence, args) }
      try {
        const suffix = (await persistence.readFrom('old', 6)).events
        assert.equal(suffix[0].data.message.id, 'legacy-message:old:5')
        assert.equal(wholeReads, 1, 'a legacy replace reads the prefix')
        assert.deepEqual((await persistence.readFrom('old', 7)).events, events.slice(7))
        assert.equal(wholeReads, 1, 'a suffix that needs no prefix is read alone')
      } finally {
        persistence.loadStored = loadStored
      }
      // Resumable: the next turn appends after it.
      await persistence.append('old', [
        { type: 'turn/start', seq: 9, time: 20, data: { turn: 2 } },
        turnEnd(10, 2, { kind: 'completed' }),
      ])
      assert.equal((await persistence.load('old')).events.length, 11)
    })

    it('a pre-react-loop log loads with steering as a user message and reasons mapped', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('steer', '/w'))
      await persistence.append('steer', preReactLoopLog())
      const { events } = await persistence.load('steer')
      assert.deepEqual(events[0].data, { turn: 1 }, 'the trigger is dropped')
      assert.equal(events[2].type, 'user/message')
      assert.deepEqual(events[2].data.content, [{ type: 'text', text: 'use tabs' }])
      assert.deepEqual(events[4].data.reason, { kind: 'error', error: { message: 'overloaded', code: 'SERVER' } })
      assert.deepEqual(events[6].data.reason, { kind: 'aborted', reason: { kind: 'disposed' } })
    })

    it('malformed stored events are refused on read, not at append', async (t) => {
      const { persistence } = await mount(t, { path: storePath(t, kind) })
      await persistence.create(meta('bad', '/w'))
      await persistence.append('bad', [
        { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
        { type: 'turn/end', seq: 1, time: 2, data: { turn: 1, step: 1, reason: { kind: 'completed' } } },
      ])
      const text = 'session "bad" contains malformed pre-react-loop turn/end at seq 1'
      for (const read of [() => persistence.load('bad'), () => persistence.inspect('bad'), () => persistence.readFrom('bad', 1)]) {
        await assert.rejects(read(), (error) => {
          assert.match(error.message, new RegExp(text.replace(/[/]/g, '\\/')))
          return true
        })
      }
    })

    for (const [version, text] of [
      [99, 'session "v" uses log format v99, but this harness reads only v0: the log was written by a newer harness — upgrade the harness to open it'],
      [-1, 'session "v" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it'],
    ]) {
      it(`a header of format v${version} is stored and refused on read`, async (t) => {
        const { persistence } = await mount(t, { path: storePath(t, kind) })
        await persistence.create({ ...meta('v', '/w'), version })
        await persistence.append('v', [
          { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
          turnEnd(1, 1, { kind: 'completed' }),
        ])
        for (const read of [() => persistence.load('v'), () => persistence.inspect('v'), () => persistence.readFrom('v', 0)]) {
          await assert.rejects(read(), (error) => {
            assert.ok(error instanceof SessionFormatUnsupportedError, `${error.name}: ${error.message}`)
            // The coordinator's own check names the raw log where the
            // backend has one per session (the WAL's file; not SQLite).
            const rest = error.message.slice(text.length)
            assert.ok(error.message.startsWith(text) && (rest === '' || rest.startsWith(' (raw log: ')), error.message)
            return true
          })
        }
      })
    }
  })
}
