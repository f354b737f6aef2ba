//! A small blocking client of the `mwp serve` API, used by the demo's agents, the benchmark
//! and the end-to-end tests. Every failure is a core [`Error`]: the server's own error when it
//! answered one, `STORAGE` when it could not be reached.

use std::time::Duration;

use mwp_core::head::SignedHead;
use mwp_core::{Code, Command, Error, Event, Id, PublicKey, Receipt, Result};
use serde::Deserialize;

/// The answer to a submitted command that was not rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The receipt.
    pub receipt: Receipt,
    /// Whether the server answered it as a Duplicate (`Mwp-Duplicate: true`).
    pub duplicate: bool,
}

/// A client of one server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    agent: ureq::Agent,
    /// The `Authorization` header sent with every request, if any.
    authorization: Option<String>,
}

/// A page of events (`GET /v1/groups/{group}/events`) with the server's latest signed head
/// (SPEC §8a), which may be behind the page's last event or ahead of it. Unverified: offer
/// it to a replica under a key you pin ([`mwp_core::replica::Replica::offer_head`]).
#[derive(Debug, Clone, Deserialize)]
pub struct Page {
    /// Events with seq > the cursor, in order.
    pub events: Vec<Event>,
    /// The signed head; `None` from a server that sends none.
    #[serde(default)]
    pub head: Option<SignedHead>,
}

#[derive(Deserialize)]
struct GroupsAnswer {
    groups: Vec<GroupHead>,
}

/// A group the server holds, and its last seq (`GET /v1/groups`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GroupHead {
    /// The group.
    pub group: Id,
    /// Seq of its last event.
    pub head: u64,
}

#[derive(Deserialize)]
struct AuthorityAnswer {
    key: PublicKey,
}

/// Largest answer body read, in bytes.
const MAX_ANSWER_BYTES: u64 = 512 * 1024 * 1024;

/// Largest error answer read, in bytes: an mwp error is a short JSON object, so a longer one
/// is not mwp's and is not read further.
const MAX_ERROR_BYTES: u64 = 64 * 1024;

/// Largest receipt read, in bytes: a receipt is a few IDs and hashes.
const MAX_RECEIPT_BYTES: u64 = 64 * 1024;

/// How a server's words are quoted in an error: the core's rule, shared with the npm client.
pub use mwp_core::error::{printable, MAX_QUOTED_CHARS};

/// Time a whole request may take (connect, send, answer, body).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Time a live tail may go without receiving a byte (its answer's head included) before it
/// is given up as dropped: four of the server's keep-alive comments (every 15 s,
/// docs/http.md "Limits").
pub const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

fn unreachable(url: &str, e: impl std::fmt::Display) -> Error {
    Error::new(Code::Storage, format!("cannot reach {url}: {e}"))
}

