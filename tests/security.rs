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
            // One attribute whose value reads like alice's whole subject
            // (O=Example,CN=alice): a principal must not be forged so.
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            // Without rcgen's default subject (a common name of its own).
            params.distinguished_name = rcgen::DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::OrganizationName, "Example,CN=alice");
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &issuer).unwrap();
            write(&format!("{prefix}forger.pem"), cert.pem());
            write(&format!("{prefix}forger.key"), key.serialize_pem());
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
    for _ in 0..3 {
        refused(
            "klog-produce",
            &plain,
            &["the broker answered in TLS: give -X security.protocol=ssl"],
        );
    }
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

/// A broker that asks for client certificates refuses a tool without one,
/// or with one of another CA, and the tool says what TLS said (the alert),
/// not "broken pipe" or "connection reset": the broker lets the alert
/// reach the client before it closes, and the client's pump hands it on.
#[test]
fn a_client_refused_for_its_certificate_is_told_why() {
    let pki = Pki::new();
    let mut flags = pki.broker_flags();
    flags.extend(["--tls-client-ca".to_string(), pki.path("ca.pem")]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut broker = KafkaBroker::start(&flags);
    let mut none = strings(&["-b", broker.addr(), "-t", "t", "-q"]);
    none.extend(strings(&["-X", "security.protocol=ssl"]));
    none.extend([
        "-X".to_string(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ]);
    for _ in 0..3 {
        refused(
            "klog-produce",
            &none,
            &["TLS: received fatal alert: CertificateRequired"],
        );
        let mut consume = none.clone();
        consume.push("-e".into());
        refused(
            "klog-consume",
            &consume,
            &["TLS: received fatal alert: CertificateRequired"],
        );
    }
    let mut foreign = none.clone();
    foreign.extend([
        "-X".to_string(),
        format!("ssl.certificate.location={}", pki.path("foreign-alice.pem")),
        "-X".to_string(),
        format!("ssl.key.location={}", pki.path("foreign-alice.key")),
    ]);
    refused(
        "klog-produce",
        &foreign,
        &["TLS: received fatal alert: UnknownCA"],
    );
    broker.assert_running();
}

/// A client that streams a megabyte right behind its handshake, as TLS
/// 1.3 allows before the server has checked its certificate, still reads
/// the server's alert, not the reset or broken pipe that follow it.
#[test]
fn the_alert_of_a_refused_handshake_survives_a_client_that_keeps_sending() {
    use std::io::{Read, Write};
    let pki = Pki::new();
    let mut flags = pki.broker_flags();
    flags.extend(["--tls-client-ca".to_string(), pki.path("ca.pem")]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut broker = KafkaBroker::start(&flags);
    let ca = PathBuf::from(pki.path("ca.pem"));
    let tls = klog::net::tls::ClientTls::load(Some(&ca), None).unwrap();
    for _ in 0..10 {
        let tcp = std::net::TcpStream::connect(broker.addr()).unwrap();
        let stream = tls.connect(tcp, "localhost", &mut || Ok(())).unwrap();
        let mut writer = stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let chunk = vec![0x55u8; 64 * 1024];
            for _ in 0..16 {
                if writer.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 64];
        let got = (&stream).read(&mut buf);
        let err = got.expect_err("the broker answers nothing but its alert");
        assert!(
            err.to_string().contains("CertificateRequired"),
            "{err} ({:?})",
            err.kind()
        );
        drop(stream);
        sender.join().unwrap();
    }
    broker.assert_running();
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
            &["TLS", "certificate", "closed", "reset", "Broken pipe"],
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

/// `klog-broker --registry R ARGS...`, which must succeed.
fn admin(registry: &str, args: &[&str]) {
    let mut all = strings(&["--registry", registry]);
    all.extend(strings(args));
    let out = run("klog-broker", &all, "");
    assert!(
        out.status.success(),
        "klog-broker {args:?}: {}",
        stderr(&out)
    );
}

/// A broker with SASL and --authorize (admin a super user); alice may
/// write and read topic t and read group g, bob may read topics prefixed
/// logs-, and carol, dave and erin as said below.
fn authorizing_broker() -> KafkaBroker {
    let flags = [
        "--sasl-mechanisms",
        "PLAIN,SCRAM-SHA-512",
        "--authorize",
        "--super-users",
        "User:admin",
    ];
    let broker = KafkaBroker::with_registry(&flags);
    let registry = broker.registry.clone().unwrap();
    let users = [
        ("alice", "a-secret"),
        ("bob", "b-secret"),
        ("admin", "x-secret"),
        ("carol", "c-secret"),
        ("dave", "d-secret"),
        ("erin", "e-secret"),
    ];
    for (user, password) in users {
        add_user(&registry, user, password);
    }
    // carol may only describe t; dave may do all but write; erin may
    // write topics app-* but create none.
    let rules: [&[&str]; 4] = [
        &[
            "--allow",
            "User:carol",
            "--operation",
            "describe",
            "--topic",
            "t",
        ],
        &["--allow", "User:dave", "--operation", "all", "--topic", "t"],
        &[
            "--deny",
            "User:dave",
            "--operation",
            "write",
            "--topic",
            "t",
        ],
        &[
            "--allow",
            "User:erin",
            "--operation",
            "write",
            "--topic",
            "app-",
            "--prefixed",
        ],
    ];
    for rule in rules {
        admin(&registry, &[&["acl", "add"][..], rule].concat());
    }
    for op in ["write", "read"] {
        admin(
            &registry,
            &[
                "acl",
                "add",
                "--allow",
                "User:alice",
                "--operation",
                op,
                "--topic",
                "t",
            ],
        );
    }
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:alice",
            "--operation",
            "read",
            "--group",
            "g",
        ],
    );
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:bob",
            "--operation",
            "read",
            "--topic",
            "logs-",
            "--prefixed",
        ],
    );
    // ACLs count within a second (the broker reloads them twice a second).
    std::thread::sleep(Duration::from_millis(1000));
    broker
}

