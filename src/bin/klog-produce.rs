//! `klog-produce`: see `klog-produce --help` and README.md.

use std::process::ExitCode;

use klog::cli::produce::{run, Args};

fn main() -> ExitCode {
    klog::cli::main(|| {
        let (args, matches) = klog::cli::parse::<Args>();
        run(args, &matches)
    })
}
