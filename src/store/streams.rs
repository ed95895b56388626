//! Command streams in a run record: at most `factory.recordLogBytes` of each (SPEC §4.1).
//!
//! A check can print gigabytes; a record is pushed and fetched by every clone, so it keeps
//! the head and the tail of a long stream around a marker naming the bytes left out. The
//! artifact folder (`--out`) keeps every stream whole.

use crate::config::{Config, DEFAULT_RECORD_LOG_BYTES, RECORD_LOG_BYTES};
use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Whether an artifact file is a command's output (`<kind>_<i>_stdout.txt` / `_stderr.txt`).
pub fn is_command_stream(name: &str) -> bool {
    name.ends_with("_stdout.txt") || name.ends_with("_stderr.txt")
}

/// `factory.recordLogBytes`: a number of bytes, with git's `k`, `m` or `g` suffix if wanted.
pub fn record_log_bytes(cfg: &Config) -> Result<u64> {
    let Some(value) = cfg.string(RECORD_LOG_BYTES) else {
        return Ok(DEFAULT_RECORD_LOG_BYTES);
    };
    parse_size(value.trim()).ok_or_else(|| {
        Error::new(format!(
            "git config {RECORD_LOG_BYTES} has an invalid value {value:?}"
        ))
        .hint(format!(
            "give a number of bytes, as git config {RECORD_LOG_BYTES} 1m (or 1048576)"
        ))
    })
}

/// A size as git reads an integer: digits, then optionally `k`, `m` or `g` (powers of 1024).
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&text[..i], c.to_ascii_lowercase()),
        _ => (text, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'k' => 10,
        'm' => 20,
        'g' => 30,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// The marker between the head and the tail of a stream longer than the cap.
pub fn marker(left_out: u64, head: u64, tail: u64, total: u64) -> String {
    format!(
        "\n[git-factory: {left_out} bytes left out here; the record keeps the first {head} and the last {tail} bytes of {total} ({RECORD_LOG_BYTES}); run with --out DIR to keep whole streams]\n"
    )
}

/// The bytes a record keeps of the stream file at `path` (`len` bytes, more than `cap`): its
/// first half of `cap`, the marker, its last half. Only those parts are read.
pub fn capped_stream(path: &Path, len: u64, cap: u64) -> Result<Vec<u8>> {
    let head = cap / 2;
    let tail = cap - head;
    let mut file = std::fs::File::open(path)?;
    let mut out = Vec::with_capacity(usize::try_from(cap).unwrap_or(0) + 200);
    (&mut file).take(head).read_to_end(&mut out)?;
    out.extend_from_slice(marker(len - head - tail, head, tail, len).as_bytes());
    file.seek(SeekFrom::Start(len - tail))?;
    file.take(tail).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_git_reads_them() {
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("0"), Some(0));
        for bad in ["", "m", "-1", "1.5m", "1x", "12 k"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_long_stream_keeps_its_head_and_tail_around_the_marker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("acceptance_0_stdout.txt");
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        let kept = capped_stream(&path, 1000, 101).expect("capped");
        let mark = marker(899, 50, 51, 1000);
        assert_eq!(&kept[..50], &bytes[..50]);
        assert_eq!(&kept[50..50 + mark.len()], mark.as_bytes());
        assert_eq!(&kept[50 + mark.len()..], &bytes[949..]);
        assert!(is_command_stream("acceptance_0_stdout.txt"));
        assert!(!is_command_stream("llm_output.txt"));
    }
}
