//! Lock names: what is locked.

use crate::error::{Error, Result};

/// Longest name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// A validated lock name: UTF-8, 1 to 256 bytes, no NUL or other control
/// characters. Backends map it into their own key space; a name can never
/// reach outside the store's namespace.
///
/// ```
/// use lockward::Name;
/// assert!(Name::new("orders/42").is_ok());
/// assert!(Name::new("").is_err());
/// assert!(Name::new("a\0b").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// Checks `name` and wraps it.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::invalid("name", "a lock name cannot be empty"));
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(Error::invalid(
                "name",
                format!(
                    "a lock name is at most {MAX_NAME_BYTES} bytes, this one has {}",
                    name.len()
                ),
            ));
        }
        if let Some((at, c)) = name.char_indices().find(|(_, c)| c.is_control()) {
            return Err(Error::invalid(
                "name",
                format!("control character {c:?} at byte {at} is not allowed in a lock name"),
            ));
        }
        Ok(Name(name))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for Name {
    type Error = Error;
    fn try_from(value: &str) -> Result<Self> {
        Name::new(value)
    }
}

impl TryFrom<String> for Name {
    type Error = Error;
    fn try_from(value: String) -> Result<Self> {
        Name::new(value)
    }
}

impl TryFrom<&String> for Name {
    type Error = Error;
    fn try_from(value: &String) -> Result<Self> {
        Name::new(value.as_str())
    }
}

impl TryFrom<&Name> for Name {
    type Error = Error;
    fn try_from(value: &Name) -> Result<Self> {
        Ok(value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert!(Name::new("x".repeat(256)).is_ok());
        assert!(matches!(
            Name::new("x".repeat(257)),
            Err(Error::InvalidArgument { what: "name", .. })
        ));
        assert!(Name::new("tab\there").is_err());
        assert!(Name::new("é/ü ok").is_ok());
    }
}
