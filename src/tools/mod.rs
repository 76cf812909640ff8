//! The engines behind the binaries: embedded produce and consume on a local
//! data directory, the segment dumper, and the benchmarks. The command line
//! (`crate::cli`) parses flags into the options structs here and calls
//! these; nothing here knows about clap.
//!
//! The small helpers below are the tools' shared manners of speaking: `% `
//! lines on stderr that `-q` silences, and tables in one style.

pub mod bench;
pub mod consume;
pub mod dump;
pub mod follow;
pub mod input;
pub mod produce;
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
            eprintln!("% {msg}");
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
