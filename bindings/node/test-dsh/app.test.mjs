// The published dsh app end to end on turnwal-dsh (issue 32), as the
// README's "Use it in the dsh app" says to set it up: the app
// (@deepseek-ai/dsh@0.1.0-rc.8, pinned by test-dsh/app/package.json) and
// pnpm installed into a temporary directory, turnwal-dsh packed (`npm run
// pack`) and added to the `headless` and `web` profiles with `dsh plugin`,
// the patch file switching each profile, a model server on 127.0.0.1
// (test-dsh/fake-model.mjs). Then: a headless prompt (streamed text and one
// bash tool call); `dsh web` resumes the session for a second prompt and is
// SIGKILLed while the answer streams; a restarted `dsh web` resumes it for a
// third; its session export is downloaded. `turnwal` checks the store at
// every stage: the stored prefix kept byte for byte, the killed turn closed
// as interrupted, the next turn stored, the export ZIP's session.jsonl equal
// to `turnwal export --jsonl` (what readRaw returns), and upstream's own JSONL
// backend reading that file back as the same events.
//
//   npm run test:dsh        (needs the network: npm installs the app)
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { startFakeModel } from './fake-model.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const binding = dirname(here)
const repo = join(binding, '..', '..')

const PATCH = `- id: session-persistence-jsonl
  disabled: true
- insert:
    - id: session-persistence-turnwal
      name: turnwal-dsh
      config:
        path: !!js dshHomePath('sessions.turnwal')
`

/** The `turnwal` binary: TURNWAL_BIN, else the workspace's release build (built if missing). */
function turnwalBinary() {
  if (process.env.TURNWAL_BIN) return process.env.TURNWAL_BIN
  const bin = join(repo, 'target', 'release', 'turnwal')
  if (!existsSync(bin)) execFileSync('cargo', ['build', '--release', '--locked', '--bin', 'turnwal'], { cwd: repo, stdio: 'inherit' })
  return bin
}

const seconds = (start) => `${((performance.now() - start) / 1000).toFixed(1)} s`

