//! Hashes, keys and signatures, always carried as lowercase hex text.

use std::fmt;

use ed25519_dalek::Signer;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical::sha256;

fn hex_fixed<const N: usize>(s: &str, what: &str) -> Result<[u8; N], String> {
    hex_fixed_bytes(s.as_bytes(), what)
}

/// The bytes of exactly `2 * N` lowercase hex digits, decoded; `None` for anything else
/// (what [`hex_fixed_bytes`] refuses, without wording why).
#[inline]
pub(crate) fn hex_digits<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    // Every byte is looked at (no early exit), which lets the loop run on whole vectors; the
    // decoder takes uppercase digits too, so they are refused first.
    if s.iter().fold(false, |up, b| up | b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; N];
    const_hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

/// [`hex_fixed`] of text as it lies in the input: lowercase hex digits are ASCII, so bytes
/// that decode were valid UTF-8 without checking.
fn hex_fixed_bytes<const N: usize>(s: &[u8], what: &str) -> Result<[u8; N], String> {
    if let Some(out) = hex_digits(s) {
        return Ok(out);
    }
    // Refused: find why, in the order the checks have always been made.
    if s.len() != 2 * N {
        return Err(format!(
            "{what} must be {} hex digits, got {}",
            2 * N,
            s.len()
        ));
    }
    if s.iter().any(u8::is_ascii_uppercase) {
        return Err(format!("{what} must be lowercase hex"));
    }
    let mut out = [0u8; N];
    if const_hex::decode_to_slice(s, &mut out).is_err() {
        if std::str::from_utf8(s).is_err() {
            return Err(format!("{what} is not valid UTF-8 text"));
        }
        // The slow decoder words the error (which character, where).
        let e = hex::decode_to_slice(s, &mut out).err();
        return Err(format!(
            "{what} is not hex: {}",
            e.map_or_else(|| "invalid character".to_owned(), |e| e.to_string())
        ));
    }
    Ok(out)
}

/// Reads a hex-text type from a string, borrowed or not, without copying it.
pub(crate) struct HexVisitor<T>(pub(crate) std::marker::PhantomData<T>);

/// A type spelled as fixed-length lowercase hex.
pub(crate) trait FromHex: Sized {
    /// Parses the hex text, naming what was wrong.
    fn parse(s: &str) -> Result<Self, String>;
    /// Parses the hex text from its bytes, naming what was wrong (bytes that are not UTF-8
    /// are refused like any other non-hex input).
    fn parse_bytes(s: &[u8]) -> Result<Self, String> {
        Self::parse(std::str::from_utf8(s).map_err(|_| "hex text is not valid UTF-8".to_owned())?)
    }
}

/// The newtype name under which a hex type asks the canonical decoder for its text's bytes
/// as they lie in the input ([`crate::canonical`] hands them over unchecked: hex decoding
/// checks them). Other deserializers see an ordinary newtype and read a string.
pub(crate) const HEX_TEXT: &str = "$mwp::hex_text";

/// [`HexVisitor`] behind the [`HEX_TEXT`] newtype.
pub(crate) struct HexTextVisitor<T>(pub(crate) std::marker::PhantomData<T>);

impl<'de, T: FromHex> serde::de::Visitor<'de> for HexTextVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_str(HexVisitor::<T>(std::marker::PhantomData))
    }

    fn visit_bytes<E: serde::de::Error>(self, s: &[u8]) -> Result<T, E> {
        T::parse_bytes(s).map_err(E::custom)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        T::parse(s).map_err(E::custom)
    }
}

impl<T: FromHex> serde::de::Visitor<'_> for HexVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<T, E> {
        T::parse(s).map_err(E::custom)
    }
}