fn login(user: &str, password: &str) -> Vec<String> {
    sasl_props("sasl_plaintext", "SCRAM-SHA-512", user, password)
}

#[test]
fn acls_allow_and_deny_klog_tools() {
    let mut broker = authorizing_broker();
    let addr = broker.addr().to_string();
    let (alice, bob, root) = (
        login("alice", "a-secret"),
        login("bob", "b-secret"),
        login("admin", "x-secret"),
    );
    // Only a super user may create (alice has no create).
    let with = |topic: &str, who: &[String]| {
        [strings(&["-b", &addr, "-t", topic, "-q"]), who.to_vec()].concat()
    };
    refused(
        "klog-produce",
        &with("t", &alice),
        &["authorization_failed"],
    );
    assert_eq!(round_trip(&addr, "t", 20, &root), common::numbers(1, 20));
    // alice writes and reads t; bob does neither.
    let out = run("klog-produce", &with("t", &alice), &common::input(21, 30));
    assert!(
        out.status.success(),
        "{} {:?}",
        stderr(&out),
        broker.broker.log()
    );
    let mut consume = with("t", &alice);
    consume.push("-e".into());
    let out = run("klog-consume", &consume, "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 30);
    refused(
        "klog-produce",
        &with("t", &bob),
        &["authorization_failed", "may not write"],
    );
    let mut bob_reads = with("t", &bob);
    bob_reads.push("-e".into());
    refused(
        "klog-consume",
        &bob_reads,
        &["authorization_failed", "may not read"],
    );
    // bob's listing shows only what he may describe.
    assert_eq!(
        round_trip(&addr, "logs-web", 3, &root),
        common::numbers(1, 3)
    );
    let mut list = strings(&["-b", &addr, "-L"]);
    list.extend(bob.clone());
    let out = run("klog-consume", &list, "");
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        listing.contains("logs-web") && !listing.contains("\"t\"") && !listing.contains(" t "),
        "{listing}"
    );
    broker.assert_running();
}

#[test]
fn acls_allow_and_deny_kcat_and_groups() {
    let Some(kcat) = kcat_path() else { return };
    let mut broker = authorizing_broker();
    let k = broker.kcat(&kcat);
    let (alice, bob, root) = (
        kcat_login("alice", "a-secret"),
        kcat_login("bob", "b-secret"),
        kcat_login("admin", "x-secret"),
    );
    k.produce("t", b"one\ntwo\n", &refs(&root));
    k.produce("t", b"three\n", &refs(&alice));
    assert_eq!(k.consume("t", &refs(&alice)), "one\ntwo\nthree\n");
    // bob may not write t: kcat reports the topic's authorization error.
    let mut args = vec!["-P", "-t", "t", "-X", "message.timeout.ms=5000"];
    args.extend(refs(&bob));
    let out = k.run(&args, b"x\n");
    let err = stderr(&out);
    assert!(
        !out.status.success() || err.contains("uthoriz"),
        "bob wrote t: {err}"
    );
    assert!(err.contains("uthoriz"), "{err}");
    // alice consumes in group g; bob may not join it.
    let mut args = vec!["-G", "g", "t", "-e", "-X", "auto.offset.reset=earliest"];
    args.extend(refs(&alice));
    let group = k.spawn(&args);
    let got = group.take_lines(3, Duration::from_secs(30));
    assert_eq!(got, ["one", "two", "three"]);
    drop(group);
    let mut args = vec!["-G", "g", "t", "-e"];
    args.extend(refs(&bob));
    let out = k.run(&args, b"");
    let err = stderr(&out);
    assert!(err.contains("uthoriz"), "bob joined g: {err}");
    broker.assert_running();
}

