//! `klog-dump`: see `klog-dump --help` and README.md.

use std::process::ExitCode;

use clap::Parser;
use klog::cli::dump::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| run(Args::parse()))
}
