//! The fuzz entry: the byte encoding of op lists ([`decode`], [`encode`])
//! for the fuzz target and its corpus, and [`fuzz_differential`].

use std::path::PathBuf;

use super::{Config, DiffOp, Differential, Shapes, Sweep, TornTail};
use turnwal::backend::jsonl::Compression;
use turnwal::contract::Policy;

// ---------------------------------------------------------------------------
// The fuzz entry
// ---------------------------------------------------------------------------

/// Decodes an operation sequence from arbitrary bytes (at most `limit` ops)
/// for `sessions` sessions. Every byte string decodes to something.
pub fn decode(bytes: &[u8], sessions: usize, limit: usize) -> Vec<DiffOp> {
    let mut ops = Vec::new();
    let mut it = bytes.iter().copied();
    let arg = |it: &mut dyn Iterator<Item = u8>| it.next().unwrap_or(0);
    while ops.len() < limit {
        let Some(code) = it.next() else { break };
        let session = (code >> 4) as usize % sessions;
        let op = match code % 16 {
            0..=6 => DiffOp::Append {
                session,
                events: 1 + arg(&mut it) as usize % 48,
            },
            7 => DiffOp::Flush { session },
            8 => DiffOp::Close { session },
            9 => DiffOp::Reopen,
            10 => DiffOp::Tear {
                session,
                how: match arg(&mut it) {
                    a if a % 4 == 0 => TornTail::PartialNext,
                    a if a % 4 == 1 => TornTail::CutLast(a),
                    a => TornTail::DropLast(a / 4),
                },
            },
            11 => DiffOp::Recover {
                session,
                dry_run: arg(&mut it) % 2 == 0,
            },
            12 => DiffOp::Load { session },
            13 => DiffOp::Delete { session },
            14 => DiffOp::ReadFrom {
                session,
                seq: u64::from(arg(&mut it)),
            },
            _ => match arg(&mut it) {
                a if a < 64 => DiffOp::Append { session, events: 0 },
                a if a < 160 => DiffOp::Reject { session, how: a },
                a if a < 208 => DiffOp::Compact { session },
                _ => DiffOp::Check,
            },
        };
        ops.push(op);
    }
    ops
}

/// Encodes ops the way [`decode`] reads them (for seed inputs). Panics on
/// an op outside what the encoding carries: a session above 15, an append
/// of more than 48 events, `DropLast` of more than 63, a read past seq 255,
/// a `Reject` whose `how` is outside 64..160.
pub fn encode(ops: &[DiffOp]) -> Vec<u8> {
    let mut out = Vec::new();
    let code = |session: usize, op: u8| {
        assert!(session < 16, "session {session} does not fit");
        (session as u8) << 4 | op
    };
    for op in ops {
        match *op {
            DiffOp::Append { session, events: 0 } => out.extend([code(session, 15), 0]),
            DiffOp::Append { session, events } => {
                assert!(events <= 48, "an append of {events} events does not fit");
                out.extend([code(session, 0), events as u8 - 1]);
            }
            DiffOp::Flush { session } => out.push(code(session, 7)),
            DiffOp::Close { session } => out.push(code(session, 8)),
            DiffOp::Reopen => out.push(9),
            DiffOp::Tear { session, how } => {
                let arg = match how {
                    TornTail::PartialNext => 0,
                    TornTail::CutLast(k) => {
                        assert_eq!(k % 4, 1, "CutLast({k}) does not fit: k % 4 must be 1");
                        k
                    }
                    TornTail::DropLast(n) => {
                        assert!(n <= 63, "DropLast({n}) does not fit");
                        n * 4 + 2
                    }
                };
                out.extend([code(session, 10), arg]);
            }
            DiffOp::Recover { session, dry_run } => {
                out.extend([code(session, 11), u8::from(!dry_run)]);
            }
            DiffOp::Load { session } => out.push(code(session, 12)),
            DiffOp::Delete { session } => out.push(code(session, 13)),
            DiffOp::ReadFrom { session, seq } => {
                let seq = u8::try_from(seq).expect("a read from seq 0..=255");
                out.extend([code(session, 14), seq]);
            }
            DiffOp::Reject { session, how } => {
                assert!((64..160).contains(&how), "Reject how {how} does not fit");
                out.extend([code(session, 15), how]);
            }
            DiffOp::Compact { session } => out.extend([code(session, 15), 160]),
            DiffOp::Check => out.extend([15, 255]),
        }
    }
    out
}

