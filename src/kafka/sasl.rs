//! SaslAuthenticate, as Kafka's clients send it after SaslHandshake,
//! declared once (`message!`, [`super::message`]) from its schema: the
//! client's and the broker's SASL messages, carried as bytes.
//!
//! | API | key | versions | flexible from |
//! |---|---:|---|---:|
//! | SaslAuthenticate | 36 | 0–2 | 2 |

use super::api_key::*;
use super::message::{message, messages};

message! {
    /// SaslAuthenticate's request (`SaslAuthenticateRequest.json`).
    pub struct SaslAuthenticateRequest<'a> {
        /// The client's SASL message.
        auth_bytes: &'a [u8] [0],
    }
}

message! {
    /// SaslAuthenticate's response.
    pub struct SaslAuthenticateResponse<'a> {
        /// The error code, or 0.
        error_code: i16 [0],
        /// The error's words, if any.
        error_message: Option<String> [0],
        /// The broker's SASL message.
        auth_bytes: &'a [u8] [0],
        /// How long the session may last before it must log in again
        /// (v1+; 0: for ever).
        session_lifetime_ms: i64 [1],
    }
}

messages! {
    SaslAuthenticateRequest<'a> = SASL_AUTHENTICATE, 2;
    SaslAuthenticateResponse<'a> = SASL_AUTHENTICATE, 2;
}
