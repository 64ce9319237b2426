// A harness that touches 10,000 sessions under `ulimit -n 256` keeps
// working (issue 29): the store lets go of idle sessions' files, so neither
// its appends nor the rest of the process run out of descriptors.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { KINDS, storePath } from './support.mjs'

const fixture = fileURLToPath(new URL('./fixtures/many-sessions-child.mjs', import.meta.url))

for (const kind of KINDS) {
  it(`10,000 sessions under ulimit -n 256, ${kind} store`, async (t) => {
    const path = storePath(t, kind)
    const child = spawn('bash', ['-c', 'ulimit -n 256 && exec "$0" "$@"', process.execPath, fixture, path, '10000'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c) => { stdout += c })
    child.stderr.on('data', (c) => { stderr += c })
    const code = await new Promise((resolve) => child.on('close', resolve))
    assert.equal(code, 0, stderr)
    const { most, listed } = JSON.parse(stdout)
    assert.equal(listed, 10_000)
    assert.ok(most < 256, `${most} descriptors at most`)
    t.diagnostic(`${kind}: at most ${most} descriptors open while writing 10,000 sessions`)
  })
}
