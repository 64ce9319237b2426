// Packs turnwal-dsh the way napi-rs projects are published: the main package
// (JavaScript and types, no addon) and a platform package per target,
// npm/<target>/, each holding its prebuilt addon.
//
//   node scripts/pack.mjs [DIR] [--targets T,...]
//       build the addon for each target (default: every published one),
//       stage, then `npm pack` the platform packages and the main package
//       into DIR (default: .); prints the tarball paths, platform packages
//       first, in the order given, then the main package
//   node scripts/pack.mjs --stage
//       copy this machine's addon (built by `npm run build` if missing) and
//       LICENSE into place; the main package's `prepack` runs this
//
// Building for another target needs its toolchain, which
// `scripts/cross-test <platform>` at the repository root installs: Debian's
// gcc-aarch64-linux-gnu (linux-arm64-gnu), mingw-w64 (win32-x64-gnu), PyPI's
// ziglang and cargo-zigbuild (darwin-*, linked against the framework stubs
// scripts/macos-sdk-stubs writes). The copied turnwal.node and LICENSE files
// are gitignored.
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(dirname(fileURLToPath(import.meta.url)))
const root = resolve(here, '..', '..')

/** Every published target: its Rust target, the library cargo makes, how it links. */
export const TARGETS = {
  'linux-x64-gnu': { rust: 'x86_64-unknown-linux-gnu', lib: 'libturnwal_node.so' },
  'linux-arm64-gnu': {
    rust: 'aarch64-unknown-linux-gnu',
    lib: 'libturnwal_node.so',
    env: { CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER: 'aarch64-linux-gnu-gcc' },
    toolchain: 'aarch64',
  },
  'darwin-arm64': { rust: 'aarch64-apple-darwin', lib: 'libturnwal_node.dylib', zig: true, toolchain: 'macos' },
  'darwin-x64': { rust: 'x86_64-apple-darwin', lib: 'libturnwal_node.dylib', zig: true, toolchain: 'macos' },
  'win32-x64-gnu': { rust: 'x86_64-pc-windows-gnu', lib: 'turnwal_node.dll', libnode: true, toolchain: 'windows' },
}

/** This machine's napi-rs target (index.js derives the same). */
function platformTarget() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime
    return `${platform}-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `${platform}-${arch}-gnu`
  return `${platform}-${arch}`
}

const npm = process.env.npm_execpath
  ? (args, options) => execFileSync(process.execPath, [process.env.npm_execpath, ...args], options)
  : (args, options) => execFileSync('npm', args, { shell: process.platform === 'win32', ...options })

/** The platform package of `target`, checked against the main package. */
function platformDir(target) {
  const dir = join(here, 'npm', target)
  if (!existsSync(join(dir, 'package.json'))) {
    throw new Error(`pack: no platform package for ${target}: create ${dir} laid out like npm/linux-x64-gnu (see README.md, "Other platforms")`)
  }
  const main = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
  const platform = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (platform.version !== main.version || main.optionalDependencies?.[platform.name] !== main.version) {
    throw new Error(`pack: ${platform.name}@${platform.version} must be version ${main.version} and an exact optional dependency of ${main.name}`)
  }
  return dir
}

let targetDir
/** Cargo's target directory (asked once). */
function targetDirectory() {
  targetDir ??= JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], {
    cwd: here, encoding: 'utf8', maxBuffer: 64 << 20,
  })).target_directory
  return targetDir
}

/** Builds the addon for `target` (release) and returns the built library's path. */
function build(target) {
  const spec = TARGETS[target]
  if (!spec) throw new Error(`pack: unknown target ${target}; the targets are ${Object.keys(TARGETS).join(', ')}`)
  if (target === platformTarget()) {
    // The host's own build, shared with `npm run build`.
    execFileSync('cargo', ['build', '-p', 'turnwal-node', '--locked', '--release'], { cwd: here, stdio: 'inherit' })
    return join(targetDirectory(), 'release', spec.lib)
  }
  const hint = `(its toolchain: \`scripts/cross-test ${spec.toolchain}\` at the repository root installs it)`
  const env = { ...process.env, ...spec.env }
  let sdk, libnode
  try {
    if (spec.zig) {
      sdk = mkdtempSync(join(tmpdir(), 'turnwal-macos-sdk-'))
      execFileSync(join(root, 'scripts', 'macos-sdk-stubs'), [sdk], { stdio: 'inherit' })
      env.SDKROOT = sdk
    }
    if (spec.libnode) {
      // napi-build links mingw builds against a `libnode.dll`, which Node
      // for Windows does not ship (its symbols are node.exe's). The addon
      // takes none of them from it: napi-sys loads every Node-API symbol
      // from the host process at run time (its `dyn-symbols`), so an empty
      // DLL satisfies the build, and the addon does not import it.
      libnode = mkdtempSync(join(tmpdir(), 'turnwal-libnode-'))
      writeFileSync(join(libnode, 'empty.c'), 'int turnwal_libnode_placeholder;\n')
      execFileSync('x86_64-w64-mingw32-gcc', ['-shared', '-o', join(libnode, 'libnode.dll'), join(libnode, 'empty.c')], { stdio: 'inherit' })
      env.LIBNODE_PATH = libnode
    }
    const args = [spec.zig ? 'zigbuild' : 'build', '-p', 'turnwal-node', '--locked', '--release', '--target', spec.rust]
    try {
      execFileSync('cargo', args, { cwd: here, stdio: 'inherit', env })
    } catch (error) {
      throw new Error(`pack: building the addon for ${target} failed ${hint}: ${error.message}`, { cause: error })
    }
  } finally {
    for (const dir of [sdk, libnode]) if (dir) rmSync(dir, { recursive: true, force: true })
  }
  return join(targetDirectory(), spec.rust, 'release', spec.lib)
}

/** Puts `addon` into the platform package of `target` and LICENSE into it and the main package. */
function stageAddon(target, addon) {
  if (!existsSync(addon)) throw new Error(`pack: ${addon} was not produced`)
  const dir = platformDir(target)
  copyFileSync(addon, join(dir, 'turnwal.node'))
  for (const d of [here, dir]) copyFileSync(join(root, 'LICENSE'), join(d, 'LICENSE'))
  return dir
}

/** The main package's prepack: this machine's addon, built by `npm run build` if missing. */
function stageHost() {
  const addon = join(here, 'turnwal.node')
  if (!existsSync(addon)) {
    console.error('pack: turnwal.node is not built; running `npm run build`')
    npm(['run', 'build'], { cwd: here, stdio: 'inherit' })
  }
  return stageAddon(platformTarget(), addon)
}

function packInto(dir, out) {
  // --ignore-scripts: staging is done; the main package's prepack would only repeat it.
  const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', out], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }))
  return join(out, packed.filename)
}

if (process.argv.includes('--stage')) {
  stageHost()
} else {
  const args = process.argv.slice(2)
  const at = args.indexOf('--targets')
  const targets = at >= 0 ? (args.splice(at, 2)[1] ?? '').split(',').filter(Boolean) : Object.keys(TARGETS)
  if (targets.length === 0) throw new Error('pack: --targets names no target')
  const out = resolve(args[0] ?? '.')
  mkdirSync(out, { recursive: true })
  const dirs = targets.map((target) => stageAddon(target, build(target)))
  const tarballs = [...dirs, here].map((dir) => packInto(dir, out))
  for (const tarball of tarballs) console.log(tarball)
}
