//! SCRAM (RFC 5802) with SHA-256 and SHA-512, as Kafka's brokers and
//! librdkafka speak it.
//!
//! ```text
//! client-first  n,,n=USER,r=CLIENT_NONCE
//! server-first  r=CLIENT_NONCE SERVER_NONCE,s=BASE64(SALT),i=ITERATIONS
//! client-final  c=biws,r=NONCE,p=BASE64(CLIENT_PROOF)
//! server-final  v=BASE64(SERVER_SIGNATURE)
//!
//! SaltedPassword  = PBKDF2-HMAC-H(password, salt, iterations)
//! ClientKey       = HMAC(SaltedPassword, "Client Key")
//! StoredKey       = H(ClientKey)
//! ServerKey       = HMAC(SaltedPassword, "Server Key")
//! AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
//! ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
//! ServerSignature = HMAC(ServerKey, AuthMessage)
//! ```
//!
//! A user's [`Credential`] keeps the salt, the iteration count, StoredKey
//! and ServerKey: enough to check a proof and to sign, not to log in.

use std::num::NonZeroU32;

use anyhow::{anyhow, bail};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::rand::SecureRandom;
use ring::{digest, hmac, pbkdf2};
use serde::{Deserialize, Serialize};

use super::{Refused, Step, Users};

/// Kafka's least iteration count for SCRAM, and klog's default.
pub const ITERATIONS_MIN: u32 = 4096;

/// The most iterations a credential may ask for (Kafka's bound): a higher
/// count only makes every login slower.
pub const ITERATIONS_MAX: u32 = 16384;

/// The bytes of a fresh salt.
const SALT_BYTES: usize = 32;

/// A SCRAM hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Hash {
    /// SHA-256.
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    /// SHA-512.
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl Hash {
    fn hmac(self) -> hmac::Algorithm {
        match self {
            Hash::Sha256 => hmac::HMAC_SHA256,
            Hash::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Hash::Sha256 => &digest::SHA256,
            Hash::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Hash::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Hash::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn len(self) -> usize {
        self.digest().output_len()
    }

    /// Its mechanism's SASL name.
    pub fn mechanism(self) -> super::Mechanism {
        match self {
            Hash::Sha256 => super::Mechanism::ScramSha256,
            Hash::Sha512 => super::Mechanism::ScramSha512,
        }
    }

    /// SaltedPassword.
    fn salted(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.len()];
        let rounds = NonZeroU32::new(iterations.max(1)).expect("at least 1");
        pbkdf2::derive(self.pbkdf2(), rounds, salt, password.as_bytes(), &mut out);
        out
    }

    fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data)
            .as_ref()
            .to_vec()
    }

    fn h(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }
}

/// A user's SCRAM credential for one hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// The hash.
    pub hash: Hash,
    /// The salt, base64.
    pub salt: String,
    /// PBKDF2's iteration count.
    pub iterations: u32,
    /// StoredKey, base64.
    pub stored_key: String,
    /// ServerKey, base64.
    pub server_key: String,
}

/// Random bytes from the system's generator.
fn random(n: usize) -> Vec<u8> {
    let mut out = vec![0; n];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .expect("the system's random number generator works");
    out
}

/// A made-up credential for a user who has none, the same for that name
/// as long as the process lives: an unknown user gets a challenge like a
/// known one's (RFC 5802's advice), and is refused only at the proof, so
/// the exchange does not say which names exist.
pub(super) fn decoy(hash: Hash, user: &str) -> Credential {
    static SECRET: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let secret = SECRET.get_or_init(|| random(32));
    let salt = hash.mac(secret, user.as_bytes());
    let key = B64.encode(hash.mac(secret, b"no key"));
    Credential {
        hash,
        salt: B64.encode(&salt[..SALT_BYTES.min(salt.len())]),
        iterations: ITERATIONS_MIN,
        stored_key: key.clone(),
        server_key: key,
    }
}

