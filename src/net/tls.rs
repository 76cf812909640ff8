//! TLS (rustls) for both listeners, between brokers, and for klog's
//! clients.
//!
//! A TLS connection is carried by a pump: one thread per connection owns
//! the TCP socket and the rustls state, and moves bytes between them and
//! one end of a Unix socket pair; the broker or client gets the other end
//! as its [`Stream`]. So the reader and writer threads of a connection,
//! its frame reader and its `sendfile`s are the same code with or without
//! TLS. The price is the copy TLS needs anyway (records are encrypted in
//! user space, as in Kafka: TLS gives up zero copy) and one more hop
//! through a socket pair.
//!
//! The pump's memory is bounded: it reads plaintext from its side only
//! when everything it encrypted has left, and reads from the network only
//! when everything it decrypted has been taken, so at most one read of
//! each (64 KiB) plus rustls' own bounded buffers is held. A peer
//! that stops reading stalls the pump; after `stall` without progress it
//! closes the connection. A handshake has [`HANDSHAKE_TIMEOUT`] to finish.

use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConnection;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig};

use super::{is_tick, Stream};

/// How long a TLS handshake may take before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most plaintext the pump moves in one read.
const CHUNK_BYTES: usize = 64 * 1024;

/// How often a blocked handshake or pump wakes to look at its deadline.
const TICK: Duration = Duration::from_millis(100);

/// The rustls crypto provider klog uses (ring).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS connection's state and its TCP socket.
struct Tls {
    conn: Connection,
    sock: TcpStream,
}

/// A broker's TLS: its certificate, and the CA its clients' certificates
/// must be signed by, if it asks for them.
#[derive(Debug, Clone)]
pub struct ServerTls {
    config: Arc<ServerConfig>,
}

/// A client's TLS: the CAs it trusts, and its own certificate, if any.
#[derive(Debug, Clone)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
}

/// Reads a PEM file's certificates (at least one).
fn certificates(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{}: not a PEM certificate file: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{}: holds no PEM certificate", path.display());
    }
    Ok(certs)
}

/// Reads a PEM file's private key (PKCS#8, PKCS#1 or SEC1).
fn private_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    let pem = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| anyhow!("{}: holds no PEM private key: {e}", path.display()))
}

/// A store of the CAs in a PEM file.
fn roots(path: &Path) -> anyhow::Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    for cert in certificates(path)? {
        store
            .add(cert)
            .map_err(|e| anyhow!("{}: not a CA certificate: {e}", path.display()))?;
    }
    Ok(store)
}