/// Reads a body of at most `limit` bytes; a longer one is `MALFORMED` (not an mwp answer),
/// read no further than one byte past the limit.
fn read_body(url: &str, body: &mut ureq::Body, limit: u64) -> Result<Vec<u8>> {
    match body.with_config().limit(limit).read_to_vec() {
        Ok(bytes) => Ok(bytes),
        Err(ureq::Error::BodyExceedsLimit(_)) => Err(Error::malformed(format!(
            "{url} answered more than {limit} bytes: not an mwp answer"
        ))
        .with("limit", limit)),
        Err(e) => Err(unreachable(url, e)),
    }
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:7878`).
    pub fn new(base: impl Into<String>) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_idle_connections(256)
            .max_idle_connections_per_host(256)
            .build()
            .into();
        Client {
            base: base.into().trim_end_matches('/').to_owned(),
            agent,
            authorization: None,
        }
    }

    /// Sends `Authorization: Bearer TOKEN` (an operator token, docs/http.md "Access") with
    /// every request.
    pub fn with_token(mut self, token: &str) -> Self {
        self.authorization = Some(format!("Bearer {token}"));
        self
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Reads an answer: the body (at most `limit` bytes) on 2xx, the server's error
    /// otherwise. An error answer is read up to [`MAX_ERROR_BYTES`], and what a server says
    /// in it is quoted [`printable`].
    fn read(
        url: &str,
        mut resp: ureq::http::Response<ureq::Body>,
        limit: u64,
    ) -> Result<(bool, Vec<u8>)> {
        let status = resp.status();
        let duplicate = resp
            .headers()
            .get("mwp-duplicate")
            .is_some_and(|v| v.as_bytes() == b"true");
        if status.is_success() {
            let body = read_body(url, resp.body_mut(), limit)?;
            return Ok((duplicate, body));
        }
        let not_mwp = |what: String| {
            Error::new(Code::Storage, format!("{url} answered {status}: {what}"))
                .with("status", status.as_u16())
        };
        let body = match read_body(url, resp.body_mut(), MAX_ERROR_BYTES) {
            Ok(body) => body,
            Err(e) if e.code == Code::Malformed => {
                return Err(not_mwp(format!(
                    "a body over {MAX_ERROR_BYTES} bytes, not an mwp error"
                )))
            }
            Err(e) => return Err(e),
        };
        // The error comes in the format asked for: JSON, or CBOR for a snapshot.
        Err(Error::from_answer(&body)
            .unwrap_or_else(|| not_mwp(printable(&String::from_utf8_lossy(&body), 200))))
    }

    fn get(&self, path: &str, accept: &str) -> Result<(bool, Vec<u8>)> {
        self.get_limited(path, accept, MAX_ANSWER_BYTES)
    }

    /// `GET path` with an answer of at most `limit` bytes (a longer one is `MALFORMED`).
    fn get_limited(&self, path: &str, accept: &str, limit: u64) -> Result<(bool, Vec<u8>)> {
        if !path.starts_with('/') {
            // Joined to the base as text: "@host/…" would name another host.
            return Err(Error::malformed(format!(
                "{path:?} is not a path on the server (it must start with /)"
            )));
        }
        let url = format!("{}{path}", self.base);
        let mut req = self.agent.get(&url).header("accept", accept);
        if let Some(auth) = &self.authorization {
            req = req.header("authorization", auth);
        }
        let resp = req.call().map_err(|e| unreachable(&url, e))?;
        Client::read(&url, resp, limit)
    }

    /// `GET /v1/groups/{group}/events/stream?after=N` (with `Last-Event-ID` when resuming):
    /// the open SSE stream, as [`Client::stream_idle`] opens it with
    /// [`STREAM_IDLE_TIMEOUT`].
    pub fn stream(
        &self,
        group: &Id,
        after: u64,
        last_event_id: Option<u64>,
    ) -> Result<ureq::BodyReader<'static>> {
        self.stream_idle(group, after, last_event_id, STREAM_IDLE_TIMEOUT)
    }

    /// `GET /v1/groups/{group}/events/stream?after=N` (with `Last-Event-ID` when resuming):
    /// the open SSE stream, without the whole-request timeout but with an idle one: a read
    /// (the answer's head included) that waits longer than `idle` fails, so a server that
    /// stops sending cannot hold the reader forever. An error answer is read as
    /// `Client::read` reads one.
    pub fn stream_idle(
        &self,
        group: &Id,
        after: u64,
        last_event_id: Option<u64>,
        idle: Duration,
    ) -> Result<ureq::BodyReader<'static>> {
        let url = format!(
            "{}/v1/groups/{group}/events/stream?after={after}",
            self.base
        );
        let mut req = self
            .agent
            .get(&url)
            .header("accept", "text/event-stream")
            .config()
            .timeout_global(None)
            .timeout_connect(Some(REQUEST_TIMEOUT))
            .timeout_recv_response(Some(idle))
            .timeout_per_read(Some(idle))
            .build();
        if let Some(auth) = &self.authorization {
            req = req.header("authorization", auth);
        }
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id.to_string());
        }
        let resp = req.call().map_err(|e| unreachable(&url, e))?;
        if !resp.status().is_success() {
            return Client::read(&url, resp, MAX_ERROR_BYTES).and_then(|_| {
                Err(Error::new(
                    Code::Storage,
                    format!("{url} answered no stream"),
                ))
            });
        }
        Ok(resp.into_body().into_reader())
    }

    /// `GET /v1/authority`: the key the server signs with.
    pub fn authority_key(&self) -> Result<PublicKey> {
        let (_, body) = self.get("/v1/authority", "application/json")?;
        serde_json::from_slice::<AuthorityAnswer>(&body)
            .map(|a| a.key)
            .map_err(|e| Error::malformed(format!("/v1/authority answered something else: {e}")))
    }

    /// `GET /v1/groups`: the groups and their heads.
    pub fn groups(&self) -> Result<Vec<GroupHead>> {
        let (_, body) = self.get("/v1/groups", "application/json")?;
        serde_json::from_slice::<GroupsAnswer>(&body)
            .map(|a| a.groups)
            .map_err(|e| Error::malformed(format!("/v1/groups answered something else: {e}")))
    }

    /// `POST /v1/groups/{group}/commands` with the command's JSON form.
    pub fn submit(&self, cmd: &Command) -> Result<Submitted> {
        let body = serde_json::to_vec(cmd).map_err(|e| Error::malformed(e.to_string()))?;
        self.submit_bytes(&cmd.group, &body, "application/json")
    }

    /// Posts an already encoded command (`content_type` JSON or CBOR).
    pub fn submit_bytes(&self, group: &Id, body: &[u8], content_type: &str) -> Result<Submitted> {
        let url = format!("{}/v1/groups/{group}/commands", self.base);
        let mut req = self
            .agent
            .post(&url)
            .header("content-type", content_type)
            .header("accept", "application/json");
        if let Some(auth) = &self.authorization {
            req = req.header("authorization", auth);
        }
        let resp = req.send(body).map_err(|e| unreachable(&url, e))?;
        // A success that is no receipt is no decision of an mwp server: `STORAGE` with the
        // status, as an answer that is not mwp's, never a rejection.
        let status = resp.status().as_u16();
        let not_a_receipt = |what: String| {
            Error::new(
                Code::Storage,
                format!("{url} answered {status} with {what}, not a receipt"),
            )
            .with("status", status)
        };
        let (duplicate, body) = match Client::read(&url, resp, MAX_RECEIPT_BYTES) {
            Err(e) if e.code == Code::Malformed && (200..300).contains(&status) => {
                return Err(not_a_receipt(format!(
                    "more than {MAX_RECEIPT_BYTES} bytes"
                )))
            }
            other => other?,
        };
        let receipt = serde_json::from_slice(&body)
            .map_err(|e| not_a_receipt(format!("something else ({e})")))?;
        Ok(Submitted { receipt, duplicate })
    }

    /// `GET /v1/groups/{group}/events?after=N&limit=M`: the events only.
    pub fn events(&self, group: &Id, after: u64, limit: usize) -> Result<Vec<Event>> {
        self.page(group, after, limit).map(|p| p.events)
    }

    /// `GET /v1/groups/{group}/events?after=N&limit=M`: the events and the signed head.
    pub fn page(&self, group: &Id, after: u64, limit: usize) -> Result<Page> {
        let path = format!("/v1/groups/{group}/events?after={after}&limit={limit}");
        let (_, body) = self.get(&path, "application/json")?;
        serde_json::from_slice::<Page>(&body).map_err(|e| {
            let why = mwp_core::canonical::text_refusal(&body, &e);
            Error::malformed(format!("{path} answered no events: {why}"))
        })
    }

    /// `GET /v1/groups/{group}/head`: the latest signed head (unverified; SPEC §8a).
    pub fn head(&self, group: &Id) -> Result<SignedHead> {
        let path = format!("/v1/groups/{group}/head");
        let (_, body) = self.get(&path, "application/json")?;
        let text = String::from_utf8_lossy(&body);
        SignedHead::from_json(&text)
    }

    /// `GET /v1/groups/{group}/receipts/{actor}/{action}`.
    pub fn receipt(&self, group: &Id, actor: &Id, action: &Id) -> Result<Receipt> {
        let path = format!("/v1/groups/{group}/receipts/{actor}/{action}");
        let (_, body) = self.get(&path, "application/json")?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::malformed(format!("{path} answered no receipt: {e}")))
    }

    /// `GET /v1/groups/{group}/snapshots/latest`: canonical CBOR.
    pub fn snapshot(&self, group: &Id) -> Result<Vec<u8>> {
        let path = format!("/v1/groups/{group}/snapshots/latest");
        self.get(&path, "application/cbor").map(|(_, b)| b)
    }

    /// Fetches from an absolute path on the server (a snapshot `location`); a path that
    /// does not start with `/` is refused (`MALFORMED`).
    pub fn fetch(&self, path: &str, accept: &str) -> Result<Vec<u8>> {
        self.get(path, accept).map(|(_, b)| b)
    }

    /// As [`Client::fetch`], for an answer of at most `limit` bytes: a longer one is
    /// `MALFORMED` with `limit`, read no further than the limit.
    pub fn fetch_limited(&self, path: &str, accept: &str, limit: u64) -> Result<Vec<u8>> {
        self.get_limited(path, accept, limit).map(|(_, b)| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_control_characters_and_cuts_long_text() {
        assert_eq!(
            printable("a\u{1b}]0;x\u{7}\r\nb\tc", 100),
            "a\\u{1b}]0;x\\u{7}\\u{d}\nb\tc"
        );
        assert_eq!(printable("abcdef", 3), "abc…");
        assert_eq!(printable("abc", 3), "abc");
    }

    #[test]
    fn a_location_that_is_not_a_path_is_refused_before_any_request() {
        // Joined to the base as text, "@host/…" would name another host.
        let client = Client::new("http://127.0.0.1:1");
        for location in ["@evil.example/snap", "evil", ""] {
            let e = client
                .fetch(location, "application/cbor")
                .expect_err("refused");
            assert_eq!(e.code, Code::Malformed, "{location}: {e}");
        }
    }
}
