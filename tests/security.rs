//! Trust: TLS on both listeners (one-way and mutual), SASL PLAIN and
//! SCRAM with users from the registry, for klog's tools and for kcat.
//! Every refused client fails fast with a clear error and leaves the
//! broker serving.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::bin;
use common::kafka::{kcat_path, KafkaBroker};

/// A test PKI in a temporary directory: a CA, the broker's certificate
/// (localhost, 127.0.0.1), a client certificate (CN=alice), and a foreign
/// CA with a certificate of its own, as PEM files.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| std::fs::write(dir.path().join(name), pem).unwrap();
        for (prefix, cn) in [("", "klog test CA"), ("foreign-", "someone else's CA")] {
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.distinguished_name.push(DnType::CommonName, cn);
            let ca_key = KeyPair::generate().unwrap();
            let ca_cert = ca.self_signed(&ca_key).unwrap();
            let issuer = rcgen::Issuer::new(ca, ca_key);
            write(&format!("{prefix}ca.pem"), ca_cert.pem());
            let leaves: [(&str, Vec<String>, &str); 2] = [
                (
                    "broker",
                    vec!["localhost".into(), "127.0.0.1".into()],
                    "broker",
                ),
                ("alice", vec![], "alice"),
            ];
            for (name, sans, cn) in leaves {
                let mut params = CertificateParams::new(sans).unwrap();
                params.distinguished_name.push(DnType::CommonName, cn);
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, "Example");
                let key = KeyPair::generate().unwrap();
                let cert = params.signed_by(&key, &issuer).unwrap();
                write(&format!("{prefix}{name}.pem"), cert.pem());
                write(&format!("{prefix}{name}.key"), key.serialize_pem());
            }
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    /// The broker's TLS flags.
    fn broker_flags(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.path("broker.pem"),
            "--tls-key".into(),
            self.path("broker.key"),
        ]
    }
}

