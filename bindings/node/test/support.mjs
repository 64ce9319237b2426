// Shared helpers of the turnwal-dsh tests: temporary stores, a real cordis
// Context with the published SessionStore and the plugin mounted, and event
// builders for turns with tool calls. Nothing here is a mock: every test runs
// the published upstream packages over real files.
import { spawn } from 'node:child_process'
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { Context } from '@deepseek-ai/cordis'
import { SessionStore } from '@deepseek-ai/dsh-session'
import { TurnwalSessionPersistence } from '../index.js'

/** The two stores the plugin opens: a WAL directory and a SQLite database. */
export const KINDS = ['wal', 'sqlite']

/** A fresh temporary directory, removed when the test ends. */
export function tempDir(t, prefix = 'turnwal-dsh-') {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A store path of `kind` inside a fresh temporary directory. */
export function storePath(t, kind) {
  const dir = tempDir(t)
  return kind === 'sqlite' ? join(dir, 'sessions.sqlite') : join(dir, 'wal')
}

/**
 * A root Context with SessionStore and a persistence plugin over `config`,
 * disposed when the test ends (or earlier, by `dispose()`).
 */
export async function mount(t, config, plugin = TurnwalSessionPersistence) {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const fiber = await ctx.plugin(plugin, config)
  let disposed = false
  const dispose = async () => {
    if (disposed) return
    disposed = true
    await fiber.dispose()
    await ctx.fiber.dispose()
  }
  t?.after(dispose)
  return { ctx, persistence: ctx.sessionPersistence, dispose }
}

/** A live session created in its own fiber, so it can be disposed on its own. */
export async function liveSession(ctx, id, options) {
  let session
  const fiber = await ctx.plugin(Object.assign((inner) => {
    session = inner.sessions.create(id, options)
  }, { inject: ['sessions'] }))
  return { session, fiber }
}

export const meta = (id, cwd) => ({ version: 0, id, createdAt: 1000, ...(cwd === undefined ? {} : { cwd }) })

export function userMessage(id, text) {
  return { id, role: 'user', source: { kind: 'user' }, content: [{ type: 'text', text }] }
}

export function assistantMessage(id, text, calls = []) {
  return {
    id,
    role: 'assistant',
    source: { kind: 'model', provider: 'mock', model: 'mock' },
    content: [
      ...(text === '' ? [] : [{ type: 'text', text }]),
      ...calls.map(([callId, name, args]) => ({ type: 'tool-call', id: callId, name, arguments: args })),
    ],
  }
}

export function toolResultMessage(id, callId, text, isError = false) {
  return {
    id,
    role: 'user',
    source: { kind: 'tool', callId },
    content: [{ type: 'tool-result', toolCallId: callId, isError, content: [{ type: 'text', text }] }],
  }
}

/**
 * Through `Session.append`: turn `n` with a streamed step that calls a tool
 * (chunks, the assistant message, `tool/call`, its result) and a final
 * answering step. `prompt` may carry any text (lone surrogates included).
 */
export function toolTurn(session, n, prompt = `prompt ${n}`) {
  const callId = `call-${n}`
  session.append('turn/start', { turn: n })
  session.append('user/message', userMessage(`user-${n}`, prompt), { surfaceOp: 'append' })
  session.append('step/start', { turn: n, step: 1 })
  for (const text of ['Let ', 'me ', 'look.']) {
    session.append('assistant/chunk', { turn: n, step: 1, chunk: { type: 'text-delta', index: 0, text } })
  }
  const chunkSeqs = [session.seq - 3, session.seq - 2, session.seq - 1]
  session.append('assistant/message', {
    turn: n,
    step: 1,
    message: assistantMessage(`assistant-${n}-1`, 'Let me look.', [[callId, 'read', '{"path":"a.txt"}']]),
    usage: { inputTokens: 12, outputTokens: 3 },
  }, { surfaceOp: 'append', sourceEventSeqs: chunkSeqs })
  const call = session.append('tool/call', { turn: n, step: 1, callId, name: 'read', arguments: '{"path":"a.txt"}' })
  session.append('tool/result', {
    turn: n,
    step: 1,
    message: toolResultMessage(`result-${n}`, callId, `contents of a.txt, turn ${n}`),
  }, { surfaceOp: 'append', sourceEventSeqs: [call.seq] })
  session.append('step/end', { turn: n, step: 1 })
  session.append('step/start', { turn: n, step: 2 })
  session.append('assistant/message', {
    turn: n,
    step: 2,
    message: assistantMessage(`assistant-${n}-2`, `Done with turn ${n}.`),
  }, { surfaceOp: 'append' })
  session.append('step/end', { turn: n, step: 2 })
  session.append('turn/end', { turn: n, reason: { kind: 'completed' } })
}

/**
 * Through `Session.append`: turn `n` up to a recorded `tool/call`, as a
 * process that is executing the tool has it. Returns the call's seq.
 */
export function turnUntilToolCall(session, n, callId = `call-${n}`) {
  session.append('turn/start', { turn: n })
  session.append('user/message', userMessage(`user-${n}`, `prompt ${n}`), { surfaceOp: 'append' })
  session.append('step/start', { turn: n, step: 1 })
  session.append('assistant/message', {
    turn: n,
    step: 1,
    message: assistantMessage(`assistant-${n}-1`, '', [[callId, 'write', '{"path":"b.txt"}']]),
  }, { surfaceOp: 'append' })
  return session.append('tool/call', { turn: n, step: 1, callId, name: 'write', arguments: '{"path":"b.txt"}' }).seq
}

/** Plain events (for `sessionPersistence.append`): one complete turn from `seq`. */
export function plainTurn(seq, n, time = 1000 + seq) {
  return [
    { type: 'turn/start', seq, time, data: { turn: n } },
    { type: 'user/message', seq: seq + 1, time, data: userMessage(`u${seq}`, 'hi'), surfaceOp: 'append' },
    { type: 'step/start', seq: seq + 2, time, data: { turn: n, step: 1 } },
    { type: 'assistant/message', seq: seq + 3, time, data: { turn: n, step: 1, message: assistantMessage(`a${seq}`, 'hello') }, surfaceOp: 'append' },
    { type: 'step/end', seq: seq + 4, time, data: { turn: n, step: 1 } },
    { type: 'turn/end', seq: seq + 5, time, data: { turn: n, reason: { kind: 'completed' } } },
  ]
}

/** The revision `listSnapshots` gives a session. */
export async function listedRevision(persistence, id) {
  return (await persistence.listSnapshots()).find((s) => s.header.id === id)?.revision
}

/**
 * Runs `node file args` and collects its output; `onLine` sees each stdout
 * line as it arrives. The child is killed and reaped when the test ends.
 */
export function child(t, file, args, { onLine, env } = {}) {
  const proc = spawn(process.execPath, [file, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  })
  let stdout = ''
  let stderr = ''
  let pending = ''
  proc.stdout.setEncoding('utf8')
  proc.stderr.setEncoding('utf8')
  proc.stdout.on('data', (chunk) => {
    stdout += chunk
    pending += chunk
    let nl
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      onLine?.(line, proc)
    }
  })
  proc.stderr.on('data', (chunk) => { stderr += chunk })
  const exited = new Promise((resolve) => {
    proc.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
  t.after(async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    await exited
  })
  return { proc, exited }
}

/** The stored bytes of a session: the WAL file, or its SQLite rows. */
export function image(path, kind, persistence, id) {
  if (kind === 'wal') return readFileSync(persistence.locate({ id }).path).toString('hex')
  const db = new DatabaseSync(path, { readOnly: true })
  try {
    return JSON.stringify(db.prepare('SELECT seq, type, time, hex(data) AS data FROM events WHERE session_id = ? ORDER BY seq').all(id))
  } finally {
    db.close()
  }
}

/**
 * Leaves a never-acknowledged partial record after the stored log: on the
 * WAL, half of a copy of the last record (a header promising more bytes than
 * the file holds, as an interrupted write leaves); on SQLite, upstream's
 * fixture, a row of bad JSON at the next seq — `next`, or one past the
 * highest stored row's seq (which a packed last row would make wrong).
 */
export function tearTail(path, kind, persistence, id, next) {
  if (kind === 'wal') {
    const file = persistence.locate({ id }).path
    const bytes = readFileSync(file)
    const last = bytes.readUInt32LE(bytes.length - 4)
    appendFileSync(file, bytes.subarray(bytes.length - last, bytes.length - last / 2))
    return
  }
  const db = new DatabaseSync(path)
  try {
    const seq = next ?? db.prepare('SELECT max(seq) + 1 AS next FROM events WHERE session_id = ?').get(id).next
    db.prepare("INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, 'assistant/chunk', 9, '{not valid json')").run(id, seq)
  } finally {
    db.close()
  }
}
