/**
 * turnwal-dsh: turnwal as the upstream harness's durable session persistence.
 *
 * A cordis plugin that registers `ctx.sessionPersistence` exactly where the
 * harness mounts its own JSONL or SQLite backend: the upstream
 * `PersistenceCoordinator` does the buffering, validation, closers and
 * caching; turnwal (a native addon, every file or database operation on the
 * store's own threads, never libuv's pool) stores the logs. A path ending in `.sqlite` or `.db` is a
 * SQLite database in the upstream harness's schema 17; any other path is a
 * native WAL directory.
 * @module turnwal-dsh
 */
import { createRequire } from 'node:module'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import z from '@deepseek-ai/schemastery'
import {
  DEFAULT_PREPARED_SESSION_CACHE_SIZE,
  DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
  MAX_WRITE_BATCH_DELAY_MS,
  PersistenceCoordinator,
  SessionFormatUnsupportedError,
  SessionPersistence,
  SessionPersistenceRevision,
} from '@deepseek-ai/dsh-session-persistence'
import { decodeStorageRecord } from '@deepseek-ai/dsh-session'

const here = dirname(fileURLToPath(import.meta.url))

/**
 * The platforms a prebuilt addon is published for, each as the package
 * `turnwal-dsh-<target>` (an optional dependency that npm installs only on
 * its platform).
 */
const PUBLISHED_TARGETS = ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-arm64', 'darwin-x64', 'win32-x64-gnu']

/** `gnu` or `musl`: the C library of this Linux process. */
function linuxLibc() {
  try {
    const ldd = readFileSync('/usr/bin/ldd', 'utf8')
    if (ldd.includes('musl')) return 'musl'
    if (ldd.includes('GNU C Library') || ldd.includes('glibc')) return 'gnu'
  } catch {
    // No ldd: ask the process report below.
  }
  return process.report?.getReport?.()?.header?.glibcVersionRuntime ? 'gnu' : 'musl'
}

/**
 * This process's platform as napi-rs names it: `linux-x64-gnu`,
 * `darwin-arm64`, `win32-x64-gnu`, ... (the Windows addon is built with
 * mingw-w64, hence `gnu`; it loads in any Node for Windows).
 */
function platformTarget() {
  const { platform, arch } = process
  if (platform === 'linux') return `${platform}-${arch}-${linuxLibc()}`
  if (platform === 'win32') return `${platform}-${arch}-gnu`
  return `${platform}-${arch}`
}

function requireAddon(path, hint) {
  try {
    return createRequire(import.meta.url)(path)
  } catch (error) {
    throw new Error(
      `turnwal-dsh: cannot load the native addon ${path} (${hint}): ${error?.message ?? error}`,
      { cause: error },
    )
  }
}

/**
 * Load the addon: `TURNWAL_DSH_ADDON` names it explicitly; otherwise the
 * `turnwal.node` that `npm run build` puts next to this file (a development
 * checkout); otherwise the prebuilt addon of the platform package
 * `turnwal-dsh-<target>` for this platform (an installed package).
 */
function loadAddon() {
  const devHint = 'build it with `npm run build` in bindings/node'
  if (process.env.TURNWAL_DSH_ADDON) return requireAddon(process.env.TURNWAL_DSH_ADDON, devHint)
  const local = join(here, 'turnwal.node')
  if (existsSync(local)) return requireAddon(local, devHint)
  // A checkout has the addon's Cargo.toml next to this file; the published package does not.
  if (existsSync(join(here, 'Cargo.toml'))) {
    throw new Error(`turnwal-dsh: the native addon ${local} is not built (${devHint}; it needs a Rust toolchain)`)
  }
  const target = platformTarget()
  const name = `turnwal-dsh-${target}`
  const require = createRequire(import.meta.url)
  let installed = true
  try {
    require.resolve(`${name}/package.json`)
  } catch {
    installed = false
  }
  if (!installed) {
    const { version } = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'))
    const published = `Prebuilt addons are published for: ${PUBLISHED_TARGETS.join(', ')}.`
    throw new Error(PUBLISHED_TARGETS.includes(target)
      ? `turnwal-dsh: the prebuilt native addon for ${target} is missing: the package ${name}@${version} is not installed. `
        + 'It is an optional dependency of turnwal-dsh: reinstall without `--omit=optional` / `--no-optional` '
        + `(a lockfile made on another platform can leave it out too). ${published}`
      : `turnwal-dsh: no prebuilt native addon for ${target}: the package ${name} is not installed. ${published} `
        + 'On another platform, build the addon from source (see "Other platforms" in the turnwal-dsh README) '
        + 'or set TURNWAL_DSH_ADDON to a built turnwal.node.')
  }
  return requireAddon(name, `the prebuilt addon of ${name} for ${target}`)
}