macro_rules! hex_type {
    ($(#[$doc:meta])* $name:ident, $n:expr, $what:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            /// Parses lowercase hex.
            pub fn from_hex(s: &str) -> Result<Self, String> {
                hex_fixed::<$n>(s, $what).map($name)
            }
            /// Lowercase hex.
            pub fn to_hex(&self) -> String {
                const_hex::encode(self.0)
            }
        }

        impl FromHex for $name {
            fn parse(s: &str) -> Result<Self, String> {
                $name::from_hex(s)
            }
            fn parse_bytes(s: &[u8]) -> Result<Self, String> {
                hex_fixed_bytes::<$n>(s, $what).map($name)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut buf = [0u8; 2 * $n];
                const_hex::encode_to_slice(self.0, &mut buf).expect("buffer is exactly twice the length");
                s.serialize_str(std::str::from_utf8(&buf).expect("hex is ASCII"))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_newtype_struct(
                    HEX_TEXT,
                    HexTextVisitor::<$name>(std::marker::PhantomData),
                )
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.to_hex())
            }
        }
    };
}

hex_type!(
    /// A SHA-256 digest.
    Hash,
    32,
    "a hash"
);
hex_type!(
    /// An Ed25519 public key.
    PublicKey,
    32,
    "a public key"
);
hex_type!(
    /// An Ed25519 signature.
    Signature,
    64,
    "a signature"
);

impl Hash {
    /// The all-zero hash: `prev` of the first event.
    pub const ZERO: Hash = Hash([0; 32]);

    /// SHA-256 of some bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Hash(sha256(bytes))
    }
}

impl PublicKey {
    /// Verifies `sig` over `message` by the one rule of SPEC §2 (strict verification): the
    /// key must pass [`PublicKey::check`], `S` must be below the group order, `R` must be
    /// the canonical encoding of a point that is not of small order, and `[S]B = R + [k]A`
    /// must hold exactly (no cofactor). Anything else fails.
    pub fn verify(&self, message: &[u8], sig: &Signature) -> bool {
        self.prepare().is_some_and(|key| key.verify(message, sig))
    }

    /// The key decoded to its curve point, for checking many signatures under it; `None` if
    /// [`PublicKey::check`] refuses it (then no signature verifies under it).
    pub fn prepare(&self) -> Option<PreparedKey> {
        self.check().ok()
    }

    /// Whether the key may be registered (SPEC §2): the canonical encoding of a curve point
    /// that is not of small order. A small-order key (one of the eight points of the
    /// torsion subgroup, the identity among them) proves nothing: signatures under it can be
    /// made without any secret.
    pub fn check(&self) -> Result<PreparedKey, KeyFault> {
        if !is_canonical_encoding(&self.0) {
            return Err(KeyFault::NotCanonical);
        }
        let key =
            ed25519_dalek::VerifyingKey::from_bytes(&self.0).map_err(|_| KeyFault::NotAPoint)?;
        if key.is_weak() {
            return Err(KeyFault::SmallOrder);
        }
        Ok(PreparedKey(key))
    }
}

/// Why [`PublicKey::check`] refuses a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFault {
    /// Not the canonical encoding of its point: `y` is not below 2^255 - 19, or `x` is 0
    /// and the sign bit is set.
    NotCanonical,
    /// No point of the curve has this encoding.
    NotAPoint,
    /// A point of small order: anyone can make signatures that verify under it.
    SmallOrder,
}

impl fmt::Display for KeyFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyFault::NotCanonical => {
                "is not the canonical encoding of an Ed25519 point (y must be below 2^255 - 19, and a point with x = 0 has the sign bit clear); send the key's canonical 32 bytes"
            }
            KeyFault::NotAPoint => {
                "is not the encoding of any Ed25519 curve point; send the public half of a real Ed25519 key pair"
            }
            KeyFault::SmallOrder => {
                "is a small-order Ed25519 point, under which anyone can forge signatures; send the public half of a real Ed25519 key pair"
            }
        })
    }
}

/// `2^255 - 19`, little-endian: the field prime.
const FIELD_PRIME: [u8; 32] = {
    let mut p = [0xff; 32];
    p[0] = 0xed;
    p[31] = 0x7f;
    p
};

