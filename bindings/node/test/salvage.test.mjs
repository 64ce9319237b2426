// The library's explicit salvage through turnwal-dsh: `salvage` (a read of
// every intact event, those after a damaged region included, with the gaps)
// and `salvageRepair` (keep the longest valid prefix, close its open turn,
// quarantine and cut everything from the first damage on). A native WAL
// session of four turns, one batch each (written by a process then killed,
// so its records stay plain: a clean close seals closed turns into a
// compressed unit), gets one flipped bit inside the
// second turn's user/message payload; load and inspect refuse it, salvage
// reads around it, a dry run writes nothing, the repair keeps the prefix.
// On SQLite the same with a committed row of bad JSON; on both stores, an
// undamaged session salvages whole with no gaps.
import { describe, it } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { DatabaseSync } from 'node:sqlite'
import { fileURLToPath } from 'node:url'
import { KINDS, child, image, meta, mount, plainTurn, storePath } from './support.mjs'

const fixture = (name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))

/** Four complete turns of six events each: seqs 0..23, turn n at 6(n-1). */
const fourTurns = () => [1, 2, 3, 4].map((n) => plainTurn(6 * (n - 1), n))

/** Writes the turns as one append (one batch) each and closes the store. */
async function writeSession(path, id, turns) {
  const { persistence, dispose } = await mount(null, { path })
  await persistence.create(meta(id, '/work'))
  for (const turn of turns) await persistence.append(id, turn)
  const file = persistence.locate({ id })?.path
  await dispose()
  return file
}

/**
 * Writes the turns as one append (one batch) each in a child process that is
 * then SIGKILLed, so the WAL log keeps its plain records (a clean close
 * seals closed turns into a compressed unit); the log's path.
 */
async function writeUnsealed(t, path, id, turns) {
  let file
  const { exited } = child(t, fixture('write-child.mjs'), [path, id, JSON.stringify(turns)], {
    onLine(line, proc) {
      if (line.startsWith('READY ')) {
        file = JSON.parse(line.slice(6))
        proc.kill('SIGKILL')
      }
    },
  })
  const { signal, stderr } = await exited
  assert.equal(signal, 'SIGKILL', `the child was killed, not ended (stderr: ${stderr})`)
  assert.ok(file, 'the child wrote the session')
  return file
}

/**
 * The records of a WAL log (docs/FORMAT.md): each record's offset, length,
 * seq and where its `data` JSON starts and how long it is.
 */
function records(bytes) {
  const out = []
  let at = 24 + bytes.readUInt32LE(16)
  while (at < bytes.length) {
    const typeLen = bytes.readUInt16LE(at + 6)
    const dataLen = bytes.readUInt32LE(at + 8)
    const length = 56 + typeLen + dataLen + bytes.readUInt32LE(at + 12) + bytes.readUInt32LE(at + 16)
    assert.equal(bytes.readUInt32LE(at + length - 4), length, `record at ${at}: its trailer repeats its length`)
    out.push({ offset: at, length, kind: bytes[at + 4], seq: Number(bytes.readBigUInt64LE(at + 24)), data: at + 52 + typeLen, dataLen })
    at += length
  }
  assert.equal(at, bytes.length, 'the records end where the file does')
  return out
}

