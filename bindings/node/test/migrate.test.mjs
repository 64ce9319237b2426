// The migration path the README gives: sessions a harness wrote with the
// published JSONL backend, copied with `turnwal convert --from jsonl:ROOT`,
// load through turnwal-dsh exactly as the JSONL backend loads them. Needs
// the turnwal binary (CI builds it before these tests; TURNWAL_BIN names
// another one).
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { KINDS, liveSession, mount, storePath, tempDir, toolTurn, turnUntilToolCall } from './support.mjs'

const repo = dirname(dirname(dirname(dirname(fileURLToPath(import.meta.url)))))
// A JSONL write keeps its durability proof in the per-user state directory
// (docs/JSONL.md): the CLI gets a temporary one, so a test run leaves
// nothing in the real ~/.local/state.
const cliEnv = (t) => ({ ...process.env, TURNWAL_STATE_DIR: tempDir(t, 'turnwal-state-') })

const binary = process.env.TURNWAL_BIN
  ?? join(process.env.CARGO_TARGET_DIR ?? join(repo, 'target'), 'release', 'turnwal')

for (const kind of KINDS) {
  it(`turnwal convert from a JSONL root to a ${kind} store: turnwal-dsh loads what the JSONL backend loads`, async (t) => {
    if (!existsSync(binary)) {
      t.skip(`no turnwal binary at ${binary} (cargo build --release, or set TURNWAL_BIN)`)
      return
    }
    const root = join(tempDir(t), 'jsonl')
    const jsonl = await mount(null, { root }, JsonlSessionPersistence)
    const done = await liveSession(jsonl.ctx, 'done', { meta: { cwd: '/work/a' } })
    toolTurn(done.session, 1)
    toolTurn(done.session, 2, 'unicode 𝄞 and a lone \ud800')
    await jsonl.ctx.sessions.flush(done.session)
    const open = await liveSession(jsonl.ctx, 'open', { meta: { cwd: '/work/b' } })
    toolTurn(open.session, 1)
    turnUntilToolCall(open.session, 2)
    await jsonl.ctx.sessions.flush(open.session)
    await done.fiber.dispose()
    await open.fiber.dispose()
    await jsonl.dispose()

    const path = storePath(t, kind)
    const out = execFileSync(binary, ['convert', '--from', `jsonl:${root}`, '--to', path], { encoding: 'utf8', env: cliEnv(t) })
    t.diagnostic(out.trim())

    const reader = await mount(t, { root }, JsonlSessionPersistence)
    const { persistence } = await mount(t, { path })
    assert.deepEqual((await persistence.list()).map((h) => h.id).sort(), ['done', 'open'])
    for (const id of ['done', 'open']) {
      const expected = await reader.persistence.inspect(id)
      const loaded = await persistence.load(id)
      assert.deepEqual(loaded.events, expected.events, `${id}: the same events, closers included`)
      assert.deepEqual(loaded.meta, expected.meta)
    }
  })
}

// The way back, judged by upstream's own reader: the random sessions the
// published JSONL backend wrote and repaired (tests/fixtures/upstream/<enc>/
// random/after), copied into a WAL store and from there into a new JSONL
// root of each encoding by `turnwal convert`, read by the published backend
// exactly as it reads the originals: the same headers, the same events.
for (const [from, to] of [['none', 'none'], ['none', 'zstd'], ['zstd', 'zstd'], ['zstd', 'none']]) {
  it(`upstream's ${from} sessions, through a WAL store, into a turnwal-written ${to} root read the same by upstream`, async (t) => {
    if (!existsSync(binary)) {
      t.skip(`no turnwal binary at ${binary} (cargo build --release, or set TURNWAL_BIN)`)
      return
    }
    const original = join(repo, 'tests', 'fixtures', 'upstream', from, 'random', 'after')
    const dir = tempDir(t)
    const copy = join(dir, 'original')
    cpSync(original, copy, { recursive: true })
    const wal = join(dir, 'wal')
    const back = join(dir, 'back')
    const convert = (src, dst) => {
      try {
        execFileSync(binary, ['convert', '--from', src, '--to', dst], { encoding: 'utf8', stdio: 'pipe', env: cliEnv(t) })
      } catch (e) {
        // Exit 2: sessions upstream refuses too (corrupt) were not copied.
        if (e.status !== 2) throw e
      }
    }
    convert(`jsonl+${from}:${copy}`, wal)
    convert(wal, `jsonl+${to}:${back}`)

    const theirs = await mount(t, { root: copy, compression: from }, JsonlSessionPersistence)
    const ours = await mount(t, { root: back, compression: to }, JsonlSessionPersistence)
    const readable = []
    for (const meta of await theirs.persistence.list()) {
      let expected
      try {
        expected = await theirs.persistence.inspect(meta.id)
      } catch {
        continue // refused by upstream: not copied either
      }
      if (expected.events.length === 0) continue // a header alone: nothing to materialize
      const got = await ours.persistence.inspect(meta.id)
      assert.deepEqual(got.meta, expected.meta, `${meta.id}: header`)
      assert.equal(JSON.stringify(got.events), JSON.stringify(expected.events), `${meta.id}: events`)
      readable.push(meta.id)
    }
    assert.ok(readable.length >= 25, `only ${readable.length} sessions compared`)
    t.diagnostic(`${readable.length} sessions read the same`)
  })
}
