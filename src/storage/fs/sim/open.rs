//! What an open of the simulated disk can meet: a fault (no descriptor
//! left), or a hold until a test lets it go.

use std::fmt;
use std::io;
use std::path::Path;

use nix::errno::Errno;

use super::{Power, SimFs, SyncFault};
use crate::sync::lock;

/// An open held until it is let go ([`SimFs::hold_next_open`]).
pub(super) struct OpenHold {
    matches: SyncFault,
    held: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
}

impl fmt::Debug for OpenHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpenHold")
    }
}

/// The two ends of an open [`SimFs::hold_next_open`] holds: `held` says
/// when the open is held, and a word on `go` (or dropping it) lets it go.
#[derive(Debug)]
pub struct HeldOpen {
    /// Receives once the open is held.
    pub held: std::sync::mpsc::Receiver<()>,
    /// Lets the open go on.
    pub go: std::sync::mpsc::Sender<()>,
}

impl Power {
    /// Consumes the armed open fault when it is for `path`: `EMFILE`.
    pub(super) fn open_fails(&self, path: &Path) -> io::Result<()> {
        let mut fault = lock(&self.open_fault);
        if fault.as_ref().is_some_and(|f| (f.0)(path)) {
            *fault = None;
            return Err(io::Error::from_raw_os_error(Errno::EMFILE as i32));
        }
        Ok(())
    }

    /// Holds the open of `path` when the armed hold is for it, until it is
    /// let go; no lock is held meanwhile.
    pub(super) fn hold_open(&self, path: &Path) {
        let hold = {
            let mut hold = lock(&self.open_hold);
            match hold.as_ref().is_some_and(|h| (h.matches.0)(path)) {
                true => hold.take(),
                false => None,
            }
        };
        if let Some(hold) = hold {
            let _ = hold.held.send(());
            let _ = hold.go.recv();
        }
    }
}

impl SimFs {
    /// Makes the next open whose path satisfies `matches` fail with
    /// `EMFILE` (no descriptor left): a file's `open` or `open_read`, or
    /// the open of a directory a `sync_dir` needs. Fires once.
    pub fn fail_next_open(&self, matches: impl Fn(&Path) -> bool + Send + Sync + 'static) {
        *lock(&self.power.open_fault) = Some(SyncFault(Box::new(matches)));
    }

    /// Holds the next open whose path satisfies `matches` (a file's
    /// `open` or `open_read`) until it is let go, as a disk stuck on it
    /// would: the stall a test needs to order another thread's step
    /// before the open ends. Fires once; arming another replaces it.
    pub fn hold_next_open(
        &self,
        matches: impl Fn(&Path) -> bool + Send + Sync + 'static,
    ) -> HeldOpen {
        let (held_tx, held) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel();
        *lock(&self.power.open_hold) = Some(OpenHold {
            matches: SyncFault(Box::new(matches)),
            held: held_tx,
            go: go_rx,
        });
        HeldOpen { held, go }
    }
}
