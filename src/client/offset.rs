//! Where a consumer starts (`-o`): the kcat forms, resolved against a
//! partition's start and end offsets and its time index.

use crate::error::{Error, Result};

/// Where to start reading a partition (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The first offset held.
    Beginning,
    /// The next offset to be written.
    End,
    /// An absolute offset.
    Absolute(u64),
    /// This many records before the end, clamped to the beginning.
    FromEnd(u64),
    /// The first record whose timestamp is at or after this (ms).
    Timestamp(i64),
    /// The consumer group's committed offset (`-G` only).
    Stored,
}

impl std::str::FromStr for OffsetSpec {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<OffsetSpec, String> {
        Ok(match s {
            "beginning" => OffsetSpec::Beginning,
            "end" => OffsetSpec::End,
            "stored" => OffsetSpec::Stored,
            _ if s.starts_with('@') => {
                OffsetSpec::Timestamp(crate::human::parse_timestamp_ms(&s[1..])?)
            }
            _ if s.starts_with('-') => {
                OffsetSpec::FromEnd(s[1..].parse().map_err(|_| bad_offset(s))?)
            }
            _ => OffsetSpec::Absolute(s.parse().map_err(|_| bad_offset(s))?),
        })
    }
}

fn bad_offset(s: &str) -> String {
    format!("{s:?} is not an offset: use beginning, end, stored, N, -N or @TIMESTAMP")
}

/// A partition's offsets as a consumer sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extent {
    /// The first offset held.
    pub start: u64,
    /// One past the last offset visible (the high watermark): a consumer
    /// may start anywhere from `start` to here.
    pub end: u64,
    /// Where a consumer's reading ends now: for a read_committed one the
    /// last stable offset (the first offset of a transaction still open),
    /// else `end`. `-o end`, `-o -N` and `-e` count from here.
    pub stable: u64,
}

impl Extent {
    /// The offsets `start..end` with no transaction open (or read
    /// uncommitted).
    pub fn of(start: u64, end: u64) -> Extent {
        Extent {
            start,
            end,
            stable: end,
        }
    }
}

/// Resolves a start position in a partition of `extent`; `by_timestamp`
/// finds the first offset at or after a timestamp.
pub fn resolve_in(
    extent: Extent,
    spec: OffsetSpec,
    name: &str,
    by_timestamp: impl FnOnce(i64) -> Result<Option<u64>>,
) -> Result<u64> {
    let Extent { start, end, stable } = extent;
    Ok(match spec {
        OffsetSpec::Beginning => start,
        OffsetSpec::End => stable,
        OffsetSpec::Absolute(n) if (start..=end).contains(&n) => n,
        OffsetSpec::Absolute(n) => {
            return Err(Error::Config(format!(
                "offset {n} is out of range for {name}, which starts at offset {start} and ends at {end}"
            )))
        }
        OffsetSpec::FromEnd(n) => stable.saturating_sub(n).max(start),
        OffsetSpec::Timestamp(ts) => by_timestamp(ts)?.unwrap_or(stable),
        OffsetSpec::Stored => return Err(Error::Config(
            "-o stored reads a consumer group's committed offset: it needs -G GROUP --registry REGISTRY"
                .into(),
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_specs() {
        assert_eq!("beginning".parse(), Ok(OffsetSpec::Beginning));
        assert_eq!("end".parse(), Ok(OffsetSpec::End));
        assert_eq!("42".parse(), Ok(OffsetSpec::Absolute(42)));
        assert_eq!("-5".parse(), Ok(OffsetSpec::FromEnd(5)));
        assert_eq!("@1000".parse(), Ok(OffsetSpec::Timestamp(1000)));
        assert!("x".parse::<OffsetSpec>().is_err());
        assert_eq!("stored".parse(), Ok(OffsetSpec::Stored));
    }
}
