//! A group's committed offsets over klog's protocol (offset_commit and
//! offset_fetch, [`crate::protocol`]), asked of the broker that leads
//! the group's partition of the offsets topic.

use super::connection::{protocol_error, Connection};
use crate::error::Result;
use crate::protocol::{self, OffsetCommit, OffsetFetch, Reader};

impl Connection {
    /// Writes a group's committed offset of a partition as `commit`
    /// asks; `Ok` with the offset stored before, once durable. A later
    /// claim's generation stored refuses it: [`crate::error::Error::Broker`]
    /// with [`protocol::ErrorCode::CommitFenced`].
    pub fn offset_commit(&mut self, commit: &OffsetCommit) -> Result<Option<u64>> {
        let (header, at) = self.call(|out, id| protocol::offset_commit_request(out, id, commit))?;
        Self::check(&header)?;
        protocol::decode_commit_response(&mut Reader::new(&self.response[at..]))
            .map_err(|e| protocol_error(&self.addr, e))
    }

    /// A group's committed offsets as `fetch` asks: (topic, partition,
    /// offset), sorted.
    pub fn offset_fetch(&mut self, fetch: &OffsetFetch) -> Result<Vec<(String, u32, u64)>> {
        let (header, at) = self.call(|out, id| protocol::offset_fetch_request(out, id, fetch))?;
        Self::check(&header)?;
        protocol::decode_offsets_response(&mut Reader::new(&self.response[at..]))
            .map_err(|e| protocol_error(&self.addr, e))
    }
}
