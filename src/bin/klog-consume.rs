//! `klog-consume`: see `klog-consume --help` and README.md.

use std::process::ExitCode;

use clap::Parser;
use klog::cli::consume::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| run(Args::parse()))
}