impl ServerTls {
    /// A broker's TLS from its certificate chain and key (PEM files), and,
    /// with `client_ca`, client certificates required and checked against
    /// that CA.
    pub fn load(cert: &Path, key: &Path, client_ca: Option<&Path>) -> anyhow::Result<ServerTls> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?;
        let builder = match client_ca {
            Some(ca) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                        .build()
                        .map_err(|e| anyhow!("{}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certificates(cert)?, private_key(key)?)
            .map_err(|e| anyhow!("{} and {}: {e}", cert.display(), key.display()))?;
        Ok(ServerTls {
            config: Arc::new(config),
        })
    }

    /// Takes a TLS connection over `tcp`: the handshake (within
    /// [`HANDSHAKE_TIMEOUT`]), then a pump thread. Gives the plaintext
    /// stream, the client certificate's principal (`User:` and its subject,
    /// if it sent one) and the pump's thread, which ends when either side
    /// closes.
    pub fn accept(&self, tcp: TcpStream, stall: Duration) -> io::Result<Accepted> {
        let conn = ServerConnection::new(Arc::clone(&self.config)).map_err(io::Error::other)?;
        let mut tls = Tls {
            conn: Connection::Server(conn),
            sock: tcp,
        };
        handshake(&mut tls, Instant::now() + HANDSHAKE_TIMEOUT, &mut || Ok(()))?;
        let principal = tls
            .conn
            .peer_certificates()
            .and_then(|certs| certs.first())
            .map(|cert| principal_of(cert));
        let (stream, pump) = spawn_pump(tls, stall)?;
        Ok(Accepted {
            stream,
            principal,
            pump,
        })
    }
}

/// A TLS connection a broker took.
#[derive(Debug)]
pub struct Accepted {
    /// The plaintext side.
    pub stream: Stream,
    /// `User:` and the client certificate's subject, if it sent one.
    pub principal: Option<String>,
    /// The pump's thread.
    pub pump: std::thread::JoinHandle<()>,
}

/// The principal a client certificate names: `User:` and its subject as
/// RFC 2253 writes it (`User:CN=alice,O=Example`; attributes of one RDN
/// joined by `+`, special characters escaped), as Kafka's default
/// principal builder does.
pub fn principal_of(cert: &CertificateDer<'_>) -> String {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return "User:ANONYMOUS".to_string();
    };
    let registry = x509_parser::objects::oid_registry();
    let mut rdns = Vec::new();
    for rdn in parsed.subject().iter_rdn() {
        let attrs: Vec<String> = rdn
            .iter()
            .map(|attr| {
                let name = x509_parser::objects::oid2abbrev(attr.attr_type(), registry)
                    .map(str::to_string)
                    .unwrap_or_else(|_| attr.attr_type().to_id_string());
                // A value that is no string is written as # and its bytes
                // in hex, as RFC 2253 does.
                let value = match attr.as_str() {
                    Ok(text) => escape_dn_value(text),
                    Err(_) => {
                        let bytes = attr.attr_value().data;
                        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                        format!("#{hex}")
                    }
                };
                format!("{name}={value}")
            })
            .collect();
        rdns.push(attrs.join("+"));
    }
    rdns.reverse();
    format!("User:{}", rdns.join(","))
}

/// An attribute value escaped as RFC 2253 says: `,+"\<>;` behind a
/// backslash, and a leading `#` or space and a trailing space too, so that
/// no value can pass for several attributes (`CN=broker,O=Example` as one
/// common name is `CN=broker\,O=Example`).
fn escape_dn_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The principal of the first certificate of a PEM file (a broker's own,
/// as the others see it).
pub fn certificate_principal(path: &Path) -> anyhow::Result<String> {
    let certs = certificates(path)?;
    Ok(principal_of(&certs[0]))
}

impl ClientTls {
    /// A client's TLS: the CAs of `ca` (PEM; without it, the system's),
    /// and its own certificate and key for brokers that ask for one.
    pub fn load(ca: Option<&Path>, identity: Option<(&Path, &Path)>) -> anyhow::Result<ClientTls> {
        let store = match ca {
            Some(ca) => roots(ca)?,
            None => system_roots()?,
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(store);
        let config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(certificates(cert)?, private_key(key)?)
                .map_err(|e| anyhow!("{} and {}: {e}", cert.display(), key.display()))?,
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            config: Arc::new(config),
        })
    }

    /// Opens TLS over `tcp` to `host` (the name or address its
    /// certificate must carry); `patience` is asked each tick the
    /// handshake waits. Gives the plaintext stream; the pump thread ends
    /// when the stream's last handle is dropped or the broker closes.
    pub fn connect(
        &self,
        tcp: TcpStream,
        host: &str,
        patience: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<Stream> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
        let conn =
            ClientConnection::new(Arc::clone(&self.config), name).map_err(io::Error::other)?;
        let mut tls = Tls {
            conn: Connection::Client(conn),
            sock: tcp,
        };
        handshake(&mut tls, Instant::now() + HANDSHAKE_TIMEOUT, patience)?;
        let (stream, _pump) = spawn_pump(tls, Duration::from_secs(60))?;
        Ok(stream)
    }
}

/// The system's CAs (Debian's bundle), for a client given no CA file.
fn system_roots() -> anyhow::Result<RootCertStore> {
    const BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
    roots(Path::new(BUNDLE)).with_context(|| "no ssl.ca.location given, and no system CA bundle")
}

/// Runs the handshake to its end, by `deadline`. A failure sends its alert
/// (rustls does) and is an error whose words say what failed.
fn handshake(
    tls: &mut Tls,
    deadline: Instant,
    patience: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    tls.sock.set_read_timeout(Some(TICK))?;
    tls.sock.set_write_timeout(Some(TICK))?;
    let _ = tls.sock.set_nodelay(true);
    while tls.conn.is_handshaking() || tls.conn.wants_write() {
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the TLS handshake did not end within {} s",
                    HANDSHAKE_TIMEOUT.as_secs()
                ),
            ));
        }
        match tls.conn.complete_io(&mut tls.sock) {
            Ok((0, 0)) if tls.conn.is_handshaking() && !tls.conn.wants_write() => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                ))
            }
            Ok(_) => {}
            Err(e) if is_tick(&e) => patience()?,
            Err(e) => return Err(tls_error(e)),
        }
    }
    Ok(())
}

