//! The handlers of `mwp serve`'s routes (SPEC §11; status table in docs/http.md); the route
//! table and the router are in [`super::route`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use mwp_core::head::{SignedHead, HEAD_INTERVAL_MS};
use mwp_core::snapshot::Snapshot;
use mwp_core::{Body, Code, Command, Decision, Error, Event, EventKind, Id, Limits, Receipt};
use serde::Serialize;
use serde_json::json;

use super::metrics::Outcome;
use super::query;
use super::wire::{self, Format};
use super::{now_ms, App};
use crate::service::AuthorityService;

/// Runs the service on the blocking pool: a durable store may sync before it answers.
async fn blocking<T: Send + 'static>(
    app: &App,
    f: impl FnOnce(&dyn AuthorityService) -> mwp_core::Result<T> + Send + 'static,
) -> mwp_core::Result<T> {
    let service = Arc::clone(&app.service);
    let result = tokio::task::spawn_blocking(move || f(service.as_ref()))
        .await
        .unwrap_or_else(|e| {
            Err(Error::new(
                Code::Storage,
                format!("the store call did not finish: {e}"),
            ))
        });
    app.metrics.store_result(&result);
    result
}

/// The answer to a request that took longer than `limit` (`ServerConfig::request_timeout`):
/// 503 `STORAGE`, which a client retries (commands are idempotent).
pub(super) fn timed_out(format: Answered, limit: std::time::Duration) -> Response {
    wire::error(
        format.0,
        &Error::new(
            Code::Storage,
            format!(
                "the request took longer than {} ms; retry it (commands are idempotent)",
                limit.as_millis()
            ),
        ),
    )
}

/// `GET /metrics`: the server's numbers as Prometheus text (docs/http.md, "Operations").
pub(super) async fn metrics(State(app): State<App>) -> Response {
    let groups = blocking(&app, |s| s.groups()).await.ok().map(|g| g.len());
    let text = app.metrics.render(groups, app.tails.live());
    let mut resp = (StatusCode::OK, text).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(super::metrics::CONTENT_TYPE),
    );
    resp
}

fn path_id(value: &str, what: &str) -> Result<Id, Error> {
    Id::new(value).map_err(|e| Error::malformed(format!("{what} in the URL: {e}")))
}

/// The format a request's answer is written in ([`Format::accepted`], JSON by default), read
/// from its `Accept` header before the handler runs: what a request that times out is answered
/// in, without a copy of every header of every request.
pub(super) struct Answered(Format);

impl<S: Send + Sync> FromRequestParts<S> for Answered {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Answered(Format::accepted(&parts.headers, Format::Json)))
    }
}

/// A route's path segments, percent-decoded; a segment that does not decode to UTF-8 is
/// answered 400 `MALFORMED` naming it, in the error shape (axum's `Path` answers such a
/// segment in plain text).
pub(super) struct Segments<T>(pub(super) T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Segments<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(t)) => Ok(Segments(t)),
            Err(rejection) => Err(wire::error(
                Format::accepted(&parts.headers, Format::Json),
                &segment_error(&rejection),
            )),
        }
    }
}

fn segment_error(rejection: &PathRejection) -> Error {
    match rejection {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::InvalidUtf8InPathParam { key } => Error::malformed(format!(
                "{key} in the URL: its percent-escapes do not decode to UTF-8; an ID is UTF-8 text"
            )),
            kind => Error::malformed(format!("the URL's path: {kind}")),
        },
        other => Error::malformed(format!("the URL's path: {}", other.body_text())),
    }
}

/// On reads, an unknown group is 404, not a conflict.
fn read_error(format: Format, err: &Error) -> Response {
    if err.code == Code::NotFound {
        wire::error_with(StatusCode::NOT_FOUND, format, err)
    } else {
        wire::error(format, err)
    }
}

#[derive(Serialize)]
struct AuthorityAnswer {
    key: String,
}

pub(super) async fn authority(State(app): State<App>, headers: HeaderMap) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let key = app.service.authority_key().to_hex();
    wire::encode(StatusCode::OK, format, &AuthorityAnswer { key })
}

#[derive(Serialize)]
struct GroupHead {
    group: Id,
    head: u64,
}

#[derive(Serialize)]
struct GroupsAnswer {
    groups: Vec<GroupHead>,
}

