//! `klog-produce`: see `klog-produce --help` and README.md.

use std::process::ExitCode;

use clap::Parser;
use klog::cli::produce::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| run(Args::parse()))
}