#[test]
fn a_new_acl_counts_on_another_broker_within_a_second() {
    let broker = authorizing_broker();
    let registry = broker.registry.clone().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let other = common::BrokerProc::start(
        dir.path(),
        &[
            "--registry",
            &registry,
            "--sasl-mechanisms",
            "SCRAM-SHA-512",
            "--authorize",
            "--super-users",
            "User:admin",
        ],
    );
    // Producers go where the registry placed the topic's partitions,
    // on either broker: each reads the ACLs on its own.
    let bob = login("bob", "b-secret");
    let root = login("admin", "x-secret");
    let on_other = |who: &[String]| {
        [
            strings(&["--registry", &registry, "-t", "shared", "-q"]),
            who.to_vec(),
        ]
        .concat()
    };
    let out = run("klog-produce", &on_other(&root), "1\n");
    assert!(out.status.success(), "{}", stderr(&out));
    refused("klog-produce", &on_other(&bob), &["authorization_failed"]);
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:bob",
            "--operation",
            "write",
            "--topic",
            "shared",
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    let out = run("klog-produce", &on_other(&bob), "3\n");
    assert!(
        out.status.success(),
        "the new ACL did not count within a second: {}",
        stderr(&out)
    );
    // And removed, it stops counting.
    admin(
        &registry,
        &[
            "acl",
            "remove",
            "--allow",
            "User:bob",
            "--operation",
            "write",
            "--topic",
            "shared",
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    refused("klog-produce", &on_other(&bob), &["authorization_failed"]);
    let out = run(
        "klog-broker",
        &strings(&["--registry", &registry, "acl", "list"]),
        "",
    );
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        listed.contains("topic\tt\tliteral\tUser:alice\twrite\tallow"),
        "{listed}"
    );
    assert!(
        listed.contains("topic\tlogs-\tprefixed\tUser:bob\tread\tallow"),
        "{listed}"
    );
    drop(other);
    drop(broker);
}

#[test]
fn a_client_that_claims_to_be_a_broker_is_refused_a_follower_fetch() {
    use klog::protocol::{self, ErrorCode, FetchPartition, FetchWant};
    let broker = sasl_broker(None);
    let mut raw = common::Raw::connect(broker.addr());
    let mut frame = Vec::new();
    protocol::sasl_handshake_request(&mut frame, 1, "PLAIN");
    assert_eq!(raw.call(&frame).0, ErrorCode::None);
    protocol::sasl_authenticate_request(&mut frame, 2, b"\0alice\0a-secret");
    assert_eq!(raw.call(&frame).0, ErrorCode::None);
    let want = FetchWant {
        wait_ms_max: 0,
        bytes_min: 0,
        response_bytes_max: 1 << 20,
    };
    let part = FetchPartition {
        topic: "t".into(),
        partition: 0,
        offset: 0,
        bytes_max: 1 << 20,
        leader_epoch: Some(0),
    };
    // A follower's fetch from a user that is no registered broker.
    protocol::replica_fetch_request(&mut frame, 3, "broker-1", want, std::slice::from_ref(&part));
    let (code, message, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::AuthorizationFailed, "{message}");
    assert!(message.contains("claims to be broker"), "{message}");
    // A consumer's fetch on the same connection is served.
    let consumer = FetchPartition {
        leader_epoch: None,
        ..part
    };
    protocol::fetch_request(&mut frame, 4, want, &[consumer]);
    let (code, message, _) = raw.call(&frame);
    assert_ne!(code, ErrorCode::AuthorizationFailed, "{message}");
}

fn refs(p: &[String]) -> Vec<&str> {
    p.iter().map(String::as_str).collect()
}

/// Three brokers replicating over TLS, each logged in to the others with
/// SCRAM as user `broker` (cluster_action by ACL); acks=all needs the
/// followers, so every record acknowledged crossed that way.
#[test]
fn replicas_fetch_from_each_other_over_tls_with_their_own_login() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry").to_str().unwrap().to_string();
    let password_file = dir.path().join("broker.password");
    std::fs::write(&password_file, "b-pass\n").unwrap();
    for (user, password) in [("broker", "b-pass"), ("admin", "x-secret")] {
        add_user(&registry, user, password);
    }
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:broker",
            "--operation",
            "cluster_action",
            "--cluster",
        ],
    );
    let mut flags = strings(&[
        "--registry",
        &registry,
        "--replication-factor",
        "3",
        "--min-insync-replicas",
        "3",
        "--sasl-mechanisms",
        "SCRAM-SHA-512",
        "--sasl-username",
        "broker",
        "--sasl-password-file",
        password_file.to_str().unwrap(),
        "--authorize",
        "--super-users",
        "User:admin",
        "--tls-ca",
        &pki.path("ca.pem"),
    ]);
    flags.extend(pki.broker_flags());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let data: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let brokers: Vec<common::BrokerProc> = data
        .iter()
        .map(|d| common::BrokerProc::start(d.path(), &flags))
        .collect();
    let mut props = sasl_props("sasl_ssl", "SCRAM-SHA-512", "admin", "x-secret");
    props.extend([
        "-X".to_string(),
        format!("ssl.ca.location={}", pki.path("ca.pem")),
    ]);
    let mut produce = strings(&["--registry", &registry, "-t", "r", "-q"]);
    produce.extend(props.clone());
    let out = run("klog-produce", &produce, &common::lines(300));
    assert!(
        out.status.success(),
        "acks=all over a replicated cluster: {} {:?}",
        stderr(&out),
        brokers.iter().map(|b| b.log()).collect::<Vec<_>>()
    );
    // klog-dump asks each partition's leader for its high watermark, the
    // same way; without the properties, it cannot.
    let mut dump = strings(&["--registry", &registry]);
    dump.extend(props.clone());
    let out = run("klog-dump", &dump, "");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && high_watermark_of_r(&shown).as_deref() == Some("300"),
        "{shown} {}",
        stderr(&out)
    );
    let out = run("klog-dump", &strings(&["--registry", &registry]), "");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let cell = high_watermark_of_r(&shown).unwrap_or_default();
    assert!(cell.starts_with("? ("), "{shown} {}", stderr(&out));
    let mut consume = strings(&["--registry", &registry, "-t", "r", "-e", "-q"]);
    consume.extend(props);
    let out = run("klog-consume", &consume, "");
    assert!(out.status.success(), "{}", stderr(&out));
    let mut got: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, (1..=300).collect::<Vec<_>>());
    for b in &brokers {
        let refused: Vec<String> = b
            .log()
            .into_iter()
            .filter(|l| l.contains("claims to be") || l.contains("lacks cluster_action"))
            .collect();
        assert!(refused.is_empty(), "{refused:?}");
    }
}

