//! The daemon's bearer token: every call must carry it once one is set
//! (`authorization: Bearer TOKEN`, or Dapr's `dapr-api-token: TOKEN`),
//! compared in constant time. The health routes answer without it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

/// A secret that every call must present. Its `Debug` never shows it.
#[derive(Clone)]
pub struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// Why a token cannot be used.
#[derive(Debug)]
pub struct TokenError(String);

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TokenError {}

/// The shortest token accepted: guessing 16 characters is out of reach.
const SHORTEST: usize = 16;

impl Token {
    /// The token in `text`, without surrounding whitespace (a file's final
    /// newline). Refused when shorter than 16 characters or not printable
    /// ASCII (it travels in a header).
    pub fn new(text: &str) -> Result<Token, TokenError> {
        let token = text.trim();
        if token.len() < SHORTEST {
            return Err(TokenError(format!(
                "the token has {} characters; give at least {SHORTEST}",
                token.len()
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError(
                "the token must be printable ASCII without spaces (it travels in a header)".into(),
            ));
        }
        Ok(Token(token.as_bytes().into()))
    }

    /// Reads the token from the file at `path`.
    pub fn from_file(path: &std::path::Path) -> Result<Token, TokenError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TokenError(format!("cannot read {}: {e}", path.display())))?;
        Token::new(&text)
    }

    /// Whether `presented` is this token, in time independent of where
    /// they differ.
    fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_ref().ct_eq(presented).into()
    }

    /// Whether the request's headers carry this token.
    fn admits(&self, headers: &axum::http::HeaderMap) -> bool {
        let bearer = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        let dapr = headers.get("dapr-api-token").map(|v| v.as_bytes());
        [bearer, dapr]
            .into_iter()
            .flatten()
            .any(|presented| self.matches(presented))
    }
}

/// Paths that answer without a token: they tell only that the daemon runs.
fn is_health(path: &str) -> bool {
    path == "/v1.0/healthz/outbound" || path.starts_with("/grpc.health.v1.Health/")
}

/// The middleware that refuses calls without the token, as gRPC's
/// `UNAUTHENTICATED`.
pub(crate) async fn require(State(token): State<Token>, request: Request, next: Next) -> Response {
    if is_health(request.uri().path()) || token.admits(request.headers()) {
        return next.run(request).await;
    }
    let status = crate::errors::status(
        tonic::Code::Unauthenticated,
        "this daemon requires its token: send `authorization: Bearer TOKEN` (or Dapr's dapr-api-token)".into(),
        "Unauthenticated",
    );
    status.into_http::<axum::body::Body>().into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_or_unprintable_tokens_are_refused_and_debug_hides_it() {
        assert!(Token::new("short").is_err());
        assert!(Token::new("with a space inside it").is_err());
        let token = Token::new("0123456789abcdef-secret\n").unwrap();
        assert!(token.matches(b"0123456789abcdef-secret"));
        assert!(!token.matches(b"0123456789abcdef-secreT"));
        assert!(!token.matches(b"0123456789abcdef"));
        assert!(!format!("{token:?}").contains("secret"));
    }
}
