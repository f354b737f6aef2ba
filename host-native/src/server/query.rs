//! Query strings of the read routes, decoded strictly: every key must be one the route knows,
//! at most once, and every value a decimal `u64` (digits only, no sign, not empty, no larger
//! than 18446744073709551615). Anything else is `MALFORMED` naming the parameter, so no
//! input reaches the store as a value it did not ask for.

use axum::http::{HeaderMap, Method, Uri};
use mwp_core::Error;

use super::gate::{Check, Verdict};
use super::wire::{self, Format};

/// The query keys an API route takes, by its path: `…/events` takes `after` and `limit`,
/// `…/events/stream` takes `after`, every other `/v1/` route none.
pub(crate) fn keys_of(path: &str) -> &'static [&'static str] {
    if path.ends_with("/events/stream") {
        &["after"]
    } else if path.ends_with("/events") {
        &["after", "limit"]
    } else {
        &[]
    }
}

/// The strict query check ([`Gate`](super::gate::Gate)): a `/v1/` request whose query does
/// not decode under [`keys_of`] is answered 400 `MALFORMED` naming the parameter before any
/// route runs (the dashboard's own pages keep their query strings).
#[derive(Clone)]
pub(crate) struct StrictQuery;

impl Check for StrictQuery {
    fn check(&self, _: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict {
        let path = uri.path();
        if path.starts_with("/v1/") {
            if let Err(e) = parse(uri.query(), keys_of(path)) {
                return Verdict::Answer(wire::error(Format::accepted(headers, Format::Json), &e));
            }
        }
        Verdict::Pass
    }
}

/// The values of a query string, by the keys a route accepts.
#[derive(Debug, Default)]
pub(crate) struct Params {
    values: Vec<(&'static str, u64)>,
}

impl Params {
    /// The value of `key`, if it was given.
    pub(crate) fn get(&self, key: &str) -> Option<u64> {
        self.values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// Decodes `raw` (the part of the URL after `?`, if any) against the keys a route accepts.
pub(crate) fn parse(raw: Option<&str>, known: &[&'static str]) -> Result<Params, Error> {
    let mut params = Params::default();
    let Some(raw) = raw else {
        return Ok(params);
    };
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key).ok_or_else(|| {
            Error::malformed(format!(
                "query: {key:?} is not valid percent-encoding ({ESCAPES}); {}",
                usage(known)
            ))
            .with("parameter", key)
        })?;
        let Some(&name) = known.iter().find(|k| **k == key) else {
            return Err(Error::malformed(format!(
                "query: unknown parameter {key:?}; {}",
                usage(known)
            ))
            .with("parameter", key));
        };
        if params.get(name).is_some() {
            return Err(Error::malformed(format!(
                "query: parameter {name} is given more than once; give it once"
            ))
            .with("parameter", name));
        }
        let Some(value) = decode(value) else {
            return Err(Error::malformed(format!(
                "query: {name}={value:?} is not valid percent-encoding ({ESCAPES}); {name} must be an integer from 0 to {}",
                u64::MAX
            ))
            .with("parameter", name));
        };
        params.values.push((name, number(name, &value)?));
    }
    Ok(params)
}

/// A decimal `u64`, or `MALFORMED` naming the query parameter `name`.
fn number(name: &str, value: &str) -> Result<u64, Error> {
    decimal(value).map_err(|why| {
        Error::malformed(format!(
            "query: {name}={value:?} {why}; {name} must be an integer from 0 to {}",
            u64::MAX
        ))
        .with("parameter", name)
    })
}

/// The value of the `Last-Event-ID` header(s) of a live tail, if any: a decimal `u64` given
/// once, or `MALFORMED` naming the header (`header` detail).
pub(crate) fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, Error> {
    let bad = |what: String| {
        Error::malformed(format!(
            "header Last-Event-ID: {what}; it must be given once, an integer from 0 to {}",
            u64::MAX
        ))
        .with("header", "last-event-id")
    };
    let mut values = headers.get_all("last-event-id").iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let more = values.count();
    if more > 0 {
        return Err(bad(format!("it is given {} times", more + 1)));
    }
    let text = value.to_str().unwrap_or("\u{fffd}").trim();
    decimal(text)
        .map(Some)
        .map_err(|why| bad(format!("{text:?} {why}")))
}

/// A decimal `u64` (digits only), or why not.
fn decimal(value: &str) -> Result<u64, &'static str> {
    if value.is_empty() {
        return Err("is empty");
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err("is not a non-negative decimal integer");
    }
    value.parse::<u64>().map_err(|_| "is too large")
}

fn usage(known: &[&'static str]) -> String {
    if known.is_empty() {
        "this route takes no query parameters".to_owned()
    } else {
        let list: Vec<String> = known.iter().map(|k| format!("{k}=N")).collect();
        format!("this route takes {}", list.join(", "))
    }
}

/// What valid percent-encoding is, for the messages that refuse a query key or value.
const ESCAPES: &str = "an escape is % and two hex digits, and the bytes decoded are UTF-8";

/// Percent-decoding (and `+` as space, as forms send it); `None` when it is not UTF-8 or an
/// escape is broken.
fn decode(s: &str) -> Option<String> {
    decode_with(s, true)
}

/// A path segment percent-decoded as the router decodes it (`+` stays `+`); `None` when it is
/// not UTF-8 or an escape is broken.
pub(crate) fn decode_segment(s: &str) -> Option<String> {
    decode_with(s, false)
}

fn decode_with(s: &str, plus_is_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                // Two hex digits and nothing else: `u8::from_str_radix` would also take a
                // sign (`%+1` as byte 1), which no percent-decoder on the way here reads so.
                let (high, low) = (bytes.get(i + 1)?, bytes.get(i + 2)?);
                out.push((hex_digit(*high)? << 4) | hex_digit(*low)?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// The value of an ASCII hex digit (either case), or `None`.
fn hex_digit(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_numbers() {
        let p = parse(
            Some("after=18446744073709551615&limit=1"),
            &["after", "limit"],
        )
        .unwrap();
        assert_eq!(p.get("after"), Some(u64::MAX));
        assert_eq!(p.get("limit"), Some(1));
        for bad in [
            "after=",
            "after=-1",
            "after=+1",
            "after=1e3",
            "after=18446744073709551616",
            "after=1&after=2",
            "before=1",
            "after=%zz",
            "after= 1",
        ] {
            let e = parse(Some(bad), &["after", "limit"]).expect_err(bad);
            assert_eq!(e.code, mwp_core::Code::Malformed, "{bad}");
        }
        assert!(parse(Some(""), &[]).is_ok());
        assert!(parse(Some("x=1"), &[]).is_err());
    }

    #[test]
    fn an_escape_is_two_hex_digits() {
        assert_eq!(decode_segment("g%31%2b%2F").as_deref(), Some("g1+/"));
        assert_eq!(decode("a+b%20c").as_deref(), Some("a b c"));
        for bad in ["%+1", "%-1", "%+F", "% 1", "%1", "%", "%1g", "%g1", "g%+31"] {
            assert_eq!(decode_segment(bad), None, "{bad}");
            assert_eq!(decode(bad), None, "{bad}");
        }
        // Two hex digits, but not UTF-8: the message says so, not only that an escape is
        // two hex digits.
        for query in ["after=%FF", "%FF=1"] {
            let err = parse(Some(query), &["after"]).expect_err(query);
            assert!(err.message.contains("UTF-8"), "{query}: {}", err.message);
        }
    }
}