/// The last cell of topic `r`'s row in `klog-dump --registry`'s table of
/// replication states: its partition's high watermark, or `? (why)`.
fn high_watermark_of_r(shown: &str) -> Option<String> {
    let row = shown.lines().find(|l| l.starts_with("│ r "))?;
    let cell = row.trim_end().trim_end_matches('│').rsplit('┆').next()?;
    Some(cell.trim().to_string())
}

/// A client that never finishes its TLS handshake holds the broker
/// neither past the handshake's bound nor at a stop: SIGTERM ends the
/// broker in well under the 10 s a handshake may take.
#[test]
fn a_silent_tls_client_does_not_hold_up_a_stop() {
    let pki = Pki::new();
    let flags = pki.broker_flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut broker = common::BrokerProc::start(dir.path(), &flags);
    let silent: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(&broker.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let status = broker.terminate();
    assert!(status.success(), "{status:?}: {:?}", broker.log());
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the stop took {:?}",
        started.elapsed()
    );
    drop(silent);
}

/// Runs tests/kafka/client.py with `lib` and `args`, with the security
/// properties `props` (kcat's names) in KLOG_SECURITY; its stdout.
fn python_client(python: &Path, props: &[(&str, String)], args: &[&str]) -> String {
    let json: serde_json::Map<String, serde_json::Value> = props
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
        .collect();
    let mut command = std::process::Command::new(python);
    command
        .arg(common::kafka::script("client.py"))
        .args(args)
        .env("KLOG_SECURITY", serde_json::Value::Object(json).to_string());
    let out = common::kafka::run_bounded(command, b"", Duration::from_secs(90));
    common::kafka::assert_ok(&format!("client.py {}", args.join(" ")), &out);
    String::from_utf8(out.stdout).unwrap()
}

