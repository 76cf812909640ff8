//! Parsers for the human-friendly values flags take: sizes (`64KiB`),
//! durations (`500ms`, `7d`), delimiters (`\n`, `\0`, `\xNN`), timestamps
//! (ms since the epoch, or RFC 3339), and RFC 3339 formatting (by `jiff`).

/// Parses `1024`, `64KiB`, `1GiB`, `10MB` (decimal) or `10M` (binary).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (try 1024, 64KiB, 1GiB)"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "{s:?} has an unknown size unit (use B, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// `n` and its noun, plural unless `n` is 1: `1 record`, `3 records`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else if noun.ends_with("ch") || noun.ends_with('s') || noun.ends_with('x') {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

/// Parses `500ms`, `10s`, `5m`, `2h`, `7d` into ms. A number needs its
/// unit (`--retention 7` is not a week, nor 7 ms), but for `0`, which is
/// the same in every unit.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 500ms, 10s, 7d)"))?;
    let mult: u64 = match unit {
        "" if n == 0 => 1,
        "" => {
            return Err(format!(
                "{s:?} needs a unit: {n}ms, {n}s, {n}m, {n}h or {n}d"
            ))
        }
        "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{s:?} has an unknown duration unit (use ms, s, m, h, d)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// Parses a delimiter with escapes: `\n`, `\t`, `\r`, `\0`, `\\`, `\xNN`.
pub fn parse_escapes(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let esc = *bytes
            .get(i + 1)
            .ok_or_else(|| format!("{s:?} ends with a lone backslash"))?;
        i += 2;
        out.push(match esc {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'0' => 0,
            b'\\' => b'\\',
            b'x' => {
                let hex = s
                    .get(i..i + 2)
                    .ok_or_else(|| format!("{s:?}: \\x needs two hex digits"))?;
                i += 2;
                u8::from_str_radix(hex, 16).map_err(|_| format!("{s:?}: \\x{hex} is not hex"))?
            }
            other => return Err(format!("{s:?}: unknown escape \\{}", other as char)),
        });
    }
    Ok(out)
}

/// Parses a non-empty delimiter.
pub fn parse_delimiter(s: &str) -> Result<Vec<u8>, String> {
    let d = parse_escapes(s)?;
    if d.is_empty() {
        return Err("a delimiter cannot be empty".into());
    }
    Ok(d)
}

/// Parses a timestamp: ms since the epoch, or RFC 3339
/// (`2026-11-29T12:00:00Z`, `2026-11-29T12:00:00.250+01:00`), by `jiff`,
/// which checks the calendar (no 2026-02-31) and requires an offset. It
/// also takes the other ISO 8601 forms `jiff` reads (`2026-11-29T12:00Z`,
/// `20261129T120000Z`); a leap second (`:60`) reads as `:59`.
pub fn parse_timestamp_ms(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || {
        format!(
            "{s:?} is not a timestamp (ms since the epoch, or RFC 3339 like 2026-11-29T12:00:00Z)"
        )
    };
    let at: jiff::Timestamp = s.parse().map_err(|_| bad())?;
    Ok(at.as_millisecond())
}

/// Formats ms since the epoch as RFC 3339 in UTC with milliseconds. A
/// timestamp outside `jiff`'s range (-9999-01-02 to 9999-12-30; only
/// damaged or hostile records carry one) is printed as its number of
/// milliseconds.
pub fn format_rfc3339(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(at) => at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("99999999999999TiB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        assert_eq!(parse_duration_ms("10s"), Ok(10_000));
        assert_eq!(parse_duration_ms("7d"), Ok(604_800_000));
        assert!(parse_duration_ms("1y").is_err());
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert_eq!(
            parse_duration_ms("7"),
            Err("\"7\" needs a unit: 7ms, 7s, 7m, 7h or 7d".into())
        );
        assert!(parse_duration_ms("-1s").is_err());
    }

    #[test]
    fn escapes() {
        assert_eq!(parse_escapes(r"\n"), Ok(b"\n".to_vec()));
        assert_eq!(parse_escapes(r"a\0\x1F\\"), Ok(b"a\0\x1f\\".to_vec()));
        assert!(parse_escapes(r"\q").is_err());
        assert!(parse_escapes(r"\x1").is_err());
        assert!(parse_delimiter("").is_err());
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp_ms("0"), Ok(0));
        assert_eq!(parse_timestamp_ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_timestamp_ms("2026-11-29T12:00:00.25Z"),
            Ok(1_795_953_600_250)
        );
        assert_eq!(
            parse_timestamp_ms("2026-11-29T13:00:00+01:00"),
            Ok(1_795_953_600_000)
        );
        assert!(parse_timestamp_ms("2026-13-29T12:00:00Z").is_err());
        assert!(parse_timestamp_ms("2026-02-31T12:00:00Z").is_err());
        assert!(
            parse_timestamp_ms("2026-11-29T12:00:00").is_err(),
            "an offset is required"
        );
        assert_eq!(
            format_rfc3339(1_795_953_600_250),
            "2026-11-29T12:00:00.250Z"
        );
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_rfc3339(i64::MAX), i64::MAX.to_string());
        assert!(parse_timestamp_ms("yesterday").is_err());
        for ms in [0, 1_795_953_600_250, -1, 951_782_400_000] {
            assert_eq!(parse_timestamp_ms(&format_rfc3339(ms)), Ok(ms));
        }
    }
}
