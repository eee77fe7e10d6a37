//! Owner ids: who holds a lock.

use std::fmt;

/// 128 bits from the operating system's CSPRNG, drawn once per
/// acquisition. Unguessable, so no other client can release or extend a
/// lock it does not hold. Printed as 32 lowercase hex digits.
///
/// The top bit of the first byte says whether the holder asked for a
/// lock-delay ([`LockOptions::lock_delay`](crate::LockOptions::lock_delay)):
/// the store records the owner with every lease, so a forced unlock found
/// there knows to hold the name back ([`Store::force_unlock`](crate::Store::force_unlock)).
/// The other 127 bits are random.
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
        bytes[0] &= !LOCK_DELAY_MARK;
        OwnerId(bytes)
    }

    /// A fresh random id for a holder that asked for a lock-delay (see
    /// [`has_lock_delay`](Self::has_lock_delay)).
    ///
    /// # Panics
    /// As [`random`](Self::random).
    pub fn random_with_lock_delay() -> Self {
        let OwnerId(mut bytes) = Self::random();
        bytes[0] |= LOCK_DELAY_MARK;
        OwnerId(bytes)
    }

    /// Whether the holder asked for a lock-delay. Also true for half of the
    /// owners of lockward versions before the mark, which a forced unlock
    /// then holds back too (the cautious side).
    pub fn has_lock_delay(&self) -> bool {
        self.0[0] & LOCK_DELAY_MARK != 0
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

/// The bit of the first byte that marks a holder with a lock-delay.
const LOCK_DELAY_MARK: u8 = 0x80;

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
    }

    #[test]
    fn lock_delay_mark_survives_the_hex_form() {
        for _ in 0..64 {
            assert!(!OwnerId::random().has_lock_delay());
            let marked = OwnerId::random_with_lock_delay();
            assert!(marked.has_lock_delay());
            let back = OwnerId::from_hex(&marked.to_string()).expect("hex");
            assert!(back.has_lock_delay());
        }
        assert_eq!(OwnerId::from_hex("zz"), None);
    }
}
