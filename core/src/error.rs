//! Errors: one stable `code` for every surface, a message that says what was wrong and what
//! would be right, and details as extra fields.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The stable error codes of SPEC §3, in the order the acceptance checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum Code {
    /// The input could not be decoded, or broke a limit or a format rule.
    Malformed,
    /// The command names another org or group than the one it was sent to.
    WrongGroup,
    /// The actor is not (and never was) a member, or the group does not exist for it.
    UnknownActor,
    /// The signature does not verify under the actor's registered key.
    BadSignature,
    /// The (actor, action) pair already has a receipt for different content.
    ActionIdCollision,
    /// The group is archived: nothing more is accepted.
    GroupArchived,
    /// The actor's role does not allow this command.
    NotPermitted,
    /// The envelope's session is not the actor's current session epoch.
    WrongSession,
    /// `expect` is not the aggregate's current revision.
    RevisionMismatch,
    /// A compare-and-set command came without `expect`.
    CasRequired,
    /// The lease was superseded or revoked.
    Fenced,
    /// The lease's time has passed.
    LeaseExpired,
    /// The named thing does not exist.
    NotFound,
    /// The named thing exists already.
    AlreadyExists,
    /// The item is not in a state that allows this command.
    InvalidState,
    /// A dependency has not succeeded yet.
    DependenciesPending,
    /// Not yet: backoff, or a tick with nothing due.
    NotYet,
    /// The work item's deadline has passed.
    DeadlinePassed,
    /// No attempts are left under the work contract.
    AttemptsExhausted,
    /// A granted approval is needed first.
    ApprovalRequired,
    /// An intended effect has no settlement yet.
    EffectUnsettled,
    /// A different disposition was already recorded for this trigger.
    DispositionConflict,
    /// The charge would exceed the work item's cost budget.
    BudgetExceeded,
    /// A replay source no longer holds the requested cursor.
    CursorTooOld,
    /// A snapshot failed validation.
    SnapshotInvalid,
    /// A signed head does not decode, is of another group, or does not verify under the
    /// authority key (SPEC §8a).
    HeadInvalid,
    /// A sealed audit artifact, its manifest, its log or a tombstone does not verify, or does
    /// not decrypt with the identity given (SPEC §6a). Carries `check` naming which.
    AuditInvalid,
    /// A signed head contradicts the chain it should vouch for: another id at its seq
    /// (SPEC §8a). Carries the heads as evidence.
    Fork,
    /// A log or event does not verify.
    LogCorrupt,
    /// The storage layer failed.
    Storage,
    /// A request to a server came without a credential it needs, or with one that does not
    /// hold (an unknown token, a signed read that does not verify or is outside the allowed
    /// clock skew). Not an acceptance check: hosts answer it before deciding anything.
    Unauthorized,
    /// A request's credential holds but does not allow it (a member of another group, a
    /// token whose scope is too narrow). Not an acceptance check.
    Forbidden,
}

