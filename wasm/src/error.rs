//! Errors as JavaScript sees them: one small type per export, each turned into a JS `Error`
//! whose `name` names the export's error type (`AcceptError`, `OfferError`, …), with the
//! spec's `code` (`"REVISION_MISMATCH"`, …) and the error's details as `details`.

use mwp_core::{Code, Error};
use wasm_bindgen::JsValue;

/// Builds the JS `Error` for a core error: `name`, `message`, `code`, `details`.
pub fn to_js_error(name: &str, error: &Error) -> JsValue {
    let js = js_sys::Error::new(&error.message);
    js.set_name(name);
    let obj: &JsValue = js.as_ref();
    // `Reflect::set` on a fresh, extensible Error object cannot fail.
    let _ = js_sys::Reflect::set(obj, &"code".into(), &error.code.as_str().into());
    let details = crate::codec::to_js(&error.details).unwrap_or(JsValue::UNDEFINED);
    let _ = js_sys::Reflect::set(obj, &"details".into(), &details);
    js.into()
}

macro_rules! export_errors {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name(pub Error);

        impl From<Error> for $name {
            fn from(e: Error) -> Self {
                $name(e)
            }
        }

        impl From<$name> for JsValue {
            fn from(e: $name) -> JsValue {
                to_js_error(stringify!($name), &e.0)
            }
        }

        impl $name {
            /// A `MALFORMED` error with this message.
            pub fn malformed(message: impl Into<String>) -> Self {
                $name(Error::malformed(message))
            }

            /// The spec's code.
            pub fn code(&self) -> Code {
                self.0.code
            }
        }
    )*};
}

export_errors! {
    /// Raised by `Authority` calls: a rejected command, or an event that does not apply.
    AcceptError;
    /// Raised by `Replica` calls: an event or snapshot the replica cannot take.
    OfferError;
    /// Raised by snapshot building and verification (`SNAPSHOT_INVALID`, …).
    SnapshotError;
    /// Raised by encoding, decoding, hashing and signing helpers.
    CodecError;
    /// Raised by the IndexedDB stores (`STORAGE`, `LOG_CORRUPT`, …).
    StoreError;
    /// Raised by `Agent` and `AgentImage` calls: bad input, or an action the driver refuses
    /// (e.g. `NOT_FOUND` for work it does not hold).
    AgentError;
    /// Raised by the transcript runner and the vector runner for unreadable input.
    TranscriptError;
    /// Raised by the static export reader and planner (`HEAD_INVALID`, `LOG_CORRUPT`, `FORK`,
    /// `SNAPSHOT_INVALID`, `MALFORMED`), naming the file in `details.file`.
    ExportError;
}

/// A `STORAGE` error naming what failed.
pub fn storage(what: impl std::fmt::Display) -> Error {
    Error::new(Code::Storage, format!("IndexedDB: {what}"))
}

/// The error a server answered with (`body`: its JSON form, or canonical CBOR), as the
/// native client reads it (the core's `Error::from_answer`): `{code, message, details}`, the
/// message quoted printable and cut at 1,000 characters; `undefined` unless it is an mwp
/// error with a code of the spec's. In every build: the dashboard's module (the `dashboard`
/// feature, without `full`) runs the npm package's `Client`, which reads every answer with it.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = errorOfAnswer)]
pub fn error_of_answer(body: &[u8]) -> JsValue {
    let Some(e) = Error::from_answer(body) else {
        return JsValue::UNDEFINED;
    };
    let obj = js_sys::Object::new();
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(&obj, &"code".into(), &e.code.as_str().into());
    let _ = js_sys::Reflect::set(&obj, &"message".into(), &e.message.as_str().into());
    let details = crate::codec::to_js(&e.details).unwrap_or(JsValue::UNDEFINED);
    let _ = js_sys::Reflect::set(&obj, &"details".into(), &details);
    obj.into()
}

/// `text` fit for a terminal, as the native client quotes a server's words (the core's
/// `printable`): control characters other than newline and tab escaped (`\u{1b}`), cut after
/// `max` characters with `…`. For a server's text that is not an mwp error.
#[wasm_bindgen::prelude::wasm_bindgen(js_name = printable)]
pub fn printable(text: &str, max: u32) -> String {
    mwp_core::error::printable(text, max as usize)
}
