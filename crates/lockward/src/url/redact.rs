//! Keeping passwords out of URL errors: whatever part of a URL an error
//! quotes, it never quotes the user information when it holds a password.

use crate::error::Error;

/// `error` with every trace of the user information of `text` (what stands
/// between `://` and the last `@`, when it holds a password) replaced by
/// `***`.
pub(super) fn without_userinfo(error: Error, text: &str) -> Error {
    let Error::InvalidArgument { what, why } = error else {
        return error;
    };
    let Some((_, rest)) = text.split_once("://") else {
        return Error::InvalidArgument { what, why };
    };
    let rest = rest.split_once('?').map_or(rest, |(body, _)| body);
    let Some(at) = rest.rfind('@') else {
        return Error::InvalidArgument { what, why };
    };
    let userinfo = &rest[..at];
    // Only a password is secret; a user name alone is quoted as it is.
    let Some((_, password)) = userinfo.split_once(':') else {
        return Error::InvalidArgument { what, why };
    };
    let mut why = why.replace(userinfo, "***");
    // Pieces of it too, in case an error quotes a host or path cut from it.
    for piece in password
        .split([':', '/', '@', ','])
        .filter(|p| p.len() >= 3)
    {
        why = why.replace(piece, "***");
    }
    Error::InvalidArgument { what, why }
}
