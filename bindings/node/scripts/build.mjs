// Builds the addon (`cargo build --release -p turnwal-node`, from the Cargo
// workspace at the repository root) and copies it next to index.js as
// turnwal.node. `--debug` builds the dev profile instead.
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(dirname(fileURLToPath(import.meta.url)))
const release = !process.argv.includes('--debug')
const args = ['build', '-p', 'turnwal-node', '--locked', ...(release ? ['--release'] : [])]
execFileSync('cargo', args, { cwd: here, stdio: 'inherit' })
const metadata = JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], {
  cwd: here,
  encoding: 'utf8',
  maxBuffer: 64 << 20,
}))
const names = { linux: 'libturnwal_node.so', darwin: 'libturnwal_node.dylib', win32: 'turnwal_node.dll' }
const built = join(metadata.target_directory, release ? 'release' : 'debug', names[process.platform] ?? names.linux)
if (!existsSync(built)) throw new Error(`build: ${built} was not produced`)
copyFileSync(built, join(here, 'turnwal.node'))
console.log(`build: ${built} -> ${join(here, 'turnwal.node')}`)
