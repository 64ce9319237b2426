// Idle seals through turnwal-dsh (issue 31): the addon queues the store's
// idle work (Store::seal_due) on the store's own thread behind every
// acknowledged append, so a live WAL session is sealed while the harness
// keeps it open, without sealing in the append path; every event still
// reads back byte for byte.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, statSync } from 'node:fs'
import { meta, mount, storePath } from './support.mjs'
import { BATCH, workload } from './workload.mjs'

describe('idle seals on a WAL store', () => {
  it('a session the harness keeps open is sealed behind its appends, and reads back whole', async (t) => {
    const path = storePath(t, 'wal')
    const { persistence } = await mount(t, { path })
    await persistence.create(meta('live', '/work'))
    const events = workload().slice(0, 20_000)
    const raw = events.reduce((n, e) => n + JSON.stringify(e).length + 1, 0)
    const file = persistence.locate({ id: 'live' }).path
    // A version-3 session's sealed turns live in its archive beside it.
    const archive = file.replace(/\.twal$/, '.twarc')
    let shrank = 0
    let last = 0
    let total = 0
    for (let i = 0; i < events.length; i += BATCH) {
      await persistence.append('live', events.slice(i, i + BATCH))
      // Any later operation of the store runs after the queued idle work.
      await persistence.loadStoredFrom('live', i + BATCH)
      const size = statSync(file).size
      if (size < last) shrank++
      last = size
      total = size + (existsSync(archive) ? statSync(archive).size : 0)
    }
    assert.ok(existsSync(archive), 'the seals appended to the archive')
    assert.ok(shrank >= 2, `the log was sealed ${shrank} times behind its appends`)
    // Under the idle rule: plain closed turns under a quarter of the file
    // (or 256 KiB), the rest sealed; these events are repetitive, so the
    // session (live file and archive) is a small fraction of their JSON.
    assert.ok(total * 4 < raw, `${total} WAL bytes for ${raw} bytes of events`)
    const stored = await persistence.loadStoredFrom('live', 0)
    assert.equal(JSON.stringify(stored.events), JSON.stringify(events), 'every event byte for byte')
  })
})
