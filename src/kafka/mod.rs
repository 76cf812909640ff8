//! The Kafka wire protocol, sans-I/O: Kafka RecordBatch v2 to and from klog batches ([`records`]).

pub mod records;

/// Kafka error code: the batch's CRC32C or framing is wrong.
pub const CORRUPT_MESSAGE: i16 = 2;
/// Kafka error code: a record (or batch) is larger than the broker accepts.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// Kafka error code: a message format older than RecordBatch v2 (magic 0 or 1).
pub const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
/// Kafka error code: a compressed batch (klog has no compression yet).
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
/// Kafka error code: a batch or record the broker refuses (transactional, control, malformed).
pub const INVALID_RECORD: i16 = 87;
