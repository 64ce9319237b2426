// Two harness processes on one session (issue 28): a child process holds a
// live session with a turn open at a tool call; this process, a second
// harness on the same store, is refused at `load` with LOCKED naming the
// holder, can still read the session, and never closes the live turn. Once
// the holder is gone, `load` gets upstream's closers as after any crash.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { SessionFormatUnsupportedError } from '@deepseek-ai/dsh-session-persistence'
import { KINDS, child, meta, mount, plainTurn, storePath } from './support.mjs'

const fixture = (name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))

for (const kind of KINDS) {
  describe(`two harness processes on one session, ${kind} store`, () => {
    it('the second is refused at load, reads it unchanged, and loads it once the first is gone', async (t) => {
      const path = storePath(t, kind)
      const id = 'shared-session'
      let ready
      let resolveReady
      const isReady = new Promise((resolve) => { resolveReady = resolve })
      const { proc, exited } = child(t, fixture('crash-child.mjs'), [path, id], {
        onLine(line) {
          if (line.startsWith('READY ')) {
            ready = JSON.parse(line.slice(6))
            resolveReady()
          }
        },
      })
      await isReady
      const written = ready.events
      assert.equal(written.at(-1).type, 'tool/call')

      const { persistence, dispose } = await mount(t, { path })
      // Refused at load, naming the holder; nothing written.
      await assert.rejects(persistence.load(id), (error) => {
        assert.equal(error.code, 'LOCKED', String(error))
        assert.match(error.message, /locked by another writer/)
        return true
      })
      // The app's resume (prepare) is refused the same way, before it could
      // accept a prompt it cannot store.
      await assert.rejects(persistence.prepare(id), (error) => {
        assert.equal(error.name, 'TurnwalError')
        assert.equal(error.code, 'LOCKED', String(error))
        assert.match(error.message, /locked by another writer/)
        return true
      })
      const before = await persistence.loadStored(id)
      assert.deepEqual(before.events, written, 'the live turn is stored as the holder wrote it')
      // Its export reads the stored events as they are: the open turn, no closers.
      const last = JSON.parse((await persistence.readRaw(id)).content.trimEnd().split('\n').at(-1))
      assert.deepEqual(last, written.at(-1))
      // Reading takes no lock: inspect shows the stored events (and the
      // closers a recovery would add, in memory only).
      const inspected = await persistence.inspect(id)
      assert.deepEqual(inspected.events.slice(0, written.length), written)
      const again = await persistence.loadStored(id)
      assert.deepEqual(again.events, written)
      assert.equal(String(again.revision), String(before.revision), 'nothing was written')

      // The holder dies: the session is loaded with upstream's closers.
      proc.kill('SIGKILL')
      await exited
      const loaded = await persistence.load(id)
      assert.deepEqual(loaded.events.slice(0, written.length), written)
      assert.deepEqual(loaded.events.slice(written.length).map((e) => e.type), ['tool/result', 'step/end', 'turn/end'])
      assert.deepEqual(loaded.events.at(-1).data, { turn: 2, reason: { kind: 'interrupted' } })
      await dispose()
    })
  })
}

for (const kind of KINDS) {
  describe(`a refused append leaves no stale cursor, ${kind} store`, () => {
    it('after LOCKED, and the holder appending more and letting go, the next append at the true next seq goes in', async (t) => {
      const path = storePath(t, kind)
      const turn = (n, seq) => [
        { type: 'turn/start', seq, time: seq, data: { turn: n } },
        { type: 'turn/end', seq: seq + 1, time: seq + 1, data: { turn: n, reason: { kind: 'completed' } } },
      ]
      const a = await mount(t, { path })
      await a.persistence.create({ version: 0, id: 's', createdAt: 1, cwd: '/w' })
      await a.persistence.append('s', turn(1, 0))
      const b = await mount(t, { path })
      await assert.rejects(b.persistence.append('s', turn(2, 2)), { code: 'LOCKED' })
      await a.persistence.append('s', [...turn(2, 2), ...turn(3, 4)])
      await a.dispose()
      // B's coordinator had adopted the log at 2 events; it reads it again.
      await b.persistence.append('s', turn(4, 6))
      const stored = await b.persistence.loadStored('s')
      assert.deepEqual(stored.events.map((e) => e.seq), [0, 1, 2, 3, 4, 5, 6, 7])
      assert.deepEqual(stored.events.slice(6), turn(4, 6))
    })
  })
}

for (const kind of KINDS) {
  describe(`a load or resume that fails lets the writer lock go, ${kind} store`, () => {
    it('a second store takes the session the first failed to resume', async (t) => {
      const path = storePath(t, kind)
      // A log of a format this harness does not read: stored as handed
      // over, refused when read — after the writer lock was taken.
      const writer = await mount(t, { path })
      await writer.persistence.create({ ...meta('future', '/w'), version: 99 })
      await writer.persistence.append('future', plainTurn(0, 1))
      await writer.dispose()

      const first = await mount(t, { path })
      const second = await mount(t, { path })
      for (const attempt of [() => first.persistence.prepare('future'), () => first.persistence.load('future')]) {
        await assert.rejects(attempt(), (error) => {
          assert.ok(error instanceof SessionFormatUnsupportedError, `${error.name}: ${error.message}`)
          return true
        })
        // The first store no longer holds it: the second is refused for
        // the format, not LOCKED by the first.
        await assert.rejects(second.persistence.load('future'), (error) => {
          assert.ok(error instanceof SessionFormatUnsupportedError, `${error.name}: ${error.message}`)
          return true
        })
      }
      // What the first store writes stays its own.
      await first.persistence.create(meta('mine', '/w'))
      await first.persistence.append('mine', plainTurn(0, 1))
      await assert.rejects(second.persistence.load('mine'), { code: 'LOCKED' })
    })
  })
}