impl Code {
    /// The SCREAMING_SNAKE name, as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Malformed => "MALFORMED",
            Code::WrongGroup => "WRONG_GROUP",
            Code::UnknownActor => "UNKNOWN_ACTOR",
            Code::BadSignature => "BAD_SIGNATURE",
            Code::ActionIdCollision => "ACTION_ID_COLLISION",
            Code::GroupArchived => "GROUP_ARCHIVED",
            Code::NotPermitted => "NOT_PERMITTED",
            Code::WrongSession => "WRONG_SESSION",
            Code::RevisionMismatch => "REVISION_MISMATCH",
            Code::CasRequired => "CAS_REQUIRED",
            Code::Fenced => "FENCED",
            Code::LeaseExpired => "LEASE_EXPIRED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::InvalidState => "INVALID_STATE",
            Code::DependenciesPending => "DEPENDENCIES_PENDING",
            Code::NotYet => "NOT_YET",
            Code::DeadlinePassed => "DEADLINE_PASSED",
            Code::AttemptsExhausted => "ATTEMPTS_EXHAUSTED",
            Code::ApprovalRequired => "APPROVAL_REQUIRED",
            Code::EffectUnsettled => "EFFECT_UNSETTLED",
            Code::DispositionConflict => "DISPOSITION_CONFLICT",
            Code::BudgetExceeded => "BUDGET_EXCEEDED",
            Code::CursorTooOld => "CURSOR_TOO_OLD",
            Code::SnapshotInvalid => "SNAPSHOT_INVALID",
            Code::HeadInvalid => "HEAD_INVALID",
            Code::AuditInvalid => "AUDIT_INVALID",
            Code::Fork => "FORK",
            Code::LogCorrupt => "LOG_CORRUPT",
            Code::Storage => "STORAGE",
            Code::Unauthorized => "UNAUTHORIZED",
            Code::Forbidden => "FORBIDDEN",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as every surface shows it: `{"code": …, "message": …, …details}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Error {
    /// The stable code.
    pub code: Code,
    /// What was wrong and what would be right.
    pub message: String,
    /// Extra fields, e.g. `current` for `REVISION_MISMATCH`.
    #[serde(flatten)]
    pub details: BTreeMap<String, serde_json::Value>,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            details: BTreeMap::new(),
        }
    }

    /// Adds a detail field.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.details.insert(key.to_owned(), value.into());
        self
    }

    /// A `MALFORMED` error.
    pub fn malformed(message: impl Into<String>) -> Self {
        Error::new(Code::Malformed, message)
    }

    /// A `LOG_CORRUPT` error.
    pub fn corrupt(message: impl Into<String>) -> Self {
        Error::new(Code::LogCorrupt, message)
    }
}

impl Error {
    /// The error a server answered with (`body`: its JSON form, or canonical CBOR for a
    /// snapshot request), as every client reads it: `None` unless it is an mwp error, with a
    /// code of the spec's and a message; the message is quoted [`printable`] and cut at
    /// [`MAX_QUOTED_CHARS`], so that words a server chose cannot drive a terminal. A client
    /// reports an answer that is not one as `STORAGE` (not mwp's answer), never with a code
    /// the server made up.
    pub fn from_answer(body: &[u8]) -> Option<Error> {
        let mut e = serde_json::from_slice::<Error>(body).ok().or_else(|| {
            crate::canonical::from_slice::<Error>(body, crate::canonical::Strictness::Lenient).ok()
        })?;
        e.message = printable(&e.message, MAX_QUOTED_CHARS);
        Some(e)
    }
}

/// Most characters of a server's words (an error message, a body that is not mwp's) quoted
/// in an error.
pub const MAX_QUOTED_CHARS: usize = 1000;

/// `text` fit for a terminal: control characters other than newline and tab escaped
/// (`\u{1b}`), so that words a server chose cannot drive the terminal they are printed on,
/// and cut after `max` characters (with `…`).
pub fn printable(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl From<crate::canonical::CanonError> for Error {
    fn from(e: crate::canonical::CanonError) -> Self {
        Error::malformed(e.to_string())
    }
}

/// Shorthand for results carrying an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Code {
    /// Whether the code is one of the acceptance checks' answers (SPEC §3): a Command that
    /// was decided and refused, with nothing changed. The others (`CURSOR_TOO_OLD`,
    /// `SNAPSHOT_INVALID`, `LOG_CORRUPT`, `STORAGE`, `UNAUTHORIZED`, `FORBIDDEN`) are about
    /// a read, a stored byte or a request, never a decision.
    pub fn is_rejection(self) -> bool {
        !matches!(
            self,
            Code::CursorTooOld
                | Code::SnapshotInvalid
                | Code::HeadInvalid
                | Code::AuditInvalid
                | Code::Fork
                | Code::LogCorrupt
                | Code::Storage
                | Code::Unauthorized
                | Code::Forbidden
        )
    }
}

/// A Command the authority decided and refused (SPEC §3): an expected answer, carried as a
/// value in [`crate::Decision::Rejected`], distinct from an [`Error`] (storage, corruption,
/// a bug). It shows as an error on every surface, `{"code": …, "message": …, …details}`, and
/// hosts map it by [`Rejection::code`] alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    /// The stable code: one for which [`Code::is_rejection`] holds.
    pub code: Code,
    /// What was wrong and what would be right.
    pub message: String,
    /// Extra fields, e.g. `current` for `REVISION_MISMATCH`.
    #[serde(flatten)]
    pub details: BTreeMap<String, serde_json::Value>,
}

impl Rejection {
    /// A rejection with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Rejection {
            code,
            message: message.into(),
            details: BTreeMap::new(),
        }
    }

    /// The rejection as the error every surface shows.
    pub fn into_error(self) -> Error {
        Error {
            code: self.code,
            message: self.message,
            details: self.details,
        }
    }
}

impl From<Rejection> for Error {
    fn from(r: Rejection) -> Self {
        r.into_error()
    }
}

impl Error {
    /// Splits an error of a decision: `Ok(rejection)` when its code is an acceptance
    /// check's ([`Code::is_rejection`]), `Err(self)` when it is storage, corruption or a bug.
    pub fn into_rejection(self) -> std::result::Result<Rejection, Error> {
        if self.code.is_rejection() {
            Ok(Rejection {
                code: self.code,
                message: self.message,
                details: self.details,
            })
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}