pub(super) async fn groups(State(app): State<App>, headers: HeaderMap) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let listed = blocking(&app, |s| {
        s.groups()?
            .into_iter()
            .map(|g| {
                Ok(GroupHead {
                    head: s.head_seq(&g)?,
                    group: g,
                })
            })
            .collect::<mwp_core::Result<Vec<_>>>()
    })
    .await;
    match listed {
        Ok(groups) => wire::encode(StatusCode::OK, format, &GroupsAnswer { groups }),
        Err(e) => read_error(format, &e),
    }
}

/// Whether an accepted event sets a lease deadline earlier than `next_poll`, the latest the
/// tick loop looks again anyway. Only a claim makes a deadline (a start or a renewal moves
/// one later, an expiry or a result removes one), so every other command leaves the tick
/// loop asleep. Looking for the next deadline reads every work item of every group: done
/// after every command, it took a seventh of the server's CPU with 40,000 work items under
/// 64 clients, and grew with the group.
fn sets_deadline_before(event: &Event, next_poll: u64) -> bool {
    match &event.kind {
        EventKind::WorkClaimed(c) => c.lease.start_by.min(c.lease.expires_at) < next_poll,
        _ => false,
    }
}

fn poll_ms(app: &App) -> u64 {
    u64::try_from(app.config.tick_poll.as_millis()).unwrap_or(u64::MAX)
}

pub(super) async fn post_command(
    State(app): State<App>,
    Segments(group): Segments<String>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let started = Instant::now();
    let format = Format::accepted(&headers, Format::Json);
    let body = read_body(&app, &headers, body).await;
    let cmd = match decode_command(&group, body) {
        Ok(cmd) => cmd,
        Err(e) => {
            app.metrics.command(refused(&e), Some(e.code));
            return wire::error(format, &e);
        }
    };
    if let Err(e) = may_open(&app, &cmd, &headers).await {
        app.metrics.command(refused(&e), Some(e.code));
        return super::auth::refusal(format, &e);
    }
    let at = now_ms();
    // Opening a group holds `opening` from the count to the decision, so concurrent opens
    // cannot pass `max_groups` together.
    let _opening = match (&cmd.body, app.config.max_groups) {
        (Body::OpenGroup(_), Some(_)) => Some(app.opening.clone().lock_owned().await),
        _ => None,
    };
    let max_groups = app.config.max_groups.filter(|_| _opening.is_some());
    // A command to an open group is decided here and its answer awaited without a blocking
    // thread (`submit_staged`); the others are submitted on the blocking pool.
    let staged = match max_groups {
        None => app.service.submit_staged(&cmd, at),
        Some(_) => None,
    };
    let decided = match staged {
        Some(answer) => {
            let result = answer.await.map(|d| (cmd, d));
            app.metrics.store_result(&result);
            result
        }
        None => {
            blocking(&app, move |s| {
                if let Some(max) = max_groups {
                    check_group_room(s, &cmd.group, max)?;
                }
                s.submit(&cmd, at).map(|d| (cmd, d))
            })
            .await
        }
    };
    drop(_opening);
    app.ready.wrote(&decided);
    match decided {
        Ok((cmd, Decision::Accepted(event))) => {
            app.metrics.command(Outcome::Accepted, None);
            app.metrics.accepted_in(started.elapsed());
            app.tails.committed(&event.group);
            if sets_deadline_before(&event, at.saturating_add(poll_ms(&app))) {
                app.tick.notify_one();
            }
            // One line per accepted command is DEBUG: at INFO its formatting and its write to
            // stderr cost about 8 % of the server's CPU per accept (docs/decisions.md).
            tracing::debug!(group = %event.group, seq = event.seq, actor = %cmd.actor, kind = cmd.body.type_name(), "accepted");
            wire::encode(StatusCode::OK, format, &event.receipt())
        }
        Ok((_, Decision::Duplicate(receipt))) => {
            app.metrics.command(Outcome::Duplicate, None);
            let mut resp = wire::encode(StatusCode::OK, format, &receipt);
            resp.headers_mut()
                .insert("mwp-duplicate", HeaderValue::from_static("true"));
            resp
        }
        // Mapped to a status by its code alone (`wire::status`).
        Ok((cmd, Decision::Rejected(r))) => {
            tracing::debug!(code = %r.code, message = %r.message, "rejected");
            let e = conceal(&app, &headers, &cmd, r.into_error()).await;
            app.metrics.command(Outcome::Rejected, Some(e.code));
            super::auth::refusal(format, &e)
        }
        Err(e) => {
            tracing::debug!(code = %e.code, message = %e.message, "failed");
            app.metrics.command(refused(&e), Some(e.code));
            wire::error(format, &e)
        }
    }
}

