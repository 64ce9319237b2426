// Where a cold `loadStored` spends its time, phase by phase, on the
// throughput test's 100,000-event session (test/workload.mjs): the native
// read (the addon's `loadStored`, on libuv's thread pool), `JSON.parse` of
// the document it returns, and the expansion of its packed rows by
// upstream's own `decodeStorageRecord`; then whole `loadStored` and `load`
// calls through the coordinator, with the published JSONL backend beside
// them. Medians of 7. Needs the built addon (`npm run build`).
//
//   node scripts/load-breakdown.mjs
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { decodeStorageRecord } from '@deepseek-ai/dsh-session'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { TurnwalSessionPersistence } from '../index.js'
import { meta, mount } from '../test/support.mjs'
import { BATCH, workload } from '../test/workload.mjs'

const native = createRequire(import.meta.url)('../turnwal.node')
const ROUNDS = 7
const ID = 'perf'
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const events = workload()
const dir = mkdtempSync(join(tmpdir(), 'turnwal-dsh-breakdown-'))
try {
  const sides = [
    ['WAL', TurnwalSessionPersistence, { path: join(dir, 'wal') }, false],
    ['SQLite', TurnwalSessionPersistence, { path: join(dir, 'sessions.sqlite') }, true],
    ['JSONL-zstd', JsonlSessionPersistence, { root: join(dir, 'jsonl') }, undefined],
  ]
  for (const [, plugin, config] of sides) {
    const writer = await mount(null, config, plugin)
    await writer.persistence.create(meta(ID, '/work/project'))
    for (let i = 0; i < events.length; i += BATCH) await writer.persistence.append(ID, events.slice(i, i + BATCH))
    await writer.dispose()
  }
  for (const [name, plugin, config, sqlite] of sides) {
    const phases = { native: [], parse: [], expand: [], loadStored: [], load: [] }
    let bytes = 0
    for (let round = 0; round < ROUNDS; round++) {
      if (sqlite !== undefined) {
        const store = await native.openStore(config.path, { sqlite, durability: 'batch' })
        let started = performance.now()
        const text = await store.loadStored(ID)
        phases.native.push(performance.now() - started)
        started = performance.now()
        const document = JSON.parse(text)
        phases.parse.push(performance.now() - started)
        started = performance.now()
        let expanded = 0
        for (const record of document.events) {
          expanded += record.type.endsWith('-chunks') ? decodeStorageRecord(record).length : 1
        }
        phases.expand.push(performance.now() - started)
        if (expanded !== events.length) throw new Error(`${name}: ${expanded} events, not ${events.length}`)
        bytes = Buffer.byteLength(text)
        await store.close()
      }
      for (const phase of ['loadStored', 'load']) {
        const reader = await mount(null, config, plugin)
        const started = performance.now()
        await reader.persistence[phase](ID)
        phases[phase].push(performance.now() - started)
        await reader.dispose()
      }
    }
    const cells = Object.entries(phases)
      .filter(([, xs]) => xs.length > 0)
      .map(([phase, xs]) => `${phase} ${median(xs).toFixed(1)} ms`)
    console.log(`${name.padEnd(10)} ${cells.join('  ')}${bytes ? `  (document ${bytes.toLocaleString('en')} bytes)` : ''}`)
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
