//! `klog-broker`: see `klog-broker --help` and README.md.

use std::process::ExitCode;

use clap::Parser;
use klog::cli::broker::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| run(Args::parse()))
}
