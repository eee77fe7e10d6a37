//! Owner ids: who holds a lock.

use std::fmt;

/// 128 random bits from the operating system's CSPRNG, drawn once per
/// acquisition. Unguessable, so no other client can release or extend a
/// lock it does not hold. Printed as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerId([u8; 16]);

impl OwnerId {
    /// A fresh random id.
    ///
    /// # Panics
    /// Only if the operating system has no random source at all, which no
    /// supported platform lacks.
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the OS random source is unavailable");
        OwnerId(bytes)
    }

    /// The id's bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Rebuilds an id from its bytes (as stored by a backend).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        OwnerId(bytes)
    }

    /// Parses the 32-digit hex form.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 32 || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(OwnerId(bytes))
    }
}

impl fmt::Display for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for OwnerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_uniqueness() {
        let a = OwnerId::random();
        assert_eq!(OwnerId::from_hex(&a.to_string()), Some(a));
        assert_ne!(a, OwnerId::random());
        assert_eq!(OwnerId::from_hex("zz"), None);
    }
}
