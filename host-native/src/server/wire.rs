//! The wire: JSON or CBOR by `Content-Type`/`Accept`, and errors as `{code, message, …}`
//! with the HTTP status of each code (the table is in docs/http.md).

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mwp_core::{canonical, Code, Error};
use serde::Serialize;

/// The media type of CBOR bodies.
pub const CBOR: &str = "application/cbor";
/// The media type of JSON bodies.
pub const JSON: &str = "application/json";

/// How a body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/cbor` (canonical CBOR).
    Cbor,
}

impl Format {
    /// The format a client asks for in `Accept`, read as media ranges (RFC 9110, section
    /// 12.5.1): each format takes the weight of the most specific range that matches it
    /// exactly (`application/json`, then `application/*`, then `*/*`; `q=0` means not
    /// acceptable), and the heavier one wins. On a tie the one named first wins, and
    /// `default` when neither is named (`*/*`, `application/*`). `default` also answers when
    /// `Accept` is absent or accepts neither: the server then answers in its own format, as
    /// RFC 9110 lets it, rather than 406.
    pub fn accepted(headers: &HeaderMap, default: Format) -> Format {
        let mut json = Weight::NONE;
        let mut cbor = Weight::NONE;
        let ranges = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','));
        for (place, range) in ranges.enumerate() {
            let Some((media, q)) = media_range(range) else {
                continue;
            };
            json.consider(media, JSON, q, place);
            cbor.consider(media, CBOR, q, place);
        }
        if json.q == 0 && cbor.q == 0 {
            return default;
        }
        match json.q.cmp(&cbor.q) {
            std::cmp::Ordering::Greater => Format::Json,
            std::cmp::Ordering::Less => Format::Cbor,
            std::cmp::Ordering::Equal => match json.named.cmp(&cbor.named) {
                std::cmp::Ordering::Less => Format::Json,
                std::cmp::Ordering::Greater => Format::Cbor,
                std::cmp::Ordering::Equal => default,
            },
        }
    }

    /// The format of a request body from `Content-Type`: JSON when absent, `MALFORMED` when
    /// it is neither JSON nor CBOR, or JSON in a charset other than UTF-8 (the only one a
    /// JSON body is read in; CBOR is binary, so its parameters are ignored).
    pub fn of_request(headers: &HeaderMap) -> Result<Format, Error> {
        let mut values = headers.get_all(header::CONTENT_TYPE).iter();
        let Some(value) = values.next() else {
            return Ok(Format::Json);
        };
        // Two `Content-Type` headers could each be read as the one: neither is (RFC 9110,
        // section 5.3: the field is not a list).
        let more = values.count();
        if more > 0 {
            return Err(Error::malformed(format!(
                "Content-Type is given {} times; send it once",
                more + 1
            ))
            .with("header", "content-type"));
        }
        let lossy = String::from_utf8_lossy(value.as_bytes());
        let text = lossy.as_ref();
        let mut parts = text.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        match media.as_str() {
            JSON => {
                for param in parts {
                    let (name, value) = param.split_once('=').unwrap_or((param, ""));
                    let value = value.trim().trim_matches('"');
                    if name.trim().eq_ignore_ascii_case("charset")
                        && !value.eq_ignore_ascii_case("utf-8")
                    {
                        return Err(Error::malformed(format!(
                            "Content-Type {text:?}: a JSON body is read as UTF-8 only; send it in UTF-8 (charset=utf-8, or no charset)"
                        ))
                        .with("header", "content-type"));
                    }
                }
                Ok(Format::Json)
            }
            CBOR => Ok(Format::Cbor),
            _ => Err(Error::malformed(format!(
                "Content-Type {text:?} is not supported; send {JSON} or {CBOR} (with curl: -H 'content-type: application/json')"
            ))
            .with("header", "content-type")),
        }
    }

    fn media_type(self) -> &'static str {
        match self {
            Format::Json => JSON,
            Format::Cbor => CBOR,
        }
    }
}

