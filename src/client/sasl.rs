//! A client's SASL login over klog's protocol (sasl_handshake, then
//! sasl_authenticate until the broker is satisfied), right after the
//! connection opens ([`super::connection`]): `call` sends one request
//! frame and gives the answer's body, or the broker's error.

use crate::error::{Error, ErrorCode, Result};
use crate::net::sasl::Login;
use crate::protocol::{self, Reader};

/// The longest answer to a SASL request a client reads.
pub(super) const ANSWER_BYTES_MAX: u32 = 128 * 1024;

/// At most this many messages each way: SCRAM needs two.
const ROUNDS_MAX: usize = 8;

/// Logs in as `login` to the broker at `addr`.
pub(super) fn authenticate(
    addr: &str,
    login: &Login,
    call: &mut dyn FnMut(&[u8]) -> Result<Vec<u8>>,
) -> Result<()> {
    let mut frame = Vec::new();
    protocol::sasl_handshake_request(&mut frame, 1, login.mechanism.name());
    call(&frame)?;
    let mut exchange = login.exchange();
    let mut from_broker: Vec<u8> = Vec::new();
    for round in 0..ROUNDS_MAX {
        let next = exchange
            .next(&from_broker)
            .map_err(|e| failed(addr, e.to_string()))?;
        let Some(message) = next else {
            return Ok(());
        };
        protocol::sasl_authenticate_request(&mut frame, 2 + round as u32, &message);
        let body = call(&frame)?;
        let mut r = Reader::new(&body);
        from_broker = r
            .bytes("message")
            .map_err(|e| Error::Protocol {
                addr: addr.to_string(),
                reason: e.to_string(),
            })?
            .to_vec();
    }
    Err(failed(
        addr,
        "the broker asked for too many SASL messages".into(),
    ))
}

fn failed(addr: &str, why: String) -> Error {
    Error::Broker {
        code: ErrorCode::SaslAuthenticationFailed,
        message: format!("{addr}: {why}"),
    }
}