const native = loadAddon()

/** The durability modes: when a resolved `append` is durable. */
export const DURABILITY_MODES = Object.freeze(['batch', 'turn', 'never'])

/**
 * The kind of store a path names — `'wal'`, `'sqlite'` or `'postgres'` — read
 * as every turnwal tool reads a store string (the addon's `storeKind`, the
 * library's `location`): a `.sqlite` or `.db` path, or a file that starts with
 * SQLite's header, is a SQLite database; `postgres://…` and `postgresql://…`
 * a PostgreSQL database; anything else a WAL directory.
 */
export function storeKind(path) {
  try {
    return native.storeKind(path)
  } catch (error) {
    throw translate(error)
  }
}

/** Whether a store path names a SQLite database rather than a WAL directory. */
export function isSqlitePath(path) {
  return storeKind(path) === 'sqlite'
}

/** Whether a store path is a PostgreSQL connection URL. */
export function isPostgresUrl(path) {
  return storeKind(path) === 'postgres'
}

/** A connection URL without its password, for messages. */
function withoutPassword(url) {
  return url
    .replace(/^(postgres(?:ql)?:\/\/[^:@/]*):[^@/]*@/, '$1@')
    .replace(/([?&])password=[^&]*(&|$)/i, (_, before, after) => (after === '&' ? before : ''))
}

/**
 * A store path with a leading `~` (alone or before a `/`) replaced by the
 * user's home directory, as a shell would: a plugin configuration is not
 * read by a shell, and `~` would otherwise name a directory called `~` in
 * the process's working directory. `~user/…` is refused, not guessed. A
 * relative path that remains resolves against the process's working
 * directory (where the app was started), as the JSONL backend's `root` does.
 */
export function expandHome(path) {
  if (path === '~') return homedir()
  if (path.startsWith('~/') || (process.platform === 'win32' && path.startsWith('~\\'))) {
    return join(homedir(), path.slice(2))
  }
  if (path.startsWith('~')) {
    throw new TypeError(`turnwal-dsh: store path ${path}: only ~ and ~/… are expanded (to ${homedir()}); give ~user paths in full`)
  }
  return path
}

/** An error from turnwal itself, with a stable `code` (e.g. `SEQ_MISMATCH`). */
export class TurnwalError extends Error {
  /**
   * @param {string} message - what failed, naming the session, file, offset and seq where known.
   * @param {string} code - stable error kind.
   */
  constructor(message, code) {
    super(message)
    this.name = 'TurnwalError'
    this.code = code
  }
}

/** Turn the addon's `turnwal[CODE] message` rejection into a typed error. */
function translate(error, location) {
  const match = /^turnwal\[([A-Z_]+)\] ([\s\S]*)$/.exec(error?.message ?? '')
  if (match === null) {
    // napi's own refusal of an argument's JavaScript type (a non-string
    // id, a numeric string where a number goes): a TurnwalError like any
    // other refused argument, not napi's internals.
    if ((typeof error?.code === 'string' && /Expected$/.test(error.code))
      || /^Failed to convert napi /.test(error?.message ?? '')) {
      return new TurnwalError(`invalid argument: ${error.message} (${error.code})`, 'INVALID_ARGUMENT')
    }
    return error
  }
  const [, code, message] = match
  if (code === 'UNSUPPORTED') {
    // The message already names the raw log, as upstream's stores word it;
    // upstream's class, with turnwal's code beside it.
    const unsupported = new SessionFormatUnsupportedError(message, location)
    unsupported.code = code
    return unsupported
  }
  return new TurnwalError(message, code)
}

/**
 * The events of the addon's storage records: with `packed`, a packed row of
 * chunk deltas (upstream's JSONL record format) expands through upstream's
 * own `decodeStorageRecord` into exactly the events it stands for, as the
 * JSONL backend expands it; every other record is one event. Without
 * `packed` (a stored event's own type is a row tag), every record is one
 * event as it is.
 */