/// Whether two byte strings are equal, in time that does not depend on
/// where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Credential {
    /// A credential for `password` with a fresh salt.
    pub fn new(hash: Hash, password: &str, iterations: u32) -> anyhow::Result<Credential> {
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            bail!("iterations must be from {ITERATIONS_MIN} to {ITERATIONS_MAX}, not {iterations}");
        }
        Ok(Credential::with_salt(
            hash,
            password,
            &random(SALT_BYTES),
            iterations,
        ))
    }

    /// A credential from a SaltedPassword a client computed (Kafka's
    /// AlterUserScramCredentials): the password itself never reaches the
    /// broker. The iterations must be in the range [`Credential::new`]
    /// takes, the salt from 1 to 1024 bytes, the salted password the
    /// hash's length.
    pub fn from_salted(
        hash: Hash,
        salt: &[u8],
        iterations: u32,
        salted: &[u8],
    ) -> anyhow::Result<Credential> {
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            bail!("iterations must be from {ITERATIONS_MIN} to {ITERATIONS_MAX}, not {iterations}");
        }
        if salt.is_empty() || salt.len() > 1024 {
            bail!("a salt must be from 1 to 1024 bytes, not {}", salt.len());
        }
        if salted.len() != hash.len() {
            bail!(
                "a salted password of {} is {} bytes, not {}",
                hash.mechanism(),
                hash.len(),
                salted.len()
            );
        }
        Ok(Credential::of_salted(hash, salt, iterations, salted))
    }

    fn with_salt(hash: Hash, password: &str, salt: &[u8], iterations: u32) -> Credential {
        let salted = hash.salted(password, salt, iterations);
        Credential::of_salted(hash, salt, iterations, &salted)
    }

    fn of_salted(hash: Hash, salt: &[u8], iterations: u32, salted: &[u8]) -> Credential {
        Credential {
            hash,
            salt: B64.encode(salt),
            iterations,
            stored_key: B64.encode(hash.h(&hash.mac(salted, b"Client Key"))),
            server_key: B64.encode(hash.mac(salted, b"Server Key")),
        }
    }

    /// Whether `password` is the one it was made from.
    pub fn matches(&self, password: &str) -> bool {
        let Ok(salt) = B64.decode(&self.salt) else {
            return false;
        };
        let again = Credential::with_salt(self.hash, password, &salt, self.iterations);
        same(again.stored_key.as_bytes(), self.stored_key.as_bytes())
    }
}

