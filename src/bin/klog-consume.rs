//! `klog-consume`: see `klog-consume --help` and README.md.

use std::process::ExitCode;

use klog::cli::consume::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| {
        let (args, matches) = klog::cli::parse::<Args>();
        run(args, &matches)
    })
}
