//! Shared helpers for the integration tests.
// Shared by several test crates, each of which uses a part.
#![allow(dead_code, unreachable_pub)]

use std::path::Path;

use assert_cmd::Command;

pub mod cluster;
pub mod kafka;
pub mod netns;
pub mod registry;
pub mod txn;
pub mod zk;

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
        .args([
            "--data-dir",
            data.to_str().unwrap(),
            "-t",
            topic,
            "-e",
            "-q",
        ])
        .args(args)
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// `1\n2\n...n\n`.
pub fn lines(n: u64) -> String {
    input(1, n)
}

/// Records `from..=to` as producer input, one number per line.
pub fn input(from: u64, to: u64) -> String {
    (from..=to).map(|i| format!("{i}\n")).collect()
}

/// The numbers `from..=to` as the lines a consumer prints.
pub fn numbers(from: u64, to: u64) -> Vec<String> {
    (from..=to).map(|n| n.to_string()).collect()
}

/// The directories of `topic`'s partitions in a data directory.
pub fn partition_dirs(data: &std::path::Path, topic: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(data) else {
        return 0;
    };
    let names = entries.filter_map(|e| e.ok()?.file_name().into_string().ok());
    let of = |n: &String| {
        n.rsplit_once('-')
            .is_some_and(|(t, p)| t == topic && p.parse::<u32>().is_ok())
    };
    names.filter(of).count()
}

/// Waits up to `bound` for `done`, looking every 50 ms; fails with `what`.
pub fn eventually(what: &str, bound: std::time::Duration, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < bound, "{what} (waited {bound:?})");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A process started by a test, killed when the test ends however it ends;
/// its stdout lines arrive on a channel.
pub struct Proc {
    pub child: std::process::Child,
    pub lines: std::sync::mpsc::Receiver<String>,
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Proc {
    /// Starts `name` with `args`, stdout piped line by line, stderr piped.
    pub fn spawn(name: &str, args: &[&str]) -> Proc {
        Proc::spawn_with_stdin(name, args, std::process::Stdio::null())
    }

    /// Starts `name` with `args` and this stdin (`Stdio::piped()`: the
    /// test writes it through `child.stdin`).
    pub fn spawn_with_stdin(name: &str, args: &[&str], stdin: std::process::Stdio) -> Proc {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin(name));
        command.args(args);
        Proc::spawn_command(command, stdin)
    }

    /// Starts `command` (e.g. a binary inside a network namespace, see
    /// `netns::Host::command`) with this stdin, as [`Proc::spawn`] does.
    pub fn spawn_command(mut command: std::process::Command, stdin: std::process::Stdio) -> Proc {
        use std::io::BufRead;
        default_signals(&mut command);
        let mut child = command
            .stdin(stdin)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let stderr_pipe = child.stderr.take().expect("stderr");
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            let stderr = std::sync::Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr_pipe).lines() {
                    let Ok(line) = line else { break };
                    stderr.lock().unwrap().push(line);
                }
            });
        }
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc {
            child,
            lines,
            stderr,
        }
    }

    /// Its stderr lines so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the last stderr line containing `text` satisfies `ok`,
    /// failing after `timeout`; returns that line.
    pub fn wait_stderr(
        &self,
        text: &str,
        ok: impl Fn(&str) -> bool,
        timeout: std::time::Duration,
    ) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let last = self.stderr_lines().into_iter().rfind(|l| l.contains(text));
            if let Some(line) = last.filter(|l| ok(l)) {
                return line;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "no stderr line with {text:?} as wanted within {timeout:?}: {:?}",
                    self.stderr_lines()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Every stdout line until the process exits (or `timeout` passes).
    pub fn all_lines(&self, timeout: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return out,
                Err(e) => panic!("output did not end within {timeout:?}: {e}"),
            }
        }
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

