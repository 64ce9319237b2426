// A throwaway PostgreSQL cluster for the binding's tests (as the Rust
// tests' tests/support/pg.rs): Debian's server, initdb into a temporary
// directory as a non-root user, listening only on a Unix socket there,
// stopped and removed when the test ends.
import { execFileSync, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

function pgBin() {
  const versions = readdirSync('/usr/lib/postgresql')
    .map((v) => join('/usr/lib/postgresql', v, 'bin'))
    .filter((bin) => existsSync(join(bin, 'initdb')))
    .sort()
  if (versions.length === 0) throw new Error('no PostgreSQL server (.ci/run installs Debian\'s postgresql)')
  return versions.at(-1)
}

/** Who runs the server: PostgreSQL refuses root. */
function serverUser() {
  if (process.getuid() !== 0) return { user: process.env.USER ?? 'postgres' }
  for (const user of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', user]).toString())
      const gid = Number(execFileSync('id', ['-g', user]).toString())
      return { user, uid, gid }
    } catch {}
  }
  throw new Error('running as root and no postgres or nobody user to run the server as')
}

/** Starts a cluster for test `t`; its `url(db)` names a database on it. */
export function startCluster(t) {
  const bin = pgBin()
  const { user, uid, gid } = serverUser()
  const dir = mkdtempSync(join(tmpdir(), 'turnwal-pg-'))
  if (uid !== undefined) chownSync(dir, uid, gid)
  const run = (tool, args) => {
    const out = spawnSync(join(bin, tool), args, { cwd: dir, uid, gid, stdio: ['ignore', 'ignore', 'pipe'] })
    if (out.status !== 0) throw new Error(`${tool}: ${out.stderr}`)
  }
  const data = join(dir, 'data')
  run('initdb', ['-D', data, '-U', user, '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'])
  const stop = () => {
    spawnSync(join(bin, 'pg_ctl'), ['-D', data, '-w', '-m', 'fast', 'stop'], { cwd: dir, uid, gid, stdio: 'ignore' })
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    run('pg_ctl', ['-D', data, '-w', '-t', '60', '-o', `-c listen_addresses='' -k ${dir}`, '-l', join(dir, 'server.log'), 'start'])
  } catch (error) {
    stop()
    throw error
  }
  t.after(stop)
  return { url: (db = 'postgres') => `postgresql://${user}@/${db}?host=${encodeURIComponent(dir)}` }
}