/// A refusal as this server may tell it to the request's sender ([`Access::conceal`]:
/// on a server whose reads need a credential, what a command is refused for before its
/// sender is authenticated is not told).
///
/// [`Access::conceal`]: super::auth::Access::conceal
async fn conceal(app: &App, headers: &HeaderMap, cmd: &Command, err: Error) -> Error {
    let access = &app.config.access;
    if access.tells_why(headers) {
        return err;
    }
    let opened = match err.code {
        Code::NotFound => {
            let group = cmd.group.clone();
            // A store that cannot say tells nothing either.
            blocking(app, move |s| s.head_seq(&group))
                .await
                .is_ok_and(|seq| seq > 0)
        }
        _ => true,
    };
    access.conceal(headers, cmd, err, opened)
}

/// How a command refused with `err` is counted: the store failing, or a refusal.
fn refused(err: &Error) -> Outcome {
    if super::metrics::is_store_error(err) {
        Outcome::Failed
    } else {
        Outcome::Rejected
    }
}

/// `max_groups` (`--max-groups`): opening a group that does not exist yet is refused once the
/// server holds `max` groups; a retried `open_group` of an existing group is answered as
/// usual.
fn check_group_room(s: &dyn AuthorityService, group: &Id, max: u64) -> mwp_core::Result<()> {
    let groups = s.groups()?;
    let held = u64::try_from(groups.len()).unwrap_or(u64::MAX);
    if held >= max && !groups.contains(group) {
        return Err(Error::new(
            Code::NotPermitted,
            format!(
                "this server holds {held} groups, its limit (--max-groups {max}); group {group} is not opened"
            ),
        )
        .with("limit", max));
    }
    Ok(())
}

/// Whether this request may send `cmd`: an `open_group` for a group that does not exist yet
/// may need an admin token (`--open-groups token`); every other command carries its signature.
async fn may_open(app: &App, cmd: &Command, headers: &HeaderMap) -> Result<(), Error> {
    if !matches!(cmd.body, Body::OpenGroup(_)) {
        return Ok(());
    }
    let access = &app.config.access;
    if access.open_groups == super::auth::OpenGroups::Any {
        return Ok(());
    }
    let g = cmd.group.clone();
    if blocking(app, move |s| s.head_seq(&g)).await? > 0 {
        // The group exists: accept answers (a Duplicate or ALREADY_EXISTS).
        return Ok(());
    }
    access.may_open_group(headers)
}

/// Refuses (`MALFORMED` naming the header, `shown` as the message spells it) a `name`
/// header that lists any coding but `allowed`: one the body reader cannot undo.
fn only_coding(
    headers: &HeaderMap,
    (name, shown): (header::HeaderName, &str),
    allowed: &str,
    instead: &str,
) -> Result<(), Error> {
    for value in headers.get_all(&name) {
        let text = value.to_str().unwrap_or("\u{fffd}");
        if !text
            .split(',')
            .all(|c| c.trim().eq_ignore_ascii_case(allowed))
        {
            return Err(
                Error::malformed(format!("{shown} {text:?} is not supported; {instead}"))
                    .with("header", name.as_str()),
            );
        }
    }
    Ok(())
}