/// confluent-kafka and kafka-python over SASL_SSL with SCRAM-SHA-512
/// (produce, then consume in a group that commits), and confluent-kafka
/// with a client certificate (kcat's tests refuse the wrong ones: the
/// Python clients retry them until their own timeout).
#[test]
fn python_clients_speak_sasl_ssl_and_mutual_tls() {
    let Some(python) = common::kafka::python() else {
        return;
    };
    let pki = Pki::new();
    let mut broker = sasl_broker(Some(&pki));
    let sasl = |password: &str| {
        vec![
            ("security.protocol", "SASL_SSL".to_string()),
            ("ssl.ca.location", pki.path("ca.pem")),
            ("sasl.mechanisms", "SCRAM-SHA-512".to_string()),
            ("sasl.username", "alice".to_string()),
            ("sasl.password", password.to_string()),
        ]
    };
    for (i, lib) in ["confluent-kafka", "kafka-python"].iter().enumerate() {
        let topic = format!("py{i}");
        python_client(
            &python,
            &sasl("a-secret"),
            &[lib, "produce", &broker.kafka, &topic, "1", "20"],
        );
        let got = python_client(
            &python,
            &sasl("a-secret"),
            &[lib, "consume", &broker.kafka, &topic, "20", "pyg"],
        );
        assert_eq!(got.lines().count(), 20, "{lib}: {got}");
    }
    broker.assert_running();
    drop(broker);
    // Mutual TLS, no SASL.
    let mut flags = pki.broker_flags();
    flags.extend(["--tls-client-ca".to_string(), pki.path("ca.pem")]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = KafkaBroker::start(&flags);
    let mtls = vec![
        ("security.protocol", "SSL".to_string()),
        ("ssl.ca.location", pki.path("ca.pem")),
        ("ssl.certificate.location", pki.path("alice.pem")),
        ("ssl.key.location", pki.path("alice.key")),
    ];
    python_client(
        &python,
        &mtls,
        &["confluent-kafka", "produce", &broker.kafka, "m", "1", "5"],
    );
    let got = python_client(
        &python,
        &mtls,
        &["confluent-kafka", "consume", &broker.kafka, "m", "5"],
    );
    assert_eq!(got.lines().count(), 5, "{got}");
}

/// What the review found no test for: each ACL check on its own, a deny
/// of one operation, and a produce that would create a topic.
#[test]
fn each_acl_check_holds_on_its_own() {
    let mut broker = authorizing_broker();
    let addr = broker.addr().to_string();
    let root = login("admin", "x-secret");
    assert_eq!(round_trip(&addr, "t", 5, &root), common::numbers(1, 5));
    assert_eq!(
        round_trip(&addr, "logs-web", 2, &root),
        common::numbers(1, 2)
    );
    let with = |topic: &str, who: &[String], extra: &[&str]| {
        [
            strings(&["-b", &addr, "-t", topic, "-q"]),
            who.to_vec(),
            strings(extra),
        ]
        .concat()
    };
    // carol may describe t, so her requests pass metadata: write and read
    // are each refused by their own check.
    let carol = login("carol", "c-secret");
    let plain = ["--no-idempotence"];
    refused(
        "klog-produce",
        &with("t", &carol, &plain),
        &["may not write"],
    );
    // Idempotent (the default), the producer id is refused first: it is
    // handed only to a principal that may write somewhere.
    refused(
        "klog-produce",
        &with("t", &carol, &[]),
        &["may write to no topic"],
    );
    refused(
        "klog-consume",
        &with("t", &carol, &["-e"]),
        &["may not read"],
    );
    // dave may do all but write.
    let dave = login("dave", "d-secret");
    refused(
        "klog-produce",
        &with("t", &dave, &plain),
        &["may not write"],
    );
    let out = run("klog-consume", &with("t", &dave, &["-e"]), "");
    assert!(
        out.status.success(),
        "a deny of write denied a read: {}",
        stderr(&out)
    );
    // erin may write app-* but create nothing: her produce creates no topic.
    let erin = login("erin", "e-secret");
    refused(
        "klog-produce",
        &with("app-x", &erin, &[]),
        &["may not create"],
    );
    let registry = broker.registry.clone().unwrap();
    let placed = Path::new(&registry).join("topics/app-x.json");
    assert!(!placed.exists() && !broker.data_dir().join("app-x-0").exists());
    broker.assert_running();
}

#[test]
fn each_kafka_acl_check_holds_on_its_own() {
    let Some(kcat) = kcat_path() else { return };
    let mut broker = authorizing_broker();
    let k = broker.kcat(&kcat);
    let root = kcat_login("admin", "x-secret");
    k.produce("t", b"one\n", &refs(&root));
    k.produce("logs-web", b"w\n", &refs(&root));
    let fails = |who: &[String], args: &[&str], stdin: &[u8]| {
        let mut all = args.to_vec();
        all.extend(refs(who));
        let out = k.run(&all, stdin);
        let err = stderr(&out);
        assert!(
            err.contains("uthoriz") || !out.status.success(),
            "{args:?}: {err}"
        );
        err
    };
    // No credentials at all: nothing is served.
    let out = k.run(&["-L", "-m", "5"], b"");
    assert!(!out.status.success(), "kcat without a login listed topics");
    // carol passes metadata (describe) and is refused at produce and fetch.
    let carol = kcat_login("carol", "c-secret");
    let err = fails(
        &carol,
        &["-P", "-t", "t", "-X", "message.timeout.ms=5000"],
        b"x\n",
    );
    assert!(err.contains("uthoriz"), "{err}");
    let err = fails(&carol, &["-C", "-t", "t", "-e"], b"");
    assert!(err.contains("uthoriz"), "{err}");
    // bob lists only what he may describe, and may not join group g2
    // though he may read its topic.
    let bob = kcat_login("bob", "b-secret");
    let mut args = vec!["-L"];
    args.extend(refs(&bob));
    let listing = String::from_utf8(k.ok(&args, b"")).unwrap();
    assert!(
        listing.contains("logs-web") && !listing.contains("\"t\""),
        "{listing}"
    );
    let err = fails(&bob, &["-G", "g2", "logs-web", "-e"], b"");
    assert!(err.contains("roup authoriz"), "{err}");
    // erin's produce to a missing topic creates nothing.
    let erin = kcat_login("erin", "e-secret");
    fails(
        &erin,
        &["-P", "-t", "app-y", "-X", "message.timeout.ms=3000"],
        b"x\n",
    );
    assert!(!broker.data_dir().join("app-y-0").exists());
    broker.assert_running();
}

/// Mutual TLS with --authorize: a certificate's principal is its subject,
/// escaped (a forger whose one attribute reads like alice's whole subject
/// is not alice), and a super user's principal may hold commas
/// (`--super-users` is separated by `;`, as Kafka's super.users).
#[test]
fn certificate_principals_cannot_be_forged_and_may_be_super_users() {
    let pki = Pki::new();
    let mut flags = pki.broker_flags();
    flags.extend(strings(&[
        "--tls-client-ca",
        &pki.path("ca.pem"),
        "--authorize",
        "--super-users",
        "User:O=Example,CN=broker;User:admin",
    ]));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let broker = KafkaBroker::with_registry(&flags);
    let registry = broker.registry.clone().unwrap();
    for op in ["write", "read"] {
        admin(
            &registry,
            &[
                "acl",
                "add",
                "--allow",
                "User:O=Example,CN=alice",
                "--operation",
                op,
                "--topic",
                "secret",
            ],
        );
    }
    std::thread::sleep(Duration::from_millis(1000));
    let as_who = |who: &str| kcat_props(&pki, "ssl", Some(who));
    // The broker's own certificate is a super user: it creates the topic.
    assert_eq!(
        round_trip(broker.addr(), "secret", 3, &as_who("broker")),
        common::numbers(1, 3)
    );
    assert_eq!(
        round_trip(broker.addr(), "secret", 0, &as_who("alice")).len(),
        3
    );
    let mut forged = strings(&["-b", broker.addr(), "-t", "secret", "-e", "-q"]);
    forged.extend(as_who("forger"));
    refused("klog-consume", &forged, &["authorization_failed"]);
}

/// OffsetFetch v8 (several groups a request, as librdkafka 2.x and Java
/// send it) checks each group on its own: alice may describe group g and
/// is answered its offsets, while g2 in the same request is refused
/// GROUP_AUTHORIZATION_FAILED with nothing of its own.
#[test]
fn offset_fetch_v8_checks_each_group() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    let Some(kcat) = kcat_path() else { return };
    let broker = authorizing_broker();
    let k = broker.kcat(&kcat);
    let root = kcat_login("admin", "x-secret");
    k.produce("t", b"one\ntwo\n", &refs(&root));
    for group in ["g", "g2"] {
        let mut args = vec!["-G", group, "-X", "auto.offset.reset=earliest", "t", "-e"];
        args.extend(refs(&root));
        k.ok(&args, b"");
    }
    let mut kafka = kafka_login(&broker.kafka, "alice", "a-secret");
    let group = |id: &str| {
        km::offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(km::GroupId(StrBytes::from_string(id.to_string())))
            .with_topics(None)
    };
    let r = km::OffsetFetchRequest::default().with_groups(vec![group("g"), group("g2")]);
    let got: km::OffsetFetchResponse = common::kafka::call_flexible(&mut kafka, (9, 8), &r);
    let groups: Vec<(String, Vec<_>, i16)> = got
        .groups
        .iter()
        .map(|g| {
            let offsets = (g.topics.iter())
                .flat_map(|t| {
                    (t.partitions.iter())
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
                })
                .collect();
            (g.group_id.0.to_string(), offsets, g.error_code)
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("g".to_string(), vec![("t".to_string(), 0, 2)], 0),
            ("g2".to_string(), vec![], 30),
        ]
    );
}

