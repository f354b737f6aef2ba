//! Who may read and who may create groups (docs/http.md, "Access").
//!
//! Two credentials, both in the `Authorization` header:
//! * an operator's bearer token (`Bearer TOKEN`) from the `--token-file`, with scope `read`
//!   (every read, listing groups included) or `admin` (also creating groups);
//! * a member's signed read (`Mwp-Signature actor=A,at=MS,sig=HEX`, see
//!   [`mwp_core::signed_read`]), which reads only the member's own group.
//!
//! Without `--public-read` (and off loopback, or with tokens) every read but
//! `GET /v1/authority` needs one of them. Commands carry their own signatures; only an
//! `open_group` for a new group may need a token (`--open-groups token`).

use std::fmt;
use std::path::Path;

use axum::http::{header, HeaderMap, HeaderValue, Method, Uri};
use axum::response::Response;
use mwp_core::signed_read::{self, SignedRead};
use mwp_core::{Code, Error, Hash, Id};
use subtle::ConstantTimeEq;

use super::gate::{Check, Verdict};
use super::wire::{self, Format};
use super::{now_ms, App};

/// What an operator token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Every read, listing groups included.
    Read,
    /// Every read, and creating groups when `--open-groups token`.
    Admin,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }
}

/// Shortest token accepted, in characters: a token is a password, not a name.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Longest token file read, in bytes: a file of thousands of tokens fits many times over. A
/// longer one is refused unread, as is one that is not a regular file (a FIFO would block the
/// start, a device never end).
pub const MAX_TOKEN_FILE: u64 = 1 << 20;

/// Operator tokens, kept only as SHA-256 digests: their `Debug` form shows how many there
/// are of each scope, never a token.
#[derive(Clone, Default)]
pub struct Tokens(Vec<(Scope, Hash)>);

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let admin = self.0.iter().filter(|(s, _)| *s == Scope::Admin).count();
        write!(f, "Tokens({} read, {admin} admin)", self.0.len() - admin)
    }
}

impl Tokens {
    /// Parses a token file: one `SCOPE TOKEN` per line (`read` or `admin`, then the token:
    /// at least 16 visible ASCII characters, no spaces); blank lines and lines starting with
    /// `#` are skipped. A bad line is an error naming its number (never its token).
    pub fn parse(text: &str) -> Result<Tokens, String> {
        let mut tokens = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let n = n + 1;
            let mut words = line.split_whitespace();
            let scope = match words.next() {
                Some("read") => Scope::Read,
                Some("admin") => Scope::Admin,
                _ => return Err(format!("line {n}: a line is `read TOKEN` or `admin TOKEN`")),
            };
            let token = words
                .next()
                .ok_or_else(|| format!("line {n}: the token is missing after the scope"))?;
            if words.next().is_some() {
                return Err(format!(
                    "line {n}: one token per line; a token holds no spaces"
                ));
            }
            if token.len() < MIN_TOKEN_CHARS || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "line {n}: a token is at least {MIN_TOKEN_CHARS} visible ASCII characters"
                ));
            }
            let digest = Hash::of(token.as_bytes());
            if tokens.iter().any(|(_, d)| *d == digest) {
                return Err(format!(
                    "line {n}: this token is already on an earlier line"
                ));
            }
            tokens.push((scope, digest));
        }
        Ok(Tokens(tokens))
    }

    /// Reads a token file, refusing one that others than its owner may read or write (its
    /// mode must grant nothing to group and others, e.g. 0600), one that is not a regular
    /// file, and one longer than [`MAX_TOKEN_FILE`] bytes (by its size, unread).
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let shown = path.display();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|e| format!("token file {shown}: {e}"))?;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(format!(
                    "token file {shown} has mode {mode:04o}: others may read it; `chmod 600 {shown}`"
                ));
            }
        }
        let bytes = crate::regular_file::read(path, MAX_TOKEN_FILE)
            .map_err(|e| format!("token file {shown}: {e}"))?;
        if bytes.len() as u64 > MAX_TOKEN_FILE {
            return Err(format!(
                "token file {shown} is longer than the {MAX_TOKEN_FILE} bytes it may hold"
            ));
        }
        let text = String::from_utf8(bytes)
            .map_err(|e| format!("token file {shown} is not UTF-8 text: {}", e.utf8_error()))?;
        let tokens = Tokens::parse(&text).map_err(|e| format!("token file {shown}, {e}"))?;
        if tokens.is_empty() {
            return Err(format!("token file {shown} holds no token"));
        }
        Ok(tokens)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The scope of `token`, if it is one of them. Every stored digest is compared, in
    /// constant time, whatever matches.
    pub fn scope_of(&self, token: &str) -> Option<Scope> {
        let digest = Hash::of(token.as_bytes());
        let mut found = None;
        for (scope, d) in &self.0 {
            if bool::from(d.0.ct_eq(&digest.0)) {
                found = Some(*scope);
            }
        }
        found
    }
}

