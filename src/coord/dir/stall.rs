//! A test seam: a commit stopped between its fence and its write, as a
//! process stopped there (SIGSTOP, stuck I/O) would be, so that a unit
//! test can show what the others do meanwhile and what the late write
//! does when it finally runs. A partition state's change stops the same
//! way, before it takes its version (at `states/<topic>-<p>/take`) or
//! after (at `states/<topic>-<p>/finish`).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

/// A stall waiting for the next commit under its directory.
#[derive(Debug)]
struct Armed {
    under: PathBuf,
    reached: Sender<()>,
    release: Receiver<()>,
}

static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

/// A commit stopped at its fence, until [`Stalled::release`] (or until
/// this is dropped, so that a failing test never leaves it stopped).
#[derive(Debug)]
pub(crate) struct Stalled {
    reached: Receiver<()>,
    release: Sender<()>,
}

impl Stalled {
    /// Waits until the commit has passed its fence and stopped.
    pub(crate) fn wait_reached(&self) {
        self.reached
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("no commit reached its fence");
    }

    /// Lets the commit go on, to its write.
    pub(crate) fn release(self) {
        let _ = self.release.send(());
    }
}

/// Stops the next commit whose path is under `under` between its fence
/// and its write.
pub(crate) fn next_commit(under: &Path) -> Stalled {
    let (reached_tx, reached_rx) = channel();
    let (release_tx, release_rx) = channel();
    crate::sync::lock(&ARMED).push(Armed {
        under: under.to_path_buf(),
        reached: reached_tx,
        release: release_rx,
    });
    Stalled {
        reached: reached_rx,
        release: release_tx,
    }
}

/// Called by a commit between its fence and its write: stops there if a
/// stall is armed for `path`.
pub(super) fn at_fence(path: &Path) {
    let armed = {
        let mut all = crate::sync::lock(&ARMED);
        let found = all.iter().position(|a| path.starts_with(&a.under));
        found.map(|i| all.remove(i))
    };
    if let Some(a) = armed {
        let _ = a.reached.send(());
        // Released, or the test dropped its handle.
        let _ = a.release.recv();
    }
}
