//! `GET /v1/openapi.json`: the OpenAPI 3.1 document of this server (docs/openapi.json), with
//! a JSON Schema for every command body, event kind, receipt and error.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The document, as committed in docs/openapi.json.
pub const DOCUMENT: &str = include_str!("../../../docs/openapi.json");

/// `GET /v1/openapi.json`.
pub(crate) async fn document() -> Response {
    let mut resp = (StatusCode::OK, DOCUMENT).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}