/// A command's body, read whole: refused at once when its `Content-Encoding` is not
/// identity, its `Transfer-Encoding` is not `chunked` or its `Content-Length` is above the
/// body limit, and cut when it has not all
/// arrived within `ServerConfig::body_read_timeout` of the request head (`MALFORMED` each:
/// the client's input, not the store, is at fault).
async fn read_body(
    app: &App,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<(Format, Bytes), Error> {
    let max = app.config.max_body_bytes;
    // A body refused before it is read is still read and dropped for a while, so that the
    // client reads the refusal ([`drain`]); one the client has not sent yet, waiting for
    // `100 Continue`, is not asked for.
    let expects_continue = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let within = app.config.body_read_timeout.min(app.config.request_timeout);
    let mut stream = body.into_data_stream();
    let refuse = |stream, e: Error| {
        if !expects_continue {
            drain(stream, within);
        }
        Err(e)
    };
    let format = match Format::of_request(headers) {
        Ok(format) => format,
        Err(e) => return refuse(stream, e),
    };
    // hyper takes `chunked` off and nothing else: a body under another transfer coding
    // (`gzip, chunked`) would reach the reader still coded.
    let codings = only_coding(
        headers,
        (header::CONTENT_ENCODING, "Content-Encoding"),
        "identity",
        "send the body as it is, without Content-Encoding",
    )
    .and_then(|()| {
        only_coding(
            headers,
            (header::TRANSFER_ENCODING, "Transfer-Encoding"),
            "chunked",
            "send the body chunked or with a Content-Length",
        )
    });
    if let Err(e) = codings {
        return refuse(stream, e);
    }
    // `chunked` twice (`chunked, chunked`) is a body no sender may send (RFC 9112, section
    // 6.1): hyper undoes one, and a proxy in front may have undone both.
    let chunked = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("").split(','))
        .filter(|c| !c.trim().is_empty())
        .count();
    if chunked > 1 {
        return refuse(
            stream,
            Error::malformed(format!(
                "Transfer-Encoding names chunked {chunked} times; a body is chunked once (RFC 9112, section 6.1)"
            ))
            .with("header", "transfer-encoding"),
        );
    }
    let too_large = || {
        Error::malformed(format!(
            "the request body is larger than the limit of {max} bytes"
        ))
        .with("limit", max)
    };
    // hyper has refused a Content-Length that is not one decimal number.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX)) {
        return refuse(stream, too_large());
    }
    let deadline = tokio::time::Instant::now() + within;
    // A body that comes in one piece (the common case) is kept as it came.
    let mut first: Option<Bytes> = None;
    let mut more: Vec<u8> = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(None) => {
                let body = match first {
                    Some(chunk) if more.is_empty() => chunk,
                    Some(_) => Bytes::from(more),
                    None => Bytes::new(),
                };
                return Ok((format, body));
            }
            Ok(Some(Ok(chunk))) => {
                let read = match more.is_empty() {
                    true => first.as_ref().map_or(0, Bytes::len),
                    false => more.len(),
                };
                if read + chunk.len() > max {
                    drain(stream, within);
                    return Err(too_large());
                }
                match &first {
                    None => first = Some(chunk),
                    Some(head) => {
                        if more.is_empty() {
                            more.extend_from_slice(head);
                        }
                        more.extend_from_slice(&chunk);
                    }
                }
            }
            // The client went away, or sent a body hyper could not frame: say why, as
            // hyper's error and its causes say it (`invalid chunk size line`, …).
            Ok(Some(Err(e))) => {
                let mut why = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    // axum's error says what the hyper error it wraps says.
                    let said = c.to_string();
                    if !why.ends_with(&said) {
                        why = format!("{why}: {said}");
                    }
                    cause = c.source();
                }
                return Err(Error::malformed(format!(
                    "the request body could not be read ({why}); send it whole, with a Content-Length or well-formed chunks"
                )));
            }
            Err(_) => {
                tracing::debug!(
                    timeout_ms = within.as_millis(),
                    "a request body did not arrive in time"
                );
                return Err(Error::malformed(format!(
                    "the request body did not arrive within {} (--body-timeout); send the whole body right after the head",
                    super::duration_text(within)
                )));
            }
        }
    }
}

/// Most bytes of a refused body read and dropped after the refusal is answered.
const DRAIN_BYTES: usize = 1 << 20;

/// Longest a refused body is read and dropped after the refusal is answered.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads and drops what is left of a refused body, for at most [`DRAIN_TIME`]
/// (or `within`, if shorter) and [`DRAIN_BYTES`], while the refusal is answered; then the
/// connection is closed. A client that sends the whole body before
/// reading the answer then reads the refusal: a connection closed with its bytes unread is
/// reset, and the reset can reach the client before the answer does.
fn drain(mut stream: axum::body::BodyDataStream, within: std::time::Duration) {
    tokio::spawn(async move {
        let mut left = DRAIN_BYTES;
        let _ = tokio::time::timeout(within.min(DRAIN_TIME), async {
            while let Some(Ok(chunk)) = stream.next().await {
                left = left.saturating_sub(chunk.len());
                if left == 0 {
                    break;
                }
            }
        })
        .await;
    });
}

/// Decodes a command and checks what the URL and this server require of it.
fn decode_command(group: &str, body: Result<(Format, Bytes), Error>) -> Result<Command, Error> {
    let limits = Limits::default();
    let (format, body) = body?;
    let cmd = match format {
        Format::Json => Command::from_json(&body, &limits)?,
        Format::Cbor => Command::from_cbor(&body, &limits)?,
    };
    let group = path_id(group, "group")?;
    if cmd.group != group {
        return Err(Error::new(
            Code::WrongGroup,
            format!(
                "the command is for group {} but was sent to /v1/groups/{group}/commands; send it to /v1/groups/{}/commands",
                cmd.group, cmd.group
            ),
        ));
    }
    Ok(cmd)
}