function storedEvents(records, packed) {
  if (!packed) return records
  const events = []
  for (const record of records) {
    const type = record.type
    if (type === 'text-chunks' || type === 'reasoning-chunks' || type === 'tool-call-chunks') {
      for (const event of decodeStorageRecord(record)) events.push(event)
    } else {
      events.push(record)
    }
  }
  return events
}

/** Refusals after which the coordinator's idea of a session's end is stale. */
const STALE_CURSOR_CODES = ['LOCKED', 'SEQ_MISMATCH', 'SUPERSEDED']

/** Lets the event loop run (timers, I/O) before the next piece is parsed. */
const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve))

/**
 * A read handed over in pieces (the addon's `loadStored*Pieces`): the head
 * document, then arrays of storage records of about 1 MiB each. Each piece
 * is parsed and expanded on its own, the event loop running between
 * pieces, so a session of any size loads without a long stall and without
 * one string near V8's limit. Returns the head and the events.
 */
async function fromPieces(pieces, signal) {
  const head = JSON.parse(pieces[0].toString('utf8'))
  const events = []
  for (let i = 1; i < pieces.length; i++) {
    if (i > 1) {
      await yieldToLoop()
      signal?.throwIfAborted()
    }
    const records = JSON.parse(pieces[i].toString('utf8'))
    pieces[i] = undefined
    for (const event of storedEvents(records, head.packed)) events.push(event)
  }
  return { head, events }
}

/** One event envelope per line, as the addon reads a batch. */
function eventLines(events) {
  return events.map((event) => JSON.stringify(event)).join('\n')
}

/**
 * The turnwal persistence backend. Load as a cordis plugin; it registers as
 * `ctx.sessionPersistence` and (through the coordinator) installs the
 * write-path listeners, as `@deepseek-ai/dsh-session-persistence-jsonl` does.
 */
export class TurnwalSessionPersistence extends SessionPersistence {
  static inject = ['sessions']

  static Config = z.object({
    path: z.string().description('The store: a WAL directory, a SQLite database when it ends in .sqlite or .db, or a PostgreSQL database (postgres://… or postgresql://…).'),
    root: z.string().description('Alias of `path`, so a JSONL configuration switches by its plugin name alone.'),
    durability: z.union([z.const('batch'), z.const('turn'), z.const('never')]).default('batch')
      .description('When an append is durable: batch (fsync every append), turn (at every turn/end), never (left to the OS).'),
    busyTimeoutMs: z.natural().max(2147483647).default(5000).description('SQLite: how long to wait for another connection\'s lock.'),
    leaseMs: z.natural().min(1000).max(86400000).description('PostgreSQL: how long a writer\'s lease runs from each renewal (the store renews it while the session is held). Default: TURNWAL_LEASE, else 30000.'),
    journalMode: z.union([z.const('wal'), z.const('delete'), z.const('truncate'), z.const('persist')]).default('wal')
      .description('SQLite: PRAGMA journal_mode.'),
    preparedSessionCacheSize: z.number().step(1).min(1).default(DEFAULT_PREPARED_SESSION_CACHE_SIZE),
    writeBatchMaxDelayMs: z.number().step(1).min(1).max(MAX_WRITE_BATCH_DELAY_MS).default(DEFAULT_WRITE_BATCH_MAX_DELAY_MS),
  })

  /** Backend label for coordinator diagnostics (shadows `Service.name`, not the service key). */
  name = 'session-persistence-turnwal'
  /**
   * Every session has a raw artifact, on every store: {@link readRaw} gives
   * it as the upstream JSONL backend's text (the app's session export).
   */
  supportsRawArtifacts = true

  config
  /** The absolute store path. */
  path
  /** The store as messages name it (a PostgreSQL URL without its password). */
  shown
  /** `'wal'`, `'sqlite'` or `'postgres'`. */
  kind
  durability
  coordinator
  opening
  closed = false