/// A TLS failure in words: rustls' own are clear ("invalid peer
/// certificate: UnknownIssuer"); say that they are TLS's.
fn tls_error(e: io::Error) -> io::Error {
    if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        io::Error::new(e.kind(), format!("TLS: {e}"))
    } else {
        e
    }
}

/// Starts the pump of a TLS connection whose handshake is done: gives the
/// plaintext side and the pump's thread.
fn spawn_pump(tls: Tls, stall: Duration) -> io::Result<(Stream, std::thread::JoinHandle<()>)> {
    let (ours, theirs) = UnixStream::pair()?;
    let failure = Arc::new(OnceLock::new());
    let failed = Arc::clone(&failure);
    let pump = std::thread::Builder::new()
        .name("tls-pump".into())
        .spawn(move || {
            let Tls { mut conn, sock } = tls;
            let ran = Pump::new(&mut conn, &sock, &theirs, stall)
                .and_then(|mut p| p.run().map_err(|e| p.last_words().unwrap_or(e)));
            // A TLS error (an alert, a bad record) is said to the
            // plaintext side before it sees the end.
            if let Err(e) = ran {
                if e.get_ref().is_some_and(|inner| inner.is::<TlsFailure>()) {
                    let _ = failed.set(e.to_string());
                }
            }
            let _ = sock.shutdown(Shutdown::Both);
            let _ = theirs.shutdown(Shutdown::Both);
        })?;
    Ok((Stream::Tls(ours, failure), pump))
}

/// What rustls refused after the handshake (an alert received, a record
/// that does not decrypt), in its words.
#[derive(Debug)]
struct TlsFailure(String);

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFailure {}

/// One TLS connection's pump: the rustls state between the network
/// (`tcp`) and the plaintext side (`plain`).
struct Pump<'a> {
    conn: &'a mut Connection,
    tcp: &'a TcpStream,
    plain: &'a UnixStream,
    /// Decrypted bytes the plaintext side has not taken yet.
    pending: Vec<u8>,
    chunk: Vec<u8>,
    /// The peer closed (or sent close_notify).
    tcp_done: bool,
    /// The plaintext side closed its writing end.
    plain_done: bool,
    stall: Duration,
}