/// The fuzz entry for the differential target: the first byte picks the
/// number of sessions (1 or 2) and their policies, the second the seed of
/// the generated content and (by its value mod 3) the JSONL store taking
/// part: none, raw or zstd; the rest decodes to up to 24 operations, run
/// against a WAL store, a SQLite store and that JSONL store (in `/dev/shm`
/// when it exists),
/// then [`Differential::finish`], reading at most 24 seqs per session at a
/// check ([`Sweep::AtMost`]). Panics on a divergence.
pub fn fuzz_differential(bytes: &[u8]) {
    let head = bytes.first().copied().unwrap_or(0);
    let seed = bytes.get(1).copied().unwrap_or(0);
    let rest = bytes.get(2..).unwrap_or(&[]);
    let policy = |bit: u8| {
        if head & bit == 0 {
            Policy::Strict
        } else {
            Policy::Lenient
        }
    };
    let policies: Vec<Policy> = if head & 1 == 0 {
        vec![policy(2)]
    } else {
        vec![policy(2), policy(4)]
    };
    let ops = decode(rest, policies.len(), 24);
    let mut run = Differential::new(&Config {
        seed: u64::from(seed),
        policies,
        shapes: Shapes {
            lean: true,
            ..Shapes::default()
        },
        durable: false,
        sweep: Sweep::AtMost(24),
        // A RAM file system where there is one: 3 to 4 times the runs.
        scratch: Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()),
        // The seed picks the JSONL store: none (so the generator still
        // names events like packed tags), raw or zstd.
        jsonl: match seed % 3 {
            0 => Vec::new(),
            1 => vec![Compression::None],
            _ => vec![Compression::Zstd],
        },
        postgres: None,
    });
    for op in &ops {
        run.apply(op);
    }
    run.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_string_decodes() {
        assert!(decode(&[], 2, 32).is_empty());
        let ops = decode(
            &[
                0x10, 5, 7, 9, 10, 1, 10, 0, 10, 30, 11, 0, 12, 13, 14, 200, 15, 0, 15, 64, 15,
                255, 15, 200, 15,
            ],
            2,
            32,
        );
        assert_eq!(
            ops,
            [
                DiffOp::Append {
                    session: 1,
                    events: 6
                },
                DiffOp::Flush { session: 0 },
                DiffOp::Reopen,
                DiffOp::Tear {
                    session: 0,
                    how: TornTail::CutLast(1)
                },
                DiffOp::Tear {
                    session: 0,
                    how: TornTail::PartialNext
                },
                DiffOp::Tear {
                    session: 0,
                    how: TornTail::DropLast(7)
                },
                DiffOp::Recover {
                    session: 0,
                    dry_run: true
                },
                DiffOp::Load { session: 0 },
                DiffOp::Delete { session: 0 },
                DiffOp::ReadFrom {
                    session: 0,
                    seq: 200
                },
                DiffOp::Append {
                    session: 0,
                    events: 0
                },
                DiffOp::Reject {
                    session: 0,
                    how: 64
                },
                DiffOp::Check,
                DiffOp::Compact { session: 0 },
                DiffOp::Append {
                    session: 0,
                    events: 0
                },
            ]
        );
        // At most `limit` ops.
        assert_eq!(decode(&[9; 100], 1, 32).len(), 32);
        // The encoding round-trips.
        let every = [
            DiffOp::Append {
                session: 1,
                events: 48,
            },
            DiffOp::Append {
                session: 0,
                events: 1,
            },
            DiffOp::Append {
                session: 2,
                events: 0,
            },
            DiffOp::Flush { session: 1 },
            DiffOp::Close { session: 2 },
            DiffOp::Compact { session: 1 },
            DiffOp::Reopen,
            DiffOp::Tear {
                session: 0,
                how: TornTail::PartialNext,
            },
            DiffOp::Tear {
                session: 1,
                how: TornTail::CutLast(129),
            },
            DiffOp::Tear {
                session: 2,
                how: TornTail::DropLast(63),
            },
            DiffOp::Tear {
                session: 2,
                how: TornTail::DropLast(0),
            },
            DiffOp::Recover {
                session: 0,
                dry_run: true,
            },
            DiffOp::Recover {
                session: 1,
                dry_run: false,
            },
            DiffOp::Load { session: 2 },
            DiffOp::Delete { session: 1 },
            DiffOp::ReadFrom {
                session: 0,
                seq: 255,
            },
            DiffOp::Reject {
                session: 1,
                how: 64,
            },
            DiffOp::Reject {
                session: 2,
                how: 159,
            },
            DiffOp::Check,
        ];
        assert_eq!(decode(&encode(&every), 3, 64), every);
    }
}