it('the published dsh app runs on turnwal-dsh: headless, web, a SIGKILL mid-stream, resume, export', { timeout: 900_000 }, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'turnwal-dsh-app-'))
  const processes = new Set()
  let model
  t.after(async () => {
    for (const proc of processes) {
      try { process.kill(-proc.pid, 'SIGKILL') } catch {}
    }
    await model?.close()
    rmSync(work, { recursive: true, force: true })
  })
  const steps = []
  const step = (name, start) => {
    steps.push(`${name}: ${seconds(start)}`)
    t.diagnostic(steps.at(-1))
  }
  // Every synchronous step is bounded: it blocks the event loop, so the
  // test's own timeout could not end a stalled one.
  const npm = (args, cwd) => execFileSync('npm', [...args, '--no-audit', '--no-fund'], { cwd, stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 })
  const turnwal = turnwalBinary()

  // 1. The app and pnpm (which `dsh plugin` runs), as a user installs them.
  let start = performance.now()
  const app = join(work, 'app')
  mkdirSync(app)
  copyFileSync(join(here, 'app', 'package.json'), join(app, 'package.json'))
  npm(['install', '--legacy-peer-deps'], app)
  npm(['install', '--prefix', join(work, 'tools'), 'pnpm@10.34.9'], work)
  const dshBin = join(app, 'node_modules', '@deepseek-ai', 'dsh', 'lib', 'bin.js')
  step('install the app and pnpm', start)

  // 2. turnwal-dsh packed and added to two profiles, each switched by the patch.
  start = performance.now()
  const tarballs = execFileSync(process.execPath, [join(binding, 'scripts', 'pack.mjs'), join(work, 'tarballs'), '--targets', 'linux-x64-gnu'], { cwd: binding, encoding: 'utf8', timeout: 300_000 })
    .trim().split('\n').slice(-2)
  const home = join(work, 'dsh-home')
  const ws = join(work, 'workspace')
  mkdirSync(ws)
  mkdirSync(join(work, 'user-home'))
  const env = {
    ...process.env,
    PATH: `${join(work, 'tools', 'node_modules', '.bin')}:${dirname(process.execPath)}:${process.env.PATH}`,
    HOME: join(work, 'user-home'),
    DSH_HOME: home,
    DSH_TELEMETRY_DISABLED: '1',
    npm_config_store_dir: join(work, 'pnpm-store'),
    npm_config_cache_dir: join(work, 'pnpm-cache'),
    npm_config_state_dir: join(work, 'pnpm-state'),
  }
  const dsh = (args) => execFileSync(process.execPath, [dshBin, ...args], { cwd: ws, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 })
  // A run that talks to the model server, which lives in this process: not
  // synchronous. Resolves with its stdout; rejects on a non-zero exit.
  const dshRun = (args) => new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [dshBin, ...args], { cwd: ws, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    processes.add(proc)
    let out = ''
    let err = ''
    proc.stdout.on('data', (d) => { out += d })
    proc.stderr.on('data', (d) => { err += d })
    proc.on('exit', (code, signal) => {
      processes.delete(proc)
      if (code === 0) resolve(out)
      else reject(new Error(`dsh ${args.join(' ')} exited ${code ?? signal}: ${out}${err}`))
    })
  })
  for (const profile of ['headless', 'web']) {
    dsh(['plugin', '--profile', profile, 'add', ...tarballs])
    // The peers resolve to the app's own copies: the profile holds none.
    for (const peer of ['cordis', 'dsh-session', 'dsh-session-persistence']) {
      assert.equal(existsSync(join(home, 'profiles', profile, 'node_modules', '@deepseek-ai', peer)), false, `${profile} has its own ${peer}`)
    }
    assert.equal(existsSync(join(home, 'profiles', profile, 'node_modules', 'turnwal-dsh-linux-x64-gnu', 'turnwal.node')), true)
    writeFileSync(join(home, 'profiles', profile, 'cordis.patch.yml'), PATCH)
    const config = dsh(['--profile', profile, '--dump-config'])
    const rows = config.split(/\n(?=- id: )/)
    const row = (id) => rows.find((r) => r.startsWith(`- id: ${id}\n`))
    assert.match(row('session-persistence-jsonl'), /\n {2}disabled: true/, `${profile}: the JSONL row is off`)
    assert.match(row('session-persistence-turnwal'), /\n {2}name: turnwal-dsh\n/)
    assert.doesNotMatch(row('session-persistence-turnwal'), /disabled: true/)
  }
  step('pack turnwal-dsh, add it to two profiles, switch them', start)

  model = await startFakeModel()
  env.DEEPSEEK_BASE_URL = model.url
  env.DEEPSEEK_API_KEY = 'sk-not-a-real-key'
  const store = join(home, 'sessions.turnwal')
  const tw = (...args) => execFileSync(turnwal, ['--store', store, ...args], { encoding: 'utf8', timeout: 60_000 })
  const lines = (text) => text.trimEnd().split('\n').map((line) => JSON.parse(line))
  // What a reader sees (a live or crashed turn with its closers), and what is stored.
  const events = (id) => lines(tw('cat', id))
  const stored = (id) => lines(tw('cat', id, '--raw'))

  // 3. A headless prompt: text, a bash tool call, the answer.
  start = performance.now()
  const answer = await dshRun(['--profile', 'headless', 'say hi using bash'])
  assert.equal(answer.trim(), 'The command finished. Its output was: hi . Done.')
  assert.equal(existsSync(join(home, 'sessions')), false, 'nothing went to the JSONL root')
  const sessions = JSON.parse(`[${tw('ls', '--json').trim().split('\n').join(',')}]`)
  assert.equal(sessions.length, 1)
  const id = sessions[0].id
  assert.deepEqual([...new Set(model.requests.map((r) => r.session))], [id])
  const first = events(id)
  const call = first.find((e) => e.type === 'tool/call')
  assert.equal(call.data.name, 'bash')
  assert.equal(JSON.parse(call.data.arguments).command, 'echo hi')
  const result = first.find((e) => e.type === 'tool/result')
  assert.match(JSON.stringify(result.data.message.content), /hi\\n/)
  assert.deepEqual(first.at(-1).data.reason, { kind: 'completed' })
  assert.match(tw('verify', id), new RegExp(`^${id}: clean, ${first.length} events, 1 turn, `))
  step('headless prompt with a tool call', start)

  /** `dsh web` on a free port: its process (its own group) and base URL. */
  async function web() {
    const proc = spawn(process.execPath, [dshBin, 'web', '--no-open', '--port', '0'], { cwd: ws, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
    processes.add(proc)
    let out = ''
    let err = ''
    proc.stderr.on('data', (d) => { err += d })
    const url = await new Promise((resolve, reject) => {
      proc.stdout.on('data', (d) => {
        out += d
        const m = /dsh web: (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
        if (m) resolve(m[1])
      })
      proc.on('exit', (code) => reject(new Error(`dsh web exited ${code} before listening: ${out}${err}`)))
    })
    const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal, err })))
    return { proc, url, exited }
  }
  const rpc = async (url, method, payload) => {
    const response = await fetch(`${url}/api/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'client-request', rpcId: method, method, payload }),
    })
    assert.equal(response.status, 200, `${method}: ${await response.clone().text()}`)
    return response.json()
  }
  const prompt = (url, text) => rpc(url, 'session.prompt', { sessionId: id, mode: 'queue', content: [{ type: 'text', text }] })

  // 4. `dsh web` resumes the session; SIGKILLed while the answer streams.
  start = performance.now()
  const killed = await web()
  await prompt(killed.url, 'again [hang]')
  await model.hung
  // The streamed words reach the store through the write-behind batch:
  // wait until they are there and the store stops changing.
  let settled = ''
  for (let i = 0; i < 100; i++) {
    await new Promise((resolve) => setTimeout(resolve, 300))
    const now = tw('export', '--jsonl', id)
    if (now === settled && stored(id).at(-1).type === 'assistant/chunk') break
    settled = now
  }
  // A second `dsh web` on the held session: its prompt is refused, naming
  // the lock, and nothing of it is stored.
  const beforeSecond = tw('export', '--jsonl', id)
  const second = await web()
  const refused = await fetch(`${second.url}/api/session.prompt`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'client-request', rpcId: 'second', method: 'session.prompt', payload: { sessionId: id, mode: 'queue', content: [{ type: 'text', text: 'from a second process' }] } }),
  })
  const refusal = await refused.text()
  t.diagnostic(`a second dsh web's prompt on the held session: HTTP ${refused.status} ${refusal.slice(0, 300)}`)
  assert.doesNotMatch(refusal, /"accepted":true/)
  assert.match(refusal, new RegExp(`locked by another writer \\(pid ${killed.proc.pid}\\)`))
  process.kill(-second.proc.pid, 'SIGTERM')
  assert.equal((await second.exited).code, 0)
  processes.delete(second.proc)
  assert.equal(tw('export', '--jsonl', id), beforeSecond, 'the second process wrote nothing')
  assert.doesNotMatch(beforeSecond, /from a second process/)
  process.kill(-killed.proc.pid, 'SIGKILL')
  const { signal } = await killed.exited
  processes.delete(killed.proc)
  assert.equal(signal, 'SIGKILL')
  const prefix = tw('export', '--jsonl', id)
  const open = stored(id)
  assert.equal(open.at(-1).type, 'assistant/chunk', 'the killed turn is open, its streamed words stored')
  assert.ok(open.length > first.length)
  step('dsh web: resume, prompt, SIGKILL mid-stream', start)

  // 5. A restarted `dsh web` resumes it for a third prompt, then exports it.
  start = performance.now()
  const restarted = await web()
  await prompt(restarted.url, 'and once more')
  for (let i = 0; i < 400; i++) {
    const last = stored(id).at(-1)
    if (last.type === 'turn/end' && last.data.turn > 2) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const response = await fetch(`${restarted.url}/api/session.export?sessionId=${encodeURIComponent(id)}`)
  assert.equal(response.status, 200, await response.clone().text())
  assert.equal(response.headers.get('content-type'), 'application/zip')
  const zip = Buffer.from(await response.arrayBuffer())
  process.kill(-restarted.proc.pid, 'SIGTERM')
  const stopped = await restarted.exited
  processes.delete(restarted.proc)
  assert.equal(stopped.code, 0, stopped.err)
  step('dsh web restarted: resume, prompt, export, stop', start)

  // 6. What the store holds now.
  const after = tw('export', '--jsonl', id)
  assert.ok(after.startsWith(prefix), 'the stored prefix is kept byte for byte')
  const rest = lines(after.slice(prefix.length))
  const closed = rest.findIndex((e) => e.type === 'turn/end')
  assert.deepEqual(rest.slice(0, closed + 1).map((e) => e.type), ['step/end', 'turn/end'], 'the killed step and turn closed')
  assert.deepEqual(rest[closed].data, { turn: 2, reason: { kind: 'interrupted' } }, 'the killed turn closed as interrupted')
  t.diagnostic(`after the prefix: ${rest.map((e) => e.type).join(' ')}`)
  const third = rest.slice(rest.findIndex((e, i) => i > closed && e.type === 'turn/start'))
  assert.equal(third[0].data.turn, 3)
  assert.match(JSON.stringify(third), /and once more/)
  assert.deepEqual(third.findLast((e) => e.type === 'turn/end').data.reason, { kind: 'completed' })
  assert.match(tw('verify', id), new RegExp(`^${id}: clean, ${events(id).length} events, 3 turns, `))

  // The export: one session.jsonl, what readRaw gives (`turnwal export --jsonl`).
  const appRequire = createRequire(join(app, 'package.json'))
  // Unzipped with the app's own ZIP library (the one it wrote it with).
  const entries = appRequire('fflate').unzipSync(new Uint8Array(zip))
  assert.deepEqual(Object.keys(entries), ['session.jsonl'])
  const exported = Buffer.from(entries['session.jsonl']).toString('utf8')
  assert.equal(exported, after, 'the export ZIP holds what readRaw returns')
  t.diagnostic(`export: ${zip.length} bytes zipped, session.jsonl ${Buffer.byteLength(exported)} bytes, ${exported.trimEnd().split('\n').length} lines`)

  // Upstream's own JSONL backend (the app's copy) reads it as the same events.
  const load = (name) => import(pathToFileURL(appRequire.resolve(name)).href)
  const [{ Context }, { SessionStore }, { default: JsonlSessionPersistence }] = await Promise.all([
    load('@deepseek-ai/cordis'), load('@deepseek-ai/dsh-session'), load('@deepseek-ai/dsh-session-persistence-jsonl'),
  ])
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const root = join(work, 'jsonl-root')
  await ctx.plugin(JsonlSessionPersistence, { root, compression: 'none' })
  const header = JSON.parse(exported.slice(0, exported.indexOf('\n')))
  const logPath = ctx.sessionPersistence.locate({ ...header, type: undefined }).path
  mkdirSync(dirname(logPath), { recursive: true })
  writeFileSync(logPath, exported)
  const upstream = await ctx.sessionPersistence.load(id)
  await ctx.fiber.dispose()
  assert.deepEqual(upstream.events, events(id), 'upstream reads every event turnwal holds')
  t.diagnostic(`upstream's JSONL backend loaded ${upstream.events.length} events from the exported session.jsonl`)
  t.diagnostic(steps.join('; '))
})
