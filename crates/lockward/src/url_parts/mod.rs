//! The pieces every store URL form shares, below both the scheme dispatch
//! (`url.rs`) and each backend's own form (`backend/<name>/url.rs`): the
//! lexer that splits a URL into its parts, credentials that never print,
//! endpoints, and the TLS files a URL names.

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// A password or other credential. Its `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A credential read from elsewhere in a URL (a query parameter).
    pub(crate) fn new(value: &str) -> Secret {
        Secret(value.to_string())
    }

    /// The credential itself, for handing to a client library.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A `host:port` pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `user:***@`, with the password never printed.
pub(crate) fn write_auth(
    f: &mut fmt::Formatter<'_>,
    user: &Option<String>,
    password: &Option<Secret>,
) -> fmt::Result {
    match (user, password) {
        (Some(u), Some(p)) => write!(f, "{u}:{p}@"),
        (Some(u), None) => write!(f, "{u}@"),
        (None, Some(p)) => write!(f, ":{p}@"),
        (None, None) => Ok(()),
    }
}

pub(crate) fn url_error(why: impl Into<String>) -> Error {
    Error::invalid("url", why)
}

/// A URL split into its generic parts; each scheme then takes what it needs.
pub(crate) struct Parts {
    pub(crate) scheme: String,
    /// Everything after `scheme://` and before `?`, undecoded (for file paths).
    pub(crate) raw_rest: String,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<Secret>,
    hosts: Vec<String>,
    pub(crate) path: String,
    params: Vec<(String, String)>,
}

impl Parts {
    pub(crate) fn split(text: &str) -> Result<Self> {
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            url_error("a store URL starts with a scheme such as sqlite://, memory:// or redis://")
        })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        {
            return Err(url_error(format!("{scheme:?} is not a valid scheme")));
        }
        if rest.chars().any(|c| c.is_control()) {
            return Err(url_error("control characters are not allowed in a URL"));
        }
        let (body, query) = match rest.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (rest, None),
        };
        let mut params = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            params.push((percent_decode(k)?, percent_decode(v)?));
        }
        // The password may contain '@' or '/' only percent-encoded; the last
        // '@' before the first '/' ends the user information.
        let authority_end = body.find('/').unwrap_or(body.len());
        let (authority, path) = body.split_at(authority_end);
        // An '@' after the first '/' means a password holding '/' (or '@'):
        // reading on would take part of it for a path, and print it.
        if scheme != "sqlite" && path.contains('@') {
            return Err(url_error(
                "an '@' after the host: percent-encode a '/' or '@' in the password (%2F, %40)",
            ));
        }
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (u, p) = match info.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (info, None),
                };
                let user = Some(percent_decode(u)?).filter(|u| !u.is_empty());
                let password = p.map(percent_decode).transpose()?.map(Secret);
                (user, password)
            }
        };
        let hosts = hostlist
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect();
        Ok(Parts {
            scheme,
            raw_rest: body.to_string(),
            user,
            password,
            hosts,
            path: path.to_string(),
            params,
        })
    }

    pub(crate) fn rest_is_empty(&self) -> bool {
        self.raw_rest.is_empty()
    }

    /// `cert=` and `key=`, which go together.
    pub(crate) fn client_cert(&self) -> Result<Option<(PathBuf, PathBuf)>> {
        match (self.param("cert"), self.param("key")) {
            (Some(c), Some(k)) => Ok(Some((PathBuf::from(c), PathBuf::from(k)))),
            (None, None) => Ok(None),
            _ => Err(url_error("cert= and key= go together")),
        }
    }

    pub(crate) fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn expect_nothing_but(&self, allowed: &[&str]) -> Result<()> {
        match self
            .params
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) if allowed.is_empty() => Err(url_error(format!(
                "{}:// takes no query parameters, got {k:?}",
                self.scheme
            ))),
            Some((k, _)) => Err(url_error(format!(
                "unknown parameter {k:?} for {}://; known: {}",
                self.scheme,
                allowed.join(", ")
            ))),
        }
    }

    pub(crate) fn endpoints(&self, default_port: u16) -> Result<Vec<Endpoint>> {
        if self.hosts.is_empty() {
            return Err(url_error(format!(
                "{}:// needs at least one host",
                self.scheme
            )));
        }
        self.hosts
            .iter()
            .map(|h| parse_endpoint(h, default_port))
            .collect()
    }

    pub(crate) fn single_endpoint(&self, default_port: u16) -> Result<Endpoint> {
        match self.hosts.as_slice() {
            [one] => parse_endpoint(one, default_port),
            [] => Err(url_error(format!("{}:// needs a host", self.scheme))),
            _ => Err(url_error(format!(
                "{}:// takes one host; for several independent masters use redlock://",
                self.scheme
            ))),
        }
    }
}

/// One `host[:port]` of the host list. No part of `text` is echoed in an
/// error: in a mistyped URL it may be a password.
fn parse_endpoint(text: &str, default_port: u16) -> Result<Endpoint> {
    let not_a_host = || {
        url_error("a host is a DNS name, an IPv4 address or a bracketed IPv6 address such as [::1]")
    };
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(not_a_host)?;
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(not_a_host());
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(not_a_host)?),
        };
        (host, port)
    } else {
        let (host, port) = match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        };
        if host.is_empty() {
            return Err(url_error("a host is empty"));
        }
        if !is_host_name(host) {
            return Err(not_a_host());
        }
        (host, port)
    };
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| url_error("the port is not a number from 1 to 65535"))?,
    };
    Ok(Endpoint {
        host: host.to_string(),
        port,
    })
}

/// A DNS name or an IPv4 address: dot-separated labels of letters, digits,
/// `-` and `_` (not at a label's ends for `-`), 1 to 63 bytes each, 253 in
/// all.
fn is_host_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

pub(crate) fn percent_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| url_error("a '%' must be followed by two hex digits"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| url_error("percent-encoding decodes to invalid UTF-8"))
}

mod tls;

// A build without TLS backends reads no TLS files.
#[allow(unused_imports)]
pub(crate) use tls::{read_file, tls_files};
