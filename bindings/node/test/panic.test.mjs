// No panic inside turnwal crosses into the harness's process (issue 29):
// every addon entry point, made to panic (TURNWAL_DSH_PANIC_IN, a test
// hook), rejects or throws an error naming the operation instead of
// aborting the process; a store whose operation panicked refuses further
// operations as POISONED; a new store opens.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { child, storePath } from './support.mjs'

const fixture = fileURLToPath(new URL('./fixtures/panic-child.mjs', import.meta.url))

const ASYNC_OPS = ['loadStored', 'loadStoredFrom', 'loadStoredPieces', 'loadStoredFromPieces', 'revision', 'hold', 'append', 'commitRepair', 'list', 'salvage', 'salvageRepair', 'close', 'openStore']
const CALLS = [...ASYNC_OPS.filter((op) => op !== 'openStore').map((op) => `${op}.call`), 'openStore.call', 'walLogPath', 'storeKind', 'version']

describe('a panic inside turnwal', () => {
  for (const op of [...ASYNC_OPS, ...CALLS]) {
    it(`in ${op} is an error, not an abort`, async (t) => {
      const path = storePath(t, 'wal')
      const { exited } = child(t, fixture, [op, path])
      const { code, signal, stdout, stderr } = await exited
      assert.equal(signal, null, `killed by ${signal}: ${stderr}`)
      assert.equal(code, 0, stderr)
      const { result, after, fresh } = JSON.parse(stdout)
      assert.ok(result.error, `no error: ${JSON.stringify(result)}`)
      assert.match(result.error, /forced panic in /)
      if (ASYNC_OPS.includes(op)) {
        assert.match(result.error, new RegExp(`^turnwal\\[PANIC\\] ${op} failed inside turnwal`))
        if (after !== undefined) assert.match(after.error, /^turnwal\[POISONED\]/)
      }
      assert.deepEqual(fresh.ok === undefined ? fresh : { listed: typeof fresh.ok }, { listed: 'string' })
    })
  }
})