/// Writes the Kafka frame `request` on `kafka` and reads its answer's
/// frame (after the length).
fn kafka_answer(kafka: &mut std::net::TcpStream, request: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    kafka.write_all(request).unwrap();
    let mut len = [0u8; 4];
    kafka.read_exact(&mut len).unwrap();
    let mut body = vec![0; u32::from_be_bytes(len) as usize];
    kafka.read_exact(&mut body).unwrap();
    body
}

/// A connection to the Kafka listener `addr`, logged in as `user` with
/// PLAIN (SaslHandshake v1, SaslAuthenticate v0).
fn kafka_login(addr: &str, user: &str, password: &str) -> std::net::TcpStream {
    let mut kafka = std::net::TcpStream::connect(addr).unwrap();
    kafka
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = |request: &[u8]| kafka_answer(&mut kafka, request);
    let handshake = [&[0, 5][..], b"PLAIN"].concat();
    answer(&common::kafka::frame(17, 1, 1, &handshake));
    let plain = format!("\0{user}\0{password}");
    let auth = [&(plain.len() as i32).to_be_bytes()[..], plain.as_bytes()].concat();
    let authenticated = answer(&common::kafka::frame(36, 0, 2, &auth));
    assert_eq!(&authenticated[4..6], &[0, 0], "{user} logs in");
    kafka
}

/// A broker's configs are the cluster's: describing or changing them
/// (the cluster default, "", or one broker) needs describe or alter on
/// the cluster; alice, who may read and write a topic, is refused
/// CLUSTER_AUTHORIZATION_FAILED and changes nothing; the super user may.
#[test]
fn broker_configs_need_the_cluster_acls() {
    use kafka_protocol::messages as km;
    use kafka_protocol::protocol::StrBytes;
    use km::incremental_alter_configs_request as q;
    let broker = authorizing_broker();
    let str = |s: &str| StrBytes::from_string(s.to_string());
    let alter = |user: &str, password: &str| {
        let change = q::AlterableConfig::default()
            .with_name(str("log.retention.ms"))
            .with_config_operation(0)
            .with_value(Some(str("60000")));
        let r = km::IncrementalAlterConfigsRequest::default().with_resources(vec![
            q::AlterConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(str(""))
                .with_configs(vec![change]),
        ]);
        let mut kafka = kafka_login(&broker.kafka, user, password);
        let answer: km::IncrementalAlterConfigsResponse =
            common::kafka::call_flexible(&mut kafka, (44, 1), &r);
        answer.responses[0].error_code
    };
    let describe = |user: &str, password: &str| {
        use km::describe_configs_request as d;
        let r = km::DescribeConfigsRequest::default().with_resources(vec![
            d::DescribeConfigsResource::default()
                .with_resource_type(4)
                .with_resource_name(str(""))
                .with_configuration_keys(Some(vec![str("log.retention.ms")])),
        ]);
        let mut kafka = kafka_login(&broker.kafka, user, password);
        let answer: km::DescribeConfigsResponse =
            common::kafka::call_flexible(&mut kafka, (32, 4), &r);
        let found = &answer.results[0];
        let value = found.configs.first().and_then(|c| c.value.as_ref());
        (found.error_code, value.map(|v| v.to_string()))
    };
    assert_eq!(alter("alice", "a-secret"), 31);
    assert_eq!(describe("alice", "a-secret").0, 31);
    let before = describe("admin", "x-secret");
    assert_eq!(before.0, 0);
    assert_ne!(before.1.as_deref(), Some("60000"), "alice changed nothing");
    assert_eq!(alter("admin", "x-secret"), 0);
    assert_eq!(
        describe("admin", "x-secret"),
        (0, Some("60000".to_string()))
    );
}

/// A raw klog connection logged in with PLAIN.
fn raw_login(addr: &str, user: &str, password: &str) -> common::Raw {
    use klog::protocol::{self, ErrorCode};
    let mut raw = common::Raw::connect(addr);
    let mut frame = Vec::new();
    protocol::sasl_handshake_request(&mut frame, 1, "PLAIN");
    assert_eq!(raw.call(&frame).0, ErrorCode::None);
    let message = format!("\0{user}\0{password}");
    protocol::sasl_authenticate_request(&mut frame, 2, message.as_bytes());
    assert_eq!(raw.call(&frame).0, ErrorCode::None);
    raw
}

