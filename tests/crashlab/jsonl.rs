//! Crash safety of upstream JSONL roots, raw and zstd, over the simulated
//! disk against the same oracle as the WAL (`oracle::check_on`): the JSONL
//! backend does every file and directory operation through `Storage`, so the
//! same power cuts, torn sectors, lost directory entries, injected
//! ENOSPC/EIO and short writes reach it.

use turnwal::backend::jsonl::Compression;
use turnwal::crashlab::ops::{self, Run};
use turnwal::crashlab::oracle::Target;

use super::{SYNC_MODES, random_sequence, scale};

const TARGETS: [Target; 2] = [
    Target::Jsonl(Compression::None),
    Target::Jsonl(Compression::Zstd),
];

#[test]
fn jsonl_random_op_sequences() {
    let sequences = 150 * scale();
    for target in TARGETS {
        for seed in 0..sequences {
            let bytes = random_sequence(seed);
            let sync = SYNC_MODES[bytes[0] as usize % 3];
            let decoded = ops::decode(&bytes[1..], 64);
            Run::on(target, u64::from(bytes[0]), sync)
                .run(&decoded)
                .unwrap_or_else(|e| {
                    panic!("{target:?} random sequence seed {seed}: {e}\nops: {decoded:?}")
                });
        }
    }
}
