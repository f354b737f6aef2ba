//! Conversions between JavaScript values and core types, and the stateless helpers:
//! canonical CBOR, events, commands, keys.

use mwp_core::canonical::{self, Strictness};
#[cfg(feature = "full")]
use mwp_core::{Command, Limits};
use mwp_core::{Error, Event, PublicKey, SecretKey};
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::error::CodecError;

/// Serializes a value into a plain JS value (objects, not `Map`s; `null` for none), as its
/// JSON form would read. The state's maps keyed by seq (`terminal`, `expansions`) write their
/// keys as text for any human-readable serializer, as JSON does. Integers beyond 2^53 cannot be
/// numbers and are `MALFORMED`.
///
/// The value crosses as JSON text read by `JSON.parse`, which makes every key an own property:
/// a key `__proto__` (a member may put one in a payload) stays a key and never becomes the
/// object's prototype.
pub fn to_js<T: Serialize + ?Sized>(value: &T) -> Result<JsValue, Error> {
    let unconvertible = |e: &dyn std::fmt::Display| {
        Error::malformed(format!("value does not convert to JavaScript: {e}"))
    };
    let mut text = Vec::with_capacity(128);
    value
        .serialize(&mut serde_json::Serializer::with_formatter(
            &mut text,
            ExactIntegers,
        ))
        .map_err(|e| unconvertible(&e))?;
    let text = String::from_utf8(text).map_err(|e| unconvertible(&e))?;
    js_sys::JSON::parse(&text).map_err(|_| unconvertible(&"JSON.parse refused it"))
}

/// JSON's compact form, refusing an integer that a JS number cannot hold exactly (one past
/// ±(2^53 − 1)) as it is written: `JSON.parse` would round it.
struct ExactIntegers;

impl ExactIntegers {
    fn exact(n: i128) -> std::io::Result<()> {
        if n.unsigned_abs() <= u128::from(MAX_SAFE_INTEGER) {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "{n} is not exact as a JavaScript number"
            )))
        }
    }
}

impl serde_json::ser::Formatter for ExactIntegers {
    fn write_i64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, n: i64) -> std::io::Result<()> {
        Self::exact(n.into())?;
        serde_json::ser::CompactFormatter.write_i64(w, n)
    }

    fn write_u64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, n: u64) -> std::io::Result<()> {
        Self::exact(n.into())?;
        serde_json::ser::CompactFormatter.write_u64(w, n)
    }

    fn write_i128<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        n: i128,
    ) -> std::io::Result<()> {
        Self::exact(n)?;
        serde_json::ser::CompactFormatter.write_i128(w, n)
    }

    fn write_u128<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        n: u128,
    ) -> std::io::Result<()> {
        Self::exact(i128::try_from(n).unwrap_or(i128::MAX))?;
        serde_json::ser::CompactFormatter.write_u128(w, n)
    }
}

/// 2^53 − 1, the largest integer a JS number holds exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The most values (every item, entry and scalar counts one) a JS value may hold to be read
/// as JSON data: the largest command is 1 MiB of JSON, far fewer.
pub const MAX_JS_VALUES: usize = 1 << 20;

/// The deepest nesting of arrays and objects read from a JS value: the canonical encoder's
/// limit, past which nothing could be encoded anyway.
pub const MAX_JS_DEPTH: usize = canonical::MAX_DEPTH;

#[wasm_bindgen]
extern "C" {
    /// `Array.isArray`, which throws for a revoked proxy.
    #[wasm_bindgen(catch, js_namespace = Array, js_name = isArray)]
    fn js_is_array(value: &JsValue) -> Result<bool, JsValue>;
    /// `Array.from`: the items of an array as a plain array, each getter run here.
    #[wasm_bindgen(catch, js_namespace = Array, js_name = from)]
    fn js_array_from(value: &JsValue) -> Result<js_sys::Array, JsValue>;
    /// `Object.entries`: own enumerable string keys and their values, each getter run here.
    #[wasm_bindgen(catch, js_namespace = Object, js_name = entries)]
    fn js_object_entries(value: &JsValue) -> Result<js_sys::Array, JsValue>;
}