  constructor(ctx, config = {}) {
    super(ctx)
    this.config = config
    const path = config.path ?? config.root
    if (typeof path !== 'string' || path === '') {
      throw new TypeError('turnwal-dsh: config.path (the store: a directory, or a .sqlite/.db file) is required')
    }
    if (config.path !== undefined && config.root !== undefined
      && resolve(expandHome(config.path)) !== resolve(expandHome(config.root))) {
      throw new TypeError('turnwal-dsh: config.path and config.root name different stores; give one')
    }
    // A PostgreSQL URL is taken as given (it names a server, not a file).
    this.kind = storeKind(path)
    this.path = this.kind === 'postgres' ? path : resolve(expandHome(path))
    this.shown = this.kind === 'postgres' ? withoutPassword(path) : this.path
    this.durability = config.durability ?? 'batch'
    if (!DURABILITY_MODES.includes(this.durability)) {
      throw new TypeError(`turnwal-dsh: durability must be one of ${DURABILITY_MODES.join(', ')}, got ${String(this.durability)}`)
    }
    this.assertUsablePath()
    this.coordinator = new PersistenceCoordinator(this.ctx, this, {
      preparedSessionCacheSize: config.preparedSessionCacheSize ?? DEFAULT_PREPARED_SESSION_CACHE_SIZE,
      writeBatchMaxDelayMs: config.writeBatchMaxDelayMs ?? DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
    })
  }

  /** An existing WAL path must be a directory, an existing SQLite path not one. */
  assertUsablePath() {
    if (this.kind === 'postgres') return
    let stats
    try {
      stats = statSync(this.path)
    } catch (error) {
      if (error?.code === 'ENOENT') return
      throw error
    }
    if (this.kind === 'wal' && !stats.isDirectory()) {
      throw new Error(`turnwal-dsh: store path ${this.path} exists and is not a directory (a WAL store is a directory; name a SQLite database .sqlite or .db)`)
    }
    if (this.kind === 'sqlite' && stats.isDirectory()) {
      throw new Error(`turnwal-dsh: store path ${this.path} is a directory, not a SQLite database`)
    }
  }

  /** The native store, opened on first use (off the JavaScript thread). */
  store() {
    if (this.closed) return Promise.reject(new TurnwalError(`store ${this.shown} is closed`, 'CLOSED'))
    this.opening ??= native.openStore(this.path, {
      durability: this.durability,
      busyTimeoutMs: this.config.busyTimeoutMs ?? 5000,
      journalMode: this.config.journalMode ?? 'wal',
      leaseMs: this.config.leaseMs,
    }).catch((error) => {
      this.opening = undefined
      throw translate(error)
    })
    return this.opening
  }

  /**
   * Run one addon call. An aborted `signal` rejects with exactly its
   * reason, before the call and after it.
   */
  async call(op, signal, location) {
    signal?.throwIfAborted()
    const store = await this.store()
    signal?.throwIfAborted()
    let result
    try {
      result = await op(store)
    } catch (error) {
      signal?.throwIfAborted()
      throw translate(error, location)
    }
    signal?.throwIfAborted()
    return result
  }

  /** The WAL log file of a session (computed, never touched); SQLite has none per session. */
  locate(meta) {
    if (this.kind !== 'wal' || typeof meta?.id !== 'string') return undefined
    return { kind: 'turnwal-wal', path: native.walLogPath(this.path, meta.id) }
  }

  create(meta) {
    return this.coordinator.create(meta)
  }

  append(id, events) {
    return this.coordinator.append(id, events)
  }

  /**
   * Prepare a session to resume it (the app's resume: the Session it
   * publishes will append): the writer lock is taken first, as
   * {@link load} takes it, so a session another process holds live is
   * refused here — before the app accepts a prompt it could not store —
   * with a `LOCKED` TurnwalError naming the holder.
   */
  async prepare(id, signal) {
    return this.holding(id, signal, () => this.coordinator.prepare(id, signal))
  }

  /**
   * Load a session to write it: its writer lock (a PostgreSQL lease) is
   * taken first, so a session another harness process or host holds live
   * is refused here with a `LOCKED` TurnwalError naming the holder, and
   * its live turn is never closed as interrupted. The harness can wait and
   * retry, read it (`inspect`, `readFrom`, `loadStored`, `readRaw` take no
   * lock), or take it with {@link steal}.
   */
  async load(id) {
    return this.holding(id, undefined, () => this.coordinator.load(id))
  }

  /**
   * Runs `op` (a load or a resume) with the session's writer lock taken
   * first. When `op` fails — a corrupt or foreign log, an aborted signal —
   * and this process held nothing of the session before, the lock is let
   * go again, so another process (or `turnwal recover`) can take it while
   * this one lives on. Nothing stored is the coordinator's to answer.
   */
  async holding(id, signal, op) {
    const heldBefore = this.ctx.sessions?.get?.(id) !== undefined || this.coordinator.states?.has?.(id) === true
    try {
      await this.call((store) => store.hold(id, false), signal, this.locate({ id }))
    } catch (error) {
      if (error?.code !== 'NOT_FOUND') throw error
    }
    try {
      return await op()
    } catch (error) {
      if (!heldBefore) await this.store().then((store) => store.release(id)).catch(() => {})
      throw error
    }
  }

