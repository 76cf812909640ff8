//! Parsers for the human-friendly values flags take: sizes (`64KiB`),
//! durations (`500ms`, `7d`), delimiters (`\n`, `\0`, `\xNN`), timestamps
//! (ms since the epoch, or RFC 3339), and RFC 3339 formatting.

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
        _ => return Err(format!("{s:?} has an unknown size unit (use B, KiB, MiB, GiB, TiB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too large"))
}

/// Parses `500ms`, `10s`, `5m`, `2h`, `7d` (or a bare number of ms) into ms.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 500ms, 10s, 7d)"))?;
    let mult: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?} has an unknown duration unit (use ms, s, m, h, d)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too long"))
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

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Parses a timestamp: ms since the epoch, or RFC 3339
/// (`2026-11-29T12:00:00Z`, `2026-11-29T12:00:00.250+01:00`).
pub fn parse_timestamp_ms(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || format!("{s:?} is not a timestamp (ms since the epoch, or RFC 3339 like 2026-11-29T12:00:00Z)");
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let t = s.get(r).ok_or_else(bad)?;
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        t.parse().map_err(|_| bad())
    };
    let (y, mo, d, h, mi, sec) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return Err(bad());
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        let frac = &s[start..i.min(start + 3)];
        ms = frac.parse::<i64>().map_err(|_| bad())? * 10i64.pow(3 - frac.len() as u32);
    }
    let zone = s.get(i..).ok_or_else(bad)?;
    let offset_min = match zone {
        "Z" | "z" => 0,
        z if z.len() == 6 && (z.starts_with('+') || z.starts_with('-')) && &z[3..4] == ":" => {
            let v = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if z.starts_with('-') {
                -v
            } else {
                v
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    Ok(secs * 1000 + ms)
}

/// Formats ms since the epoch as RFC 3339 in UTC with milliseconds.
pub fn format_rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
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
        assert_eq!(parse_timestamp_ms("2026-11-29T12:00:00.25Z"), Ok(1_795_953_600_250));
        assert_eq!(parse_timestamp_ms("2026-11-29T13:00:00+01:00"), Ok(1_795_953_600_000));
        assert!(parse_timestamp_ms("2026-13-29T12:00:00Z").is_err());
        assert!(parse_timestamp_ms("yesterday").is_err());
        for ms in [0, 1_795_953_600_250, -1, 951_782_400_000] {
            assert_eq!(parse_timestamp_ms(&format_rfc3339(ms)), Ok(ms));
        }
    }
}