/// What JavaScript threw while a value was read (a getter, a proxy's trap), as words.
fn thrown(e: &JsValue) -> String {
    let what = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "a value that is not an Error".into());
    format!("reading it threw: {what}")
}

/// Reads a JS value as JSON data (`serde_json::Value`): integers stay integers, other finite
/// numbers become floats (which canonical CBOR then refuses), `undefined` is `null`.
///
/// Whatever the value is, this answers `MALFORMED` naming what was wrong, never a trap or a
/// JS exception thrown through the module: a getter or a proxy trap that throws, nesting
/// deeper than [`MAX_JS_DEPTH`], more than [`MAX_JS_VALUES`] values (an array's length is
/// checked before its items are read), `NaN` or an infinity, a string with a lone surrogate
/// (which UTF-8 cannot carry; JSON text read by the server refuses it too), a `BigInt` past
/// 64 bits, and anything JSON has no form for (a function, a symbol, a `Map`, bytes).
pub fn json_from_js(value: JsValue) -> Result<serde_json::Value, Error> {
    JsonReader {
        budget: MAX_JS_VALUES,
    }
    .read(&value, 0)
    .map_err(|e| Error::malformed(format!("not JSON data: {e}")))
}

/// [`json_from_js`]'s walk: how many more values it may read.
struct JsonReader {
    budget: usize,
}

impl JsonReader {
    fn read(&mut self, value: &JsValue, depth: usize) -> Result<serde_json::Value, String> {
        use serde_json::Value;
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| format!("more than {MAX_JS_VALUES} values"))?;
        if value.is_null() || value.is_undefined() {
            return Ok(Value::Null);
        }
        if let Some(b) = value.as_bool() {
            return Ok(Value::Bool(b));
        }
        if let Some(x) = value.as_f64() {
            return number(x);
        }
        if value.is_string() {
            let s: &js_sys::JsString = value.unchecked_ref();
            return unicode(s).map(Value::String);
        }
        if value.is_bigint() {
            let b: &js_sys::BigInt = value.unchecked_ref();
            let text = b.to_string(10).map_err(|e| thrown(&e))?;
            let text = String::from(text);
            if let Ok(u) = text.parse::<u64>() {
                return Ok(Value::from(u));
            }
            return text
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("the BigInt {text} is past 64 bits"));
        }
        if !value.is_object() {
            let kind = if value.is_function() {
                "a function"
            } else {
                "a symbol"
            };
            return Err(format!("{kind} has no JSON form"));
        }
        if value.is_instance_of::<js_sys::Map>()
            || value.is_instance_of::<js_sys::Set>()
            || value.is_instance_of::<js_sys::ArrayBuffer>()
            || js_sys::ArrayBuffer::is_view(value)
        {
            return Err(
                "a Map, Set or binary data has no JSON form (give an object or an array)".into(),
            );
        }
        if depth >= MAX_JS_DEPTH {
            return Err(format!("nested deeper than {MAX_JS_DEPTH} levels"));
        }
        if js_is_array(value).map_err(|e| thrown(&e))? {
            let len = js_sys::Reflect::get(value, &"length".into())
                .map_err(|e| thrown(&e))?
                .as_f64()
                .unwrap_or(0.0);
            // `NaN` (a proxy's length) fits nowhere.
            let fits = len <= self.budget as f64;
            if !fits {
                return Err(format!(
                    "an array of {len} items: more than {MAX_JS_VALUES} values"
                ));
            }
            let items = js_array_from(value).map_err(|e| thrown(&e))?;
            return items
                .iter()
                .map(|item| self.read(&item, depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array);
        }
        let entries = js_object_entries(value).map_err(|e| thrown(&e))?;
        let len = entries.length() as usize;
        if len > self.budget {
            return Err(format!(
                "an object of {len} keys: more than {MAX_JS_VALUES} values"
            ));
        }
        let mut map = serde_json::Map::new();
        for entry in entries.iter() {
            let entry: js_sys::Array = entry.unchecked_into();
            let key = entry.get(0);
            let key = unicode(key.unchecked_ref()).map_err(|e| format!("a key: {e}"))?;
            map.insert(key, self.read(&entry.get(1), depth + 1)?);
        }
        Ok(Value::Object(map))
    }
}

