use super::scram::{Hash, ITERATIONS_MIN};
use super::*;

struct Table(Vec<(String, Credential)>);
impl Users for Table {
    fn credential(&self, user: &str, hash: Hash) -> Option<Credential> {
        self.0
            .iter()
            .find(|(u, c)| u == user && c.hash == hash)
            .map(|(_, c)| c.clone())
    }
}

fn table() -> Table {
    Table(vec![
        (
            "alice".into(),
            Credential::new(Hash::Sha256, "a-pass", ITERATIONS_MIN).unwrap(),
        ),
        (
            "alice".into(),
            Credential::new(Hash::Sha512, "a-pass", ITERATIONS_MIN).unwrap(),
        ),
        (
            "bob".into(),
            Credential::new(Hash::Sha256, "b-pass", ITERATIONS_MIN).unwrap(),
        ),
    ])
}

/// Runs a whole exchange; the principal, or the server's refusal.
fn run(mechanism: &str, user: &str, password: &str) -> Result<String, String> {
    let users = table();
    let login = Login::new(mechanism, Some(user), Some(password)).unwrap();
    let mut client = login.exchange();
    let mut server = ServerExchange::new(login.mechanism);
    let mut from_server = Vec::new();
    for _ in 0..4 {
        let Some(message) = client.next(&from_server).map_err(|e| e.to_string())? else {
            return Err("the client stopped early".into());
        };
        match server.step(&message, &users).map_err(|r| r.0)? {
            Step::Challenge(c) => from_server = c,
            Step::Done { principal, last } => {
                if !last.is_empty() {
                    assert_eq!(client.next(&last).map_err(|e| e.to_string())?, None);
                }
                return Ok(principal);
            }
        }
    }
    Err("no end".into())
}

#[test]
fn every_mechanism_logs_in_with_the_right_password_only() {
    for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        assert_eq!(run(m, "alice", "a-pass"), Ok("User:alice".into()), "{m}");
        let wrong = run(m, "alice", "b-pass").unwrap_err();
        assert!(wrong.contains("wrong password"), "{m}: {wrong}");
        let unknown = run(m, "carol", "a-pass").unwrap_err();
        assert!(unknown.contains("unknown user"), "{m}: {unknown}");
    }
    // bob has no SHA-512 credential: PLAIN takes his SHA-256 one.
    assert_eq!(run("PLAIN", "bob", "b-pass"), Ok("User:bob".into()));
    assert!(run("SCRAM-SHA-512", "bob", "b-pass").is_err());
}

#[test]
fn plain_messages_must_have_three_parts_and_act_for_themselves() {
    let users = table();
    for bad in [
        &b"alice\0a-pass"[..],
        b"\0alice\0a-pass\0x",
        b"bob\0alice\0a-pass",
        b"\xff",
    ] {
        let mut server = ServerExchange::new(Mechanism::Plain);
        assert!(server.step(bad, &users).is_err(), "{bad:?}");
    }
}

#[test]
fn mechanisms_parse_by_name_in_any_case() {
    assert_eq!(
        Mechanism::parse("scram-sha-512"),
        Ok(Mechanism::ScramSha512)
    );
    assert!(Mechanism::parse("GSSAPI").is_err());
    assert_eq!(
        Mechanism::parse_list("PLAIN, SCRAM-SHA-256,PLAIN"),
        Ok(vec![Mechanism::Plain, Mechanism::ScramSha256])
    );
    assert!(Mechanism::parse_list(" , ").is_err());
}

#[test]
fn an_unknown_user_is_challenged_like_a_known_one_and_refused_at_the_proof() {
    let users = table();
    for m in [Mechanism::ScramSha256, Mechanism::ScramSha512] {
        let mut known = ServerExchange::new(m);
        let mut unknown = ServerExchange::new(m);
        let a = known.step(b"n,,n=alice,r=abc", &users).unwrap();
        let b = unknown.step(b"n,,n=carol,r=abc", &users).unwrap();
        assert!(matches!((&a, &b), (Step::Challenge(_), Step::Challenge(_))));
        // The same unknown name gets the same salt each time.
        let again = ServerExchange::new(m)
            .step(b"n,,n=carol,r=abc", &users)
            .unwrap();
        let salt = |s: &Step| match s {
            Step::Challenge(c) => String::from_utf8_lossy(c)
                .split(',')
                .nth(1)
                .unwrap()
                .to_string(),
            _ => unreachable!(),
        };
        assert_eq!(salt(&b), salt(&again));
    }
    assert!(run("SCRAM-SHA-512", "carol", "x")
        .unwrap_err()
        .contains("unknown user"));
}

/// A credential from a SaltedPassword the client computed (Kafka's
/// AlterUserScramCredentials) is the one the password makes; what does
/// not fit is refused.
#[test]
fn a_credential_from_a_salted_password_is_the_passwords() {
    use super::scram::{Credential, Hash};
    let salt = b"0123456789abcdef";
    for (hash, algorithm, len) in [
        (Hash::Sha256, ring::pbkdf2::PBKDF2_HMAC_SHA256, 32),
        (Hash::Sha512, ring::pbkdf2::PBKDF2_HMAC_SHA512, 64),
    ] {
        let mut salted = vec![0; len];
        let rounds = std::num::NonZeroU32::new(4096).unwrap();
        ring::pbkdf2::derive(algorithm, rounds, salt, b"pencil", &mut salted);
        let c = Credential::from_salted(hash, salt, 4096, &salted).unwrap();
        assert!(c.matches("pencil"));
        assert!(!c.matches("pencil2"));
        assert!(Credential::from_salted(hash, salt, 4095, &salted).is_err());
        assert!(Credential::from_salted(hash, salt, 16385, &salted).is_err());
        assert!(Credential::from_salted(hash, b"", 4096, &salted).is_err());
        assert!(Credential::from_salted(hash, &[1; 1025], 4096, &salted).is_err());
        assert!(Credential::from_salted(hash, salt, 4096, &salted[1..]).is_err());
    }
}
