//! Identifiers: `org`, `group`, `mission`, `actor`, `work`, `action`, `approval`, `op`.
//!
//! An [`Id`] is 1–128 bytes of `[A-Za-z0-9._:@~-]`. Anything else is refused when it is
//! parsed, so a value of this type is always valid.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest identifier, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The reserved actor that signs `tick` commands and snapshots.
pub const AUTHORITY_ACTOR: &str = "@authority";

/// A validated identifier.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Id(String);

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
        if s.is_empty() {
            return Err(IdError::Empty);
        }
        if s.len() > MAX_ID_LEN {
            return Err(IdError::TooLong(s.len()));
        }
        if let Some(c) = s.chars().find(|c| !is_id_char(*c)) {
            return Err(IdError::BadChar(s, c));
        }
        Ok(Id(s))
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
        Id(AUTHORITY_ACTOR.to_owned())
    }
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '@' | '~' | '-')
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
        id.0
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
}
