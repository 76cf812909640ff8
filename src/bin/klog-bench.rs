//! `klog-bench`: see `klog-bench --help` and README.md.

use std::process::ExitCode;

use clap::Parser;
use klog::cli::bench::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| run(Args::parse()))
}
