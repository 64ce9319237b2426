//! The zstd container of a JSONL log (reference §3): a plain concatenation
//! of independent RFC 8878 frames, each with its content checksum. Frame 1
//! holds exactly the header line; every later frame is one durable append
//! batch. No skippable frames are written, and any other magic is refused.
//!
//! [`scan_frames`] finds the frames without decompressing them, so a torn
//! final frame (EOF anywhere inside it) is told from invalid structure
//! (corruption) by its framing alone.

use std::io::Read;
use std::ops::Range;

use zstd::stream::raw::{CParameter, Decoder as RawDecoder, Operation};

use crate::limits::MAX_FRAME_LEN;

/// The magic of a zstd frame, `28 b5 2f fd` on disk.
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// The level upstream's `zstdCompress` uses (libzstd's default).
pub const LEVEL: i32 = 3;

/// Where the frames of a file are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameScan {
    /// Byte ranges of the complete frames, in order.
    pub frames: Vec<Range<usize>>,
    /// Where an incomplete final frame starts (EOF inside it).
    pub torn_start: Option<usize>,
}

/// Invalid frame structure: the byte it was found at and upstream's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// Byte offset of the offending field.
    pub offset: usize,
    /// What is wrong.
    pub reason: String,
}

/// `scanZstdFrames`: walks frame headers and block headers of `buf`,
/// stopping after `max_frames` complete frames.
///
/// ```
/// use turnwal::backend::jsonl::zstd::{compress_frame, scan_frames};
/// let frame = compress_frame(b"hello\n");
/// let mut file = frame.clone();
/// file.extend_from_slice(&frame[..frame.len() - 1]); // last checksum byte missing
/// let scan = scan_frames(&file, usize::MAX).unwrap();
/// assert_eq!((scan.frames, scan.torn_start), (vec![0..frame.len()], Some(frame.len())));
/// assert_eq!(scan_frames(&[0, 0, 0, 0], usize::MAX).unwrap_err().reason,
///     "corrupt Zstandard session log: invalid frame magic at byte 0");
/// ```
pub fn scan_frames(buf: &[u8], max_frames: usize) -> Result<FrameScan, FrameError> {
    let (frames, end) = walk_frames(buf, max_frames);
    match end {
        Ok(torn_start) => Ok(FrameScan { frames, torn_start }),
        Err(e) => Err(e),
    }
}

/// [`scan_frames`], keeping the complete frames found before invalid
/// structure: the frames, and how the walk ended (an incomplete final
/// frame's start, or the structural error). A salvage read uses the frames
/// before the damage; the damaged frame starts where the last one ends.
pub fn walk_frames(
    buf: &[u8],
    max_frames: usize,
) -> (Vec<Range<usize>>, Result<Option<usize>, FrameError>) {
    walk_frames_at(buf, max_frames, 0)
}

/// [`walk_frames`] of `buf` found at byte `base` of its file: the frames
/// and the torn start are positions in `buf`, the error names the file's
/// byte (a read that walks a file in windows).
pub(crate) fn walk_frames_at(
    buf: &[u8],
    max_frames: usize,
    base: u64,
) -> (Vec<Range<usize>>, Result<Option<usize>, FrameError>) {
    let mut frames = Vec::new();
    let mut offset = 0usize;
    let torn = |frames: Vec<Range<usize>>, start| (frames, Ok(Some(start)));
    let fail = |frames: Vec<Range<usize>>, offset: usize, what: &str| {
        let offset = (base + offset as u64) as usize;
        (
            frames,
            Err(FrameError {
                offset,
                reason: format!("corrupt Zstandard session log: {what} at byte {offset}"),
            }),
        )
    };
    while offset < buf.len() {
        let start = offset;
        if buf.len() - offset < 4 {
            return torn(frames, start);
        }
        let magic = u32::from_le_bytes(buf[offset..offset + 4].try_into().expect("4 bytes"));
        if magic != ZSTD_MAGIC {
            return fail(frames, offset, "invalid frame magic");
        }
        offset += 4;
        if offset == buf.len() {
            return torn(frames, start);
        }
        let descriptor = buf[offset];
        offset += 1;
        if descriptor & 0x18 != 0 {
            return fail(frames, offset - 1, "reserved frame-header bit");
        }
        let content_size_flag = descriptor >> 6;
        let single_segment = descriptor & 0x20 != 0;
        let checksum = descriptor & 0x04 != 0;
        let dictionary_bytes = match descriptor & 0x03 {
            3 => 4,
            n => usize::from(n),
        };
        let content_size_bytes = match content_size_flag {
            0 => usize::from(single_segment),
            n => 1 << n,
        };
        let rest = usize::from(!single_segment) + dictionary_bytes + content_size_bytes;
        if buf.len() - offset < rest {
            return torn(frames, start);
        }
        offset += rest;
        loop {
            if buf.len() - offset < 3 {
                return torn(frames, start);
            }
            let header = u32::from(buf[offset])
                | u32::from(buf[offset + 1]) << 8
                | u32::from(buf[offset + 2]) << 16;
            offset += 3;
            let last = header & 1 != 0;
            let block_type = (header >> 1) & 3;
            let block_size = (header >> 3) as usize;
            if block_type == 3 {
                return fail(frames, offset - 3, "reserved block type");
            }
            let payload = if block_type == 1 { 1 } else { block_size };
            if buf.len() - offset < payload {
                return torn(frames, start);
            }
            offset += payload;
            if last {
                break;
            }
        }
        if checksum {
            if buf.len() - offset < 4 {
                return torn(frames, start);
            }
            offset += 4;
        }
        frames.push(start..offset);
        if frames.len() == max_frames {
            break;
        }
    }
    (frames, Ok(None))
}