/// A `klog-broker` started on port 0 in a data directory; killed when the
/// test ends however it ends. Its stderr is collected line by line.
pub struct BrokerProc {
    pub child: std::process::Child,
    pub addr: String,
    pub stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl BrokerProc {
    /// Starts a broker on `data` with extra `args`, and waits for its
    /// `% Listening on ADDR` line.
    pub fn start(data: &Path, args: &[&str]) -> BrokerProc {
        let command = std::process::Command::new(assert_cmd::cargo::cargo_bin("klog-broker"));
        BrokerProc::start_command(command, data, args)
    }

    /// Starts `command`, a `klog-broker` (e.g. inside a network namespace,
    /// see `netns::Host::command`), as [`BrokerProc::start`] does.
    pub fn start_command(
        mut command: std::process::Command,
        data: &Path,
        args: &[&str],
    ) -> BrokerProc {
        use std::io::BufRead;
        // Port 0 unless the test names an address.
        let listen: &[&str] = if args.contains(&"--listen") {
            &[]
        } else {
            &["--listen", "127.0.0.1:0"]
        };
        default_signals(&mut command);
        let mut child = command
            .args(["--data-dir", data.to_str().unwrap()])
            .args(listen)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn klog-broker");
        let stderr = child.stderr.take().expect("stderr");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let lines = std::sync::Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addr) = line.strip_prefix("% Listening on ") {
                        let _ = tx.send(addr.to_string());
                    }
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let mut broker = BrokerProc {
            child,
            addr: String::new(),
            stderr: lines,
        };
        match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(addr) => broker.addr = addr,
            Err(_) => panic!("the broker did not start: {:?}", broker.log()),
        }
        broker
    }

    /// Its stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// The address of its Kafka listener (started with --kafka-listen).
    pub fn kafka_addr(&self) -> String {
        self.log()
            .iter()
            .find_map(|l| {
                l.strip_prefix("% Listening for Kafka clients on ")
                    .map(str::to_string)
            })
            .expect("a Kafka listener")
    }

    /// Waits until a stderr line contains `text`, failing after `timeout`.
    pub fn wait_for_log(&self, text: &str, timeout: std::time::Duration) -> String {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(line) = self.log().into_iter().find(|l| l.contains(text)) {
                return line;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "no broker line with {text:?} within {timeout:?}: {:?}",
                    self.log()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        self.child.wait().unwrap()
    }

    /// Sends it `signal` (SIGSTOP freezes it, SIGCONT thaws it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    /// Kills it with SIGKILL and waits.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its resident memory, in KiB (Linux).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for BrokerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Gives `command`'s process the default action of SIGINT, whatever this
/// one has: a test suite started in the background by a shell ignores
/// SIGINT, and so would every tool it starts (an ignored signal is
/// inherited, and discarded even where a tool waits for it).
#[allow(unsafe_code)]
pub fn default_signals(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe; nothing else runs between
    // fork and exec.
    unsafe {
        command.pre_exec(|| {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGINT,
                nix::sys::signal::SigHandler::SigDfl,
            )
            .map(drop)
            .map_err(std::io::Error::from)
        });
    }
}

/// A raw connection for bytes a client library would never send.
pub struct Raw {
    pub stream: std::net::TcpStream,
}

impl Raw {
    /// Connects, reading answers for at most 20 s.
    pub fn connect(addr: &str) -> Raw {
        let stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        Raw { stream }
    }

    /// Sends bytes as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(&mut self.stream, bytes).unwrap();
    }

    /// The next response frame's body, or `None` when the broker closed
    /// the connection.
    pub fn response(&mut self) -> Option<Vec<u8>> {
        let mut len = [0u8; 4];
        if std::io::Read::read_exact(&mut self.stream, &mut len).is_err() {
            return None;
        }
        let mut body = vec![0; u32::from_le_bytes(len) as usize];
        std::io::Read::read_exact(&mut self.stream, &mut body).ok()?;
        Some(body)
    }

    /// Sends a request and returns the response's error code and message.
    pub fn call(&mut self, frame: &[u8]) -> (klog::protocol::ErrorCode, String, Vec<u8>) {
        self.send(frame);
        let body = self.response().expect("a response");
        let mut r = klog::protocol::Reader::new(&body);
        let h = klog::protocol::decode_response_header(&mut r).unwrap();
        let rest = body[r.position()..].to_vec();
        (h.error, h.message, rest)
    }

    /// Whether the broker closed the connection (no further answer).
    pub fn closed(&mut self) -> bool {
        self.response().is_none()
    }
}

