//! Lines read from input (`append`'s stdin, an `import` file) in bounded
//! memory: a line is refused while it is read, once it passes the longest
//! a line of its kind can be, never after it was held whole (a 600 MB line
//! costs the limit, not 600 MB).

use std::io::{self, BufRead};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The end of the input, before any byte of a line.
    Eof,
    /// A line, in the buffer: through its newline, or to the end of the
    /// input when the last line has none.
    Read,
    /// A line longer than the limit: the buffer holds its first bytes (the
    /// limit and at most one read more), and the rest was left unread.
    TooLong,
}

/// Reads one line into `buf` (cleared first). `limit` bounds the line
/// without its newline and carriage return.
pub(crate) fn read_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> io::Result<Line> {
    buf.clear();
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                Line::Eof
            } else {
                Line::Read
            });
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(nl) => (nl + 1, true),
            None => (available.len(), false),
        };
        // The line so far, without its newline and a carriage return before
        // it (one still waiting for its newline does not count either).
        let total = buf.len() + take;
        let from_end = |k: usize| {
            let i = total - k;
            if i < buf.len() {
                buf[i]
            } else {
                available[i - buf.len()]
            }
        };
        let mut content = total;
        if done {
            content -= 1;
        }
        if content > 0 && from_end(total - content + 1) == b'\r' {
            content -= 1;
        }
        if content > limit {
            let keep = (limit + 2).saturating_sub(buf.len()).min(take);
            buf.extend_from_slice(&available[..keep]);
            reader.consume(keep);
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            return Ok(Line::Read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes a read, as a pipe does.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
        at: usize,
    }

    impl io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.step).min(self.bytes.len() - self.at);
            out[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn lines(input: &[u8], step: usize, limit: usize) -> Vec<(Line, Vec<u8>)> {
        let mut reader = io::BufReader::with_capacity(
            step,
            Trickle {
                bytes: input,
                step,
                at: 0,
            },
        );
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let got = read_line(&mut reader, &mut buf, limit).unwrap();
            let stop = got != Line::Read;
            out.push((got, buf.clone()));
            if stop {
                return out;
            }
        }
    }

    #[test]
    fn lines_at_the_limit_pass_and_longer_ones_stop_in_bounded_memory() {
        for step in [1, 3, 7, 64] {
            let got = lines(b"abcd\nabcd\r\nabc\nab", step, 4);
            assert_eq!(
                got,
                [
                    (Line::Read, b"abcd\n".to_vec()),
                    (Line::Read, b"abcd\r\n".to_vec()),
                    (Line::Read, b"abc\n".to_vec()),
                    (Line::Read, b"ab".to_vec()),
                    (Line::Eof, Vec::new()),
                ],
                "step {step}"
            );
            for long in [&b"ok\nabcde\nnever read\n"[..], b"ok\nabcdefgh\r\nx\n"] {
                let got = lines(long, step, 4);
                assert_eq!(got[0], (Line::Read, b"ok\n".to_vec()), "step {step}");
                assert_eq!(got[1].0, Line::TooLong, "step {step}");
                assert_eq!(got.len(), 2);
            }
            let got = lines(b"ok\nabcdefgh\nnever read\n", step, 4);
            assert_eq!(got[0], (Line::Read, b"ok\n".to_vec()), "step {step}");
            assert_eq!(got[1].0, Line::TooLong, "step {step}");
            assert!(
                got[1].1.len() <= 6 && got[1].1.starts_with(b"abcd"),
                "step {step}"
            );
            assert_eq!(got.len(), 2);
        }
        // A huge line costs the limit, not the line.
        let huge = vec![b'x'; 1 << 20];
        let got = lines(&huge, 4096, 1000);
        assert_eq!(got[0].0, Line::TooLong);
        assert!(got[0].1.len() <= 1002);
    }
}