describe('salvage and salvageRepair on a native WAL store', () => {
  it('a flipped bit in an acknowledged record: refused by load/inspect, read around by salvage, cut by an explicit repair', async (t) => {
    const path = storePath(t, 'wal')
    const id = 'damaged'
    const turns = fourTurns()
    const written = turns.flat()
    const file = await writeUnsealed(t, path, id, turns)

    // Flip one bit inside turn 2's user/message payload (seq 7).
    const clean = readFileSync(file)
    const recs = records(clean)
    assert.deepEqual(recs.map((r) => r.seq), written.map((e) => e.seq))
    const damaged = recs.find((r) => r.seq === 7)
    assert.equal(damaged.kind, 5, 'seq 7 is a user/message record')
    const bytes = Buffer.from(clean)
    bytes[damaged.data + Math.floor(damaged.dataLen / 2)] ^= 0x04
    writeFileSync(file, bytes)

    const { persistence, dispose } = await mount(t, { path })
    // Corruption: load and inspect refuse it, nothing is written.
    await assert.rejects(persistence.load(id), { name: 'TurnwalError', code: 'CORRUPT' })
    await assert.rejects(persistence.inspect(id), { name: 'TurnwalError', code: 'CORRUPT' })
    assert.deepEqual(readFileSync(file), bytes, 'the refused loads wrote nothing')

    // The salvage read: every event but the damaged one, in seq order, one gap.
    const salvaged = await persistence.salvage(id)
    assert.deepEqual(salvaged.header, meta(id, '/work'))
    assert.deepEqual(salvaged.events, written.filter((e) => e.seq !== 7))
    assert.equal(JSON.stringify(salvaged.events), JSON.stringify(written.filter((e) => e.seq !== 7)), 'byte for byte')
    assert.equal(salvaged.gaps.length, 1)
    const [gap] = salvaged.gaps
    assert.deepEqual({ ...gap, reason: undefined }, {
      offset: damaged.offset,
      length: damaged.length,
      firstSeq: 7,
      nextSeq: 8,
      reason: undefined,
      damaged: true,
    })
    assert.equal(typeof gap.reason, 'string')
    assert.notEqual(gap.reason, '')
    assert.deepEqual(readFileSync(file), bytes, 'salvage wrote nothing')

    // The dry run: the report, and not a byte of the log changed.
    const closers = [{ type: 'turn/end', seq: 7, time: written[6].time, data: { turn: 2, reason: { kind: 'interrupted' } } }]
    const cut = { offset: damaged.offset, seq: 7, length: bytes.length - damaged.offset, reason: 'damaged' }
    const dry = await persistence.salvageRepair(id, { dryRun: true })
    assert.equal(typeof dry.cut.detail, 'string')
    assert.deepEqual({ ...dry, cut: { ...dry.cut, detail: undefined } }, {
      state: 'corrupt',
      kept: 7,
      cut: { ...cut, detail: undefined },
      closers,
      committed: false,
      quarantine: null,
    })
    assert.deepEqual(readFileSync(file), bytes, 'the dry run changed no byte of the log')
    await assert.rejects(persistence.load(id), { code: 'CORRUPT' }, 'still refused after the dry run')

    // The repair: the prefix kept, its open turn closed, the rest quarantined and cut.
    const report = await persistence.salvageRepair(id)
    assert.deepEqual({ ...report, quarantine: undefined }, { ...dry, committed: true, quarantine: undefined })
    assert.equal(typeof report.quarantine, 'string')
    assert.ok(existsSync(report.quarantine), `${report.quarantine} exists`)
    assert.deepEqual(readFileSync(report.quarantine), bytes.subarray(damaged.offset), 'the quarantine holds exactly the cut bytes')
    const after = readFileSync(file)
    assert.deepEqual(after.subarray(0, damaged.offset), bytes.subarray(0, damaged.offset), 'the kept prefix is unchanged')

    // Loads now, in this context and a new one: the kept events, then the closers.
    const expected = [...written.slice(0, 7), ...closers]
    assert.deepEqual((await persistence.load(id)).events, expected)
    assert.deepEqual((await persistence.inspect(id)).events, expected)
    // This context holds the session now: another is refused at load
    // until it lets go, and reads it meanwhile.
    const cold = await mount(t, { path })
    await assert.rejects(cold.persistence.load(id), { name: 'TurnwalError', code: 'LOCKED' })
    assert.deepEqual((await cold.persistence.inspect(id)).events, expected)
    await dispose()
    assert.deepEqual((await cold.persistence.load(id)).events, expected)
    // Salvage of the repaired log: everything, no gaps; a second repair has nothing to do.
    assert.deepEqual(await cold.persistence.salvage(id), { header: meta(id, '/work'), events: expected, gaps: [] })
    const again = await cold.persistence.salvageRepair(id)
    assert.deepEqual(again, { state: 'clean', kept: 8, cut: null, closers: [], committed: false, quarantine: null })
    assert.deepEqual(readFileSync(file), after, 'nothing more written')
  })

  it('a missing session: the same error the other reads give, through the error mapping', async (t) => {
    const { persistence } = await mount(t, { path: storePath(t, 'wal') })
    const expected = await persistence.load('absent').then(() => assert.fail('loaded'), (e) => e)
    assert.equal(expected.message, 'session "absent" not found')
    for (const op of [() => persistence.salvage('absent'), () => persistence.salvageRepair('absent'), () => persistence.salvageRepair('absent', { dryRun: true })]) {
      await assert.rejects(op(), { name: 'TurnwalError', code: 'NOT_FOUND', message: expected.message })
    }
    // Created but never appended: nothing is stored yet.
    await persistence.create(meta('lazy'))
    await assert.rejects(persistence.salvage('lazy'), { code: 'NOT_FOUND' })
    await assert.rejects(persistence.salvageRepair('lazy', { dryRun: 1 }), { name: 'TypeError', message: /dryRun must be a boolean/ })
    const aborted = AbortSignal.abort(new Error('stop'))
    await assert.rejects(persistence.salvage('absent', aborted), (e) => e === aborted.reason)
  })
})

