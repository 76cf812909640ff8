//! `klog-recover`: see `klog-recover --help` and README.md.

use std::process::ExitCode;

use clap::Parser;
use klog::cli::recover::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| run(Args::parse()))
}
