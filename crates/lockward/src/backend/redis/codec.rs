//! redis-rs's replies and errors as lockward's: shared by every store built
//! on Redis (Redis, Redis Cluster, Redlock) and by the Redis fence.

use redis::Value;

use crate::error::{Cause, Error};

/// A redis-rs error as lockward's (for the other Redis-based backends too). Its text never holds the password: the
/// address is lockward's redacted one, and redis-rs does not echo AUTH.
pub(crate) fn redis_error(address: &str, e: redis::RedisError) -> Error {
    let address = address.to_string();
    match e.kind() {
        redis::ErrorKind::AuthenticationFailed => Error::Denied {
            address,
            message: "authentication failed: check the user and password in the URL".to_string(),
            cause: Some(Cause::of(&e)),
        },
        redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) => Error::Denied {
            address,
            message: format!("the user's ACL does not allow what lockward needs: {e}"),
            cause: Some(Cause::of(&e)),
        },
        _ => Error::Unavailable {
            address,
            message: e.to_string(),
            cause: Some(Cause::of(&e)),
        },
    }
}

/// An integer reply, also when sent as a string.
pub(crate) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// A string reply, lossily decoded.
pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}