/// Whether 32 bytes are the one encoding of their point: `y` (the low 255 bits) below the
/// field prime, and no sign bit on `x = 0` (the points with `y = 1` and `y = p - 1`).
fn is_canonical_encoding(bytes: &[u8; 32]) -> bool {
    let mut y = *bytes;
    y[31] &= 0x7f;
    let sign = bytes[31] >> 7 == 1;
    // Little-endian comparison, most significant byte first.
    if y.iter().rev().cmp(FIELD_PRIME.iter().rev()) != std::cmp::Ordering::Less {
        return false;
    }
    let mut one = [0u8; 32];
    one[0] = 1;
    let mut minus_one = FIELD_PRIME;
    minus_one[0] -= 1;
    !(sign && (y == one || y == minus_one))
}

/// A [`PublicKey`] that passed [`PublicKey::check`], decoded once. Decoding (a square root
/// in the field) is about a fifth of a signature check; [`PreparedKey::verify`] is exactly
/// [`PublicKey::verify`] without it.
#[derive(Clone, Debug)]
pub struct PreparedKey(ed25519_dalek::VerifyingKey);

impl PreparedKey {
    /// Verifies `sig` over `message`, as [`PublicKey::verify`] does: ed25519-dalek's
    /// `verify_strict`, which refuses a non-canonical `S`, a small-order `R` or key, and
    /// compares `R` by its encoding.
    pub fn verify(&self, message: &[u8], sig: &Signature) -> bool {
        let sig = ed25519_dalek::Signature::from_bytes(&sig.0);
        self.0.verify_strict(message, &sig).is_ok()
    }

    /// The public key this was prepared from.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.to_bytes())
    }
}

/// An Ed25519 secret key. Its `Debug` form never shows the secret.
#[derive(Clone)]
pub struct SecretKey(ed25519_dalek::SigningKey);

impl SecretKey {
    /// A key from 32 secret bytes (its seed).
    pub fn from_bytes(seed: &[u8; 32]) -> Self {
        SecretKey(ed25519_dalek::SigningKey::from_bytes(seed))
    }

    /// The secret seed, for storing in a 0600 key file.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key().to_bytes())
    }

    /// Signs a message.
    pub fn sign(&self, message: &[u8]) -> Signature {
        Signature(self.0.sign(message).to_bytes())
    }

    /// The key the transcript runner uses for `actor`: secret key =
    /// `sha256("mwp transcript key " + actor)` (SPEC §12).
    pub fn for_transcript(actor: &str) -> Self {
        let seed = sha256(format!("mwp transcript key {actor}").as_bytes());
        SecretKey::from_bytes(&seed)
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey(public {})", self.public())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_exact_length() {
        let h = Hash::of(b"abc");
        assert_eq!(
            h.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(Hash::from_hex(&h.to_hex().to_uppercase()).is_err());
        assert!(Hash::from_hex("ab").is_err());
        assert!(Hash::from_hex(&"zz".repeat(32)).is_err());
    }

    #[test]
    fn sign_verify_round_trip() {
        let k = SecretKey::for_transcript("alice");
        let sig = k.sign(b"hello");
        assert!(k.public().verify(b"hello", &sig));
        assert!(!k.public().verify(b"hellp", &sig));
        let other = SecretKey::for_transcript("bob");
        assert!(!other.public().verify(b"hello", &sig));
    }

    #[test]
    fn a_prepared_key_answers_as_the_key_does() {
        let k = SecretKey::for_transcript("alice");
        let sig = k.sign(b"hello");
        let prepared = k.public().prepare().expect("a real key is a curve point");
        let mut bad_sig = sig;
        bad_sig.0[0] ^= 1;
        for (msg, sig) in [(&b"hello"[..], sig), (b"hellp", sig), (b"hello", bad_sig)] {
            assert_eq!(prepared.verify(msg, &sig), k.public().verify(msg, &sig));
        }
        // Not a point: nothing to prepare, and nothing verifies under it.
        let not_a_point = (0u8..=255)
            .map(|b| PublicKey([b; 32]))
            .find(|p| p.prepare().is_none())
            .expect("some 32-byte strings are not points");
        assert!(!not_a_point.verify(b"hello", &sig));
    }
}