/// A JS string as Rust text, refused when it holds a lone surrogate (which UTF-8 cannot carry
/// and the conversion would silently replace with U+FFFD). Only a string that comes out
/// holding U+FFFD is looked at code unit by code unit (`String.prototype.isWellFormed` is
/// too recent for every engine the package runs on).
fn unicode(s: &js_sys::JsString) -> Result<String, String> {
    let text = String::from(s);
    if text.contains('\u{FFFD}') && !s.is_valid_utf16() {
        return Err("a string with a lone surrogate (not Unicode text)".into());
    }
    Ok(text)
}

/// A JS number as JSON data: an integer when it is one a JS number holds exactly.
fn number(x: f64) -> Result<serde_json::Value, String> {
    if !x.is_finite() {
        return Err(format!("{x} is not a finite number"));
    }
    let limit = MAX_SAFE_INTEGER as f64;
    if x.fract() == 0.0 && x.abs() <= limit {
        // Integral and within ±(2^53 − 1): the casts are exact.
        return Ok(if x < 0.0 {
            serde_json::Value::from(x as i64)
        } else {
            serde_json::Value::from(x as u64)
        });
    }
    serde_json::Number::from_f64(x)
        .map(serde_json::Value::Number)
        .ok_or_else(|| format!("{x} is not a finite number"))
}

/// Reads a JS value (an object in the JSON form) as a typed core value.
pub fn from_js<T: DeserializeOwned>(value: JsValue, what: &str) -> Result<T, Error> {
    let json = json_from_js(value)?;
    serde_json::from_value(json).map_err(|e| Error::malformed(format!("{what}: {e}")))
}

/// The bytes of a `Uint8Array`, if `value` is one.
pub fn bytes_of(value: &JsValue) -> Option<Vec<u8>> {
    value.dyn_ref::<js_sys::Uint8Array>().map(|a| a.to_vec())
}

/// A command given either as canonical CBOR bytes or as an object in the JSON form.
#[cfg(feature = "full")]
pub fn command_from_js(value: JsValue, limits: &Limits) -> Result<Command, Error> {
    if let Some(bytes) = bytes_of(&value) {
        return Command::from_cbor(&bytes, limits);
    }
    let json = json_from_js(value)?;
    let bytes = serde_json::to_vec(&json).map_err(|e| Error::malformed(format!("command: {e}")))?;
    Command::from_json(&bytes, limits)
}

/// An event given either as canonical CBOR bytes or as an object in the JSON form.
pub fn event_from_js(value: JsValue) -> Result<Event, Error> {
    if let Some(bytes) = bytes_of(&value) {
        return Event::from_cbor(&bytes);
    }
    Event::from_serde(json_from_js(value)?)
}

/// [`event_from_js`], with its payload hash and id checked (`LOG_CORRUPT` names the first
/// that fails): bytes are checked where they lie ([`Event::from_cbor_verified`]), an object
/// by encoding it ([`Event::verify`]).
pub fn verified_event_from_js(value: JsValue) -> Result<Event, Error> {
    if let Some(bytes) = bytes_of(&value) {
        return Event::from_cbor_verified(&bytes);
    }
    let event = event_from_js(value)?;
    event.verify()?;
    Ok(event)
}

fn public_key(hex: &str) -> Result<PublicKey, Error> {
    PublicKey::from_hex(hex).map_err(|e| Error::malformed(format!("public key: {e}")))
}

/// Parses a hex Ed25519 public key (64 hex digits).
pub fn parse_public_key(hex: &str) -> Result<PublicKey, Error> {
    public_key(hex)
}

/// Parses a hex Ed25519 secret key seed (64 hex digits).
pub fn parse_secret_key(hex_seed: &str) -> Result<SecretKey, Error> {
    let bytes = hex::decode(hex_seed)
        .map_err(|e| Error::malformed(format!("secret key is not hex: {e}")))?;
    let seed: [u8; 32] = bytes
        .try_into()
        .map_err(|_| Error::malformed("secret key must be 32 bytes (64 hex digits)"))?;
    Ok(SecretKey::from_bytes(&seed))
}