/// A SCRAM name: `=` and `,` escaped as `=3D` and `=2C`.
fn escape(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// A SCRAM name unescaped; any other `=` is an error.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=3D") => out.push('='),
            Some("=2C") => out.push(','),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The value of attribute `key` (`r`, `s`...) in a message's fields.
fn attribute<'a>(fields: &[&'a str], key: char) -> Option<&'a str> {
    fields
        .iter()
        .find_map(|f| f.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// The client's side of a SCRAM exchange.
#[derive(Debug)]
pub struct Client {
    hash: Hash,
    password: String,
    nonce: String,
    first_bare: String,
    state: ClientState,
}

#[derive(Debug)]
enum ClientState {
    Start,
    SentFirst,
    SentFinal { server_signature: Vec<u8> },
    Done,
}

impl Client {
    /// A client's exchange for `username` and `password`.
    pub fn new(hash: Hash, username: &str, password: &str) -> Client {
        Client::with_nonce(hash, username, password, B64.encode(random(24)))
    }

    /// A client's exchange with a given nonce (the RFC's test vectors).
    fn with_nonce(hash: Hash, username: &str, password: &str, nonce: String) -> Client {
        Client {
            hash,
            password: password.to_string(),
            first_bare: format!("n={},r={nonce}", escape(username)),
            nonce,
            state: ClientState::Start,
        }
    }

    /// The next message, given the server's last.
    pub fn next(&mut self, from_server: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
        match std::mem::replace(&mut self.state, ClientState::Done) {
            ClientState::Start => {
                self.state = ClientState::SentFirst;
                Ok(Some(format!("n,,{}", self.first_bare).into_bytes()))
            }
            ClientState::SentFirst => {
                let (message, server_signature) = self.final_message(from_server)?;
                self.state = ClientState::SentFinal { server_signature };
                Ok(Some(message))
            }
            ClientState::SentFinal { server_signature } => {
                let text = std::str::from_utf8(from_server)?;
                let fields: Vec<&str> = text.split(',').collect();
                if let Some(e) = attribute(&fields, 'e') {
                    bail!("the broker refused: {e}");
                }
                let v = attribute(&fields, 'v').ok_or_else(|| anyhow!("no server signature"))?;
                if !same(&B64.decode(v)?, &server_signature) {
                    bail!("the broker's SCRAM signature is wrong: it does not know the password");
                }
                Ok(None)
            }
            ClientState::Done => Ok(None),
        }
    }

    /// client-final for server-first, and the signature the server must
    /// answer with.
    fn final_message(&self, server_first: &[u8]) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
        let text = std::str::from_utf8(server_first)?;
        let fields: Vec<&str> = text.split(',').collect();
        let nonce = attribute(&fields, 'r').ok_or_else(|| anyhow!("no nonce in {text:?}"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            bail!("the broker's SCRAM nonce does not extend ours");
        }
        let salt = B64.decode(attribute(&fields, 's').ok_or_else(|| anyhow!("no salt"))?)?;
        let iterations: u32 = attribute(&fields, 'i')
            .ok_or_else(|| anyhow!("no iteration count"))?
            .parse()?;
        // Fewer iterations would hand whoever answers for the broker a
        // proof it can try passwords against cheaply (Kafka's client
        // refuses them too); more only make the login slow.
        if !(ITERATIONS_MIN..=ITERATIONS_MAX * 4).contains(&iterations) {
            bail!(
                "the broker asks for {iterations} SCRAM iterations (at least {ITERATIONS_MIN} are taken)"
            );
        }
        let h = self.hash;
        let salted = h.salted(&self.password, &salt, iterations);
        let client_key = h.mac(&salted, b"Client Key");
        let stored_key = h.h(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{text},{without_proof}", self.first_bare);
        let signature = h.mac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_signature = h.mac(&h.mac(&salted, b"Server Key"), auth.as_bytes());
        let message = format!("{without_proof},p={}", B64.encode(proof));
        Ok((message.into_bytes(), server_signature))
    }
}

/// The server's side of a SCRAM exchange, after the client's first
/// message.
#[derive(Debug)]
pub struct Server {
    user: String,
    credential: Credential,
    /// The user has no credential: the decoy's proof is refused.
    unknown: bool,
    nonce: String,
    auth_start: String,
}

impl Server {
    /// Takes client-first: the user's credential looked up, server-first
    /// the challenge.
    pub fn first(
        hash: Hash,
        message: &[u8],
        users: &dyn Users,
    ) -> Result<(Server, Vec<u8>), Refused> {
        Server::first_with(hash, message, users, B64.encode(random(24)))
    }

    /// [`Server::first`] with the server's part of the nonce given.
    fn first_with(
        hash: Hash,
        message: &[u8],
        users: &dyn Users,
        server_nonce: String,
    ) -> Result<(Server, Vec<u8>), Refused> {
        let bad = |why: &str| Refused(format!("client-first: {why}"));
        let text = std::str::from_utf8(message).map_err(|_| bad("not UTF-8"))?;
        // gs2 header: channel binding flag, authzid, then the bare message.
        let mut parts = text.splitn(3, ',');
        let (Some(flag), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("too short"));
        };
        if flag.starts_with('p') {
            return Err(bad("channel binding is not supported"));
        }
        let fields: Vec<&str> = bare.split(',').collect();
        let user = attribute(&fields, 'n')
            .and_then(unescape)
            .ok_or_else(|| bad("no user name"))?;
        let authz = authzid.strip_prefix("a=").and_then(unescape);
        if authz.as_ref().is_some_and(|a| *a != user) {
            return Err(Refused(format!(
                "{user} may not act for {}",
                authz.unwrap_or_default()
            )));
        }
        let client_nonce = attribute(&fields, 'r').ok_or_else(|| bad("no nonce"))?;
        if client_nonce.is_empty() || client_nonce.contains(',') {
            return Err(bad("an empty nonce"));
        }
        let found = users.credential(&user, hash);
        let unknown = found.is_none();
        let credential = found.unwrap_or_else(|| decoy(hash, &user));
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            credential.salt, credential.iterations
        );
        let server = Server {
            user,
            credential,
            unknown,
            nonce,
            auth_start: format!("{bare},{server_first}"),
        };
        Ok((server, server_first.into_bytes()))
    }

    /// Takes client-final: the proof checked, server-final the last word.
    pub fn last(self, message: &[u8]) -> Result<Step, Refused> {
        let bad = |why: &str| Refused(format!("client-final: {why}"));
        let text = std::str::from_utf8(message).map_err(|_| bad("not UTF-8"))?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| bad("no proof"))?;
        let fields: Vec<&str> = without_proof.split(',').collect();
        // librdkafka sends its own nonce again before the agreed one:
        // Kafka's broker takes any nonce that ends with the agreed one
        // (its freshness is the server's part), and so does klog.
        if !attribute(&fields, 'r').is_some_and(|r| r.ends_with(self.nonce.as_str())) {
            return Err(bad("the nonce is not the one agreed"));
        }
        let h = self.credential.hash;
        let decode = |s: &str| B64.decode(s).map_err(|_| bad("not base64"));
        let stored_key = decode(&self.credential.stored_key)?;
        let server_key = decode(&self.credential.server_key)?;
        let auth = format!("{},{without_proof}", self.auth_start);
        let signature = h.mac(&stored_key, auth.as_bytes());
        let proof = decode(proof)?;
        if proof.len() != signature.len() {
            return Err(bad("a proof of the wrong length"));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        if self.unknown {
            let mechanism = h.mechanism();
            return Err(Refused(format!(
                "unknown user {:?} (for {mechanism})",
                self.user
            )));
        }
        if !same(&h.h(&client_key), &stored_key) {
            return Err(Refused(format!("wrong password for {:?}", self.user)));
        }
        let server_signature = h.mac(&server_key, auth.as_bytes());
        Ok(Step::Done {
            principal: format!("User:{}", self.user),
            last: format!("v={}", B64.encode(server_signature)).into_bytes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct One(Credential);
    impl Users for One {
        fn credential(&self, user: &str, hash: Hash) -> Option<Credential> {
            (user == "user" && hash == self.0.hash).then(|| self.0.clone())
        }
    }

    /// RFC 7677's SCRAM-SHA-256 example, both sides, byte for byte.
    #[test]
    fn the_rfc_7677_exchange() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = Credential::with_salt(Hash::Sha256, "pencil", &salt, 4096);
        let users = One(credential);
        let mut client = Client::with_nonce(
            Hash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        let first = client.next(b"").unwrap().unwrap();
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_nonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_string();
        let (server, challenge) =
            Server::first_with(Hash::Sha256, &first, &users, server_nonce).unwrap();
        assert_eq!(
            challenge,
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let last = client.next(&challenge).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(last.clone()).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let Step::Done {
            principal,
            last: server_final,
        } = server.last(&last).unwrap()
        else {
            panic!("not done");
        };
        assert_eq!(principal, "User:user");
        assert_eq!(
            server_final,
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        assert_eq!(client.next(&server_final).unwrap(), None);
    }

    /// A wrong password fails the proof, a forged server signature fails
    /// the client, and a proof for another nonce is refused.
    #[test]
    fn wrong_proofs_and_signatures_are_refused() {
        for hash in [Hash::Sha256, Hash::Sha512] {
            let users = One(Credential::new(hash, "right", ITERATIONS_MIN).unwrap());
            let mut client = Client::new(hash, "user", "wrong");
            let first = client.next(b"").unwrap().unwrap();
            let (server, challenge) = Server::first(hash, &first, &users).unwrap();
            let last = client.next(&challenge).unwrap().unwrap();
            assert!(server.last(&last).unwrap_err().0.contains("wrong password"));

            let mut client = Client::new(hash, "user", "right");
            let first = client.next(b"").unwrap().unwrap();
            let (server, challenge) = Server::first(hash, &first, &users).unwrap();
            let last = client.next(&challenge).unwrap().unwrap();
            assert!(matches!(server.last(&last), Ok(Step::Done { .. })));
            let forged = format!("v={}", B64.encode(vec![0u8; hash.len()]));
            assert!(client.next(forged.as_bytes()).is_err());

            let (server, _) = Server::first(hash, &first, &users).unwrap();
            assert!(server.last(&last).unwrap_err().0.contains("nonce"));
        }
    }

    #[test]
    fn a_client_refuses_a_server_that_asks_for_too_few_iterations() {
        let mut client = Client::with_nonce(Hash::Sha256, "user", "pencil", "abc".into());
        client.next(b"").unwrap();
        assert!(client.next(b"r=abcdef,s=c2FsdA==,i=1").is_err());
        let mut client = Client::with_nonce(Hash::Sha256, "user", "pencil", "abc".into());
        client.next(b"").unwrap();
        assert!(client
            .next(b"r=abcdef,s=c2FsdA==,i=4096")
            .unwrap()
            .is_some());
    }

    #[test]
    fn names_escape_and_unescape() {
        assert_eq!(escape("a=b,c"), "a=3Db=2Cc");
        assert_eq!(unescape("a=3Db=2Cc").as_deref(), Some("a=b,c"));
        assert_eq!(unescape("a=b"), None);
    }

    #[test]
    fn a_credential_matches_its_password_only() {
        let c = Credential::new(Hash::Sha512, "secret", ITERATIONS_MIN).unwrap();
        assert!(c.matches("secret"));
        assert!(!c.matches("secret "));
        assert!(Credential::new(Hash::Sha512, "x", 10).is_err());
    }
}
