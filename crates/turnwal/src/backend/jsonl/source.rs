//! The bytes of a transcript as a scan or a cursor reads them: a file read
//! in windows of [`WINDOW`] bytes (a read of any size holds one window, and
//! never maps a file another writer may truncate), or bytes already in
//! memory. Raw logs are handed over window by window; zstd logs frame by
//! frame ([`FrameWalk`]).

use std::io;
use std::ops::Range;

use super::zstd::{FrameError, walk_frames_at};
use crate::storage::StorageFile;

/// The bytes read at a time.
pub(crate) const WINDOW: usize = 1 << 20;

/// Bytes a scan reads: their length when the read began, and reads within
/// it.
pub(crate) trait Source {
    /// The length the read covers.
    fn len(&self) -> u64;
    /// Fills `buf` from byte `at` (`at + buf.len() <= len()`).
    fn read_exact_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Hands `f` the bytes `[from, to)` in order, in pieces.
    fn each_window(
        &self,
        from: u64,
        to: u64,
        f: &mut dyn FnMut(u64, &[u8]) -> crate::error::Result<()>,
    ) -> crate::error::Result<()>;
}

/// Bytes already in memory (a writer's repair, a salvage read).
pub(crate) struct InMemory<'a>(pub &'a [u8]);

impl Source for InMemory<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_exact_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = at as usize;
        let piece = self
            .0
            .get(at..at + buf.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(piece);
        Ok(())
    }

    fn each_window(
        &self,
        from: u64,
        to: u64,
        f: &mut dyn FnMut(u64, &[u8]) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        f(from, &self.0[from as usize..to as usize])
    }
}

/// A transcript file read through its handle, up to the length it had
/// when opened: what a writer appends meanwhile lies past it, and a file
/// shortened under the read (by a writer that takes no turnwal lock) is a
/// failed read, not a fault.
pub(crate) struct FileSource {
    file: Box<dyn StorageFile>,
    len: u64,
    path: std::path::PathBuf,
}

impl FileSource {
    pub(crate) fn new(
        file: Box<dyn StorageFile>,
        path: &std::path::Path,
    ) -> io::Result<FileSource> {
        let len = file.len()?;
        Ok(FileSource {
            file,
            len,
            path: path.to_owned(),
        })
    }
}

impl Source for FileSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, at)
    }

    fn each_window(
        &self,
        from: u64,
        to: u64,
        f: &mut dyn FnMut(u64, &[u8]) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        let mut buf = vec![0; WINDOW.min((to.saturating_sub(from)) as usize)];
        let mut at = from;
        while at < to {
            let n = ((to - at) as usize).min(buf.len());
            self.file
                .read_exact_at(&mut buf[..n], at)
                .map_err(|e| crate::error::Error::io("read", &self.path, e))?;
            f(at, &buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

/// One step of a walk over a zstd log's frames.
#[derive(Debug)]
pub(crate) enum Step {
    /// A complete frame: its bytes' range in the file.
    Frame(Range<u64>),
    /// An incomplete final frame starts here (EOF inside it).
    Torn(u64),
    /// Invalid frame structure (its offset is the file's byte).
    Broken(FrameError),
    /// The end of the bytes, after a complete frame.
    End,
}

/// The frames of a zstd log from some offset on, found by their framing
/// alone (as [`super::zstd::scan_frames`] finds them), holding one window
/// of the file: a frame longer than a window grows it to the frame.
pub(crate) struct FrameWalk {
    at: u64,
    buf: Vec<u8>,
    buf_at: u64,
}

impl FrameWalk {
    /// A walk from byte `at` of the source each step is given.
    pub(crate) fn new(at: u64) -> FrameWalk {
        FrameWalk {
            at,
            buf: Vec::new(),
            buf_at: at,
        }
    }

    /// The next step over `src`; the walk goes on past a frame only.
    pub(crate) fn next_step(&mut self, src: &dyn Source) -> io::Result<Step> {
        let len = src.len();
        if self.at >= len {
            return Ok(Step::End);
        }
        loop {
            let start = (self.at - self.buf_at) as usize;
            let have = self.buf.get(start..).unwrap_or(&[]);
            let window_end = self.buf_at + self.buf.len() as u64;
            let (frames, end) = walk_frames_at(have, 1, self.at);
            if let Some(frame) = frames.first() {
                let range = self.at + frame.start as u64..self.at + frame.end as u64;
                self.at = range.end;
                return Ok(Step::Frame(range));
            }
            match end {
                Err(e) => return Ok(Step::Broken(e)),
                Ok(Some(_)) if window_end >= len && !have.is_empty() => {
                    return Ok(Step::Torn(self.at));
                }
                // The window ends inside the frame (or holds none of the
                // bytes yet): read on from its start, twice as much when a
                // whole window held no frame.
                _ => {
                    let want = if start == 0 && !have.is_empty() {
                        self.buf.len() * 2
                    } else {
                        WINDOW
                    };
                    let n = want.min((len - self.at) as usize);
                    self.buf.resize(n, 0);
                    src.read_exact_at(self.at, &mut self.buf)?;
                    self.buf_at = self.at;
                }
            }
        }
    }

    /// Where the next step starts.
    pub(crate) fn position(&self) -> u64 {
        self.at
    }

    /// The bytes of a frame the last step returned.
    pub(crate) fn bytes(&self, frame: &Range<u64>) -> &[u8] {
        &self.buf[(frame.start - self.buf_at) as usize..(frame.end - self.buf_at) as usize]
    }
}