/// A page of events with the latest signed head (SPEC §8a); `head` is left out only when the
/// service signs no heads (its `sign_head` answers `NOT_PERMITTED`; every store of mwp signs).
#[derive(Serialize)]
struct EventsAnswer<'a> {
    events: Vec<Event>,
    #[serde(skip_serializing_if = "Option::is_none")]
    head: Option<&'a SignedHead>,
}

/// Points a `CURSOR_TOO_OLD` answer's snapshot reference at this server's URL for it.
fn locate_snapshot(mut err: Error, group: &Id) -> Error {
    if err.code == Code::CursorTooOld {
        if let Some(snap) = err
            .details
            .get_mut("snapshot")
            .and_then(|s| s.as_object_mut())
        {
            snap.insert(
                "location".into(),
                json!(format!("/v1/groups/{group}/snapshots/latest")),
            );
        }
    }
    err
}

pub(super) async fn events(
    State(app): State<App>,
    Segments(group): Segments<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let group = match path_id(&group, "group") {
        Ok(g) => g,
        Err(e) => return wire::error(format, &e),
    };
    let q = match query::parse(uri.query(), query::keys_of(uri.path())) {
        Ok(q) => q,
        Err(e) => return wire::error(format, &e),
    };
    let after = q.get("after").unwrap_or(0);
    let limit = q
        .get("limit")
        .map_or(app.config.max_page, |l| {
            usize::try_from(l).unwrap_or(usize::MAX)
        })
        .clamp(1, app.config.max_page);
    let (g, heads) = (group.clone(), Arc::clone(&app.heads));
    let page = blocking(&app, move |s| {
        let events = s.events(&g, after, limit)?;
        // Read after the page: the head is at most `HEAD_INTERVAL_MS` of commits behind it.
        let head = match heads.current(s, &g, now_ms()) {
            Ok(head) => Some(head),
            Err(e) if e.code == Code::NotPermitted => None,
            Err(e) => return Err(e),
        };
        Ok((events, head))
    })
    .await;
    match page {
        Ok((events, head)) => wire::encode(
            StatusCode::OK,
            format,
            &EventsAnswer {
                events,
                head: head.as_deref(),
            },
        ),
        Err(e) => read_error(format, &locate_snapshot(e, &group)),
    }
}

/// `GET /v1/groups/{group}/head`: the latest signed head (SPEC §8a), signed now if one is
/// due ([`super::heads`]).
pub(super) async fn head(
    State(app): State<App>,
    Segments(group): Segments<String>,
    headers: HeaderMap,
) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let group = match path_id(&group, "group") {
        Ok(g) => g,
        Err(e) => return wire::error(format, &e),
    };
    let heads = Arc::clone(&app.heads);
    match blocking(&app, move |s| heads.current(s, &group, now_ms())).await {
        Ok(head) => wire::encode(StatusCode::OK, format, &*head),
        Err(e) => read_error(format, &e),
    }
}

/// `GET /v1/groups/{group}/audit`: the signed manifest of the group's sealed audit log
/// (SPEC §6a), JSON or CBOR; 404 `NOT_FOUND` when the group was not sealed.
pub(super) async fn audit(
    State(app): State<App>,
    Segments(group): Segments<String>,
    headers: HeaderMap,
) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let group = match path_id(&group, "group") {
        Ok(g) => g,
        Err(e) => return wire::error(format, &e),
    };
    let name = group.clone();
    match blocking(&app, move |s| s.audit_manifest(&group)).await {
        Ok(Some(m)) => wire::encode(StatusCode::OK, format, &m),
        Ok(None) => read_error(
            format,
            &Error::new(
                Code::NotFound,
                format!("group {name} has no sealed audit log (it is not archived under an org policy, or unknown)"),
            ),
        ),
        Err(e) => read_error(format, &e),
    }
}

/// What a live tail remembers between events.
struct Tail {
    app: App,
    group: Id,
    cursor: u64,
    pending: VecDeque<Event>,
    /// A head to send once `pending` is sent, if it covers more than `head_sent`.
    head_ready: Option<Arc<SignedHead>>,
    /// Seq of the last head sent (0: none yet).
    head_sent: u64,
    /// This idle period's wait for a fresh head.
    head_wait: HeadWait,
    /// Its place under the tail caps, and its group's commit signal.
    slot: super::tails::Slot,
    closing: tokio::sync::watch::Receiver<bool>,
    done: bool,
}

