//! The `redlock://` URL form: N independent Redis masters (an odd number,
//! at least 3), shared credentials and the key prefix.

use std::fmt;

use crate::error::Result;
use crate::url_parts::{url_error, write_auth, Endpoint, Parts, Secret};

use crate::backend::redis::url::{RedisUrl, DEFAULT_PREFIX};

/// The parts of a `redlock://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedlockUrl {
    /// The masters: an odd number, at least 3.
    pub masters: Vec<Endpoint>,
    /// ACL user name, the same on every master.
    pub user: Option<String>,
    /// Password, the same on every master.
    pub password: Option<Secret>,
    /// Prefix of every key lockward writes, [`DEFAULT_PREFIX`] by default.
    pub prefix: String,
}

impl RedlockUrl {
    /// Takes a `redlock` URL apart.
    pub(crate) fn parse(parts: &Parts) -> Result<Self> {
        parts.expect_nothing_but(&["prefix"])?;
        if !parts.path.trim_matches('/').is_empty() {
            return Err(url_error("redlock:// takes no database index"));
        }
        let masters = parts.endpoints(6379)?;
        if masters.len() < 3 || masters.len() % 2 == 0 {
            return Err(url_error(format!(
                "redlock:// needs an odd number of masters, at least 3 (got {}), \
                     so that any two majorities share a master",
                masters.len()
            )));
        }
        Ok(RedlockUrl {
            masters,
            user: parts.user.clone(),
            password: parts.password.clone(),
            prefix: parts.param("prefix").unwrap_or(DEFAULT_PREFIX).to_string(),
        })
    }

    /// The `redis://` URL of one master.
    pub fn master(&self, endpoint: &Endpoint) -> RedisUrl {
        RedisUrl {
            tls: false,
            cluster: false,
            sentinel: None,
            endpoints: vec![endpoint.clone()],
            db: 0,
            user: self.user.clone(),
            password: self.password.clone(),
            prefix: self.prefix.clone(),
            ca: None,
            client_cert: None,
            replicas: None,
        }
    }
}

/// Prints the URL with any password replaced by `***`.
impl fmt::Display for RedlockUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self;
        f.write_str("redlock://")?;
        write_auth(f, &r.user, &r.password)?;
        let hosts: Vec<String> = r.masters.iter().map(Endpoint::to_string).collect();
        write!(f, "{}", hosts.join(","))?;
        if r.prefix != DEFAULT_PREFIX {
            write!(f, "?prefix={}", r.prefix)?;
        }
        Ok(())
    }
}
