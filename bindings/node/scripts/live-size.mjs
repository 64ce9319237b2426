// The bytes of a live session written through turnwal-dsh (issue 31),
// against upstream's own JSONL backend (zstd and plain) given the same
// appends: a realistic session read from a JSONL file (one event a line;
// `cargo run --release -p turnwal-testkit --example realistic -- 31 500`
// prints the one the CLI's `bench --live-turns 500` uses), appended in
// write-behind batches of BATCH events as the harness streams them, never
// closed: the WAL side is measured while the session is open, after the
// store's idle work behind the last append (a `loadStoredFrom` runs after
// it), live file plus archive; also the largest the live file was after
// any append. Needs the built addon (`npm run build`).
//
//   node scripts/live-size.mjs SESSION.jsonl
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { meta, mount } from '../test/support.mjs'
import { BATCH } from '../test/workload.mjs'

const file = process.argv[2]
if (!file) {
  console.error('usage: node scripts/live-size.mjs SESSION.jsonl')
  process.exit(2)
}
const events = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line))
const raw = events.reduce((n, e) => n + JSON.stringify(e).length + 1, 0)
const ID = 'live'

/** Every file's bytes under `dir`. */
function bytesUnder(dir) {
  let n = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) n += statSync(join(entry.parentPath, entry.name)).size
  }
  return n
}

const dir = mkdtempSync(join(tmpdir(), 'turnwal-dsh-live-size-'))
try {
  const wal = await mount(null, { path: join(dir, 'wal') })
  await wal.persistence.create(meta(ID, '/work/app'))
  const live = wal.persistence.locate({ id: ID }).path
  const archive = live.replace(/\.twal$/, '.twarc')
  let largest = 0
  const started = performance.now()
  for (let i = 0; i < events.length; i += BATCH) {
    await wal.persistence.append(ID, events.slice(i, i + BATCH))
    await wal.persistence.loadStoredFrom(ID, events.length)
    largest = Math.max(largest, statSync(live).size)
  }
  const appendMs = performance.now() - started
  const walBytes = statSync(live).size + (existsSync(archive) ? statSync(archive).size : 0)
  await wal.dispose()

  const jsonl = {}
  for (const compression of ['zstd', 'none']) {
    const root = join(dir, `jsonl-${compression}`)
    const side = await mount(null, { root, compression }, JsonlSessionPersistence)
    await side.persistence.create(meta(ID, '/work/app'))
    for (let i = 0; i < events.length; i += BATCH) await side.persistence.append(ID, events.slice(i, i + BATCH))
    await side.dispose()
    jsonl[compression] = bytesUnder(root)
  }
  console.log(JSON.stringify({
    events: events.length,
    batch: BATCH,
    raw_json_bytes: raw,
    wal_bytes: walBytes,
    largest_live_file: largest,
    jsonl_zstd_bytes: jsonl.zstd,
    jsonl_raw_bytes: jsonl.none,
    wal_vs_zstd: +(walBytes / jsonl.zstd).toFixed(3),
    wal_vs_raw: +(walBytes / jsonl.none).toFixed(3),
    append_ms: Math.round(appendMs),
  }, null, 2))
} finally {
  rmSync(dir, { recursive: true, force: true })
}