/// How much a client's `Accept` wants one format: the weight (thousandths) of the most
/// specific media range that matches it, and where that format is named exactly.
#[derive(Debug, Clone, Copy)]
struct Weight {
    /// 0 (not acceptable, or not matched) to 1000.
    q: u16,
    /// How specific the range that set `q` is: 0 none, 1 `*/*`, 2 `application/*`, 3 exact.
    specific: u8,
    /// The place of the exact range naming it, `usize::MAX` when none does.
    named: usize,
}

impl Weight {
    const NONE: Weight = Weight {
        q: 0,
        specific: 0,
        named: usize::MAX,
    };

    /// Takes the range `media` (lowercase) of weight `q` at `place` into account for the
    /// media type `of`.
    fn consider(&mut self, media: &str, of: &str, q: u16, place: usize) {
        let specific = if media.eq_ignore_ascii_case(of) {
            3
        } else if media.eq_ignore_ascii_case("application/*") {
            2
        } else if media == "*/*" {
            1
        } else {
            return;
        };
        // The most specific range decides; among equally specific ones, the first.
        if specific > self.specific {
            self.q = q;
            self.specific = specific;
            if specific == 3 {
                self.named = place;
            }
        }
    }
}

/// One media range of `Accept`: its type (lowercase) and its weight in thousandths; `None`
/// when its weight is not a qvalue (such a range is left out).
fn media_range(range: &str) -> Option<(&str, u16)> {
    let mut parts = range.split(';');
    let media = parts.next()?.trim();
    if media.is_empty() {
        return None;
    }
    let mut q = 1000;
    for param in parts {
        if let Some((name, value)) = param.split_once('=') {
            if name.trim().eq_ignore_ascii_case("q") {
                q = qvalue(value.trim())?;
            }
        }
    }
    Some((media, q))
}

/// A qvalue (`0`, `0.5`, `1.000`, …: RFC 9110, section 12.4.2) in thousandths.
fn qvalue(text: &str) -> Option<u16> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Thousandths: "5" is 500, "25" is 250, "125" is 125.
    let frac_value = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0u16, |v, d| v * 10 + u16::from(d - b'0'));
    match whole {
        "0" => Some(frac_value),
        "1" if frac_value == 0 => Some(1000),
        _ => None,
    }
}

/// The HTTP status that answers an error code.
pub fn status_of(code: Code) -> StatusCode {
    match code {
        Code::Malformed => StatusCode::BAD_REQUEST,
        Code::BadSignature | Code::UnknownActor | Code::Unauthorized => StatusCode::UNAUTHORIZED,
        Code::Forbidden => StatusCode::FORBIDDEN,
        Code::CursorTooOld => StatusCode::GONE,
        Code::Storage => StatusCode::SERVICE_UNAVAILABLE,
        Code::LogCorrupt | Code::SnapshotInvalid => StatusCode::INTERNAL_SERVER_ERROR,
        // Every other code is a rule of SPEC §3–§5 saying no: a conflict with the state.
        _ => StatusCode::CONFLICT,
    }
}

/// `body` encoded as `format`, with `status`.
pub fn encode<T: Serialize>(status: StatusCode, format: Format, body: &T) -> Response {
    let bytes = match format {
        Format::Json => serde_json::to_vec(body).map_err(|e| e.to_string()),
        Format::Cbor => canonical::to_vec(body).map_err(|e| e.to_string()),
    };
    match bytes {
        Ok(bytes) => {
            let mut resp = (status, bytes).into_response();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.media_type()),
            );
            resp
        }
        Err(e) => {
            let err = Error::new(
                Code::Storage,
                format!("the answer could not be encoded: {e}"),
            );
            let body = serde_json::to_vec(&err).unwrap_or_default();
            let mut resp = (StatusCode::INTERNAL_SERVER_ERROR, body).into_response();
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
            resp
        }
    }
}

/// An error answer with the status of its code.
pub fn error(format: Format, err: &Error) -> Response {
    encode(status_of(err.code), format, err)
}

