//! The `Expect` check ([`Gate`](super::gate::Gate)): a request that expects anything but
//! `100-continue` is answered 417 Expectation Failed before any route runs (RFC 9110,
//! section 10.1.1), in the error shape (`MALFORMED`, `header: "expect"`), and changes nothing.

use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use mwp_core::Error;

use super::gate::{Check, Verdict};
use super::wire::{self, Format};

/// Passes a request without `Expect` or with one `Expect: 100-continue` (any ASCII case), the
/// only form hyper answers with `100 Continue`; answers any other 417.
#[derive(Clone)]
pub(crate) struct ExpectCheck;

impl Check for ExpectCheck {
    fn check(&self, _: &Method, _: &Uri, headers: &HeaderMap) -> Verdict {
        let mut values = headers.get_all(header::EXPECT).iter();
        let Some(first) = values.next() else {
            return Verdict::Pass;
        };
        let more = values.count();
        let what = if more > 0 {
            format!("the request has {} Expect headers", more + 1)
        } else if first.as_bytes().eq_ignore_ascii_case(b"100-continue") {
            return Verdict::Pass;
        } else {
            format!(
                "Expect {:?} cannot be met",
                first.to_str().unwrap_or("\u{fffd}")
            )
        };
        Verdict::Answer(wire::error_with(
            StatusCode::EXPECTATION_FAILED,
            Format::accepted(headers, Format::Json),
            &Error::malformed(format!(
                "{what}; the server meets only Expect: 100-continue (RFC 9110, section 10.1.1)"
            ))
            .with("header", "expect"),
        ))
    }
}