/// A produce request itself (not klog-produce, which asks create_topic
/// first) to a missing topic creates it only with create: erin may write
/// app-* but creates nothing, whatever her batch holds.
#[test]
fn a_produce_with_write_alone_creates_no_topic() {
    use klog::protocol::{self, ErrorCode};
    let broker = authorizing_broker();
    let mut raw = raw_login(broker.addr(), "erin", "e-secret");
    let mut frame = Vec::new();
    let mut b = klog::storage::record::BatchBuilder::new();
    b.push(1_700_000_000_000, None, &[], b"x");
    let batch = b.finish().to_vec();
    for (topic, records) in [("app-good", &batch[..]), ("app-garbage", &b"garbage"[..])] {
        protocol::produce_request(&mut frame, 3, 1, 1000, topic, 0, records);
        let (code, message, _) = raw.call(&frame);
        assert_eq!(code, ErrorCode::AuthorizationFailed, "{topic}: {message}");
        assert!(message.contains("may not create"), "{message}");
    }
    // And Kafka's produce (SaslHandshake, SaslAuthenticate, Produce v3).
    let mut kafka = kafka_login(&broker.kafka, "erin", "e-secret");
    let mut answer = |request: &[u8]| kafka_answer(&mut kafka, request);
    let body = common::kafka::produce_v3_body("app-kafka", 1, 1000, &batch);
    let produced = answer(&common::kafka::frame(0, 3, 3, &body));
    // correlation id, topics 1, "app-kafka", partitions 1, index 0, error.
    let at = 4 + 4 + 2 + "app-kafka".len() + 4 + 4;
    let error = i16::from_be_bytes([produced[at], produced[at + 1]]);
    assert_eq!(
        error, 3,
        "UNKNOWN_TOPIC_OR_PARTITION, not a created topic: {produced:?}"
    );
    let registry = broker.registry.clone().unwrap();
    for topic in ["app-good", "app-garbage", "app-kafka"] {
        assert!(!Path::new(&registry)
            .join(format!("topics/{topic}.json"))
            .exists());
        assert!(!broker.data_dir().join(format!("{topic}-0")).exists());
    }
}

/// `klog-broker --registry R user add USER`, the password on stdin.
fn add_user(registry: &str, user: &str, password: &str) {
    let out = run(
        "klog-broker",
        &strings(&["--registry", registry, "user", "add", user]),
        &format!("{password}\n"),
    );
    assert!(out.status.success(), "user add: {}", stderr(&out));
}

/// Before a login, a request over 64 KiB is refused, and the answer says
/// which bound it broke (not `--max-request-bytes`, which it is under).
#[test]
fn a_large_request_before_login_is_refused_naming_its_bound() {
    let broker = sasl_broker(None);
    let mut raw = common::Raw::connect(broker.addr());
    let mut frame = (100_000u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&3u16.to_le_bytes());
    frame.extend_from_slice(&1u16.to_le_bytes());
    frame.extend_from_slice(&9u32.to_le_bytes());
    raw.send(&frame);
    let body = raw.response().expect("an answer");
    let mut r = klog::protocol::Reader::new(&body);
    let h = klog::protocol::decode_response_header(&mut r).unwrap();
    assert_eq!(h.error, klog::protocol::ErrorCode::RequestTooLarge);
    assert!(
        h.message.contains("before SASL authentication"),
        "{}",
        h.message
    );
    assert!(raw.closed());
}

/// kcat's properties to log in as `user` with PLAIN, without TLS.
fn kcat_login(user: &str, password: &str) -> Vec<String> {
    sasl_props("sasl_plaintext", "PLAIN", user, password)
}

/// A damaged ACL entry is named by `acl list` (exit 1) with its repair,
/// and `acl clear` is that repair.
#[test]
fn a_damaged_acl_entry_is_named_and_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("reg").to_str().unwrap().to_string();
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--deny",
            "User:mallory",
            "--operation",
            "read",
            "--topic",
            "secret",
        ],
    );
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:alice",
            "--operation",
            "read",
            "--topic",
            "open",
        ],
    );
    // Torn: the deny rule is still there to read, not to parse.
    let file = dir.path().join("reg/config/acls/topic.literal.secret.json");
    let whole = std::fs::read(&file).unwrap();
    std::fs::write(&file, &whole[..whole.len() - 3]).unwrap();
    let out = run(
        "klog-broker",
        &strings(&["--registry", &registry, "acl", "list"]),
        "",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("klog-broker acl clear --topic 'secret'"),
        "{err}"
    );
    assert!(err.contains("deny rules too"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("User:alice"));
    // Doing what it says: the clear shows the rules the entry held, the
    // deny among them, for the operator to add back.
    let cleared = run(
        "klog-broker",
        &strings(&["--registry", &registry, "acl", "clear", "--topic", "secret"]),
        "",
    );
    assert!(cleared.status.success(), "{}", stderr(&cleared));
    let said = stderr(&cleared);
    assert!(
        said.contains("User:mallory") && said.contains("acl add"),
        "{said}"
    );
    let out = run(
        "klog-broker",
        &strings(&["--registry", &registry, "acl", "list"]),
        "",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!file.exists());
}