/// An error answer with an explicit status (404 for an unknown group on a read, …).
pub fn error_with(status: StatusCode, format: Format, err: &Error) -> Response {
    encode(status, format, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: header::HeaderName, value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn accept_picks_cbor_only_when_named() {
        let none = HeaderMap::new();
        assert_eq!(Format::accepted(&none, Format::Json), Format::Json);
        assert_eq!(Format::accepted(&none, Format::Cbor), Format::Cbor);
        let cbor = headers(header::ACCEPT, "application/cbor");
        assert_eq!(Format::accepted(&cbor, Format::Json), Format::Cbor);
        let both = headers(header::ACCEPT, "application/json, application/cbor");
        assert_eq!(Format::accepted(&both, Format::Cbor), Format::Json);
    }

    #[test]
    fn accept_is_read_as_media_ranges() {
        for (accept, default, want) in [
            // Another type whose name starts like one of ours is neither.
            ("application/cbor-seq", Format::Json, Format::Json),
            ("application/json-patch+json", Format::Cbor, Format::Cbor),
            // q=0: not acceptable.
            (
                "application/json;q=0, application/cbor",
                Format::Json,
                Format::Cbor,
            ),
            ("application/cbor; q=0", Format::Cbor, Format::Cbor),
            ("application/json;q=0", Format::Json, Format::Json),
            // The heavier wins, wherever it is listed.
            (
                "application/json;q=0.5, application/cbor;q=0.9",
                Format::Json,
                Format::Cbor,
            ),
            (
                "application/cbor;q=0.5, application/json",
                Format::Cbor,
                Format::Json,
            ),
            // Wildcards take the default; a more specific range decides over them.
            ("*/*", Format::Cbor, Format::Cbor),
            ("application/*", Format::Json, Format::Json),
            ("*/*, application/json;q=0", Format::Json, Format::Cbor),
            ("Application/CBOR", Format::Json, Format::Cbor),
            // A weight that is not a qvalue leaves its range out.
            ("application/cbor;q=2", Format::Json, Format::Json),
            ("application/cbor;q=0.0001", Format::Json, Format::Json),
        ] {
            let h = headers(header::ACCEPT, accept);
            assert_eq!(Format::accepted(&h, default), want, "{accept}");
        }
    }

    #[test]
    fn content_type_other_than_json_or_cbor_is_malformed() {
        let text = headers(header::CONTENT_TYPE, "text/plain");
        let err = Format::of_request(&text).expect_err("refused");
        assert_eq!(err.code, Code::Malformed);
        let mut two = headers(header::CONTENT_TYPE, "application/json");
        two.append(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let err = Format::of_request(&two).expect_err("refused");
        assert!(err.message.contains("given 2 times"), "{}", err.message);
        let mut latin = HeaderMap::new();
        latin.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_bytes(b"text/pl\xe9in").expect("a header value"),
        );
        let err = Format::of_request(&latin).expect_err("refused");
        assert!(err.message.contains("text/pl\u{fffd}in"), "{}", err.message);
        let cbor = headers(header::CONTENT_TYPE, "application/cbor; charset=binary");
        assert_eq!(Format::of_request(&cbor).expect("cbor"), Format::Cbor);
        for utf8 in [
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
        ] {
            let h = headers(header::CONTENT_TYPE, utf8);
            assert_eq!(Format::of_request(&h).expect(utf8), Format::Json);
        }
        for other in [
            "application/json; charset=utf-16",
            "application/json; charset=latin1",
        ] {
            let err = Format::of_request(&headers(header::CONTENT_TYPE, other)).expect_err(other);
            assert_eq!(err.code, Code::Malformed);
            assert!(err.message.contains("UTF-8"), "{}", err.message);
        }
    }

    #[test]
    fn statuses_follow_the_table() {
        assert_eq!(status_of(Code::Malformed), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(Code::BadSignature), StatusCode::UNAUTHORIZED);
        assert_eq!(status_of(Code::RevisionMismatch), StatusCode::CONFLICT);
        assert_eq!(status_of(Code::CursorTooOld), StatusCode::GONE);
        assert_eq!(status_of(Code::Storage), StatusCode::SERVICE_UNAVAILABLE);
    }
}
