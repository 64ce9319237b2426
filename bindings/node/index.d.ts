/**
 * turnwal-dsh: turnwal as the DeepSeek Harness's durable session persistence.
 * A cordis plugin registering `ctx.sessionPersistence`, shaped like
 * `@deepseek-ai/dsh-session-persistence-jsonl` so a harness switches backends
 * by changing one line: the upstream `PersistenceCoordinator` does buffering,
 * validation, closers and caching; turnwal stores the logs (a native WAL
 * directory, a SQLite database in the upstream schema 17 when the path
 * ends in `.sqlite` or `.db`, or a PostgreSQL database at a `postgres://` URL).
 * @module turnwal-dsh
 */
import { Context } from '@deepseek-ai/cordis'
import z from '@deepseek-ai/schemastery'
import {
  SessionPersistence,
  type PersistenceBackend,
  type SessionInspection,
  type SessionLocation,
  type SessionPersistenceRevision,
  type SessionPersistenceSnapshot,
  type SessionRawArtifact,
  type StoredPrefix,
  type StoredSuffix,
} from '@deepseek-ai/dsh-session-persistence'
import type { SessionEvent, SessionHeader, SessionId, SessionPreparation } from '@deepseek-ai/dsh-session'

/** When a resolved `append` is durable. */
export type Durability = 'batch' | 'turn' | 'never'

/** The durability modes, in order of strength. */
export declare const DURABILITY_MODES: readonly Durability[]

/** Plugin config. */
export interface Config {
  /**
   * The store. A path ending in `.sqlite` or `.db` is a SQLite database (the
   * upstream harness's schema 17, so either side opens it); a
   * `postgres://…` or `postgresql://…` URL is a PostgreSQL database shared
   * by every harness host (turnwal creates its tables; a writer holds a
   * renewed lease on its session, so another host cannot take it while it
   * lives); any other path is a native
   * turnwal WAL directory. Created on first materialization. A leading `~`
   * or `~/` is the home directory ({@link expandHome}); relative paths are
   * resolved against the process's working directory when the plugin loads
   * (in the dsh app, the directory dsh was started from: prefer
   * `!!js dshHomePath('sessions.turnwal')` or an absolute path).
   */
  path?: string
  /** Alias of {@link path}: a JSONL backend's `root` line works unchanged. */
  root?: string
  /**
   * When an append is durable (its promise resolves):
   * - `batch` (default): every append is fsynced (SQLite: `synchronous=FULL`),
   *   as the upstream contract requires — a resolved append survives a power loss;
   * - `turn`: fsynced at every batch holding a `turn/end`; other batches
   *   survive a process crash, not a power loss;
   * - `never`: left to the OS (SQLite: `synchronous=NORMAL`); survives a
   *   process crash only.
   */
  durability?: Durability
  /** SQLite: how long an operation waits for another connection's lock, in ms. Default 5000. */
  busyTimeoutMs?: number
  /** SQLite: `PRAGMA journal_mode`. Default `wal`. */
  journalMode?: 'wal' | 'delete' | 'truncate' | 'persist'
  /**
   * PostgreSQL: how long a writer's lease runs from each renewal, in ms
   * (1000 to 86400000). The store renews it while the session is held; a
   * session whose lease is live is refused to every other host until it
   * runs out. Default: `TURNWAL_LEASE`, else 30000.
   */
  leaseMs?: number
  /** Maximum cold Session preparations retained for history-to-resume reuse. Default 5. */
  preparedSessionCacheSize?: number
  /** Fixed live-event coalescing window in ms; not a completion deadline. Default 200. */
  writeBatchMaxDelayMs?: number
}

/**
 * The opaque torn-tail marker `loadStored` returns when the stored log has a
 * tail to cut: how many events are kept and where the cut starts.
 */
export interface TurnwalTornMarker {
  /** Events stored and kept. */
  readonly stored: number
  /** Byte offset (WAL) or row position (SQLite) where the cut starts. */
  readonly cut: number
  /** The seq the first removed record has or should have. */
  readonly seq: number
  /** How much is removed (bytes for the WAL). */
  readonly bytes: number
  /** Why: `incomplete-record`, `zero-fill`, `invalid-record`, `debris` or `interrupted-repair`. */
  readonly reason: string
}

