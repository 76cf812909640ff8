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

/// A process started by a test, killed when the test ends however it ends;
/// its stdout lines arrive on a channel.
pub struct Proc {
    pub child: std::process::Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    /// Starts `name` with `args`, stdout piped line by line, stderr piped.
    pub fn spawn(name: &str, args: &[&str]) -> Proc {
        use std::io::BufRead;
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin(name))
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    /// The next `n` stdout lines, failing the test if they do not come
    /// within `timeout`.
    pub fn take_lines(&self, n: usize, timeout: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(e) => panic!("only {} of {n} lines within {timeout:?}: {e}", out.len()),
            }
        }
        out
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
