//! The engines behind the binaries. The command line (`crate::cli`) parses
//! flags into the options structs here and calls these; nothing here knows
//! about clap, so each engine can be driven and tested without a process.
//!
//! | binary | engine |
//! |---|---|
//! | `klog-produce` | [`produce`] (its input: [`input`]) |
//! | `klog-consume` | [`follow`] (formats, envelopes, the embedded reader: [`consume`]; `--commit-from`: [`commit_from`]) |
//! | both, with `-L` | [`list`] |
//! | `klog-dump` | [`dump`], [`registry_dump`] for `--registry`, [`compare`] for `--compare` |
//! | asking brokers (`-L --registry`, `klog-dump --registry`) | [`ask`] (every broker at once, each within 1s) |
//! | `klog-produce --audit-topic`, `klog-consume --audit` | [`audit`], [`reconcile`] |
//! | `klog-recover` | [`recover`] |
//! | `klog-bench` | [`bench`](mod@bench) |
//!
//! `klog-broker` needs no engine here: its command line fills a
//! [`crate::broker::BrokerConfig`] and runs the broker.
//!
//! The small helpers below are the tools' shared manners of speaking: `% `
//! lines on stderr that `-q` silences, and tables in one style.

pub mod ask;
pub mod audit;
pub mod bench;
pub mod commit_from;
pub mod compare;
pub mod consume;
pub mod dump;
pub mod follow;
pub mod input;
pub mod list;
pub mod produce;
pub mod reconcile;
pub mod recover;
pub mod registry_dump;

/// Informational output (`% ...` on stderr), silenced by `-q`.
#[derive(Debug, Clone, Copy)]
pub struct Say {
    /// Whether `-q` was given.
    pub quiet: bool,
}

impl Say {
    /// Prints `% <msg>` on stderr unless quiet.
    pub fn info(&self, msg: impl std::fmt::Display) {
        if !self.quiet {
            crate::diag::line(format_args!("% {msg}"));
        }
    }
}

/// A table with this header in the tools' one style: condensed UTF-8
/// borders and, when `NO_COLOR` is set, no styling for a terminal
/// (comfy-table then draws as if the output were not one).
pub fn table(header: &[&str]) -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    if std::env::var_os("NO_COLOR").is_some() {
        table.force_no_tty();
    }
    table.set_header(header.to_vec());
    table
}
