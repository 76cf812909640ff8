//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::Path;

use assert_cmd::Command;

/// A command for one of the binaries.
pub fn bin(name: &str) -> Command {
    Command::cargo_bin(name).expect("binary built")
}

/// Produces `input` into `topic` of `data` with extra `args`.
pub fn produce(data: &Path, topic: &str, input: &str, args: &[&str]) {
    bin("klog-produce")
        .args(["--data-dir", data.to_str().unwrap(), "-t", topic, "-q"])
        .args(args)
        .write_stdin(input.to_string())
        .assert()
        .success();
}

/// Consumes all of `topic` with `-e` and extra `args`, returning stdout.
pub fn consume(data: &Path, topic: &str, args: &[&str]) -> String {
    let out = bin("klog-consume")
        .args(["--data-dir", data.to_str().unwrap(), "-t", topic, "-e", "-q"])
        .args(args)
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// `1\n2\n...n\n`.
pub fn lines(n: u64) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}
