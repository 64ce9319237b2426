// Type-checks the package's declarations against the published upstream
// types (`npm run typecheck`): the plugin is a SessionPersistence and a
// PersistenceBackend, and a harness mounts it the way it mounts the JSONL
// backend.
import { Context } from '@deepseek-ai/cordis'
import type { PersistenceBackend, SessionPersistence } from '@deepseek-ai/dsh-session-persistence'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import type { SessionId } from '@deepseek-ai/dsh-session'
import TurnwalSessionPersistence, {
  type Config,
  type TurnwalTornMarker,
  type TurnwalSalvage,
  type TurnwalSalvageGap,
  type TurnwalSalvageRepair,
  TurnwalError,
  isSqlitePath,
} from 'turnwal-dsh'

export async function mountBoth(ctx: Context): Promise<void> {
  // The one line a harness changes to switch backends.
  await ctx.plugin(JsonlSessionPersistence, { root: '/var/lib/agent/sessions' })
  await ctx.plugin(TurnwalSessionPersistence, { root: '/var/lib/agent/sessions.turnwal' })
  const config: Config = { path: '/var/lib/agent/sessions.sqlite', durability: 'batch', busyTimeoutMs: 5000 }
  await ctx.plugin(TurnwalSessionPersistence, config)
}

export function asSeam(plugin: TurnwalSessionPersistence): SessionPersistence {
  return plugin
}

export function asBackend(plugin: TurnwalSessionPersistence): PersistenceBackend<TurnwalTornMarker> {
  return plugin
}

export async function revisionOf(ctx: Context, id: string): Promise<string | undefined> {
  const snapshots = await ctx.sessionPersistence.listSnapshots()
  return snapshots.find((snapshot) => snapshot.header.id === id)?.revision
}

export function codeOf(error: unknown): string | undefined {
  return error instanceof TurnwalError ? error.code : undefined
}

export const sqlite: boolean = isSqlitePath('/tmp/x.db')

// The explicit salvage, beside the upstream interface.
export async function salvageOf(plugin: TurnwalSessionPersistence, id: SessionId): Promise<number> {
  const salvaged: TurnwalSalvage = await plugin.salvage(id, AbortSignal.timeout(1000))
  const lost = salvaged.gaps.map((gap: TurnwalSalvageGap) => (gap.nextSeq === null ? 0 : gap.nextSeq - gap.firstSeq))
  const dry: TurnwalSalvageRepair = await plugin.salvageRepair(id, { dryRun: true })
  const cutBytes: number = dry.cut === null ? 0 : dry.cut.length
  const report = await plugin.salvageRepair(id)
  const quarantined: string | null = report.quarantine
  return salvaged.events.length + lost.length + cutBytes + report.kept + report.closers.length + (quarantined === null ? 0 : 1)
}