/// A producer id (klog's init_producer_id, Kafka's InitProducerId) goes
/// only to a principal that may write to some topic: carol, who may only
/// describe t, is refused on both listeners; alice gets one.
#[test]
fn a_producer_id_goes_only_to_a_writer() {
    use klog::protocol::{self, ErrorCode};
    let broker = authorizing_broker();
    let mut frame = Vec::new();
    protocol::init_producer_id_request(&mut frame, 7);
    let mut carol = raw_login(broker.addr(), "carol", "c-secret");
    let (code, message, _) = carol.call(&frame);
    assert_eq!(code, ErrorCode::AuthorizationFailed, "{message}");
    let mut alice = raw_login(broker.addr(), "alice", "a-secret");
    let (code, message, body) = alice.call(&frame);
    assert_eq!(code, ErrorCode::None, "{message}");
    assert_eq!(body.len(), 8 + 2, "producer_id i64, producer_epoch u16");
    // Kafka's InitProducerId v0: no transactional id, a timeout.
    let mut body = (-1i16).to_be_bytes().to_vec();
    body.extend_from_slice(&60_000i32.to_be_bytes());
    let request = common::kafka::frame(22, 0, 8, &body);
    for (user, password, error) in [("carol", "c-secret", 31i16), ("alice", "a-secret", 0)] {
        let mut kafka = kafka_login(&broker.kafka, user, password);
        let answer = kafka_answer(&mut kafka, &request);
        // Correlation id, throttle time, error code.
        assert_eq!(i16::from_be_bytes([answer[8], answer[9]]), error, "{user}");
    }
}

/// Transactions on klog's protocol need write on the transactional id
/// (init, add_to_txn, end_txn, a transactional produce), and a commit of
/// a group's offsets read on the group: alice, who may write t and read
/// group g, is refused each until an ACL gives her the id.
#[test]
fn a_native_transaction_needs_write_on_its_transactional_id() {
    use klog::protocol::{self, ErrorCode, TxnProducer, TxnRequest};
    let broker = authorizing_broker();
    let registry = broker.registry.clone().unwrap();
    let root = login("admin", "x-secret");
    let created = strings(&["-b", broker.addr(), "-t", "t", "-q"]);
    let out = run("klog-produce", &[created, root].concat(), "");
    assert!(out.status.success(), "{}", stderr(&out));
    let connect = || {
        let mut raw = common::Raw::connect(broker.addr());
        let mut frame = Vec::new();
        protocol::sasl_handshake_request(&mut frame, 1, "PLAIN");
        assert_eq!(raw.call(&frame).0, ErrorCode::None);
        protocol::sasl_authenticate_request(&mut frame, 2, b"\0alice\0a-secret");
        assert_eq!(raw.call(&frame).0, ErrorCode::None);
        raw
    };
    let call = |raw: &mut common::Raw, request: &TxnRequest| {
        let mut frame = Vec::new();
        protocol::txn_request(&mut frame, 3, request);
        raw.call(&frame)
    };
    let init = TxnRequest::Init {
        transactional_id: "tx".into(),
        timeout_ms: 60_000,
    };
    let mut raw = connect();
    let (code, message, _) = call(&mut raw, &init);
    assert_eq!(code, ErrorCode::AuthorizationFailed, "{message}");
    assert!(message.contains("transactional id \"tx\""), "{message}");
    admin(
        &registry,
        &[
            "acl",
            "add",
            "--allow",
            "User:alice",
            "--operation",
            "write",
            "--transactional-id",
            "tx",
        ],
    );
    std::thread::sleep(Duration::from_millis(1000));
    let mut raw = connect();
    let (code, message, body) = call(&mut raw, &init);
    assert_eq!(code, ErrorCode::None, "{message}");
    let mut r = protocol::Reader::new(&body);
    let producer = TxnProducer {
        transactional_id: "tx".into(),
        producer_id: r.i64("id").unwrap(),
        epoch: r.u16("epoch").unwrap() as i16,
    };
    // A topic she may not write, a group she may not read: refused.
    let add = |topic: &str| TxnRequest::Add {
        producer: producer.clone(),
        partitions: vec![(topic.into(), 0)],
    };
    let (code, message, _) = call(&mut raw, &add("logs-x"));
    assert_eq!(code, ErrorCode::AuthorizationFailed, "{message}");
    let offsets = |group: &str| TxnRequest::OffsetCommit {
        producer: producer.clone(),
        group: group.into(),
        offsets: vec![("t".into(), 0, 1)],
    };
    let (code, message, _) = call(&mut raw, &offsets("h"));
    assert_eq!(code, ErrorCode::AuthorizationFailed, "{message}");
    assert_eq!(call(&mut raw, &add("t")).0, ErrorCode::None);
    assert_eq!(call(&mut raw, &offsets("g")).0, ErrorCode::None);
    // A transactional batch named with another id she may not write.
    let mut b = klog::storage::record::BatchBuilder::new();
    b.push(1, None, &[], b"v");
    let mut batch = b
        .finish_numbered((producer.producer_id, producer.epoch, 0))
        .to_vec();
    klog::storage::record::set_transactional(&mut batch);
    let mut frame = Vec::new();
    protocol::append_txn_produce_request(&mut frame, 4, (-1, 5000, Some("other")), "t", 0, &batch);
    let (code, message, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::AuthorizationFailed, "{message}");
    frame.clear();
    protocol::append_txn_produce_request(&mut frame, 5, (-1, 5000, Some("tx")), "t", 0, &batch);
    let (code, message, _) = raw.call(&frame);
    assert_eq!(code, ErrorCode::None, "{message}");
    let end = TxnRequest::End {
        producer,
        commit: true,
    };
    assert_eq!(call(&mut raw, &end).0, ErrorCode::None);
}