/// Runs a klog tool with a bound; its output.
fn run(name: &str, args: &[String], stdin: &str) -> std::process::Output {
    let started = Instant::now();
    let out = bin(name)
        .args(args)
        .write_stdin(stdin.to_string())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    eprintln!("{name} took {:?}", started.elapsed());
    out
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Produces and consumes `n` records with klog's tools and `extra`
/// properties; the records read back.
fn round_trip(addr: &str, topic: &str, n: u64, extra: &[String]) -> Vec<String> {
    let mut args = strings(&["-b", addr, "-t", topic, "-q"]);
    args.extend_from_slice(extra);
    let out = run("klog-produce", &args, &common::lines(n));
    assert!(out.status.success(), "produce: {}", stderr(&out));
    let mut args = strings(&["-b", addr, "-t", topic, "-e", "-q"]);
    args.extend_from_slice(extra);
    let out = run("klog-consume", &args, "");
    assert!(out.status.success(), "consume: {}", stderr(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A refused client fails within a few seconds (no retry loop until a
/// timeout) and says why.
fn refused(name: &str, args: &[String], words: &[&str]) {
    let started = Instant::now();
    let out = run(name, args, "1\n");
    let err = stderr(&out);
    assert!(!out.status.success(), "{name} {args:?} succeeded");
    assert!(
        words.iter().any(|w| err.contains(w)),
        "{name}: expected one of {words:?} in: {err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{name} took {:?} to fail: {err}",
        started.elapsed()
    );
}

#[test]
fn klog_tools_speak_tls_and_refused_clients_fail_fast() {
    let pki = Pki::new();
    let flags = pki.broker_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut broker = KafkaBroker::start(&flags);
    let tls = vec![
        "-X".to_string(),
        "security.protocol=ssl".into(),
        "-X".into(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ];
    assert_eq!(
        round_trip(broker.addr(), "t", 500, &tls),
        common::numbers(1, 500)
    );
    // A plaintext client on the TLS port; a client that trusts another CA.
    let plain = strings(&["-b", broker.addr(), "-t", "t", "-q"]);
    refused(
        "klog-produce",
        &plain,
        &["closed the connection", "reset", "broken pipe"],
    );
    let mut foreign = plain.clone();
    foreign.extend(strings(&["-X", "security.protocol=ssl"]));
    foreign.extend([
        "-X".to_string(),
        format!("ssl.ca.location={}", pki.path("foreign-ca.pem")),
    ]);
    refused("klog-produce", &foreign, &["UnknownIssuer", "certificate"]);
    broker.assert_running();
    assert!(
        broker
            .broker
            .log()
            .iter()
            .any(|l| l.contains("TLS handshake failed")),
        "{:?}",
        broker.broker.log()
    );
    // Still serving.
    assert_eq!(
        round_trip(broker.addr(), "t2", 10, &tls),
        common::numbers(1, 10)
    );
}

/// kcat's properties, for a kcat against `broker`.
fn kcat_props(pki: &Pki, protocol: &str, identity: Option<&str>) -> Vec<String> {
    let mut props = vec![
        format!("security.protocol={protocol}"),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ];
    if let Some(who) = identity {
        props.push(format!(
            "ssl.certificate.location={}",
            pki.path(&format!("{who}.pem"))
        ));
        props.push(format!(
            "ssl.key.location={}",
            pki.path(&format!("{who}.key"))
        ));
    }
    props
        .into_iter()
        .flat_map(|p| ["-X".to_string(), p])
        .collect()
}

#[test]
fn kcat_speaks_tls_and_mutual_tls_refuses_strangers() {
    let Some(kcat) = kcat_path() else { return };
    let pki = Pki::new();
    let mut flags = pki.broker_flags();
    flags.extend(["--tls-client-ca".to_string(), pki.path("ca.pem")]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut broker = KafkaBroker::start(&flags);
    let k = broker.kcat(&kcat);
    let alice = kcat_props(&pki, "ssl", Some("alice"));
    let alice: Vec<&str> = alice.iter().map(String::as_str).collect();
    k.produce("m", b"one\ntwo\n", &alice);
    assert_eq!(k.consume("m", &alice), "one\ntwo\n");
    // klog's tools with the same certificate, on the klog listener.
    let tools = kcat_props(&pki, "ssl", Some("alice"));
    assert_eq!(
        round_trip(broker.addr(), "n", 20, &tools),
        common::numbers(1, 20)
    );
    // No certificate, and one of another CA: refused.
    for who in [None, Some("foreign-alice")] {
        let props = kcat_props(&pki, "ssl", who);
        let mut args: Vec<&str> = props.iter().map(String::as_str).collect();
        args.extend(["-L", "-m", "5"]);
        let out = k.run(&args, b"");
        assert!(
            !out.status.success(),
            "kcat without a trusted certificate listed topics"
        );
        let mut tools = strings(&["-b", broker.addr(), "-t", "n", "-q"]);
        tools.extend(props);
        refused(
            "klog-produce",
            &tools,
            &["TLS", "certificate", "closed", "reset"],
        );
    }
    broker.assert_running();
}

/// A broker taking SASL, with users alice (a-secret) and bob (b-secret).
fn sasl_broker(pki: Option<&Pki>) -> KafkaBroker {
    let mut flags = vec![
        "--sasl-mechanisms".to_string(),
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".into(),
    ];
    if let Some(pki) = pki {
        flags.extend(pki.broker_flags());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = KafkaBroker::with_registry(&flags);
    for (user, password) in [("alice", "a-secret"), ("bob", "b-secret")] {
        let out = run(
            "klog-broker",
            &strings(&[
                "--registry",
                broker.registry.as_deref().unwrap(),
                "user",
                "add",
                user,
            ]),
            &format!("{password}\n"),
        );
        assert!(out.status.success(), "user add: {}", stderr(&out));
    }
    broker
}

fn sasl_props(protocol: &str, mechanism: &str, user: &str, password: &str) -> Vec<String> {
    [
        format!("security.protocol={protocol}"),
        format!("sasl.mechanisms={mechanism}"),
        format!("sasl.username={user}"),
        format!("sasl.password={password}"),
    ]
    .into_iter()
    .flat_map(|p| ["-X".to_string(), p])
    .collect()
}

#[test]
fn klog_tools_log_in_with_sasl_and_strangers_are_refused() {
    let mut broker = sasl_broker(None);
    for (i, mechanism) in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        .iter()
        .enumerate()
    {
        let props = sasl_props("sasl_plaintext", mechanism, "alice", "a-secret");
        let topic = format!("s{i}");
        assert_eq!(
            round_trip(broker.addr(), &topic, 50, &props),
            common::numbers(1, 50)
        );
    }
    let base = strings(&["-b", broker.addr(), "-t", "s0", "-q"]);
    let with = |props: Vec<String>| [base.clone(), props].concat();
    refused(
        "klog-produce",
        &with(sasl_props(
            "sasl_plaintext",
            "SCRAM-SHA-512",
            "alice",
            "b-secret",
        )),
        &["sasl_authentication_failed", "Authentication failed"],
    );
    refused(
        "klog-produce",
        &with(sasl_props("sasl_plaintext", "PLAIN", "carol", "a-secret")),
        &["sasl_authentication_failed", "Authentication failed"],
    );
    refused(
        "klog-produce",
        &base,
        &["illegal_sasl_state", "requires SASL"],
    );
    // A user removed cannot log in any more.
    let registry = broker.registry.clone().unwrap();
    let out = run(
        "klog-broker",
        &strings(&["--registry", &registry, "user", "list"]),
        "",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "alice\tSCRAM-SHA-256,SCRAM-SHA-512\nbob\tSCRAM-SHA-256,SCRAM-SHA-512\n"
    );
    let out = run(
        "klog-broker",
        &strings(&["--registry", &registry, "user", "remove", "bob"]),
        "",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    refused(
        "klog-produce",
        &with(sasl_props(
            "sasl_plaintext",
            "SCRAM-SHA-256",
            "bob",
            "b-secret",
        )),
        &["sasl_authentication_failed"],
    );
    broker.assert_running();
    // The registry holds no password: only salted SCRAM keys.
    let stored =
        std::fs::read_to_string(Path::new(&registry).join("config/users/alice.json")).unwrap();
    assert!(
        !stored.contains("a-secret") && stored.contains("stored_key"),
        "{stored}"
    );
}

#[test]
fn kcat_logs_in_with_scram_and_plain_over_tls() {
    let Some(kcat) = kcat_path() else { return };
    let pki = Pki::new();
    let mut broker = sasl_broker(Some(&pki));
    let k = broker.kcat(&kcat);
    for (i, mechanism) in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
        .iter()
        .enumerate()
    {
        let mut props = sasl_props("sasl_ssl", mechanism, "alice", "a-secret");
        props.extend([
            "-X".to_string(),
            format!("ssl.ca.location={}", pki.path("ca.pem")),
        ]);
        let props: Vec<&str> = props.iter().map(String::as_str).collect();
        let topic = format!("k{i}");
        k.produce(&topic, b"a\nb\nc\n", &props);
        assert_eq!(k.consume(&topic, &props), "a\nb\nc\n", "{mechanism}");
    }
    let mut wrong = sasl_props("sasl_ssl", "SCRAM-SHA-512", "alice", "nope");
    wrong.extend([
        "-X".to_string(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ]);
    let mut args: Vec<&str> = wrong.iter().map(String::as_str).collect();
    args.extend(["-L", "-m", "5"]);
    let started = Instant::now();
    let out = k.run(&args, b"");
    assert!(
        !out.status.success(),
        "kcat with a wrong password listed topics"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let err = stderr(&out);
    assert!(
        err.contains("Authentication failed") || err.contains("SASL"),
        "{err}"
    );
    broker.assert_running();
    let _unused: Option<PathBuf> = None;
}
