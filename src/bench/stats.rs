//! Medians, percentiles, the process's memory and the machine a bench ran
//! on. The machine is shared and noisy, so every figure is a median and
//! every report carries the load average it was measured under.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

/// The median of `samples` (the mean of the middle two for an even count);
/// zero when empty.
pub fn median(samples: &[Duration]) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2
    }
}

/// The `p`-th percentile (nearest rank) of `samples`; zero when empty.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The process's memory, from `/proc/self/status` (bytes; zero where the
/// kernel does not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Resident set size (`VmRSS`): anonymous memory plus mapped file pages
    /// this process has touched.
    pub rss: u64,
    /// Peak resident set size (`VmHWM`).
    pub hwm: u64,
    /// Anonymous resident memory (`RssAnon`): the heap, not the page cache.
    pub anon: u64,
    /// Resident file-backed pages (`RssFile`): memory maps.
    pub file: u64,
}

impl Memory {
    /// The current figures (all zero off Linux).
    pub fn now() -> Memory {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map_or(0, |kb| kb * 1024)
        };
        Memory {
            rss: field("VmRSS"),
            hwm: field("VmHWM"),
            anon: field("RssAnon"),
            file: field("RssFile"),
        }
    }
}

/// The machine: cores, CPU model, kernel, the file system holding `dir`,
/// and the load average (1, 5, 15 minutes) when this is called.
pub fn machine(dir: &Path) -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|x| x.1))
        .unwrap_or("unknown")
        .trim()
        .to_owned();
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_owned();
    let load: Vec<f64> = read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    json!({
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cpu": cpu,
        "kernel": kernel,
        "filesystem": filesystem(dir).unwrap_or_else(|| "unknown".into()),
        "dir": dir.display().to_string(),
        "load_average": load,
    })
}

/// The type of the file system mounted at the longest mount point that
/// holds `dir` (from `/proc/self/mounts`).
fn filesystem(dir: &Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, at, fs) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(at).then(|| (at.len(), fs.to_owned()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&ms(&[5, 1, 3])), Duration::from_millis(3));
        assert_eq!(median(&ms(&[4, 1, 3, 2])), Duration::from_micros(2500));
        assert_eq!(median(&[]), Duration::ZERO);
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&ms(&hundred), 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&ms(&hundred), 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&ms(&[7]), 99.0), Duration::from_millis(7));
    }

    #[test]
    fn memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let m = Memory::now();
            assert!(m.rss > 0 && m.hwm >= m.rss, "{m:?}");
        }
    }
}