/// Produces `input` to `topic` on a broker with extra `args`.
pub fn produce_to(addr: &str, topic: &str, input: &str, args: &[&str]) {
    bin("klog-produce")
        .args(["-b", addr, "-t", topic, "-q"])
        .args(args)
        .write_stdin(input.to_string())
        .assert()
        .success();
}

/// Consumes all of `topic` from a broker with `-e` and extra `args`.
pub fn consume_from(addr: &str, topic: &str, args: &[&str]) -> String {
    let out = bin("klog-consume")
        .args(["-b", addr, "-t", topic, "-e", "-q"])
        .args(args)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// Consumes all of `topic` through a registry with `-e` and extra `args`.
pub fn consume_registry(registry: &str, topic: &str, args: &[&str]) -> String {
    let out = bin("klog-consume")
        .args(["--registry", registry, "-t", topic, "-e", "-q"])
        .args(args)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// Every record of `log` from its start, as (offset, value), read through
/// `Log::read` with every CRC checked against the format's limits. Each
/// read must begin with a whole batch (the byte budget may cut the last).
pub fn log_records(log: &klog::storage::log::Log) -> Vec<(u64, Vec<u8>)> {
    use klog::limits::{BATCH_BYTES_MAX, RECORD_BYTES_MAX_LIMIT};
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut offset = log.start_offset();
    let mut buf = Vec::new();
    while let Some(slice) = log.read(offset, 1 << 16).unwrap() {
        slice.read_into(&mut buf).unwrap();
        let mut at = 0;
        while let Ok(b) =
            klog::storage::record::Batch::decode(slice.format, &buf[at..], BATCH_BYTES_MAX)
        {
            for r in b.records(RECORD_BYTES_MAX_LIMIT) {
                let r = r.unwrap();
                if r.offset >= offset {
                    out.push((r.offset, r.value.to_vec()));
                }
            }
            at += b.total_bytes();
        }
        assert!(at > 0, "no whole batch at offset {offset}");
        offset = out.last().map_or(offset, |r| r.0 + 1);
    }
    out
}

/// A tmpfs mounted on a temporary directory, unmounted when dropped (also
/// when the test fails).
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Writes a file until the disk is full.
pub fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let block = vec![0xAB; 4096];
    loop {
        match file.write_all(&block) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
            Err(e) => panic!("filling the disk: {e}"),
        }
    }
}

/// Feeds a child's standard input the numbers 1, 2, 3... (a line each, 5
/// every 10 ms) from a thread of its own, counting what it fed, until
/// [`Feeder::finish`] or it is dropped.
pub struct Feeder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    fed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<std::process::ChildStdin>>,
}

impl Feeder {
    /// Starts feeding `stdin`.
    pub fn start(mut stdin: std::process::ChildStdin) -> Feeder {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let fed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let thread = {
            let (stop, fed) = (std::sync::Arc::clone(&stop), std::sync::Arc::clone(&fed));
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    if stdin.write_all(input(n + 1, n + 5).as_bytes()).is_err() {
                        break;
                    }
                    n += 5;
                    fed.store(n, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                stdin
            })
        };
        Feeder {
            stop,
            fed,
            thread: Some(thread),
        }
    }

    /// The numbers fed so far.
    pub fn fed(&self) -> u64 {
        self.fed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits (up to `bound`) until `n` more numbers were fed.
    pub fn feed_more(&self, n: u64, bound: std::time::Duration) {
        let until = self.fed() + n;
        eventually("the producer takes input", bound, || self.fed() >= until);
    }

    /// Stops feeding and closes the input (the child sees its end).
    pub fn finish(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            drop(thread.join().expect("the feeder"));
        }
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