/** A region of a stored log that a salvage read could not use. */
export interface TurnwalSalvageGap {
  /** Where it starts: a byte offset (WAL), a row index (SQLite). */
  readonly offset: number
  /** How long it is: bytes (WAL), rows (SQLite). */
  readonly length: number
  /** The seq the first lost event has or should have. */
  readonly firstSeq: number
  /** The seq of the first intact event after the gap; null when the gap runs to the end of the log. */
  readonly nextSeq: number | null
  /** Why the region is unusable (the failed check). */
  readonly reason: string
  /** Damage only an explicit salvage repair cuts (false: a torn tail or debris an automatic repair cuts). */
  readonly damaged: boolean
}

/** What {@link TurnwalSessionPersistence.salvage} read. */
export interface TurnwalSalvage {
  /** The session header. */
  header: SessionHeader
  /** Every intact event, in seq order; seqs skip over the gaps. */
  events: SessionEvent[]
  /** The regions that could not be used, in log order; empty for an undamaged log with nothing to cut. */
  gaps: TurnwalSalvageGap[]
}

/** What a repair cut (or would cut). */
export interface TurnwalCut {
  /** Where the cut starts: a byte offset (WAL), a row position (SQLite). */
  readonly offset: number
  /** The seq the first removed record has or should have. */
  readonly seq: number
  /** How much is removed: bytes (WAL), rows (SQLite). */
  readonly length: number
  /** `damaged` (only a salvage repair cuts it), `incomplete-record`, `zero-fill`, `invalid-record`, `debris` or `interrupted-repair`. */
  readonly reason: string
  /** Which check failed, for people. */
  readonly detail: string
}

/** What {@link TurnwalSessionPersistence.salvageRepair} found and did. */
export interface TurnwalSalvageRepair {
  /** The state before the repair. */
  state: 'clean' | 'open-turn' | 'torn' | 'corrupt'
  /** Events kept. */
  kept: number
  /** What was (or would be) cut; null when nothing is. */
  cut: TurnwalCut | null
  /** The closers that were (or would be) appended after the kept events. */
  closers: SessionEvent[]
  /** Whether the repair was written (false for a dry run or a log with nothing to repair). */
  committed: boolean
  /** The file the cut bytes (or rows) were kept in before they were cut; null when nothing was cut. */
  quarantine: string | null
}

/** An error from turnwal itself, with a stable code. */
export declare class TurnwalError extends Error {
  /**
   * `SEQ_MISMATCH`, `STALE_REPAIR`, `NOT_FOUND`, `ALREADY_EXISTS`, `CORRUPT`,
   * `LOCKED`, `CONTRACT_VIOLATION`, `INVALID_EVENT`, `INVALID_HEADER`,
   * `OPEN_TURN`, `INVALID_ARGUMENT`, `POISONED`, `IO`, `CLOSED` or `ERROR`.
   */
  readonly code: string
  constructor(message: string, code: string)
}

/**
 * A store path with a leading `~` or `~/` replaced by the home directory
 * (the plugin's `path` is not read by a shell); `~user/…` throws. Relative
 * paths are left to resolve against the process's working directory.
 */
export declare function expandHome(path: string): string

/**
 * The kind of store a path names, read as every turnwal tool reads a store
 * string: a `.sqlite` or `.db` path, or a file that starts with SQLite's
 * header, is `'sqlite'`; `postgres://…` and `postgresql://…` are
 * `'postgres'`; anything else is a WAL directory, `'wal'`. A `jsonl:` root is
 * refused (`INVALID_ARGUMENT`): the harness's own JSONL backend mounts it.
 */
export declare function storeKind(path: string): 'wal' | 'sqlite' | 'postgres'
/** Whether a store path names a SQLite database rather than a WAL directory. */
export declare function isSqlitePath(path: string): boolean
/** Whether a store path is a PostgreSQL connection URL (`postgres://…`, `postgresql://…`). */
export declare function isPostgresUrl(path: string): boolean

/** The version of the turnwal addon in use. */
export declare const addonVersion: string

/**
 * The turnwal persistence backend. Load as a plugin; it registers as
 * `ctx.sessionPersistence` and (via the coordinator) installs the write-path
 * listeners. Every file or database operation runs on the store's own
 * threads (at most 4 at once), never on libuv's thread pool.
 */
