//! Cluster ids ([`crate::coord::Registry::cluster_id`]): what names a
//! registry for as long as it lives, as Kafka's `/cluster/id` does.

/// A new cluster id: 16 random bytes in URL-safe base64 without padding
/// (22 characters), as Kafka makes its own.
pub(crate) fn new() -> String {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // No system generator: the time and the process still make one
        // no other registry has.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes.copy_from_slice(&(nanos ^ u128::from(std::process::id()) << 96).to_be_bytes());
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// What to do about a registry's cluster id that does not read: put back
/// the one it held (the offsets topic's records name it), or remove it.
pub(crate) const DAMAGED_HINT: &str = "put back the id it held (each record of __consumer_offsets \
names it: klog-consume -t __consumer_offsets -c 1 -f '%h\\n' shows klog.cluster=ID), or remove it \
to have a new one made (until their next claims, groups are fenced by the registry alone)";

/// Whether `id` may be a cluster id: 1 to 64 ASCII letters, digits, `-`
/// and `_`.
pub(crate) fn valid(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
