// Throughput in one run: a 100,000-event session appended and loaded through
// turnwal-dsh (WAL and SQLite stores) and through the published
// @deepseek-ai/dsh-session-persistence-jsonl backend (zstd, its default, and
// raw), all behind the same upstream PersistenceCoordinator. The figures are
// printed (and written as JSON to $TURNWAL_DSH_PERF_OUT when set), never
// judged: the machine is shared and noisy. The test checks only that every
// side stored and loaded the same 100,000 events.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { TurnwalSessionPersistence } from '../index.js'
import { meta, mount, tempDir } from './support.mjs'
import { BATCH, EVENTS, workload } from './workload.mjs'

const SIDES = [
  ['turnwal-dsh WAL', TurnwalSessionPersistence, (dir) => ({ path: join(dir, 'wal') })],
  ['turnwal-dsh SQLite', TurnwalSessionPersistence, (dir) => ({ path: join(dir, 'sessions.sqlite') })],
  ['jsonl (zstd, default)', JsonlSessionPersistence, (dir) => ({ root: join(dir, 'jsonl') })],
  ['jsonl (none)', JsonlSessionPersistence, (dir) => ({ root: join(dir, 'jsonl'), compression: 'none' })],
]

const LOAD_ROUNDS = 3

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/**
 * Runs `fn`, measuring the longest the event loop went without running a
 * 5 ms timer meanwhile (the stall a harness's UI and timers would see).
 */
async function withGap(fn) {
  let last = performance.now()
  let gap = 0
  const timer = setInterval(() => {
    const now = performance.now()
    gap = Math.max(gap, now - last)
    last = now
  }, 5)
  try {
    const value = await fn()
    gap = Math.max(gap, performance.now() - last)
    return { value, gap }
  } finally {
    clearInterval(timer)
  }
}

it(`appends and loads a ${EVENTS.toLocaleString('en')}-event session: turnwal-dsh vs the published JSONL backend`, async (t) => {
  const events = workload()
  const id = 'perf'
  // Every side in its own context over its own directory. The sides take
  // turns batch by batch (and load by load), so a busy moment of the shared
  // machine falls on all of them alike.
  const sides = []
  for (const [name, plugin, config] of SIDES) {
    const dir = tempDir(t, 'turnwal-dsh-perf-')
    const writer = await mount(null, config(dir), plugin)
    await writer.persistence.create(meta(id, '/work/project'))
    sides.push({ name, plugin, config: config(dir), writer, appendMs: 0, loadStored: [], load: [], loadStoredGap: [], loadGap: [] })
  }
  for (let i = 0; i < EVENTS; i += BATCH) {
    const batch = events.slice(i, i + BATCH)
    for (const side of sides) {
      const started = performance.now()
      await side.writer.persistence.append(id, batch)
      side.appendMs += performance.now() - started
    }
  }
  for (const side of sides) await side.writer.dispose()

  // Cold reads, each in a fresh context: the backend's stored prefix alone
  // (loadStored), and the coordinator's load (validation, freezing) on top.
  for (let round = 0; round < LOAD_ROUNDS; round++) {
    for (const side of sides) {
      const reader = await mount(null, side.config, side.plugin)
      let started = performance.now()
      const { value: stored, gap: storedGap } = await withGap(() => reader.persistence.loadStored(id))
      side.loadStored.push(performance.now() - started)
      side.loadStoredGap.push(storedGap)
      assert.equal(stored.events.length, EVENTS)
      await reader.dispose()
      const loader = await mount(null, side.config, side.plugin)
      started = performance.now()
      const { value: loaded, gap: loadGap } = await withGap(() => loader.persistence.load(id))
      side.load.push(performance.now() - started)
      side.loadGap.push(loadGap)
      await loader.dispose()
      assert.equal(loaded.events.length, EVENTS)
      assert.deepEqual(loaded.events.at(-1), events.at(-1))
      assert.deepEqual(loaded.events[12345], events[12345])
    }
  }

  const results = sides.map((s) => ({
    name: s.name,
    appendMs: s.appendMs,
    loadStoredMs: median(s.loadStored),
    loadMs: median(s.load),
    loadStoredGapMs: median(s.loadStoredGap),
    loadGapMs: median(s.loadGap),
  }))
  const rate = (ms) => `${Math.round(EVENTS / (ms / 1000)).toLocaleString('en')} ev/s`
  const jsonl = results.find((r) => r.name.startsWith('jsonl (zstd'))
  for (const r of results) {
    t.diagnostic(`${r.name.padEnd(22)} append ${r.appendMs.toFixed(0).padStart(6)} ms (${rate(r.appendMs)}; ${EVENTS / BATCH} fsynced batches)`
      + `  loadStored ${r.loadStoredMs.toFixed(0).padStart(5)} ms  load ${r.loadMs.toFixed(0).padStart(5)} ms (median of ${LOAD_ROUNDS})`
      + `  | jsonl-zstd time / this: append ${(jsonl.appendMs / r.appendMs).toFixed(2)}, loadStored ${(jsonl.loadStoredMs / r.loadStoredMs).toFixed(2)}, load ${(jsonl.loadMs / r.loadMs).toFixed(2)}`
      + `  | longest event-loop gap: loadStored ${r.loadStoredGapMs.toFixed(0)} ms, load ${r.loadGapMs.toFixed(0)} ms`)
  }
  if (process.env.TURNWAL_DSH_PERF_OUT) {
    writeFileSync(process.env.TURNWAL_DSH_PERF_OUT, `${JSON.stringify({ events: EVENTS, batch: BATCH, node: process.version, results }, null, 2)}\n`)
  }
})
