// A store's waits never occupy libuv's thread pool (issue 29, n6): while
// another connection holds a SQLite database's write lock, turnwal's appends
// wait in SQLite's busy handler on the store's own threads, and the harness's
// unrelated pool work (fs, crypto, dns) goes on.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { pbkdf2 } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { mount, plainTurn, storePath } from './support.mjs'

const holderScript = fileURLToPath(new URL('./fixtures/sqlite-holder.mjs', import.meta.url))

describe('waiting for a lock', () => {
  it('appends behind another connection\'s SQLite write lock leave libuv\'s pool free', async (t) => {
    const path = storePath(t, 'sqlite')
    const { persistence } = await mount(t, { path, busyTimeoutMs: 10_000 })
    // More sessions than libuv's default pool has threads (4).
    const ids = Array.from({ length: 6 }, (_, i) => `s${i}`)
    for (const id of ids) {
      await persistence.create({ version: 0, id, createdAt: 1 })
      await persistence.appendBatch({ version: 0, id, createdAt: 1 }, plainTurn(0, 1), false)
    }

    const holder = spawn(process.execPath, [holderScript, path], { stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = new Promise((resolve) => holder.on('close', resolve))
    t.after(async () => { if (holder.exitCode === null) holder.kill('SIGKILL'); await exited })
    holder.stdout.setEncoding('utf8')
    await new Promise((resolve) => holder.stdout.on('data', (d) => { if (d.includes('HELD')) resolve() }))

    let settled = 0
    const appends = ids.map((id) => persistence.appendBatch({ version: 0, id, createdAt: 1 }, plainTurn(6, 2), true)
      .finally(() => { settled += 1 }))
    // Let every append reach SQLite's busy wait.
    await new Promise((resolve) => setTimeout(resolve, 200))

    // The harness's own pool work completes while all six still wait.
    const hostname = await readFile(fileURLToPath(import.meta.url), 'utf8')
    assert.match(hostname, /waiting for a lock/)
    const key = await new Promise((resolve, reject) => pbkdf2('pw', 'salt', 1000, 16, 'sha256', (e, k) => e ? reject(e) : resolve(k)))
    assert.equal(key.length, 16)
    assert.equal(settled, 0, 'the appends are still waiting for the lock')

    // The lock is released: every append completes, each stored once.
    holder.stdin.write('commit\n')
    await Promise.all(appends)
    for (const id of ids) {
      const stored = await persistence.loadStored(id)
      assert.deepEqual(stored.events.map((e) => e.seq), Array.from({ length: 12 }, (_, i) => i))
    }
  })
})
