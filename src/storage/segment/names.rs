//! The names of a segment's files.

use std::path::{Path, PathBuf};

/// The file name of the segment whose first offset is `base_offset`.
pub fn log_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.log")
}

/// Paths of the cleaned segment based at `base` before it takes its
/// name ([`crate::storage::cleaner`]): its log, offset index and time
/// index.
pub fn cleaned_paths(dir: &Path, base: u64) -> [PathBuf; 3] {
    let log = dir.join(format!("{base:020}.cleaned.log"));
    let (index, timeindex) = crate::storage::index::index_paths(&log);
    [log, index, timeindex]
}

/// Whether `name` is one of a cleaned segment's files before its rename:
/// a leftover the next open removes.
pub fn is_cleaned_name(name: &str) -> bool {
    name.split_once(".cleaned.").is_some_and(|(digits, ext)| {
        digits.len() == 20
            && digits.bytes().all(|b| b.is_ascii_digit())
            && matches!(ext, "log" | "index" | "timeindex")
    })
}

/// The base offset a segment file name encodes, if it is one.
pub fn parse_log_file_name(name: &str) -> Option<u64> {
    parse_offset_file_name(name, ".log")
}

/// The offset a file name of 20 digits and `suffix` encodes (a segment's,
/// a producer snapshot's), if it is one.
pub fn parse_offset_file_name(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
