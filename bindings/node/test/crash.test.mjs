// The crash path end to end, on both stores: a child Node process running a
// live session on the turnwal plugin is SIGKILLed mid-turn, after a tool call
// was recorded (and flushed, as the checkpoint policy does before a tool
// body). A new process loads the session and gets upstream's closers
// (TOOL_OUTCOME_UNKNOWN result, step/end, turn/end interrupted), resumes it,
// and a further turn appends after them.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { KINDS, child, storePath } from './support.mjs'

const fixture = (name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))

/** Runs the crash child until it reports READY, SIGKILLs it, and reaps it. */
async function crash(t, path, id) {
  let ready
  const { exited } = child(t, fixture('crash-child.mjs'), [path, id], {
    onLine(line, proc) {
      if (line.startsWith('READY ')) {
        ready = JSON.parse(line.slice(6))
        proc.kill('SIGKILL')
      }
    },
  })
  const { signal, stderr } = await exited
  assert.equal(signal, 'SIGKILL', `the child was killed, not ended (stderr: ${stderr})`)
  assert.ok(ready, 'the child reached the tool call before it was killed')
  return ready
}

for (const kind of KINDS) {
  describe(`a harness process SIGKILLed mid-turn, ${kind} store`, () => {
    it('a new process loads the session with upstream closers, and a further turn appends after them', async (t) => {
      const path = storePath(t, kind)
      const id = 'crash-session'
      const { callSeq, events: written } = await crash(t, path, id)
      assert.equal(written.at(-1).type, 'tool/call')

      const { exited } = child(t, fixture('resume-child.mjs'), [path, id])
      const { code, stdout, stderr } = await exited
      assert.equal(code, 0, stderr)
      const { inspected, loaded, final } = JSON.parse(stdout)

      // Everything the killed process flushed is there, unchanged.
      assert.deepEqual(loaded.slice(0, written.length), written)
      assert.deepEqual(inspected, loaded, 'inspect showed the closers load committed')
      const closers = loaded.slice(written.length)
      assert.deepEqual(closers.map((e) => e.type), ['tool/result', 'step/end', 'turn/end'])
      const [result, stepEnd, turnEnd] = closers
      const last = written.at(-1)
      assert.deepEqual(closers.map((e) => e.seq), [last.seq + 1, last.seq + 2, last.seq + 3])
      assert.ok(closers.every((e) => e.time === last.time), 'closers take the last real event time')
      assert.deepEqual(result.data.error, { name: 'ToolOutcomeUnknownError', code: 'TOOL_OUTCOME_UNKNOWN' })
      assert.deepEqual(result.sourceEventSeqs, [callSeq])
      assert.equal(result.surfaceOp, 'append')
      assert.equal(result.data.message.id, `interrupted-tool-result-call-2-${last.seq + 1}`)
      assert.deepEqual(result.data.message.source, { kind: 'tool', callId: 'call-2' })
      assert.match(result.data.message.content[0].content[0].text, /Do not retry blindly\.$/)
      assert.equal(result.data.message.content[0].isError, true)
      assert.deepEqual(stepEnd.data, { turn: 2, step: 1 })
      assert.deepEqual(turnEnd.data, { turn: 2, reason: { kind: 'interrupted' } })

      // The resumed session: its seed boundary, then turn 3, after the closers.
      assert.deepEqual(final.slice(0, loaded.length), loaded)
      const after = final.slice(loaded.length)
      assert.equal(after[0].type, 'session/end-seed')
      assert.deepEqual(after[1], { ...after[1], type: 'turn/start', data: { turn: 3 } })
      assert.deepEqual(after.at(-1).data, { turn: 3, reason: { kind: 'completed' } })
      assert.deepEqual(final.map((e) => e.seq), [...final.keys()], 'contiguous seqs')
    })

    it('killed at random moments while it writes: every acknowledged event survives and the log loads balanced', async (t) => {
      for (let round = 0; round < 3; round++) {
        const path = storePath(t, kind)
        const id = `churn-${round}`
        let acked = 0
        const delay = 40 + Math.floor(Math.random() * 200)
        const { proc, exited } = child(t, fixture('churn-child.mjs'), [path, id], {
          onLine(line) {
            if (line.startsWith('ACK ')) acked = Number(line.slice(4))
          },
        })
        // Kill once it has acknowledged something, after a random delay.
        await new Promise((resolve) => {
          const poll = setInterval(() => {
            if (acked > 0 || proc.exitCode !== null) {
              clearInterval(poll)
              setTimeout(resolve, delay)
            }
          }, 5)
        })
        proc.kill('SIGKILL')
        const { signal, stderr } = await exited
        assert.equal(signal, 'SIGKILL', stderr)
        const { exited: resumed } = child(t, fixture('resume-child.mjs'), [path, id])
        const { code, stdout, stderr: err } = await resumed
        assert.equal(code, 0, err)
        const { loaded, final } = JSON.parse(stdout)
        assert.ok(loaded.length >= acked, `round ${round}: ${loaded.length} events loaded, ${acked} acknowledged`)
        assert.equal(loaded.at(-1).type, 'turn/end', 'balanced after load')
        assert.deepEqual(final.map((e) => e.seq), [...final.keys()])
        t.diagnostic(`${kind} round ${round}: killed after ${delay} ms with ${acked} events acknowledged; ${loaded.length} loaded (reason ${loaded.at(-1).data.reason.kind})`)
      }
    })
  })
}