/// Who may create groups (send `open_group` for a group that does not exist yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OpenGroups {
    /// Anyone who reaches the server.
    Any,
    /// Only a request with an `admin` token.
    Token,
}

/// The access rules of a server. `Default` is the loopback default without tokens: anyone
/// reads, anyone creates groups.
#[derive(Debug, Clone)]
pub struct Access {
    /// Operator tokens.
    pub tokens: Tokens,
    /// Whether reads need no credential.
    pub public_read: bool,
    /// Who may create groups.
    pub open_groups: OpenGroups,
    /// How far a signed read's `at` may be from the server's clock, either way.
    pub max_skew_ms: u64,
}

/// The clock skew allowed by default: five minutes either way.
pub const DEFAULT_MAX_SKEW_MS: u64 = 5 * 60 * 1000;

impl Default for Access {
    fn default() -> Self {
        Access {
            tokens: Tokens::default(),
            public_read: true,
            open_groups: OpenGroups::Any,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
        }
    }
}

impl Access {
    /// The rules `mwp serve` uses: reads are public with `--public-read`, or on loopback
    /// without tokens; groups are created by anyone on loopback and by `admin` tokens
    /// elsewhere, unless `open_groups` says otherwise.
    pub fn for_server(
        tokens: Tokens,
        loopback: bool,
        public_read: bool,
        open_groups: Option<OpenGroups>,
    ) -> Access {
        Access {
            public_read: public_read || (loopback && tokens.is_empty()),
            open_groups: open_groups.unwrap_or(if loopback {
                OpenGroups::Any
            } else {
                OpenGroups::Token
            }),
            tokens,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
        }
    }

    /// One line for the startup log: which mode the server is in.
    pub fn describe(&self) -> String {
        let reads = if self.public_read {
            "reads are public (anyone who reaches the port reads and lists every group)"
        } else {
            "reads need a token or a member's signature"
        };
        let create = match self.open_groups {
            OpenGroups::Any => "anyone may create groups",
            OpenGroups::Token => "creating a group needs an admin token",
        };
        if self.tokens.is_empty() {
            format!("{reads}; {create}; no operator tokens")
        } else {
            format!("{reads}; {create}; operator {:?}", self.tokens)
        }
    }

    /// Whether a command's refusal may say in full why it was refused: on a server whose reads
    /// are public, or to a request carrying an operator token (which reads every group).
    /// Otherwise the refusals a command gets before its sender is authenticated are answered
    /// alike ([`Access::conceal`]).
    pub fn tells_why(&self, headers: &HeaderMap) -> bool {
        self.public_read
            || matches!(credential(headers), Ok(Some(Credential::Bearer(token)))
                if self.tokens.scope_of(token).is_some())
    }

