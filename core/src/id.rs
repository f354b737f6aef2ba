//! Identifiers: `org`, `group`, `mission`, `actor`, `work`, `action`, `approval`, `op`.
//!
//! An [`Id`] is 1–128 bytes of `[A-Za-z0-9._:@~-]`. Anything else is refused when it is
//! parsed, so a value of this type is always valid.

use std::fmt;

use compact_str::CompactString;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

/// Longest identifier, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The reserved actor that signs `tick` commands and snapshots.
pub const AUTHORITY_ACTOR: &str = "@authority";

/// A validated identifier. Up to 24 bytes are held inline: most identifiers cost no heap
/// allocation to decode, clone or keep.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id(CompactString);

/// Why a string is not an [`Id`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The string is empty.
    #[error("an identifier must not be empty")]
    Empty,
    /// The string is longer than [`MAX_ID_LEN`] bytes.
    #[error("identifier is {0} bytes long; the limit is 128")]
    TooLong(usize),
    /// The string holds a character outside `[A-Za-z0-9._:@~-]`.
    #[error("identifier {0:?} holds {1:?}; only A-Z a-z 0-9 . _ : @ ~ - are allowed")]
    BadChar(String, char),
}

impl Id {
    /// Checks and wraps a string.
    pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
        let s = s.into();
        check(&s)?;
        Ok(Id(CompactString::from(s)))
    }

    /// Checks and copies a borrowed string (inline when short: no allocation).
    pub fn from_str_checked(s: &str) -> Result<Self, IdError> {
        check(s)?;
        Ok(Id(CompactString::new(s)))
    }

    /// Checks and copies an identifier's bytes: `None` unless they are 1–128 bytes of the
    /// alphabet (which is ASCII, so valid UTF-8).
    pub(crate) fn from_bytes_checked(raw: &[u8]) -> Option<Self> {
        if raw.is_empty() || raw.len() > MAX_ID_LEN {
            return None;
        }
        if !raw
            .iter()
            .fold(true, |ok, b| ok & ID_BYTES[usize::from(*b)])
        {
            return None;
        }
        std::str::from_utf8(raw)
            .ok()
            .map(|s| Id(CompactString::new(s)))
    }

    /// The identifier as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the reserved `@authority` actor.
    pub fn is_authority(&self) -> bool {
        self.0 == AUTHORITY_ACTOR
    }

    /// The `@authority` actor.
    pub fn authority() -> Self {
        Id(CompactString::const_new(AUTHORITY_ACTOR))
    }
}

fn check(s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty);
    }
    if s.len() > MAX_ID_LEN {
        return Err(IdError::TooLong(s.len()));
    }
    // Bytes outside ASCII are never allowed, so the byte check decides; the char is found
    // only for the message.
    // Every byte is looked up (no early exit), so the common case is a short loop without
    // branches; the position is found only for the message.
    if !s.bytes().fold(true, |ok, b| ok & ID_BYTES[usize::from(b)]) {
        let i = s.bytes().position(|b| !is_id_byte(b)).unwrap_or(0);
        let c = s[i..].chars().next().unwrap_or('\u{fffd}');
        return Err(IdError::BadChar(s.to_owned(), c));
    }
    Ok(())
}

/// Which bytes an identifier may hold, by value.
const ID_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = is_id_byte(b as u8);
        b += 1;
    }
    table
};

const fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'~' | b'-')
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Id, E> {
                Id::from_str_checked(s).map_err(E::custom)
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Id, E> {
                Id::new(s).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(V)
    }
}

impl TryFrom<String> for Id {
    type Error = IdError;
    fn try_from(s: String) -> Result<Self, IdError> {
        Id::new(s)
    }
}

impl TryFrom<&str> for Id {
    type Error = IdError;
    fn try_from(s: &str) -> Result<Self, IdError> {
        Id::new(s)
    }
}

impl From<Id> for String {
    fn from(id: Id) -> String {
        id.0.into_string()
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl std::borrow::Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_allowed_alphabet() {
        assert!(Id::new("a-Z_0.9:@~x").is_ok());
        assert!(Id::new("x".repeat(128)).is_ok());
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(Id::new(""), Err(IdError::Empty));
        assert_eq!(Id::new("x".repeat(129)), Err(IdError::TooLong(129)));
        assert!(matches!(Id::new("w#1"), Err(IdError::BadChar(_, '#'))));
        assert!(matches!(Id::new("a b"), Err(IdError::BadChar(_, ' '))));
        assert!(matches!(Id::new("é"), Err(IdError::BadChar(_, 'é'))));
    }

    proptest::proptest! {
        /// The table check accepts exactly the strings of 1–128 allowed characters, and names
        /// the first character that is not allowed.
        #[test]
        fn the_byte_table_is_the_alphabet(s in proptest::prop_oneof![
            "[a-zA-Z0-9._:@~-]{0,130}",
            "[a-z.@~-]{0,20}[ #/é\\x00-\\x7f][a-z]{0,5}",
        ]) {
            let allowed = |c: char| c.is_ascii_alphanumeric() || "._:@~-".contains(c);
            let expected = if s.is_empty() {
                Err(IdError::Empty)
            } else if s.len() > MAX_ID_LEN {
                Err(IdError::TooLong(s.len()))
            } else if let Some(c) = s.chars().find(|c| !allowed(*c)) {
                Err(IdError::BadChar(s.clone(), c))
            } else {
                Ok(())
            };
            proptest::prop_assert_eq!(check(&s), expected);
        }
    }
}