  /**
   * Take a session from the writer holding it: a PostgreSQL lease is taken
   * even while live (that writer is refused from its next batch, and
   * nothing it acknowledged is lost); then {@link load} it. A WAL or SQLite
   * lock belongs to a live process and is never taken: still `LOCKED`.
   * Not part of the upstream backend interface.
   */
  async steal(id) {
    await this.call((store) => store.hold(id, true), undefined, this.locate({ id }))
    return this.coordinator.load(id)
  }

  inspect(id, signal) {
    return this.coordinator.inspect(id, signal)
  }

  readFrom(id, fromSeq, signal) {
    return this.coordinator.readFrom(id, fromSeq, signal)
  }

  /**
   * The stored prefix without changing anything: the header, the kept
   * events (no closers), the revision of exactly these, and a torn marker iff
   * there is a tail to cut.
   */
  async loadStored(id, signal) {
    const pieces = await this.call((store) => store.loadStoredPieces(id), signal, this.locate({ id }))
    if (pieces === null) return undefined
    const { head: { meta, revision, torn }, events } = await fromPieces(pieces, signal)
    return {
      meta,
      events,
      revision: SessionPersistenceRevision(revision),
      ...(torn === null ? {} : { tornMarker: torn }),
    }
  }

  /**
   * The header and the stored events with `seq >= fromSeq`, read by a seek
   * (the WAL from its end, SQLite by its seq index) without reading the
   * events before `fromSeq`; behind `readFrom`. Non-mutating: no repair, no
   * closers, no torn marker (a torn tail is left out; an open turn is served
   * as stored). Past the end gives no events; an absent session, undefined.
   */
  async loadStoredFrom(id, fromSeq, signal) {
    const pieces = await this.call((store) => store.loadStoredFromPieces(id, fromSeq), signal, this.locate({ id }))
    if (pieces === null) return undefined
    const { head: { meta }, events } = await fromPieces(pieces, signal)
    return { meta, events }
  }

  /** The revision token; it changes with every append and repair, never with a read. */
  async readStoredRevision(id, signal) {
    const revision = await this.call((store) => store.revision(id), signal)
    return revision === null ? undefined : SessionPersistenceRevision(revision)
  }

  /**
   * Append a contiguous batch, durable (per `durability`) when this
   * resolves; the first batch creates the session atomically with it. A
   * batch not starting at the stored next seq is refused; a failed write
   * leaves the stored log as it was.
   */
  async appendBatch(meta, events, isMaterialized) {
    if (events.length === 0) return
    try {
      await this.call((store) => store.append(meta.id, JSON.stringify(meta), eventLines(events), isMaterialized))
    } catch (error) {
      // Refused because the stored log is not where this process's
      // coordinator thinks it ends (another writer holds it or wrote it):
      // the coordinator's cursor for the session is dropped, so its next
      // append adopts the log as stored instead of being refused forever.
      if (STALE_CURSOR_CODES.includes(error?.code)) this.coordinator.states?.delete?.(meta.id)
      throw error
    }
  }

  /**
   * Cut the torn tail (iff a marker is given) and append the closers, in one
   * crash-safe step. A marker or closers that no longer match the stored log
   * are refused (`STALE_REPAIR`), and nothing changes.
   */
  async commitRepair(meta, tornMarker, closers) {
    if (tornMarker === undefined && closers.length === 0) return
    await this.call((store) => store.commitRepair(
      meta.id,
      tornMarker?.stored ?? null,
      tornMarker?.cut ?? null,
      eventLines(closers),
    ))
  }

  /**
   * A salvage read (turnwal's `Store::salvage`, `turnwal cat --salvage`):
   * every intact event of a stored session, those after a damaged region
   * included, in seq order, and the regions that could not be used as gaps
   * (`nextSeq` null when a gap runs to the end of the log). Never writes; a
   * corrupt log, which `load` and `inspect` refuse, is read. Not part of the
   * upstream backend interface: the coordinator never calls it.
   */
  async salvage(id, signal) {
    const text = await this.call((store) => store.salvage(id), signal, this.locate({ id }))
    const { header, gaps, packed, events } = JSON.parse(text)
    return { header, events: storedEvents(events, packed), gaps }
  }