    /// The answer to a command refused before its sender was authenticated, on a server whose
    /// reads need a credential: that the group has not been opened (`NOT_FOUND`), is of
    /// another org (`WRONG_GROUP`), has no such member (`UNKNOWN_ACTOR`), or holds another key
    /// for it (`BAD_SIGNATURE`, which names that key) is what only a reader of the group may
    /// learn (docs/security.md, "What a refusal tells"). All four are answered with one
    /// `BAD_SIGNATURE` that names nothing of the group's; an `open_group` needing an admin
    /// token is answered `refused_open`, as if the group did not exist. Any other refusal
    /// comes after the signature verified under a member's key, and is answered as it is.
    /// `opened`: whether the command's group exists.
    pub fn conceal(
        &self,
        headers: &HeaderMap,
        cmd: &mwp_core::Command,
        err: Error,
        opened: bool,
    ) -> Error {
        let before_sender_known = match err.code {
            Code::WrongGroup | Code::UnknownActor | Code::BadSignature => true,
            // The only NOT_FOUND decided before the signature: the group is not opened.
            Code::NotFound => !opened,
            _ => false,
        };
        if !before_sender_known || self.tells_why(headers) {
            return err;
        }
        if matches!(cmd.body, mwp_core::Body::OpenGroup(_)) {
            if let Err(refused_open) = self.may_open_group(headers) {
                return refused_open;
            }
        }
        Error::new(
            Code::BadSignature,
            format!(
                "the command is not signed by a member of group {} under its registered key, or the group has not been opened; this server tells a sender it cannot authenticate nothing more",
                cmd.group
            ),
        )
    }

    /// Whether the request may create a group: `Ok` under `--open-groups any` or with an
    /// `admin` token; `UNAUTHORIZED` without a valid token, `FORBIDDEN` with a `read` one.
    pub fn may_open_group(&self, headers: &HeaderMap) -> Result<(), Error> {
        if self.open_groups == OpenGroups::Any {
            return Ok(());
        }
        match credential(headers)? {
            Some(Credential::Bearer(token)) => match self.tokens.scope_of(token) {
                Some(Scope::Admin) => Ok(()),
                Some(scope) => Err(Error::new(
                    Code::Forbidden,
                    format!(
                        "creating a group needs an admin token; this token's scope is {}",
                        scope.name()
                    ),
                )),
                None => Err(unknown_token()),
            },
            Some(Credential::Signed(_)) => Err(Error::new(
                Code::Forbidden,
                "creating a group needs an admin token (Authorization: Bearer TOKEN); a member's signature does not allow it",
            )),
            None => Err(Error::new(
                Code::Unauthorized,
                "creating a group on this server needs an admin token: send Authorization: Bearer TOKEN",
            )),
        }
    }

    /// Whether a read of `target` may go ahead.
    fn may_read(
        &self,
        app: &App,
        method: &Method,
        target: &str,
        group: Option<Id>,
        headers: &HeaderMap,
    ) -> Result<(), Error> {
        if self.public_read {
            return Ok(());
        }
        match credential(headers)? {
            Some(Credential::Bearer(token)) => match self.tokens.scope_of(token) {
                Some(_) => Ok(()),
                None => Err(unknown_token()),
            },
            Some(Credential::Signed(read)) => {
                let Some(group) = group else {
                    return Err(Error::new(
                        Code::Forbidden,
                        "a member's signature reads only its own group's routes; listing groups needs a token",
                    ));
                };
                self.check_signed(app, method, target, &group, &read)
            }
            None => Err(Error::new(
                Code::Unauthorized,
                "this read needs a credential: Authorization: Bearer TOKEN, or a member's Mwp-Signature (docs/http.md)",
            )),
        }
    }

    fn check_signed(
        &self,
        app: &App,
        method: &Method,
        target: &str,
        group: &Id,
        read: &SignedRead,
    ) -> Result<(), Error> {
        let now = now_ms();
        if now.abs_diff(read.at_ms) > self.max_skew_ms {
            return Err(Error::new(
                Code::Unauthorized,
                format!(
                    "the signed read's at={} is more than {} ms from the server's clock ({now}); sign again with the current time",
                    read.at_ms, self.max_skew_ms
                ),
            )
            .with("server_time", now));
        }
        let member = app.service.member(group, &read.actor)?;
        let member = member.filter(|m| !m.removed);
        // A non-member's signature is checked as well, under a stand-in key whose verdict is
        // dropped: the signature check is not skipped only for those who are not members.
        let key = member.as_ref().map_or(*STAND_IN_KEY, |m| m.key);
        let verified = read.verify(method.as_str(), target, &key)?;
        if member.is_some() && verified {
            Ok(())
        } else {
            Err(not_a_reader(group))
        }
    }
}

