// The migration path the README gives: sessions a harness wrote with the
// published JSONL backend, copied with `turnwal convert --from jsonl:ROOT`,
// load through turnwal-dsh exactly as the JSONL backend loads them. Needs
// the turnwal binary (CI builds it before these tests; TURNWAL_BIN names
// another one).
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { KINDS, liveSession, mount, storePath, tempDir, toolTurn, turnUntilToolCall } from './support.mjs'

const repo = dirname(dirname(dirname(dirname(fileURLToPath(import.meta.url)))))
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
    const out = execFileSync(binary, ['convert', '--from', `jsonl:${root}`, '--to', path], { encoding: 'utf8' })
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