impl<'a> Pump<'a> {
    fn new(
        conn: &'a mut Connection,
        tcp: &'a TcpStream,
        plain: &'a UnixStream,
        stall: Duration,
    ) -> io::Result<Pump<'a>> {
        tcp.set_nonblocking(true)?;
        plain.set_nonblocking(true)?;
        Ok(Pump {
            conn,
            tcp,
            plain,
            pending: Vec::new(),
            chunk: vec![0; CHUNK_BYTES],
            tcp_done: false,
            plain_done: false,
            stall,
        })
    }

    /// Moves bytes both ways until the plaintext side closes, the network
    /// side fails, or nothing moves for `stall` while something waits.
    fn run(&mut self) -> io::Result<()> {
        // The handshake's last reads may have brought records after it
        // (a client's first request right behind its Finished): they wait
        // in rustls, and no poll would say so.
        self.decrypted()?;
        let mut last_progress = Instant::now();
        loop {
            let tcp_out = self.conn.wants_write();
            if self.plain_done && self.tcp_done && self.pending.is_empty() && !tcp_out {
                return Ok(());
            }
            let tcp_in = !self.tcp_done && self.pending.is_empty();
            let (plain_in, plain_out) = (!self.plain_done && !tcp_out, !self.pending.is_empty());
            if !wait(self.tcp, tcp_in, tcp_out, self.plain, plain_in, plain_out)? {
                let waiting = tcp_out || plain_out || self.plain_done;
                if waiting && last_progress.elapsed() >= self.stall {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer stopped reading",
                    ));
                }
                continue;
            }
            let mut moved = false;
            if tcp_out {
                moved |= self.send_tls()?;
            }
            if plain_out {
                moved |= self.give_plain()?;
            }
            if tcp_in {
                moved |= self.take_tls()?;
            }
            if plain_in && !self.conn.wants_write() {
                moved |= self.take_plain()?;
            }
            if moved {
                last_progress = Instant::now();
            }
        }
    }

    /// What the peer said before the connection failed: a peer that
    /// refuses (a handshake it will not finish, a bad record) sends its
    /// alert and closes, and a write of ours that meets the close fails
    /// (a reset, a broken pipe) while the alert still waits unread. Reads
    /// what is left (at most 64 reads); the alert's error if one was
    /// there.
    fn last_words(&mut self) -> Option<io::Error> {
        for _ in 0..64 {
            match self.conn.read_tls(&mut self.tcp) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            if let Err(e) = self.conn.process_new_packets() {
                return Some(io::Error::new(
                    io::ErrorKind::InvalidData,
                    TlsFailure(format!("TLS: {e}")),
                ));
            }
            // What came before the alert is not delivered: the
            // connection has failed.
            let _ = io::copy(&mut self.conn.reader(), &mut io::sink());
        }
        None
    }

    /// Writes encrypted bytes to the network; whether any left.
    fn send_tls(&mut self) -> io::Result<bool> {
        let mut moved = false;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.tcp) {
                Ok(_) => moved = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(moved)
    }

    /// Reads encrypted bytes from the network and decrypts them into
    /// `pending`; whether any came.
    fn take_tls(&mut self) -> io::Result<bool> {
        match self.conn.read_tls(&mut self.tcp) {
            Ok(0) => {
                self.peer_closed();
                return Ok(true);
            }
            Ok(_) => {}
            Err(e) if is_tick(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
        if let Err(e) = self.conn.process_new_packets() {
            // Its alert goes out before the connection closes.
            let _ = self.send_tls();
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                TlsFailure(format!("TLS: {e}")),
            ));
        }
        self.decrypted()?;
        Ok(true)
    }

    /// Moves what rustls decrypted into `pending`.
    fn decrypted(&mut self) -> io::Result<()> {
        let mut reader = self.conn.reader();
        loop {
            let at = self.pending.len();
            self.pending.resize(at + 16 * 1024, 0);
            match reader.read(&mut self.pending[at..]) {
                Ok(0) => {
                    self.pending.truncate(at);
                    self.peer_closed();
                    break;
                }
                Ok(n) => self.pending.truncate(at + n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.pending.truncate(at);
                    break;
                }
                Err(e) => {
                    self.pending.truncate(at);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The peer closed its side: so does the plaintext side's reading
    /// end, once what was pending is taken.
    fn peer_closed(&mut self) {
        self.tcp_done = true;
        if self.pending.is_empty() {
            let _ = self.plain.shutdown(Shutdown::Write);
        }
    }

    /// Writes decrypted bytes to the plaintext side; whether any left.
    fn give_plain(&mut self) -> io::Result<bool> {
        let mut written = 0;
        while written < self.pending.len() {
            match (&*self.plain).write(&self.pending[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pending.drain(..written);
        if self.pending.is_empty() {
            if self.pending.capacity() > CHUNK_BYTES {
                self.pending = Vec::new();
            }
            if self.tcp_done {
                let _ = self.plain.shutdown(Shutdown::Write);
            }
        }
        Ok(written > 0)
    }

    /// Reads plaintext and encrypts it; whether any came. When the
    /// plaintext side closes its writing end, close_notify tells the peer
    /// (TLS's half-close, as TCP's FIN): what the peer still sends is
    /// delivered until it closes too.
    fn take_plain(&mut self) -> io::Result<bool> {
        match (&*self.plain).read(&mut self.chunk) {
            Ok(0) => {
                self.plain_done = true;
                self.conn.send_close_notify();
                self.send_tls()?;
                Ok(true)
            }
            Ok(n) => {
                self.conn.writer().write_all(&self.chunk[..n])?;
                self.send_tls()?;
                Ok(true)
            }
            Err(e) if is_tick(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Waits up to a second for either socket to be ready as asked; whether
/// one is.
fn wait(
    tcp: &TcpStream,
    tcp_in: bool,
    tcp_out: bool,
    plain: &UnixStream,
    plain_in: bool,
    plain_out: bool,
) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let flags = |r: bool, w: bool| {
        let mut f = PollFlags::empty();
        if r {
            f |= PollFlags::POLLIN;
        }
        if w {
            f |= PollFlags::POLLOUT;
        }
        f
    };
    let mut fds = [
        PollFd::new(tcp.as_fd(), flags(tcp_in, tcp_out)),
        PollFd::new(plain.as_fd(), flags(plain_in, plain_out)),
    ];
    match poll(&mut fds, PollTimeout::from(1000u16)) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => Ok(false),
        Ok(_) => {
            // A side that hung up while we were not reading it (a peer
            // that stopped reading, or reset): nothing more can move.
            let closed = PollFlags::POLLHUP | PollFlags::POLLERR;
            let gone = |fd: &PollFd<'_>, reading: bool| {
                !reading && fd.revents().is_some_and(|r| r.intersects(closed))
            };
            if gone(&fds[0], tcp_in) || gone(&fds[1], plain_in) {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
            }
            Ok(true)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::{escape_dn_value, principal_of, CertificateDer};

    fn cert(attrs: &[(rcgen::DnType, &str)]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        // rcgen's default subject (a common name) would come first.
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in attrs {
            params.distinguished_name.push(kind.clone(), *value);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    /// A subject's attributes in reverse order, escaped: one attribute
    /// whose value reads like two is not those two.
    #[test]
    fn a_certificate_principal_is_its_escaped_subject() {
        use rcgen::DnType::{CommonName, OrganizationName};
        let alice = principal_of(&cert(&[
            (CommonName, "alice"),
            (OrganizationName, "Example"),
        ]));
        let forger = principal_of(&cert(&[(OrganizationName, "Example,CN=alice")]));
        assert_eq!(alice, "User:O=Example,CN=alice");
        assert_eq!(forger, "User:O=Example\\,CN=alice");
    }

    #[test]
    fn distinguished_name_values_are_escaped_so_none_passes_for_another() {
        assert_eq!(escape_dn_value("alice"), "alice");
        assert_eq!(escape_dn_value("broker,O=Example"), "broker\\,O=Example");
        assert_eq!(
            escape_dn_value("a+b;c\\d\"<e>"),
            "a\\+b\\;c\\\\d\\\"\\<e\\>"
        );
        assert_eq!(escape_dn_value("#x "), "\\#x\\ ");
        assert_eq!(escape_dn_value(" "), "\\ ");
    }
}