/// The key a signed read by a non-member is checked under, so that every signed read is
/// checked once; its verdict is never used.
static STAND_IN_KEY: std::sync::LazyLock<mwp_core::PublicKey> =
    std::sync::LazyLock::new(|| mwp_core::SecretKey::from_bytes(&[0x5a; 32]).public());

/// The one answer to a signed read of `group` that its sender may not make, whatever the
/// cause: the actor is not a current member, the group does not exist, or the signature does
/// not verify under the member's key. It names only the group the request named, so a
/// signature reveals neither which groups exist nor who their members are.
fn not_a_reader(group: &Id) -> Error {
    Error::new(
        Code::Forbidden,
        format!(
            "the signature is not by a current member of group {group} under its registered key, or the group does not exist"
        ),
    )
}

fn unknown_token() -> Error {
    Error::new(
        Code::Unauthorized,
        "the bearer token is not one this server knows",
    )
}

/// A credential as sent.
enum Credential<'a> {
    Bearer(&'a str),
    Signed(SignedRead),
}

/// The request's credential, if any; an `Authorization` header that is neither scheme, or
/// a malformed signature, is `UNAUTHORIZED` naming what was wrong.
///
/// A request with more than one `Authorization` header is refused whatever they hold: which
/// one counts would otherwise depend on who reads them (RFC 9110, section 11.6.2: the field
/// is not a list). No answer repeats a header's credentials: an unknown scheme is named only
/// when credentials follow it, since a lone word may be a token sent without its scheme.
fn credential(headers: &HeaderMap) -> Result<Option<Credential<'_>>, Error> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let more = values.count();
    if more > 0 {
        return Err(Error::new(
            Code::Unauthorized,
            format!(
                "the request has {} Authorization headers; send one credential",
                more + 1
            ),
        ));
    }
    let value = value
        .to_str()
        .map_err(|_| Error::new(Code::Unauthorized, "the Authorization header is not ASCII"))?
        .trim();
    // The scheme ends at the first space (or tab, which some clients send).
    let split = value.split_once([' ', '\t']);
    let (scheme, rest) = split.unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("bearer") {
        return Ok(Some(Credential::Bearer(rest.trim())));
    }
    if scheme.eq_ignore_ascii_case(signed_read::SCHEME) {
        return SignedRead::parse_params(rest.trim())
            .map(|r| Some(Credential::Signed(r)))
            .map_err(|e| Error::new(Code::Unauthorized, e.message));
    }
    let what = match split {
        Some(_) => format!("the Authorization scheme {scheme:?} is not known"),
        None => {
            "the Authorization header names no scheme (its value is not repeated here)".to_owned()
        }
    };
    Err(Error::new(
        Code::Unauthorized,
        format!(
            "{what}; send Authorization: Bearer TOKEN or {} …",
            signed_read::SCHEME
        ),
    ))
}

/// The group a `/v1/groups/{group}/…` path names (`None` for other paths or a bad ID),
/// percent-decoded as the route decodes it: a member's signature is checked against the group
/// the route reads (`/v1/groups/g%31/events` reads `g1`).
fn group_of(path: &str) -> Option<Id> {
    let rest = path.strip_prefix("/v1/groups/")?;
    let segment = rest.split('/').next()?;
    Id::new(super::query::decode_segment(segment)?).ok()
}

/// The access check ([`Gate`](super::gate::Gate)): reads (`GET`/`HEAD` under `/v1/`,
/// `GET /v1/authority` and `GET /v1/openapi.json` excepted) pass only as [`Access`] allows;
/// everything else goes on (commands carry their own signature, static files hold no data).
#[derive(Clone)]
pub(crate) struct Authorise(pub(crate) App);