  /**
   * An explicit salvage repair (turnwal's `Store::recover_salvage`,
   * `turnwal recover --salvage`): keeps the longest valid prefix, closes its
   * open turn (upstream's interrupted-turn closers), and cuts everything from
   * the first damage on, acknowledged or not, after keeping the cut bytes (or
   * rows) in a quarantine file. On a log that is not corrupt it is the
   * ordinary repair. With `dryRun`, reports what it would do and writes
   * nothing. Not part of the upstream backend interface.
   */
  async salvageRepair(id, { dryRun = false } = {}) {
    if (typeof dryRun !== 'boolean') throw new TypeError(`turnwal-dsh: dryRun must be a boolean, got ${typeof dryRun}`)
    const text = await this.call((store) => store.salvageRepair(id, dryRun), undefined, this.locate({ id }))
    const { state, kept, cut, committed, quarantine, packed, events } = JSON.parse(text)
    return { state, kept, cut, closers: storedEvents(events, packed), committed, quarantine }
  }

  /**
   * The session as the upstream JSONL backend would hold it, for the app's
   * session export: `content` is the header line and the stored events'
   * records, runs of chunk deltas packed, as that backend writes them in one
   * append (byte for byte what `turnwal convert` writes into a plain JSONL
   * root); `filename` is `session.jsonl`, as there. The stored events only:
   * an open turn as stored (no closers), a torn tail left out. Read-only;
   * undefined when nothing is stored.
   */
  async readRaw(id, signal) {
    const text = await this.call((store) => store.readRaw(id), signal, this.locate({ id }))
    if (text === null) return undefined
    // The header parsed from the artifact's own first line, as upstream's
    // JSONL backend gives it: the line's fields but its `type` tag.
    const { type: _, ...meta } = JSON.parse(text.slice(0, text.indexOf('\n')))
    return { meta, filename: 'session.jsonl', content: text }
  }

  /**
   * Follow a session: its stored events from `fromSeq` on, in order, each
   * once, then each new one as it is acknowledged (by this process, another
   * process, or, on PostgreSQL, another host), as an async iterator. The
   * events are those stored (a live turn's synthetic closers never appear;
   * a crashed writer's appear once recovery stores them). Woken by inotify
   * or PostgreSQL's LISTEN, a short poll elsewhere; waits on a thread of its
   * own, never the store's or libuv's. Ends when `signal` aborts (rejecting
   * with its reason), when the loop breaks, or when the store closes;
   * rejects with `FOLLOW_LOST` when the session is removed or recreated.
   *
   * @param {string} id
   * @param {{ fromSeq?: number, signal?: AbortSignal }} [options]
   * @returns {AsyncGenerator<object>}
   */
  async *follow(id, { fromSeq = 0, signal } = {}) {
    signal?.throwIfAborted()
    const store = await this.store()
    signal?.throwIfAborted()
    let follower
    try {
      follower = store.follow(id, fromSeq)
    } catch (error) {
      throw translate(error, this.locate({ id }))
    }
    const stop = () => follower.cancel()
    signal?.addEventListener('abort', stop, { once: true })
    try {
      // Aborted between the check above and the listener: no event comes.
      signal?.throwIfAborted()
      for (;;) {
        let text
        try {
          text = await follower.next()
        } catch (error) {
          signal?.throwIfAborted()
          throw translate(error, this.locate({ id }))
        }
        signal?.throwIfAborted()
        if (text === null) return
        for (const event of JSON.parse(text)) yield event
      }
    } finally {
      signal?.removeEventListener('abort', stop)
      follower.cancel()
    }
  }

  /** Every materialized session's header (read from headers and log tails, never whole logs). */
  async list(signal) {
    return JSON.parse(await this.call((store) => store.list(false), signal))
  }

  /** Every materialized session's header and revision. */
  async listSnapshots(signal) {
    const items = JSON.parse(await this.call((store) => store.list(true), signal))
    return items.map(({ header, revision }) => ({ header, revision: SessionPersistenceRevision(revision) }))
  }

  /** Release the store (every session closed, so a WAL log is sealed at rest; every writer lock); called by the coordinator after the final drain. */
  async close() {
    this.closed = true
    const opening = this.opening
    this.opening = undefined
    if (opening === undefined) return
    const store = await opening.catch(() => undefined)
    await store?.close()
  }
}

/** The version of the turnwal addon in use. */
export const addonVersion = native.version()

export default TurnwalSessionPersistence