/// Canonical CBOR (RFC 8949 §4.2.1) of a JSON-like JS value. Floats are refused.
#[wasm_bindgen(js_name = canonicalEncode)]
pub fn canonical_encode(value: JsValue) -> Result<Vec<u8>, CodecError> {
    let json = json_from_js(value)?;
    Ok(canonical::to_vec(&json).map_err(Error::from)?)
}

/// Decodes canonical CBOR into a JS value; `strict = false` also accepts valid but
/// non-canonical encodings.
#[wasm_bindgen(js_name = canonicalDecode)]
pub fn canonical_decode(bytes: &[u8], strict: Option<bool>) -> Result<JsValue, CodecError> {
    let strictness = if strict.unwrap_or(true) {
        Strictness::Canonical
    } else {
        Strictness::Lenient
    };
    let value: serde_json::Value = canonical::from_slice(bytes, strictness).map_err(Error::from)?;
    Ok(to_js(&value)?)
}

/// SHA-256 (hex) of the canonical CBOR of a JSON-like JS value.
#[wasm_bindgen(js_name = canonicalHash)]
pub fn canonical_hash(value: JsValue) -> Result<String, CodecError> {
    let bytes = canonical_encode(value)?;
    Ok(hex::encode(canonical::sha256(&bytes)))
}

/// Decodes a stored event (canonical CBOR) into its JSON form. Does not verify it.
#[wasm_bindgen(js_name = decodeEvent)]
pub fn decode_event(bytes: &[u8]) -> Result<JsValue, CodecError> {
    let event = Event::from_cbor(bytes)?;
    Ok(to_js(&event)?)
}

/// Encodes an event given in its JSON form (or as bytes) into canonical CBOR.
#[wasm_bindgen(js_name = encodeEvent)]
pub fn encode_event(event: JsValue) -> Result<Vec<u8>, CodecError> {
    Ok(event_from_js(event)?.to_cbor()?)
}

/// Checks an event's payload hash and id; throws `LOG_CORRUPT` naming the first that fails.
#[wasm_bindgen(js_name = verifyEvent)]
pub fn verify_event(event: JsValue) -> Result<(), CodecError> {
    verified_event_from_js(event)?;
    Ok(())
}

/// The redacted form (SPEC §6) of a stored event (canonical CBOR in, canonical CBOR out):
/// every opaque value replaced by `{"$redacted": "<its hash>"}`; id, payload hash and chain
/// unchanged. What a file store writes to its redaction overlay.
#[wasm_bindgen(js_name = redactEvent)]
pub fn redact_event(bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut event = Event::from_cbor(bytes)?;
    event.redact()?;
    Ok(event.to_cbor()?)
}

/// The receipt an event gives its sender, as a JS object.
#[wasm_bindgen(js_name = receiptOf)]
pub fn receipt_of(event: JsValue) -> Result<JsValue, CodecError> {
    Ok(to_js(&event_from_js(event)?.receipt())?)
}

/// Parses a command (JSON-form object or CBOR bytes) and gives back its JSON form:
/// checks the limits and field rules without deciding anything.
#[cfg(feature = "full")]
#[wasm_bindgen(js_name = parseCommand)]
pub fn parse_command(command: JsValue) -> Result<JsValue, CodecError> {
    Ok(to_js(&command_from_js(command, &Limits::default())?)?)
}

/// Canonical CBOR of a command, `sig` included.
#[cfg(feature = "full")]
#[wasm_bindgen(js_name = encodeCommand)]
pub fn encode_command(command: JsValue) -> Result<Vec<u8>, CodecError> {
    Ok(command_from_js(command, &Limits::default())?.to_cbor()?)
}

/// Content hash (hex) of a command: SHA-256 of the canonical CBOR of every field but `sig`.
#[cfg(feature = "full")]
#[wasm_bindgen(js_name = commandContentHash)]
pub fn command_content_hash(command: JsValue) -> Result<String, CodecError> {
    let command = with_placeholder_sig(command)?;
    Ok(command_from_js(command, &Limits::default())?
        .content_hash()?
        .to_hex())
}

