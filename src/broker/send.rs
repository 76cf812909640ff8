//! A fetch's records on their way out, on either listener: a segment's
//! byte range sent from the page cache with `sendfile`, never through user
//! space; only a segment written before klog stored Kafka's format is read
//! and converted ([`legacy::to_kafka`]), at most a fetch's budget (or one
//! batch) of it.

use crate::net::Stream;
use std::io::{self, Write};
use std::os::fd::AsFd;

use std::time::{Duration, Instant};

use crate::broker::memory::{Held, Taken};
use crate::broker::shared::Shared;
use crate::storage::log::FileSlice;
use crate::storage::record::{legacy, Format};
use crate::storage::recover;

/// A partition's records in a fetch response.
#[derive(Debug, Default)]
pub(in crate::broker) enum Records<'a> {
    /// None.
    #[default]
    Empty,
    /// A segment's bytes as stored, sent with `sendfile`.
    File(FileSlice),
    /// A legacy segment's batches converted to Kafka's format (whole
    /// batches only; a reader fetches the rest again), and the request
    /// memory they hold.
    Converted {
        /// The Kafka batches.
        bytes: Vec<u8>,
        /// Given back once they are sent.
        held: Held<'a>,
    },
}

impl Records<'_> {
    /// Whether these records hold request memory.
    pub(in crate::broker) fn holds_memory(&self) -> bool {
        matches!(self, Records::Converted { .. })
    }

    pub(in crate::broker) fn len(&self) -> u64 {
        match self {
            Records::Empty => 0,
            Records::File(slice) => slice.len,
            Records::Converted { bytes, .. } => bytes.len() as u64,
        }
    }
}

/// The records of `slice` as a fetch sends them: as stored, or converted
/// from a legacy segment ([`legacy::to_kafka`]), which costs a read and a
/// copy of the slice (the fetch's byte budget, or one batch): that much is
/// taken from the broker's request memory first, else the answer goes
/// without records (the reader asks again). Only a fetch that holds no
/// conversion yet may `wait` for it (up to the request timeout): one that
/// waited holding some could wait for what only it holds, and holds
/// others up meanwhile. For the same reason a conversion takes at most
/// the request memory less what the fetch's own frame may hold of it (its
/// bytes past the read buffer: up to `--max-request-bytes`, or half the
/// memory if that is less), however large its batch.
pub(in crate::broker) fn records_of(
    shared: &Shared,
    slice: FileSlice,
    wait: bool,
) -> crate::error::Result<Records<'_>> {
    if slice.format == Format::Kafka {
        return Ok(Records::File(slice));
    }
    // The stored bytes, the batch being built and the Kafka batches made
    // of them (at most half as large again: a few bytes more per record).
    let memory = &shared.request_memory;
    let frame = u64::from(shared.config.request_bytes_max).min(memory.total() / 2);
    let need = (4 * slice.len).min(memory.total() - frame);
    let timeout = Duration::from_millis(shared.config.request_timeout_ms);
    let deadline = Instant::now() + if wait { timeout } else { Duration::ZERO };
    if memory.take(need, &shared.stop, deadline) != Taken::Yes {
        return Ok(Records::Empty);
    }
    let held = Held {
        memory,
        bytes: need,
    };
    let mut stored = Vec::new();
    slice.read_into(&mut stored)?;
    let mut kafka = Vec::with_capacity(stored.len() + stored.len() / 2);
    legacy::to_kafka(&stored, &mut kafka)
        .map_err(|e| recover::corrupt(&slice.path, slice.position, e.to_string()))?;
    Ok(Records::Converted { bytes: kafka, held })
}

/// Sends a segment's byte range with `sendfile`: from the page cache to the
/// socket, never through user space.
pub(in crate::broker) fn send_slice(stream: &Stream, slice: &FileSlice) -> io::Result<()> {
    let Some(file) = slice.file.as_file() else {
        let mut buf = Vec::new();
        slice.read_into(&mut buf).map_err(io::Error::other)?;
        return (&*stream).write_all(&buf);
    };
    let mut offset = slice.position as i64;
    let end = (slice.position + slice.len) as i64;
    while offset < end {
        let left = (end - offset) as usize;
        match nix::sys::sendfile::sendfile64(stream.as_fd(), file.as_fd(), Some(&mut offset), left)
        {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} ended during sendfile", slice.path.display()),
                ))
            }
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer stopped reading",
                ))
            }
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Ok(())
}