impl Check for Authorise {
    fn check(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict {
        let path = uri.path();
        let read = matches!(*method, Method::GET | Method::HEAD);
        if !read
            || !path.starts_with("/v1/")
            || path == "/v1/authority"
            || path == "/v1/openapi.json"
        {
            return Verdict::Pass;
        }
        if self.0.config.access.public_read {
            return Verdict::Pass;
        }
        let target = uri
            .path_and_query()
            .map_or_else(|| path.to_owned(), |pq| pq.as_str().to_owned());
        let group = group_of(path);
        let format = Format::accepted(headers, Format::Json);
        let (app, method, headers) = (self.0.clone(), method.clone(), headers.clone());
        // A member lookup may read the store: run it on the blocking pool.
        Verdict::Later(Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                app.config
                    .access
                    .may_read(&app, &method, &target, group, &headers)
            })
            .await
            .unwrap_or_else(|e| {
                Err(Error::new(
                    Code::Storage,
                    format!("the access check did not finish: {e}"),
                ))
            })
            .map_err(|e| refusal(format, &e))
        }))
    }
}

/// The error answer, with `WWW-Authenticate` naming both schemes on a 401.
pub(crate) fn refusal(format: Format, err: &Error) -> Response {
    let mut resp = wire::error(format, err);
    if err.code == Code::Unauthorized {
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer, Mwp-Signature"),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_files_parse_and_bad_lines_are_named_without_the_token() {
        let tokens = Tokens::parse(
            "# operators\nread 0123456789abcdef-read\n\nadmin 0123456789abcdef-admin\n",
        )
        .expect("parses");
        assert_eq!(tokens.scope_of("0123456789abcdef-read"), Some(Scope::Read));
        assert_eq!(
            tokens.scope_of("0123456789abcdef-admin"),
            Some(Scope::Admin)
        );
        assert_eq!(tokens.scope_of("0123456789abcdef"), None);
        assert_eq!(format!("{tokens:?}"), "Tokens(1 read, 1 admin)");
        for (text, what) in [
            ("write 0123456789abcdef", "line 1: a line is"),
            ("read", "token is missing"),
            ("read short", "at least 16"),
            ("read 0123456789abcdef x", "one token per line"),
            (
                "read 0123456789abcdef\nadmin 0123456789abcdef",
                "line 2: this token is already",
            ),
        ] {
            let err = Tokens::parse(text).expect_err(text);
            assert!(err.contains(what), "{text}: {err}");
            assert!(!err.contains("0123456789abcdef"), "{err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens");
        std::fs::write(&path, "read 0123456789abcdef-read\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = Tokens::load(&path).expect_err("refused");
        assert!(err.contains("mode 0644"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(Tokens::load(&path).is_ok());
    }

    #[test]
    fn the_server_default_follows_the_address() {
        let off = Access::for_server(Tokens::default(), false, false, None);
        assert!(!off.public_read);
        assert_eq!(off.open_groups, OpenGroups::Token);
        let lo = Access::for_server(Tokens::default(), true, false, None);
        assert!(lo.public_read);
        assert_eq!(lo.open_groups, OpenGroups::Any);
        let tokens = Tokens::parse("read 0123456789abcdef-read").expect("parses");
        let lo_tokens = Access::for_server(tokens, true, false, None);
        assert!(!lo_tokens.public_read);
        assert!(!lo_tokens.describe().contains("0123456789abcdef"));
    }

    #[test]
    fn group_of_reads_the_first_segment() {
        assert_eq!(group_of("/v1/groups/g1/events"), Id::new("g1").ok());
        assert_eq!(group_of("/v1/groups/g%31/events"), Id::new("g1").ok());
        assert_eq!(group_of("/v1/groups/g%ff/events"), None);
        assert_eq!(group_of("/v1/groups"), None);
        assert_eq!(group_of("/v1/authority"), None);
    }
}
