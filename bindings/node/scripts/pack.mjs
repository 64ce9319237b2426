// Packs turnwal-dsh the way napi-rs projects are published: the main package
// (JavaScript and types, no addon) and the platform package of this machine,
// npm/<target>/, holding the prebuilt addon.
//
//   node scripts/pack.mjs [DIR]   stage, then `npm pack` both into DIR (default: .)
//                                 and print the two tarball paths
//   node scripts/pack.mjs --stage copy the addon (built by `npm run build` if
//                                 missing) and LICENSE into place; the main
//                                 package's `prepack` runs this
//
// The copied turnwal.node and LICENSE files are gitignored.
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(dirname(fileURLToPath(import.meta.url)))
const root = resolve(here, '..', '..')

/** This machine's napi-rs target (index.js derives the same). */
function platformTarget() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime
    return `${platform}-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `${platform}-${arch}-msvc`
  return `${platform}-${arch}`
}

const npm = process.env.npm_execpath
  ? (args, options) => execFileSync(process.execPath, [process.env.npm_execpath, ...args], options)
  : (args, options) => execFileSync('npm', args, { shell: process.platform === 'win32', ...options })

/** Puts the addon into the platform package and LICENSE into both; returns the platform package's directory. */
function stage() {
  const target = platformTarget()
  const platformDir = join(here, 'npm', target)
  if (!existsSync(join(platformDir, 'package.json'))) {
    throw new Error(`pack: no platform package for ${target}: create ${platformDir} laid out like npm/linux-x64-gnu (see README.md, "Other platforms")`)
  }
  const main = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
  const platform = JSON.parse(readFileSync(join(platformDir, 'package.json'), 'utf8'))
  if (platform.version !== main.version || main.optionalDependencies?.[platform.name] !== main.version) {
    throw new Error(`pack: ${platform.name}@${platform.version} must be version ${main.version} and an exact optional dependency of ${main.name}`)
  }
  const addon = join(here, 'turnwal.node')
  if (!existsSync(addon)) {
    console.error('pack: turnwal.node is not built; running `npm run build`')
    npm(['run', 'build'], { cwd: here, stdio: 'inherit' })
  }
  copyFileSync(addon, join(platformDir, 'turnwal.node'))
  for (const dir of [here, platformDir]) copyFileSync(join(root, 'LICENSE'), join(dir, 'LICENSE'))
  return platformDir
}

if (process.argv.includes('--stage')) {
  stage()
} else {
  const out = resolve(process.argv[2] ?? '.')
  mkdirSync(out, { recursive: true })
  const platformDir = stage()
  const tarballs = [platformDir, here].map((dir) => {
    // --ignore-scripts: staging is done; the main package's prepack would only repeat it.
    const [packed] = JSON.parse(npm(['pack', '--json', '--ignore-scripts', '--pack-destination', out], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }))
    return join(out, packed.filename)
  })
  for (const tarball of tarballs) console.log(tarball)
}