/// An idle tail's wait for a fresh head (SPEC §8a): once the last head it sent is behind its
/// last event, it waits until a fresh head is due. One timed wait per idle period, so that a
/// head that still cannot be signed is not waited for again until the next event. A wake by
/// a commit that brought no new event does not spend it: a commit's signal may come after
/// the tail has already read its event, and such a wake must not cost the tail the head that
/// covers that event. Nor does a timer that ran out before the due time by the wall clock
/// (the clock heads are stamped with): the tail waits again, at most `HEAD_INTERVAL_MS` at a
/// time.
#[derive(Debug, Default, Clone, Copy)]
struct HeadWait {
    /// When (ms, wall clock) a fresh head is due, read once per idle period: reading it takes
    /// the group's head lock, which a signature holds across a sync.
    due: Option<u64>,
    /// Whether the timed wait of this idle period has run out.
    spent: bool,
}

impl HeadWait {
    /// New events were read: a new idle period begins after them.
    fn handle_events(&mut self) {
        *self = HeadWait::default();
    }

    /// The timed wait ran out at `now_ms`: it is spent if the head was due by then (whether
    /// or not one came).
    fn handle_timeout(&mut self, now_ms: u64) {
        self.spent = self.due.is_none_or(|due| now_ms >= due);
    }

    /// How long (ms) to wait before reading again, if at all (else only a commit wakes the
    /// tail): until `due()` (when the next head may be signed), 1 to `HEAD_INTERVAL_MS`.
    fn poll_timeout(
        &mut self,
        head_sent: u64,
        cursor: u64,
        due: impl FnOnce() -> u64,
        now_ms: u64,
    ) -> Option<u64> {
        if head_sent >= cursor || self.spent {
            return None;
        }
        let due = *self.due.get_or_insert_with(due);
        Some(due.saturating_sub(now_ms).clamp(1, HEAD_INTERVAL_MS))
    }
}

fn sse_event(event: &Event) -> SseEvent {
    match SseEvent::default()
        .id(event.seq.to_string())
        .json_data(event)
    {
        Ok(e) => e,
        Err(e) => SseEvent::default().event("error").data(e.to_string()),
    }
}

/// An `event: head` message: the signed head's JSON, without an `id:` (the cursor of a
/// reconnecting client stays its last event's seq).
fn sse_head(head: &SignedHead) -> SseEvent {
    match SseEvent::default().event("head").json_data(head) {
        Ok(e) => e,
        Err(e) => SseEvent::default().event("error").data(e.to_string()),
    }
}

fn sse_error(err: &Error) -> SseEvent {
    SseEvent::default()
        .event("error")
        .data(serde_json::to_string(err).unwrap_or_else(|_| err.to_string()))
}