describe('salvage and salvageRepair on a SQLite store', () => {
  it('a committed row of bad JSON mid-log: refused by load, read around by salvage, cut from there by an explicit repair', async (t) => {
    const path = storePath(t, 'sqlite')
    const id = 'damaged'
    const written = fourTurns().flat()
    await writeSession(path, id, fourTurns())
    const db = new DatabaseSync(path)
    try {
      db.prepare("UPDATE events SET data = '{not json' WHERE session_id = ? AND seq = 7").run(id)
    } finally {
      db.close()
    }

    const { persistence } = await mount(t, { path })
    const before = image(path, 'sqlite', persistence, id)
    await assert.rejects(persistence.load(id), { name: 'TurnwalError', code: 'CORRUPT' })
    const salvaged = await persistence.salvage(id)
    assert.deepEqual(salvaged.events, written.filter((e) => e.seq !== 7))
    assert.deepEqual(salvaged.gaps.map((g) => ({ ...g, reason: undefined })),
      [{ offset: 7, length: 1, firstSeq: 7, nextSeq: 8, reason: undefined, damaged: true }], 'one row lost, at row 7')
    const closers = [{ type: 'turn/end', seq: 7, time: written[6].time, data: { turn: 2, reason: { kind: 'interrupted' } } }]
    const dry = await persistence.salvageRepair(id, { dryRun: true })
    assert.deepEqual({ ...dry, cut: { ...dry.cut, detail: undefined } }, {
      state: 'corrupt',
      kept: 7,
      cut: { offset: 7, seq: 7, length: 17, reason: 'damaged', detail: undefined },
      closers,
      committed: false,
      quarantine: null,
    })
    assert.equal(image(path, 'sqlite', persistence, id), before, 'the dry run changed no row')

    const report = await persistence.salvageRepair(id)
    assert.deepEqual({ ...report, quarantine: undefined }, { ...dry, committed: true, quarantine: undefined })
    const kept = readFileSync(report.quarantine, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line))
    assert.deepEqual(kept.map((row) => row.seq), written.slice(7).map((e) => e.seq), 'the quarantine holds exactly the cut rows')
    assert.equal(kept[0].data, '{not json')
    assert.deepEqual((await persistence.load(id)).events, [...written.slice(0, 7), ...closers])
  })
})

for (const kind of KINDS) {
  describe(`salvage of an undamaged session, ${kind} store`, () => {
    it('every event and no gaps; a salvage repair has nothing to do and writes nothing', async (t) => {
      const path = storePath(t, kind)
      const id = 'clean'
      const turns = fourTurns()
      const written = turns.flat()
      const file = await writeSession(path, id, turns)
      if (kind === 'wal') {
        // Closed cleanly (dispose closes the store): the log is version 3,
        // its four closed turns sealed into one unit (kind 18) that ends
        // its archive, and the live file holds nothing but the archive's
        // reference (kind 19, stating 24 events).
        const bytes = readFileSync(file)
        assert.equal(bytes.readUInt16LE(8), 3, 'format version 3')
        const ref = 24 + bytes.readUInt32LE(16)
        assert.equal(bytes[ref + 4], 19, 'an archive reference')
        assert.equal(Number(bytes.readBigUInt64LE(ref + 24)), 24, 'standing for the 24 events')
        assert.equal(ref + 72, bytes.length, 'and nothing after it')
        const archive = readFileSync(file.replace(/\.twal$/, '.twarc'))
        const at = 24 + archive.readUInt32LE(16)
        assert.equal(archive[at + 4], 18, 'a sealed unit')
        assert.equal(archive.readUInt32LE(at + 16), 24, 'of the 24 events')
        assert.equal(at + 56 + archive.readUInt32LE(at + 8), archive.length, 'and nothing after it')
      }
      const { persistence } = await mount(t, { path })
      const before = image(path, kind, persistence, id)
      const salvaged = await persistence.salvage(id)
      assert.deepEqual(salvaged, { header: meta(id, '/work'), events: written, gaps: [] })
      assert.equal(JSON.stringify(salvaged.events), JSON.stringify(written), 'byte for byte')
      assert.deepEqual(await persistence.salvageRepair(id, { dryRun: true }),
        { state: 'clean', kept: 24, cut: null, closers: [], committed: false, quarantine: null })
      assert.deepEqual(await persistence.salvageRepair(id),
        { state: 'clean', kept: 24, cut: null, closers: [], committed: false, quarantine: null })
      assert.equal(image(path, kind, persistence, id), before, 'nothing written')
      assert.deepEqual((await persistence.load(id)).events, written)
    })
  })
}