export declare class TurnwalSessionPersistence extends SessionPersistence implements PersistenceBackend<TurnwalTornMarker> {
  config: Config
  static inject: string[]
  static Config: z<Config>
  readonly name = 'session-persistence-turnwal'
  /** True on every store: {@link readRaw} renders the upstream JSONL text. */
  readonly supportsRawArtifacts = true
  /** The absolute store path. */
  readonly path: string
  /** Which store the path names. */
  readonly kind: 'wal' | 'sqlite'
  readonly durability: Durability
  constructor(ctx: Context, config: Config)
  /** The WAL log file of a session (no I/O); `undefined` for SQLite. */
  locate(meta: SessionHeader): SessionLocation | undefined
  create(meta: SessionHeader): Promise<void>
  append(id: SessionId, events: readonly SessionEvent[]): Promise<void>
  /**
   * Prepare a session to resume it, taking its writer lock first as
   * {@link load} does: a session another process holds live is refused with
   * a `LOCKED` {@link TurnwalError} before the app accepts a prompt.
   */
  prepare(id: SessionId, signal?: AbortSignal): Promise<SessionPreparation>
  /**
   * Load a session to write it, taking its writer lock (a PostgreSQL lease)
   * first: a session another process or host holds live is refused with a
   * `LOCKED` {@link TurnwalError} naming the holder, and its live turn is
   * never closed. Wait and retry, read it (`inspect`, `readFrom`), or
   * {@link steal} it.
   */
  load(id: SessionId): Promise<SessionInspection>
  /**
   * Take a session from its live writer (a PostgreSQL lease; that writer is
   * refused from its next batch), then {@link load} it. A WAL or SQLite
   * lock belongs to a live process: still `LOCKED`.
   */
  steal(id: SessionId): Promise<SessionInspection>
  inspect(id: SessionId, signal?: AbortSignal): Promise<SessionInspection>
  readFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<{
    meta: SessionHeader
    events: SessionEvent[]
  }>
  /** The stored prefix, unchanged: header, kept events, revision, and a torn marker iff there is a tail to cut. */
  loadStored(id: SessionId, signal?: AbortSignal): Promise<StoredPrefix<TurnwalTornMarker> | undefined>
  /** The header and the stored events with `seq >= fromSeq`, by a seek (never the whole log); no repair, no closers, no torn marker. */
  loadStoredFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<StoredSuffix | undefined>
  /**
   * Follow a session from `fromSeq`: its stored events in order, each once,
   * then each new one as it is acknowledged (any process or host), until
   * `signal` aborts (rejecting with its reason), the loop breaks, or the
   * store closes. Rejects with a `TurnwalError` of code `FOLLOW_LOST` when
   * the session is removed or recreated.
   */
  follow(id: SessionId, options?: { fromSeq?: number; signal?: AbortSignal }): AsyncGenerator<SessionEvent, void, undefined>
  /** The revision token without reading the log. */
  readStoredRevision(id: SessionId, signal?: AbortSignal): Promise<SessionPersistenceRevision | undefined>
  /** Append a contiguous batch; durable (per {@link Config.durability}) when it resolves. */
  appendBatch(meta: SessionHeader, events: readonly SessionEvent[], isMaterialized: boolean): Promise<void>
  /** Cut the torn tail and append the closers in one crash-safe step; a stale marker is refused. */
  commitRepair(meta: SessionHeader, tornMarker: TurnwalTornMarker | undefined, closers: readonly SessionEvent[]): Promise<void>
  /**
   * The session as the upstream JSONL backend would hold it (the app's
   * session export): the header line and the stored events' records, chunk
   * runs packed, as one append of them writes; `filename` is
   * `session.jsonl`. Undefined when nothing is stored. Takes no lock.
   */
  readRaw(id: SessionId, signal?: AbortSignal): Promise<SessionRawArtifact | undefined>
  list(signal?: AbortSignal): Promise<SessionHeader[]>
  listSnapshots(signal?: AbortSignal): Promise<SessionPersistenceSnapshot[]>
  /**
   * A salvage read: every intact event of a stored session (those after a
   * damaged region included) and the gaps. Never writes; reads a corrupt log
   * that `load` and `inspect` refuse. Not part of the upstream interface.
   */
  salvage(id: SessionId, signal?: AbortSignal): Promise<TurnwalSalvage>
  /**
   * An explicit salvage repair: keeps the longest valid prefix, closes its
   * open turn, and quarantines and cuts everything from the first damage on.
   * With `dryRun`, writes nothing. Not part of the upstream interface.
   */
  salvageRepair(id: SessionId, options?: { dryRun?: boolean }): Promise<TurnwalSalvageRepair>
  /** Release the store and every writer lock it holds; every session is closed first (a WAL log sealed at rest). */
  close(): Promise<void>
}

export default TurnwalSessionPersistence