/// Signs a command given in its JSON form (its `sig`, if any, is replaced) with a secret key
/// seed (64 hex digits); returns the signed command in its JSON form.
#[cfg(feature = "full")]
#[wasm_bindgen(js_name = signCommand)]
pub fn sign_command(command: JsValue, secret_key_hex: &str) -> Result<JsValue, CodecError> {
    let key = parse_secret_key(secret_key_hex)?;
    let command = with_placeholder_sig(command)?;
    let mut cmd = command_from_js(command, &Limits::default())?;
    cmd.sign(&key)?;
    Ok(to_js(&cmd)?)
}

/// Whether a command's signature verifies under a public key.
#[cfg(feature = "full")]
#[wasm_bindgen(js_name = verifyCommand)]
pub fn verify_command(command: JsValue, public_key_hex: &str) -> Result<bool, CodecError> {
    let key = public_key(public_key_hex)?;
    Ok(command_from_js(command, &Limits::default())?.verify(&key)?)
}

/// Adds an all-zero `sig` to a JSON-form command that has none, so it parses.
#[cfg(feature = "full")]
fn with_placeholder_sig(command: JsValue) -> Result<JsValue, Error> {
    if command.is_instance_of::<js_sys::Uint8Array>() || !command.is_object() {
        return Ok(command);
    }
    let mut json = json_from_js(command)?;
    if let Some(map) = json.as_object_mut() {
        if map.get("sig").is_none_or(serde_json::Value::is_null) {
            map.insert("sig".into(), serde_json::Value::String("00".repeat(64)));
        }
    }
    to_js(&json)
}

/// The `Authorization` header value of a member-signed read (docs/http.md): `actor` signs
/// `method` and `target` (the path with its query, exactly as sent) at `at_ms` (milliseconds
/// since the epoch) with its secret key seed (hex). The bytes are built and signed by the core.
#[wasm_bindgen(js_name = signRead)]
pub fn sign_read(
    method: &str,
    target: &str,
    actor: &str,
    at_ms: f64,
    secret_key_hex: &str,
) -> Result<String, CodecError> {
    let key = parse_secret_key(secret_key_hex)?;
    let actor = mwp_core::Id::new(actor).map_err(|e| Error::malformed(format!("actor: {e}")))?;
    let at_ms = uint(at_ms, "at_ms")?;
    let read = mwp_core::signed_read::SignedRead::sign(method, target, actor, at_ms, &key)?;
    Ok(read.header_value())
}

/// The public key (hex) of a secret key seed (hex).
#[wasm_bindgen(js_name = publicKeyOf)]
pub fn public_key_of(secret_key_hex: &str) -> Result<String, CodecError> {
    Ok(parse_secret_key(secret_key_hex)?.public().to_hex())
}

/// The secret key seed (hex) the transcript runner derives for an actor:
/// `sha256("mwp transcript key " + actor)`. For tests and demos only.
#[wasm_bindgen(js_name = transcriptSecretKey)]
pub fn transcript_secret_key(actor: &str) -> String {
    hex::encode(SecretKey::for_transcript(actor).to_bytes())
}

/// SHA-256 (hex) of bytes.
#[wasm_bindgen]
pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(canonical::sha256(bytes))
}

/// A JS number that must be a non-negative integer no larger than 2^53 − 1 (times, seqs).
pub fn uint(value: f64, what: &str) -> Result<u64, Error> {
    if value.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&value) {
        // In range and integral: the cast is exact.
        Ok(value as u64)
    } else {
        Err(Error::malformed(format!(
            "`{what}` must be a non-negative integer up to 2^53 - 1, got {value}"
        )))
    }
}

/// An optional count from JS (a page's `limit`): [`uint`]'s rules, then at most `u32::MAX`
/// (a larger one asks for everything, as `u32::MAX` does). Never wrapped: -1 is not 2^32 − 1.
pub fn count(value: Option<f64>, what: &str) -> Result<Option<u32>, Error> {
    value
        .map(|n| uint(n, what).map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
        .transpose()
}

/// A u64 as a JS number (exact up to 2^53, which seqs and times stay below).
pub fn num(value: u64) -> f64 {
    value as f64
}
