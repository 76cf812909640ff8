//! How `klog-produce`'s input records become records: a line as it is
//! (`-K` splits its key off, `-k` gives a fixed one), or a JSON envelope
//! as `klog-consume -J` prints it (`-J`).

use base64::Engine as _;

use crate::client::{ParsedRecord, Source};

/// Parses one JSON envelope as `klog-consume -J` prints it.
pub fn parse_envelope(line: &[u8]) -> std::result::Result<ParsedRecord, String> {
    let v: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("bad JSON: {e}"))?;
    let obj = v.as_object().ok_or("a JSON envelope must be an object")?;
    // A field's encoding: its text itself, or base64 (`<field>_encoding`).
    let base64 = |field: &str| -> std::result::Result<bool, String> {
        match obj.get(&format!("{field}_encoding")) {
            None | Some(serde_json::Value::Null) => Ok(false),
            Some(serde_json::Value::String(s)) if s == "base64" => Ok(true),
            Some(other) => Err(format!("\"{field}_encoding\" is {other}, not \"base64\"")),
        }
    };
    let decode = |field: &str, s: &str, b64: bool| -> std::result::Result<Vec<u8>, String> {
        if b64 {
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|e| format!("\"{field}\": {e}"))
        } else {
            Ok(s.as_bytes().to_vec())
        }
    };
    let bytes = |field: &str| -> std::result::Result<Option<Vec<u8>>, String> {
        match obj.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => decode(field, s, base64(field)?).map(Some),
            Some(_) => Err(format!("\"{field}\" must be a string or null")),
        }
    };
    let headers_b64 = base64("headers")?;
    let mut headers = Vec::new();
    match obj.get("headers") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(items)) => {
            if items.len() % 2 != 0 {
                return Err("\"headers\" must list name, value pairs".into());
            }
            for pair in items.chunks(2) {
                let (Some(n), Some(v)) = (pair[0].as_str(), pair[1].as_str()) else {
                    return Err("header names and values must be strings".into());
                };
                headers.push((
                    decode("headers", n, headers_b64)?,
                    decode("headers", v, headers_b64)?,
                ));
            }
        }
        Some(_) => return Err("\"headers\" must be an array".into()),
    }
    let timestamp = match obj.get("ts") {
        None | Some(serde_json::Value::Null) => None,
        Some(t) => Some(
            t.as_i64()
                .ok_or("\"ts\" must be an integer (ms since the epoch)")?,
        ),
    };
    let payload = bytes("payload")?;
    Ok(ParsedRecord {
        key: bytes("key")?,
        null_value: payload.is_none(),
        value: payload.unwrap_or_default(),
        headers,
        timestamp,
        source: source(obj),
    })
}

/// An envelope's source coordinates: its `topic`, `partition` and
/// `offset`, when it has all three, each of its type (envelopes written
/// by hand may carry others: they are records all the same).
fn source(obj: &serde_json::Map<String, serde_json::Value>) -> Option<Source> {
    let topic = obj.get("topic")?.as_str()?;
    let partition = u32::try_from(obj.get("partition")?.as_u64()?).ok()?;
    let offset = obj.get("offset")?.as_u64()?;
    Some(Source {
        topic: topic.into(),
        partition,
        offset,
    })
}

/// How input lines become records.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// Split key and value at the first occurrence of this.
    pub key_delimiter: Option<Vec<u8>>,
    /// A fixed key for every record.
    pub key: Option<Vec<u8>>,
    /// Input lines are JSON envelopes.
    pub json: bool,
    /// An empty value is sent as null (kcat's `-Z`): a tombstone.
    pub null_empty: bool,
}

/// Parses one input record into key, value and headers.
pub fn parse_record(
    raw: &[u8],
    options: &ParseOptions,
    out: &mut ParsedRecord,
) -> std::result::Result<(), String> {
    if options.json {
        *out = parse_envelope(raw)?;
        return Ok(());
    }
    out.headers.clear();
    out.timestamp = None;
    out.value.clear();
    if let Some(d) = &options.key_delimiter {
        let at = raw
            .windows(d.len())
            .position(|w| w == d.as_slice())
            .ok_or_else(|| {
                format!(
                    "no key delimiter {:?} in the record",
                    String::from_utf8_lossy(d)
                )
            })?;
        out.key = Some(raw[..at].to_vec());
        out.value.extend_from_slice(&raw[at + d.len()..]);
    } else {
        out.key.clone_from(&options.key);
        out.value.extend_from_slice(raw);
    }
    out.null_value = options.null_empty && out.value.is_empty();
    Ok(())
}
