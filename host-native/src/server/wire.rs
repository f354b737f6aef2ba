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
    /// The format a client asks for in `Accept` (JSON unless CBOR is named), or `default`
    /// when `Accept` names neither.
    pub fn accepted(headers: &HeaderMap, default: Format) -> Format {
        let accept = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        let cbor = accept.contains(CBOR);
        let json = accept.contains(JSON);
        match (json, cbor) {
            (false, true) => Format::Cbor,
            (true, false) => Format::Json,
            // Both named: the first one listed wins.
            (true, true) => {
                if accept.find(CBOR) < accept.find(JSON) {
                    Format::Cbor
                } else {
                    Format::Json
                }
            }
            (false, false) => default,
        }
    }

    /// The format of a request body from `Content-Type`: JSON when absent, `MALFORMED` when
    /// it is neither JSON nor CBOR.
    pub fn of_request(headers: &HeaderMap) -> Result<Format, Error> {
        let Some(value) = headers.get(header::CONTENT_TYPE) else {
            return Ok(Format::Json);
        };
        let text = value.to_str().unwrap_or("");
        let media = text
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            JSON => Ok(Format::Json),
            CBOR => Ok(Format::Cbor),
            _ => Err(Error::malformed(format!(
                "Content-Type {text:?} is not supported; send {JSON} or {CBOR} (with curl: -H 'content-type: application/json')"
            ))),
        }
    }

    fn media_type(self) -> &'static str {
        match self {
            Format::Json => JSON,
            Format::Cbor => CBOR,
        }
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
    fn content_type_other_than_json_or_cbor_is_malformed() {
        let text = headers(header::CONTENT_TYPE, "text/plain");
        let err = Format::of_request(&text).expect_err("refused");
        assert_eq!(err.code, Code::Malformed);
        let cbor = headers(header::CONTENT_TYPE, "application/cbor; charset=binary");
        assert_eq!(Format::of_request(&cbor).expect("cbor"), Format::Cbor);
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