/// Where the next frame magic starts at or after `from` (a salvage read
/// resynchronizes there after a damaged frame).
pub fn next_magic(buf: &[u8], from: usize) -> Option<usize> {
    let magic = ZSTD_MAGIC.to_le_bytes();
    buf.get(from..)?
        .windows(4)
        .position(|w| w == magic)
        .map(|i| from + i)
}

/// One independent frame of `plain` at level 3 with its content checksum, as
/// upstream's `compressZstdFrame` writes it.
pub fn compress_frame(plain: &[u8]) -> Vec<u8> {
    let mut compressor = zstd::bulk::Compressor::new(LEVEL).expect("a zstd context");
    compressor
        .set_parameter(CParameter::ChecksumFlag(true))
        .expect("the checksum flag is a valid parameter");
    compressor
        .compress(plain)
        .expect("compressing into a growable buffer cannot fail")
}

/// Decompresses one complete frame and checks its checksum. A frame that
/// would decompress past [`MAX_FRAME_LEN`] bytes (no writer makes one: a
/// batch over it is refused) is an error, found after inflating at most one
/// byte past the bound.
pub fn decompress_frame(frame: &[u8]) -> Result<Vec<u8>, String> {
    decompress_frame_within(frame, MAX_FRAME_LEN)
}

/// [`decompress_frame`] with the bound given: never inflates more than
/// `max + 1` bytes.
///
/// ```
/// use turnwal::backend::jsonl::zstd::{compress_frame, decompress_frame_within};
/// let bomb = compress_frame(&vec![0u8; 1 << 20]);
/// assert_eq!(decompress_frame_within(&bomb, 1000).unwrap_err(),
///     "the frame decompresses past the 1000-byte bound");
/// ```
pub fn decompress_frame_within(frame: &[u8], max: usize) -> Result<Vec<u8>, String> {
    let mut decoder = zstd::stream::read::Decoder::with_buffer(frame)
        .map_err(|e| e.to_string())?
        .single_frame();
    let mut out = Vec::new();
    (&mut decoder)
        .take((max as u64).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > max {
        return Err(format!("the frame decompresses past the {max}-byte bound"));
    }
    Ok(out)
}

/// The plaintext a torn (structurally incomplete) final frame still gives,
/// as upstream's `decompressZstdPrefix` (`finishFlush: ZSTD_e_flush`) does:
/// whatever the decoder produces from the bytes present. A decoding error
/// gives nothing at all, as upstream's catch does, and so does a prefix that
/// inflates past [`MAX_FRAME_LEN`] bytes (no writer makes one).
pub fn decompress_prefix(bytes: &[u8]) -> Vec<u8> {
    decompress_prefix_within(bytes, MAX_FRAME_LEN)
}

/// [`decompress_prefix`] with the bound given: never holds more than
/// `max` plus one 128 KiB chunk of output.
pub fn decompress_prefix_within(bytes: &[u8], max: usize) -> Vec<u8> {
    let Ok(mut decoder) = RawDecoder::new() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 1 << 17];
    let mut input = bytes;
    loop {
        let Ok(status) = decoder.run_on_buffers(input, &mut chunk) else {
            return Vec::new();
        };
        out.extend_from_slice(&chunk[..status.bytes_written]);
        if out.len() > max {
            return Vec::new();
        }
        input = &input[status.bytes_read..];
        if status.bytes_read == 0 && status.bytes_written == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_regions_versus_invalid_structure() {
        let magic = ZSTD_MAGIC.to_le_bytes();
        let torn = |bytes: &[u8]| scan_frames(bytes, usize::MAX).unwrap().torn_start;
        assert_eq!(torn(&magic[..2]), Some(0));
        assert_eq!(torn(&magic), Some(0));
        let mut no_window = magic.to_vec();
        no_window.push(0x00);
        assert_eq!(torn(&no_window), Some(0));
        let err = |bytes: &[u8]| scan_frames(bytes, usize::MAX).unwrap_err();
        assert_eq!(
            err(&[0, 0, 0, 0]).reason,
            "corrupt Zstandard session log: invalid frame magic at byte 0"
        );
        let mut reserved = magic.to_vec();
        reserved.push(0x08);
        assert_eq!(
            err(&reserved),
            FrameError {
                offset: 4,
                reason: "corrupt Zstandard session log: reserved frame-header bit at byte 4".into()
            }
        );
        // Descriptor 0x20 (single segment, 1-byte FCS), then a block of type 3.
        let mut bad_block = magic.to_vec();
        bad_block.extend_from_slice(&[0x20, 0x05, 0x07, 0x00, 0x00]);
        assert_eq!(
            err(&bad_block).reason,
            "corrupt Zstandard session log: reserved block type at byte 6"
        );
    }

    #[test]
    fn descriptors_rle_blocks_and_multiple_blocks() {
        // Hand-built frames for each descriptor: raw block "ab", RLE block of
        // 3 x 'z', last block empty raw; a checksum when flagged.
        for descriptor in [0x00u8, 0x21, 0x42, 0x83, 0xE3] {
            let mut frame = ZSTD_MAGIC.to_le_bytes().to_vec();
            frame.push(descriptor);
            let single = descriptor & 0x20 != 0;
            if !single {
                frame.push(0x00); // window descriptor
            }
            let dict = match descriptor & 3 {
                3 => 4,
                n => n as usize,
            };
            frame.extend(std::iter::repeat_n(0, dict));
            let fcs = match descriptor >> 6 {
                0 => usize::from(single),
                n => 1 << n,
            };
            frame.extend(std::iter::repeat_n(0, fcs));
            frame.extend_from_slice(&[(2 << 3) as u8, 0, 0, b'a', b'b']); // raw, 2 bytes
            frame.extend_from_slice(&[((3 << 3) | (1 << 1)) as u8, 0, 0, b'z']); // RLE
            frame.extend_from_slice(&[1, 0, 0]); // last, raw, empty
            let scan = scan_frames(&frame, usize::MAX).unwrap();
            assert_eq!(scan.frames, vec![0..frame.len()], "{descriptor:#x}");
            for cut in 0..frame.len() {
                assert_eq!(
                    scan_frames(&frame[..cut], usize::MAX).unwrap().torn_start,
                    if cut == 0 { None } else { Some(0) },
                    "{descriptor:#x} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn frames_round_trip_and_torn_prefixes_recover() {
        let a = compress_frame(b"{\"a\":1}\n");
        assert_eq!(&a[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
        assert_eq!(decompress_frame(&a).unwrap(), b"{\"a\":1}\n");
        let mut bad = a.clone();
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        assert!(decompress_frame(&bad).is_err());
        // Missing the last checksum byte: torn at 0, and its prefix decodes.
        assert_eq!(
            scan_frames(&a[..n - 1], usize::MAX).unwrap(),
            FrameScan {
                frames: vec![],
                torn_start: Some(0)
            }
        );
        assert_eq!(decompress_prefix(&a[..n - 1]), b"{\"a\":1}\n");
        assert_eq!(decompress_prefix(&a[..3]), b"");
    }
}
