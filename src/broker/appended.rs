//! What an acks=all answer waits for.

/// Records an acks=all answer waits for: from `base_offset` to before
/// `end_offset`, appended in undo `epoch` (see
/// [`crate::storage::log::Log::fate`]) and in `leader_epoch`.
#[derive(Debug, Clone, Copy)]
pub(in crate::broker) struct Appended {
    pub(in crate::broker) base_offset: u64,
    pub(in crate::broker) end_offset: u64,
    pub(in crate::broker) epoch: u64,
    /// The leader epoch they were appended in (`None`: a single copy).
    pub(in crate::broker) leader_epoch: Option<u32>,
}
