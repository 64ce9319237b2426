// The throughput workload (test/throughput.test.mjs, scripts/load-breakdown.mjs):
// a 100,000-event session of 4,000 turns, as a streaming harness writes it.
import assert from 'node:assert/strict'
import { assistantMessage, toolResultMessage, userMessage } from './support.mjs'

export const EVENTS = 100_000
const PER_TURN = 25
export const BATCH = 100 // events per append: a write-behind batch of a streaming step

/** 4,000 turns of 25 events: prompt, 17 streamed chunks, a tool call and its result. */
export function workload() {
  const events = []
  let time = 1_700_000_000_000
  for (let n = 1; events.length < EVENTS; n++) {
    const push = (type, data, extra = {}) => events.push({ type, seq: events.length, time: time++, data, ...extra })
    push('turn/start', { turn: n })
    push('user/message', userMessage(`user-${n}`, `Please look at file ${n} and summarize what changed since the last review.`), { surfaceOp: 'append' })
    push('step/start', { turn: n, step: 1 })
    for (let i = 0; i < 17; i++) {
      push('assistant/chunk', { turn: n, step: 1, chunk: { type: 'text-delta', index: 0, text: `token${i} ` } })
    }
    const callId = `call-${n}`
    push('assistant/message', {
      turn: n,
      step: 1,
      message: assistantMessage(`assistant-${n}`, 'Reading the file.', [[callId, 'read', `{"path":"src/file${n}.rs"}`]]),
      usage: { inputTokens: 1200 + n, outputTokens: 40 },
    }, { surfaceOp: 'append' })
    const callSeq = events.length
    push('tool/call', { turn: n, step: 1, callId, name: 'read', arguments: `{"path":"src/file${n}.rs"}` })
    push('tool/result', {
      turn: n,
      step: 1,
      message: toolResultMessage(`result-${n}`, callId, `fn main() {\n    println!("file ${n}");\n}\n`),
    }, { surfaceOp: 'append', sourceEventSeqs: [callSeq] })
    push('step/end', { turn: n, step: 1 })
    push('turn/end', { turn: n, reason: { kind: 'completed' } })
  }
  assert.equal(events.length, EVENTS)
  assert.equal(EVENTS % PER_TURN, 0)
  return events
}