/// The next message of a live tail: each pending event; after each batch the head read with
/// it when it covers more than the last head sent; and once the tail is idle with its last
/// head behind its last event, a fresh head as soon as one is due (at most
/// `HEAD_INTERVAL_MS` later; SPEC §8a).
async fn next_sse(mut tail: Tail) -> Option<(Result<SseEvent, Infallible>, Tail)> {
    loop {
        if tail.done {
            return None;
        }
        if let Some(event) = tail.pending.pop_front() {
            tail.cursor = event.seq;
            return Some((Ok(sse_event(&event)), tail));
        }
        if let Some(head) = tail.head_ready.take() {
            if head.seq > tail.head_sent {
                tail.head_sent = head.seq;
                return Some((Ok(sse_head(&head)), tail));
            }
        }
        if *tail.closing.borrow() {
            return None;
        }
        // Read the commit counter before querying, so a commit in between wakes us.
        tail.slot.commits.borrow_and_update();
        let (g, after, page) = (tail.group.clone(), tail.cursor, tail.app.config.max_page);
        let heads = Arc::clone(&tail.app.heads);
        let read = blocking(&tail.app, move |s| {
            let events = s.events(&g, after, page)?;
            // A head that cannot be signed costs the tail its heads, not its events.
            let head = heads
                .current(s, &g, now_ms())
                .inspect_err(|e| tracing::debug!(group = %g, code = %e.code, "no signed head"))
                .ok();
            Ok((events, head))
        })
        .await;
        match read {
            Ok((events, head)) if !events.is_empty() => {
                tail.pending.extend(events);
                tail.head_ready = head;
                tail.head_wait.handle_events();
            }
            Ok((_, head)) => {
                if head.as_ref().is_some_and(|h| h.seq > tail.head_sent) {
                    tail.head_ready = head;
                    continue;
                }
                // Idle with the last head sent behind the last event: wait for a fresh one
                // to be due (once per idle period), or for a commit.
                let heads = &tail.app.heads;
                let wait = tail.head_wait.poll_timeout(
                    tail.head_sent,
                    tail.cursor,
                    || heads.next_due(&tail.group),
                    now_ms(),
                );
                let sleep = async {
                    match wait {
                        Some(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
                        None => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    changed = tail.slot.commits.changed() => if changed.is_err() { return None },
                    _ = tail.closing.changed() => return None,
                    () = sleep => tail.head_wait.handle_timeout(now_ms()),
                }
            }
            Err(e) => {
                tail.done = true;
                let e = locate_snapshot(e, &tail.group);
                return Some((Ok(sse_error(&e)), tail));
            }
        }
    }
}

pub(super) async fn stream_events(
    State(app): State<App>,
    Segments(group): Segments<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let group = match path_id(&group, "group") {
        Ok(g) => g,
        Err(e) => return wire::error(format, &e),
    };
    let q = match query::parse(uri.query(), query::keys_of(uri.path())) {
        Ok(q) => q,
        Err(e) => return wire::error(format, &e),
    };
    // `Last-Event-ID` (sent by a reconnecting EventSource) wins over `after`.
    let last_id = match query::last_event_id(&headers) {
        Ok(n) => n,
        Err(e) => return wire::error(format, &e),
    };
    let after = last_id.or(q.get("after")).unwrap_or(0);
    // Take a place under the tail caps before reading anything.
    let slot = match app.tails.admit(&group) {
        Ok(slot) => slot,
        Err(e) => {
            let mut resp = wire::error_with(StatusCode::TOO_MANY_REQUESTS, format, &e);
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return resp;
        }
    };
    // Check the cursor before the stream starts, so the errors keep their statuses.
    let (g, page) = (group.clone(), app.config.max_page);
    let first = match blocking(&app, move |s| s.events(&g, after, page)).await {
        Ok(events) => events,
        Err(e) => return read_error(format, &locate_snapshot(e, &group)),
    };
    let tail = Tail {
        slot,
        closing: app.closing.clone(),
        app,
        group,
        cursor: after,
        pending: first.into(),
        head_ready: None,
        head_sent: 0,
        head_wait: HeadWait::default(),
        done: false,
    };
    let events: std::pin::Pin<Box<dyn Stream<Item = Result<SseEvent, Infallible>> + Send>> =
        Box::pin(stream::unfold(tail, next_sse));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

pub(super) async fn receipt(
    State(app): State<App>,
    Segments((group, actor, action)): Segments<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let format = Format::accepted(&headers, Format::Json);
    let ids = path_id(&group, "group")
        .and_then(|g| Ok((g, path_id(&actor, "actor")?, path_id(&action, "action")?)));
    let (group, actor, action) = match ids {
        Ok(ids) => ids,
        Err(e) => return wire::error(format, &e),
    };
    let (a, b) = (actor.clone(), action.clone());
    // A store answers "no receipt" for a group it does not hold, too: that one is told as the
    // other reads tell it (`NOT_FOUND` naming the group).
    let found: mwp_core::Result<Option<Receipt>> =
        blocking(&app, move |s| match s.receipt(&group, &a, &b)? {
            Some(r) => Ok(Some(r)),
            None if s.head_seq(&group)? == 0 => Err(mwp_core::memory::not_found(&group)),
            None => Ok(None),
        })
        .await;
    match found {
        Ok(Some(r)) => wire::encode(StatusCode::OK, format, &r),
        Ok(None) => read_error(
            format,
            &Error::new(
                Code::NotFound,
                format!("no command with action {action} from {actor} was accepted"),
            ),
        ),
        Err(e) => read_error(format, &e),
    }
}

pub(super) async fn snapshot(
    State(app): State<App>,
    Segments(group): Segments<String>,
    headers: HeaderMap,
) -> Response {
    // The snapshot is CBOR unless JSON is asked for; an error is JSON unless CBOR is.
    let format = Format::accepted(&headers, Format::Cbor);
    let error_format = Format::accepted(&headers, Format::Json);
    let group = match path_id(&group, "group") {
        Ok(g) => g,
        Err(e) => return wire::error(error_format, &e),
    };
    let bytes = match blocking(&app, move |s| s.latest_snapshot(&group)).await {
        Ok(b) => b,
        Err(e) => return read_error(error_format, &e),
    };
    match format {
        Format::Cbor => {
            let mut resp = (StatusCode::OK, bytes).into_response();
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(wire::CBOR));
            resp
        }
        Format::Json => match Snapshot::from_cbor(&bytes) {
            Ok(snap) => wire::encode(StatusCode::OK, format, &snap),
            Err(e) => wire::error(error_format, &e),
        },
    }
}

/// The answer to a method a route does not take: 405 with `Allow` (which axum adds to a
/// route's answers) and a `NOT_FOUND` error: nothing is served for this method at this path
/// (docs/decisions.md, "Wrong methods").
pub(super) fn wrong_method(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    allow: &str,
) -> Response {
    let mut resp = wire::error_with(
        StatusCode::METHOD_NOT_ALLOWED,
        Format::accepted(headers, Format::Json),
        &Error::new(
            Code::NotFound,
            format!(
                "nothing is served for {method} at {}; it takes {allow}",
                // A CONNECT's target is an authority, with no path.
                if uri.path().is_empty() {
                    uri.to_string()
                } else {
                    uri.path().to_owned()
                }
            ),
        )
        .with("allow", allow),
    );
    if let Ok(allow) = HeaderValue::from_str(allow) {
        resp.headers_mut().insert(header::ALLOW, allow);
    }
    resp
}

pub(super) async fn fallback(
    State(app): State<App>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path();
    if !path.starts_with("/v1/") {
        if let Some(asset) = app.config.assets.fetch(path).await {
            // Files are read, nothing else: a CONNECT or a POST is not answered with a page.
            if method != Method::GET && method != Method::HEAD {
                return wrong_method(&method, &uri, &headers, "GET, HEAD");
            }
            return static_file(asset, &headers);
        }
    }
    let format = Format::accepted(&headers, Format::Json);
    wire::error_with(
        StatusCode::NOT_FOUND,
        format,
        &Error::new(
            Code::NotFound,
            format!("nothing is served at {path}; see docs/http.md for the routes"),
        ),
    )
}

/// A static file: embedded files carry an ETag and are revalidated on every use (`no-cache`,
/// answered 304 when unchanged), so a new `mwp` binary is picked up at the next reload; files
/// of a `--dashboard` directory are never cached.
fn static_file(asset: super::assets::Asset, headers: &HeaderMap) -> Response {
    let unchanged = asset.etag.is_some_and(|etag| {
        headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|tag| {
                let tag = tag.trim();
                tag == "*" || tag.trim_start_matches("W/") == etag
            })
    });
    let mut resp = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, asset.bytes).into_response()
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    match asset.etag {
        Some(etag) => {
            h.insert(header::ETAG, HeaderValue::from_static(etag));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
        None => {
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_tail_waits_for_a_head_until_one_is_due() {
        // Behind by one event, the last head signed at 1,000: due at 1,100.
        assert_eq!(
            HeadWait::default().poll_timeout(3, 4, || 1_100, 1_030),
            Some(70)
        );
        // Already due, or due long ago: a short wait, never none.
        assert_eq!(
            HeadWait::default().poll_timeout(3, 4, || 1_100, 1_200),
            Some(1)
        );
        // Never more than one interval.
        assert_eq!(
            HeadWait::default().poll_timeout(3, 4, || 9_000, 1_000),
            Some(HEAD_INTERVAL_MS)
        );
        // Nothing owed: only a commit wakes the tail.
        assert_eq!(
            HeadWait::default().poll_timeout(4, 4, || 1_100, 1_030),
            None
        );
    }

    #[test]
    fn a_wake_without_new_events_does_not_spend_the_wait() {
        let mut wait = HeadWait::default();
        assert!(wait.poll_timeout(3, 4, || 1_100, 1_030).is_some());
        // A commit's signal that arrives after its event was read wakes the tail with nothing
        // new: it waits for the head again, without reading the due time again.
        assert_eq!(
            wait.poll_timeout(3, 4, || unreachable!("read once"), 1_050),
            Some(50)
        );
        // The timer ran out early by the wall clock: not spent, a short wait more.
        wait.handle_timeout(1_098);
        assert_eq!(wait.poll_timeout(3, 4, || 1_100, 1_098), Some(2));
        // It ran out when due and still no head came (none could be signed): not again...
        wait.handle_timeout(1_101);
        assert_eq!(wait.poll_timeout(3, 4, || 1_100, 1_101), None);
        // ...until new events begin another idle period, which reads the due time again.
        wait.handle_events();
        assert_eq!(wait.poll_timeout(3, 5, || 1_300, 1_250), Some(50));
    }
}
