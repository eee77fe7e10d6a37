//! Keeping passwords out of URL errors: whatever part of a URL an error
//! quotes, it never quotes the user information when it holds a password.

use crate::error::Error;

/// `error` with every trace of the user information of `text` replaced by
/// `***`, when it holds a password: of every URL in it, so also of a URL
/// pasted twice, whose second copy an error quotes as a parameter.
pub(super) fn without_userinfo(error: Error, text: &str) -> Error {
    let Error::InvalidArgument { what, mut why } = error else {
        return error;
    };
    for userinfo in userinfos(text) {
        // Only a password is secret; a user name alone is quoted as it is.
        let Some((_, password)) = userinfo.split_once(':') else {
            continue;
        };
        why = why.replace(userinfo, "***");
        // Pieces of it too, in case an error quotes a host or path cut from it.
        for piece in password
            .split([':', '/', '@', ','])
            .filter(|p| p.len() >= 3)
        {
            why = why.replace(piece, "***");
        }
    }
    Error::InvalidArgument { what, why }
}

/// The user information of every URL in `text`: what stands between a
/// `://` and the last `@` before its query (`?`) or the next `://`.
fn userinfos(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some((_, after)) = rest.split_once("://") {
        let end = after.find("://").unwrap_or(after.len());
        let body = &after[..end];
        let body = body.split_once('?').map_or(body, |(body, _)| body);
        if let Some(at) = body.rfind('@') {
            found.push(&body[..at]);
        }
        rest = &after[end..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::userinfos;

    #[test]
    fn finds_the_user_information_of_every_copy() {
        assert_eq!(
            userinfos("pg://a:b@h/d?x=pg://c:d@h,e://f@g"),
            vec!["a:b", "c:d", "f"]
        );
        assert_eq!(userinfos("redis://u:p@ss@h:1"), vec!["u:p@ss"]);
        assert!(userinfos("no url here").is_empty());
        assert!(userinfos("redis://h:1?a=b@c").is_empty());
    }
}
