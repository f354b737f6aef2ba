//! The authority driver: what an authority does around [`accept`], decided once for every
//! host (memory, files, PostgreSQL, IndexedDB, the Node/Deno file store).
//!
//! A host holds one [`Authority`] per Group and does only IO around it, in the style of a
//! sans-IO protocol driver (`handle_*` takes input, `poll_*` gives what to do next; `now_ms`
//! is passed in):
//!
//! 1. [`Authority::handle_command`] decides a Command and, when it is accepted, applies it
//!    and returns the [`Commit`]: exactly what the host must persist (the event's bytes, the
//!    seq whose stored values a redaction erases, the snapshot that is due). The host makes
//!    the event durable before it hands out [`Commit::receipt`]; if it cannot, it drops this
//!    driver and rebuilds it from storage, since the state already includes the event.
//! 2. [`Authority::poll_tick`] gives the one `tick` Command the authority sends by itself
//!    when a lease deadline has passed; [`Authority::next_wake`] says when to ask again.
//! 3. [`Authority::check_replay`] says whether a replay cursor is served or answered
//!    `CURSOR_TOO_OLD` (the online window, SPEC §9).
//!
//! The host hands in the authority's key; the driver does no IO, reads no clock and draws no
//! randomness. Tick names, the snapshot cadence and the online window are decided here and
//! nowhere else.

use std::sync::Arc;

use crate::accept::{accept, accept_preverified, accept_verified, Decision};
use crate::audit::{OrgPolicies, OrgPolicy};
use crate::command::{Body, Command, Tick, Verified};
use crate::crypto::{PublicKey, SecretKey};
use crate::error::{Code, Error, Rejection, Result};
use crate::event::{Event, EventKind};
use crate::id::Id;
use crate::limits::Limits;
use crate::receipt::Receipt;
use crate::snapshot::{Snapshot, SnapshotRef};
use crate::state::GroupState;

/// Events between two cadence snapshots when a host sets none.
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 100_000;

/// The most bytes of events one page of events reads (8 MiB), whatever its `limit`: a page
/// takes its next event while the events it has taken hold fewer bytes than this, and always
/// its first ([`page_takes`]). An event counts as the page serves it: its canonical CBOR, a
/// redacted event's redacted form (a file store's record payload, or its overlay entry once
/// redacted; a PostgreSQL event row's `bytes`), so every store cuts a log's pages at the same
/// events. So a page holds less than this plus one event of at most
/// [`crate::log_format::MAX_RECORD_LEN`] bytes: a reader's page, or a store's catch-up read,
/// never holds a limit's worth of the largest events at once.
pub const MAX_PAGE_BYTES: u64 = 8 << 20;

/// Whether a page of events whose events so far hold `taken` bytes takes the next one
/// ([`MAX_PAGE_BYTES`]): the one rule every store's page of events follows.
pub fn page_takes(taken: u64) -> bool {
    taken < MAX_PAGE_BYTES
}

/// Whether a store serves stored event `seq` of a Group in `state` in its redacted form
/// (SPEC §6) whatever its stored record holds: once the state holds its redaction. The
/// event's values are erased after the `event_redacted` is durable; until that erasure is
/// done (a writer between the two, or one that stopped there, read by a reader that
/// repairs nothing) the record still holds them, and a read never serves them.
pub fn serves_redacted(state: &GroupState, seq: u64) -> bool {
    state.redacted.contains(&seq)
}

/// What an authority decides besides [`accept`]: limits, the snapshot cadence and the online
/// replay window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The limits commands are checked against.
    pub limits: Limits,
    /// A signed snapshot after every this many events (`None`: only after `group_archived`
    /// and on request).
    pub snapshot_every: Option<u64>,
    /// How many of the latest events a replay always serves (`None`: the whole log).
    pub online_events: Option<u64>,
    /// The Organizations' archival policies (SPEC §6a): a Group of an org named here is
    /// sealed when archived (`None`, or an org not named: its history stays in the clear).
    pub audit: Option<Arc<OrgPolicies>>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            limits: Limits::default(),
            snapshot_every: Some(DEFAULT_SNAPSHOT_EVERY),
            online_events: None,
            audit: None,
        }
    }
}

impl Policy {
    /// Whether the state right after `event` must be snapshotted: every `snapshot_every`
    /// events, and always after `group_archived` (the signed final snapshot, SPEC §5).
    pub fn snapshot_due(&self, event: &Event) -> bool {
        matches!(event.kind, EventKind::GroupArchived(_))
            || self
                .snapshot_every
                .is_some_and(|n| n > 0 && event.seq % n == 0)
    }

    /// The archival policy a Group of `org` is sealed under once archived, if any.
    pub fn seal_policy(&self, org: &Id) -> Option<&OrgPolicy> {
        self.audit.as_ref()?.get(org)
    }

    /// [`Authority::check_replay`] for a sealed Group whose plain history was removed: only
    /// the final snapshot at `seq` (state hash `hash`) and what follows it are served, and an
    /// older cursor is `CURSOR_TOO_OLD` naming that snapshot (SPEC §6a).
    pub fn check_replay_sealed(group: &Id, after: u64, seq: u64, hash: crate::Hash) -> Replay {
        if after >= seq {
            return Replay::Serve;
        }
        Replay::TooOld(snapshot_ref(group, seq, hash).cursor_too_old(after, seq))
    }

    /// [`Authority::check_replay`] for a host that knows only the head and the latest
    /// snapshot (a read that does not hold the group's driver).
    pub fn check_replay(
        &self,
        group: &Id,
        after: u64,
        head: u64,
        latest: Option<(u64, crate::Hash)>,
    ) -> Replay {
        let Some(window) = self.online_events else {
            return Replay::Serve;
        };
        let online_from = head.saturating_sub(window);
        if after >= online_from {
            return Replay::Serve;
        }
        // Events after the latest snapshot are always served, so that a client that
        // restores it can always resume.
        match latest {
            None => Replay::NeedSnapshot,
            Some((seq, _)) if after >= seq => Replay::Serve,
            Some((seq, hash)) => {
                let reference = snapshot_ref(group, seq, hash);
                let oldest = online_from.min(seq);
                Replay::TooOld(reference.cursor_too_old(after, oldest))
            }
        }
    }
}

/// The answer to a replay request (SPEC §9).
#[derive(Debug, Clone, PartialEq)]
pub enum Replay {
    /// Serve the events after the cursor from the log.
    Serve,
    /// The cursor is older than the online window and there is no snapshot yet: take one
    /// (at the head, [`Authority::snapshot`]), store it and ask again.
    NeedSnapshot,
    /// `CURSOR_TOO_OLD`, with a reference to the latest signed snapshot.
    TooOld(Error),
}

/// The reference a `CURSOR_TOO_OLD` answer carries for the snapshot of `group` at `seq`:
/// `location` is where `mwp serve` serves the latest snapshot.
pub fn snapshot_ref(group: &Id, seq: u64, hash: crate::Hash) -> SnapshotRef {
    SnapshotRef {
        seq,
        hash,
        location: format!("/v1/groups/{group}/snapshots/latest"),
    }
}

/// Whether a store holding the key `key` may sign for the group whose state is `state`: its
/// ticks, snapshots and heads. Yes if the group names `key` as its `authority_key` (in its
/// `open_group`), or if it is archived: it takes no command, and a sealed audit log restored
/// elsewhere (`mwp audit open --out DIR`) is re-signed there with a key of that store's own.
/// Otherwise the key the store holds is not this group's (replaced, or copied from another data
/// directory): `STORAGE`, not `LOG_CORRUPT` (the log is intact; the key is what is wrong),
/// naming where the key was read from (`key_file`, as the host names it: the core reads no
/// file), the group and both public keys, in the message and as details `file`, `group`,
/// `authority_key` (the group's) and `key` (the store's). Every file store asks this before it
/// signs anything for a group it opens (docs/decisions.md, "The store's key and its groups").
pub fn check_store_key(state: &GroupState, key: &PublicKey, key_file: &str) -> Result<()> {
    if state.archived || state.authority_key == *key {
        return Ok(());
    }
    Err(Error::new(
        Code::Storage,
        format!(
            "{key_file} holds the key {key}, but group {} names {} as its authority_key: the key \
             file is not this group's authority; put back the group's key",
            state.group, state.authority_key
        ),
    )
    .with("file", key_file)
    .with("group", state.group.as_str())
    .with("authority_key", state.authority_key.to_hex())
    .with("key", key.to_hex()))
}

/// An authority's key and policy, shared by the drivers of its Groups.
#[derive(Debug)]
pub struct Config {
    key: SecretKey,
    public: PublicKey,
    policy: Policy,
}

impl Config {
    /// The authority signing ticks and snapshots with `key`, deciding under `policy`.
    pub fn new(key: SecretKey, policy: Policy) -> Arc<Config> {
        let public = key.public();
        Arc::new(Config {
            key,
            public,
            policy,
        })
    }

    /// The authority's public key: what an `open_group` must name as `authority_key`.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The secret key: what a host signs its stored snapshots with (a cadence snapshot
    /// written once the event is durable, a read-only store's snapshot in memory).
    pub fn secret_key(&self) -> &SecretKey {
        &self.key
    }
}

/// What a host must persist for an accepted Command, in this order: the event (durably,
/// before the receipt is handed out), then the erasure, then the snapshot.
#[derive(Debug)]
pub struct Commit {
    /// The accepted event, applied to the driver's state already.
    pub event: Box<Event>,
    /// Its canonical CBOR: the bytes the log holds.
    pub bytes: Vec<u8>,
    /// A redaction's target: the seq whose stored values are erased once the event is
    /// durable (SPEC §5).
    pub erase: Option<u64>,
    /// The signed snapshot that is due after this event, to be signed and stored once the
    /// event is durable (in the background if the host likes, except after an archive).
    pub snapshot: Option<SnapshotDue>,
    /// The archival policy the Group is now sealed under (SPEC §6a): set when this event
    /// archives a Group whose org has a policy. The host seals the audit log once the final
    /// snapshot is durable, and removes nothing before the sealed artifact is.
    pub seal: Option<OrgPolicy>,
}

impl Commit {
    /// The receipt to hand out once the event is durable.
    pub fn receipt(&self) -> Receipt {
        self.event.receipt()
    }

    /// The decision the surfaces show.
    pub fn into_decision(self) -> Decision {
        Decision::Accepted(self.event)
    }
}

/// A snapshot the cadence made due: the state right after the event, not yet signed.
#[derive(Debug)]
pub struct SnapshotDue {
    state: Box<GroupState>,
    keys: Keys,
}

impl SnapshotDue {
    /// The seq the snapshot is at.
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// The state it snapshots.
    pub fn state(&self) -> &GroupState {
        &self.state
    }

    /// Whether the driver holds the key to sign it ([`Authority::keyless`] does not: its
    /// host keeps the state unsigned, as a checkpoint, or signs with a key of its own).
    pub fn signable(&self) -> bool {
        self.keys.config().is_some()
    }

    /// Signs it with the authority key.
    pub fn sign(&self) -> Result<Snapshot> {
        Snapshot::build(&self.state, self.keys.secret_key()?)
    }

    /// Signs and encodes it: the stored bytes and the state hash.
    pub fn sign_stored(&self) -> Result<(Vec<u8>, crate::Hash)> {
        Snapshot::build_stored(&self.state, self.keys.secret_key()?)
    }
}

/// The key an authority signs with and its policy, or the policy alone (a keyless
/// authority).
#[derive(Debug, Clone)]
enum Keys {
    Signing(Arc<Config>),
    Keyless(Arc<Policy>),
}

impl Keys {
    fn policy(&self) -> &Policy {
        match self {
            Keys::Signing(c) => &c.policy,
            Keys::Keyless(p) => p,
        }
    }

    fn config(&self) -> Option<&Arc<Config>> {
        match self {
            Keys::Signing(c) => Some(c),
            Keys::Keyless(_) => None,
        }
    }

    fn secret_key(&self) -> Result<&SecretKey> {
        self.config().map(|c| &c.key).ok_or_else(|| {
            Error::new(
                Code::NotPermitted,
                "this authority holds no key: it cannot sign a snapshot or a tick",
            )
        })
    }
}

/// What a host checked of a command before handing it to the authority.
#[derive(Clone, Copy)]
enum Checked<'a, 'c> {
    /// Nothing: [`accept`] checks the signature.
    Nothing,
    /// Its signature, under this key ([`accept_preverified`]).
    Key(&'a PublicKey),
    /// Its signature, by the core, with the content bytes it verified ([`accept_verified`]).
    Verified(&'a Verified<'c>),
}

/// What [`Authority::handle_command`] decided.
#[derive(Debug)]
pub enum Step {
    /// Accepted: persist the commit, then acknowledge with its receipt.
    Accepted(Commit),
    /// Already accepted: the original receipt, byte for byte. Nothing to persist.
    Duplicate(Receipt),
    /// Refused by a check; nothing changed.
    Rejected(Rejection),
}

impl Step {
    /// The decision the surfaces show (the commit's bytes dropped).
    pub fn into_decision(self) -> Decision {
        match self {
            Step::Accepted(c) => c.into_decision(),
            Step::Duplicate(r) => Decision::Duplicate(r),
            Step::Rejected(r) => Decision::Rejected(r),
        }
    }
}

/// One Group's authority: its state and the rules around [`accept`]. See the module doc.
#[derive(Debug, Clone)]
pub struct Authority {
    keys: Keys,
    state: Option<GroupState>,
}

impl Authority {
    /// A driver for a Group that does not exist yet: it accepts only an `open_group`.
    pub fn new(config: Arc<Config>) -> Self {
        Authority::restore(config, None)
    }

    /// A driver over a state rebuilt from storage.
    pub fn restore(config: Arc<Config>, state: Option<GroupState>) -> Self {
        Authority {
            keys: Keys::Signing(config),
            state,
        }
    }

    /// A driver that holds no key, over `state` (`None`: not open yet). It decides as any
    /// other, but accepts an `open_group` naming any `authority_key`, sends no ticks
    /// ([`Authority::poll_tick`] is always `None`) and signs nothing: a due snapshot comes
    /// unsigned ([`SnapshotDue::signable`]). For hosts whose callers hold the key (the
    /// in-memory wasm `Authority` built without one, IndexedDB).
    pub fn keyless(policy: Policy, state: Option<GroupState>) -> Self {
        Authority {
            keys: Keys::Keyless(Arc::new(policy)),
            state,
        }
    }

    /// The same key and policy over another state: what a host rebuilding from storage
    /// starts from.
    pub fn with_state(&self, state: Option<GroupState>) -> Self {
        Authority {
            keys: self.keys.clone(),
            state,
        }
    }

    /// The state, once the Group is open.
    pub fn state(&self) -> Option<&GroupState> {
        self.state.as_ref()
    }

    /// The state, taken out (the driver is gone).
    pub fn into_state(self) -> Option<GroupState> {
        self.state
    }

    /// The key and policy (`None` for a [`Authority::keyless`] driver).
    pub fn config(&self) -> Option<&Arc<Config>> {
        self.keys.config()
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        self.keys.policy()
    }

    /// The archival policy the Group must be sealed under, when it is archived and its org
    /// has one (SPEC §6a): what a host checks on open, to finish a seal a crash interrupted.
    pub fn seal_due(&self) -> Option<&OrgPolicy> {
        let state = self.state.as_ref().filter(|s| s.archived)?;
        self.policy().seal_policy(&state.org)
    }

    /// The seq of the last accepted event (0 before genesis).
    pub fn head(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.seq)
    }

    /// Decides `cmd` at `now_ms`; an accepted command is applied and returned as the
    /// [`Commit`] to persist. `Err` only for what is not a decision (a bug, corruption).
    pub fn handle_command(&mut self, cmd: &Command, now_ms: u64) -> Result<Step> {
        self.decide(cmd, now_ms, Checked::Nothing)
    }

    /// [`Authority::handle_command`] for a host that verified `cmd`'s signature under
    /// `verified_key` before taking its lock ([`accept_preverified`]).
    pub fn handle_command_preverified(
        &mut self,
        cmd: &Command,
        now_ms: u64,
        verified_key: &PublicKey,
    ) -> Result<Step> {
        self.decide(cmd, now_ms, Checked::Key(verified_key))
    }

    /// [`Authority::handle_command`] for a command the core verified before the host took
    /// its lock ([`Command::verify_once`], [`accept_verified`]): its content is not encoded
    /// again.
    pub fn handle_verified(&mut self, verified: &Verified<'_>, now_ms: u64) -> Result<Step> {
        self.decide(verified.command(), now_ms, Checked::Verified(verified))
    }

    /// Decides `cmd` at `now_ms` without applying it: the decision
    /// [`Authority::handle_command`] would make. For a host that makes the event durable
    /// first and then hands it to [`Authority::handle_logged`].
    pub fn check(&self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        self.check_with(cmd, now_ms, Checked::Nothing)
    }

    fn check_with(&self, cmd: &Command, now_ms: u64, checked: Checked<'_, '_>) -> Result<Decision> {
        let limits = &self.policy().limits;
        let state = self.state.as_ref();
        let decision = match checked {
            Checked::Nothing => accept(state, cmd, now_ms, limits)?,
            Checked::Key(k) => accept_preverified(state, cmd, now_ms, limits, k)?,
            Checked::Verified(v) => accept_verified(state, v, now_ms, limits)?,
        };
        // Checked once the command is otherwise acceptable, so that a bad signature is
        // answered as such before the key is looked at.
        if matches!(decision, Decision::Accepted(_)) && self.state.is_none() {
            if let Some(r) = self.check_open_group(cmd) {
                return Ok(Decision::Rejected(r));
            }
        }
        Ok(decision)
    }

    fn decide(&mut self, cmd: &Command, now_ms: u64, checked: Checked<'_, '_>) -> Result<Step> {
        let event = match self.check_with(cmd, now_ms, checked)? {
            Decision::Accepted(event) => event,
            Decision::Duplicate(r) => return Ok(Step::Duplicate(r)),
            Decision::Rejected(r) => return Ok(Step::Rejected(r)),
        };
        let bytes = event.to_cbor()?;
        // `apply` checks before it changes anything: on error the state is untouched.
        GroupState::apply_to(&mut self.state, &event)?;
        let erase = match &event.kind {
            EventKind::EventRedacted(r) => Some(r.seq),
            _ => None,
        };
        let snapshot = match &self.state {
            Some(state) if self.policy().snapshot_due(&event) => Some(SnapshotDue {
                state: Box::new(state.clone()),
                keys: self.keys.clone(),
            }),
            _ => None,
        };
        let seal = match (&event.kind, &self.state) {
            (EventKind::GroupArchived(_), Some(state)) => {
                self.policy().seal_policy(&state.org).cloned()
            }
            _ => None,
        };
        Ok(Step::Accepted(Commit {
            event,
            bytes,
            erase,
            snapshot,
            seal,
        }))
    }

    /// An `open_group` must name this authority's key as `authority_key`, since this
    /// authority signs the group's ticks and snapshots (SPEC §11).
    fn check_open_group(&self, cmd: &Command) -> Option<Rejection> {
        let Body::OpenGroup(g) = &cmd.body else {
            return None;
        };
        let key = self.config()?.public;
        (g.authority_key != key).then(|| {
            let mut r = Rejection::new(
                Code::NotPermitted,
                format!(
                    "open_group names authority_key {}, but this authority signs with {key}; name {key}",
                    g.authority_key
                ),
            );
            r.details
                .insert("authority_key".to_owned(), key.to_hex().into());
            r
        })
    }

    /// Applies an event already in the log (written by this authority earlier, or by
    /// another process sharing the store): what recovery and catch-up call. The event must
    /// follow the head.
    pub fn handle_logged(&mut self, event: &Event) -> Result<()> {
        GroupState::apply_to(&mut self.state, event)
    }

    /// [`Authority::handle_logged`] for an event read back from the stored log of `group`:
    /// the genesis event must belong to `group` ([`GroupState::apply_stored_to`]).
    pub fn handle_stored(&mut self, group: &Id, event: &Event) -> Result<()> {
        GroupState::apply_stored_to(&mut self.state, group, event)
    }

    /// When the authority next has something to do by itself: the earliest lease deadline
    /// (`None` before genesis, once archived, or with no lease held).
    pub fn next_wake(&self) -> Option<u64> {
        next_wake(self.state.as_ref()?)
    }

    /// The `tick` the authority sends at `now_ms`, if a lease deadline has passed: actor
    /// `@authority`, session 1, action `tick.<the seq it will have>`, signed with the
    /// authority key. Feed it to [`Authority::handle_command`]. Its action is unique, since
    /// each accepted tick moves the head; a tick decided twice at one head (two processes
    /// sharing a store) is a duplicate, never a second event.
    pub fn poll_tick(&self, now_ms: u64) -> Result<Option<Command>> {
        match (&self.state, self.config()) {
            (Some(state), Some(config)) => due_tick(state, &config.key, now_ms),
            _ => Ok(None),
        }
    }

    /// Whether a replay of the events after `after` is served, given the latest stored
    /// snapshot's (seq, state hash). See [`Policy::check_replay`].
    pub fn check_replay(&self, after: u64, latest: Option<(u64, crate::Hash)>) -> Replay {
        match &self.state {
            Some(s) => self.policy().check_replay(&s.group, after, s.seq, latest),
            None => Replay::Serve,
        }
    }

    /// A signed snapshot of the state now (on request, or for [`Replay::NeedSnapshot`]).
    pub fn snapshot(&self) -> Result<Snapshot> {
        Snapshot::build(self.open_state()?, self.keys.secret_key()?)
    }

    /// [`Authority::snapshot`], encoded: the stored bytes and the state hash.
    pub fn snapshot_stored(&self) -> Result<(Vec<u8>, crate::Hash)> {
        Snapshot::build_stored(self.open_state()?, self.keys.secret_key()?)
    }

    fn open_state(&self) -> Result<&GroupState> {
        self.state.as_ref().ok_or_else(|| {
            Error::new(
                Code::NotFound,
                "the group is not open: there is nothing to snapshot",
            )
        })
    }
}

/// When the authority of a group in `state` next acts by itself: its earliest lease
/// deadline, unless it is archived. What [`Authority::next_wake`] answers.
pub fn next_wake(state: &GroupState) -> Option<u64> {
    if state.archived {
        return None;
    }
    state.next_deadline()
}

/// The `tick` the authority of a group in `state` sends at `now_ms`, if one is due: what
/// [`Authority::poll_tick`] answers, for a host that keeps the state without a driver (the
/// Node/Deno file store through the wasm `StoreGroup`). The one place a tick is named.
pub fn due_tick(state: &GroupState, key: &SecretKey, now_ms: u64) -> Result<Option<Command>> {
    match next_wake(state) {
        Some(at) if at <= now_ms => tick_command(state, key).map(Some),
        _ => Ok(None),
    }
}

fn tick_command(state: &GroupState, key: &SecretKey) -> Result<Command> {
    let action = Id::new(format!("tick.{}", state.seq + 1))
        .map_err(|e| Error::malformed(format!("tick action id: {e}")))?;
    Command::signed(
        state.org.clone(),
        state.group.clone(),
        Id::authority(),
        action,
        1,
        None,
        Body::Tick(Tick {}),
        key,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{MemberSpec, OpenGroup, Role};
    use crate::event::EventKind;

    fn id(s: &str) -> Id {
        Id::new(s).expect("valid id")
    }

    fn signed(actor: &str, action: &str, body: Body, expect: Option<u64>) -> Command {
        let key = SecretKey::for_transcript(actor);
        Command::signed(
            id("acme"),
            id("g"),
            id(actor),
            id(action),
            1,
            expect,
            body,
            &key,
        )
        .expect("signs")
    }

    fn open(authority_key: PublicKey) -> Command {
        let body = Body::OpenGroup(OpenGroup {
            mission: id("m"),
            title: serde_json::json!("t").into(),
            members: vec![
                MemberSpec {
                    actor: id("alice"),
                    role: Role::Owner,
                    key: SecretKey::for_transcript("alice").public(),
                },
                MemberSpec {
                    actor: id("bob"),
                    role: Role::Worker,
                    key: SecretKey::for_transcript("bob").public(),
                },
            ],
            authority_key,
        });
        signed("alice", "open", body, None)
    }

    fn body(json: serde_json::Value) -> Body {
        serde_json::from_value(json).expect("a body")
    }

    fn config(policy: Policy) -> Arc<Config> {
        Config::new(SecretKey::for_transcript("@authority"), policy)
    }

    /// A group with w1 claimed by bob at 1000: its start deadline is 3000.
    fn leased(policy: Policy) -> Authority {
        let mut a = Authority::new(config(policy));
        let key = a.config().expect("keyed").public_key();
        let accepted = |step: Step| assert!(matches!(step, Step::Accepted(_)), "{step:?}");
        accepted(a.handle_command(&open(key), 1000).expect("decides"));
        let create = body(serde_json::json!({"type": "create_work", "work": "w1",
            "contract": {"max_attempts": 3, "backoff_base_ms": 100, "backoff_max_ms": 1000,
                         "cost_budget": 10, "risk": "low"}, "after": [], "spec": {}}));
        accepted(
            a.handle_command(&signed("alice", "c1", create, None), 1000)
                .expect("decides"),
        );
        let claim = body(serde_json::json!({"type": "claim_work", "work": "w1",
            "lease_ms": 10000, "start_within_ms": 2000}));
        accepted(
            a.handle_command(&signed("bob", "b1", claim, Some(1)), 1000)
                .expect("decides"),
        );
        a
    }

    #[test]
    fn the_tick_is_due_at_the_deadline_and_named_after_the_seq_it_will_have() {
        let mut a = leased(Policy::default());
        assert_eq!(a.next_wake(), Some(3000));
        assert!(a.poll_tick(2999).expect("polls").is_none());
        let tick = a.poll_tick(3000).expect("polls").expect("due");
        assert_eq!(tick.action.as_str(), "tick.4");
        assert_eq!(tick.actor.as_str(), "@authority");
        assert_eq!(tick.session, 1);
        assert!(tick
            .verify(&a.config().expect("keyed").public_key())
            .expect("encodes"));
        let Step::Accepted(commit) = a.handle_command(&tick, 3000).expect("decides") else {
            panic!("the due tick is accepted");
        };
        assert!(matches!(commit.event.kind, EventKind::LeasesExpired(_)));
        assert_eq!(commit.event.seq, 4);
        assert_eq!(a.next_wake(), None, "nothing is leased any more");
        // The same tick decided again (another process, one head) is a duplicate.
        assert!(matches!(
            a.handle_command(&tick, 3000).expect("decides"),
            Step::Duplicate(_)
        ));
    }

    #[test]
    fn open_group_must_name_the_authoritys_key_after_the_other_checks() {
        let mut a = Authority::new(config(Policy::default()));
        let other = SecretKey::for_transcript("elsewhere").public();
        let Step::Rejected(r) = a.handle_command(&open(other), 1).expect("decides") else {
            panic!("another authority key is refused");
        };
        assert_eq!(r.code, Code::NotPermitted);
        assert_eq!(
            r.details["authority_key"],
            a.config().expect("keyed").public_key().to_hex()
        );
        assert!(a.state().is_none(), "nothing applied");
        let mut tampered = open(other);
        tampered.sig.0[0] ^= 1;
        let Step::Rejected(r) = a.handle_command(&tampered, 1).expect("decides") else {
            panic!("a bad signature is refused");
        };
        assert_eq!(r.code, Code::BadSignature, "the signature answers first");
    }

    #[test]
    fn a_store_signs_for_a_group_only_with_the_key_it_names_unless_archived() {
        let a = leased(Policy::default());
        let state = a.state().expect("opened");
        let genuine = a.config().expect("keyed").public_key();
        check_store_key(state, &genuine, "d/authority.key").expect("the group's own key");
        let other = SecretKey::for_transcript("elsewhere").public();
        let e = check_store_key(state, &other, "d/authority.key").expect_err("another key");
        assert_eq!(e.code, Code::Storage);
        assert_eq!(
            e.message,
            format!(
                "d/authority.key holds the key {other}, but group g names {genuine} as its \
                 authority_key: the key file is not this group's authority; put back the \
                 group's key"
            )
        );
        assert_eq!(e.details["file"], "d/authority.key");
        assert_eq!(e.details["group"], "g");
        assert_eq!(e.details["authority_key"], genuine.to_hex());
        assert_eq!(e.details["key"], other.to_hex());
        assert_eq!(e.details.len(), 4);
        let archived = GroupState {
            archived: true,
            ..state.clone()
        };
        check_store_key(&archived, &other, "d/authority.key").expect("an archived group");
    }

    #[test]
    fn the_cadence_makes_a_snapshot_due_every_n_events() {
        let a = leased(Policy {
            snapshot_every: Some(2),
            ..Policy::default()
        });
        let mut a = a;
        // seq 4: the tick, a multiple of 2.
        let tick = a.poll_tick(3000).expect("polls").expect("due");
        let Step::Accepted(commit) = a.handle_command(&tick, 3000).expect("decides") else {
            panic!("accepted");
        };
        let due = commit.snapshot.expect("due at seq 4");
        assert_eq!(due.seq(), 4);
        let snap = due.sign().expect("signs");
        snap.verify(
            &a.config().expect("keyed").public_key(),
            &id("acme"),
            &id("g"),
            0,
        )
        .expect("verifies");
    }

    #[test]
    fn replay_serves_the_window_and_everything_after_the_latest_snapshot() {
        let policy = Policy {
            online_events: Some(5),
            ..Policy::default()
        };
        let g = id("g");
        let h = crate::Hash::ZERO;
        assert_eq!(policy.check_replay(&g, 15, 20, None), Replay::Serve);
        assert_eq!(policy.check_replay(&g, 14, 20, None), Replay::NeedSnapshot);
        assert_eq!(
            policy.check_replay(&g, 12, 20, Some((12, h))),
            Replay::Serve
        );
        let Replay::TooOld(e) = policy.check_replay(&g, 3, 20, Some((12, h))) else {
            panic!("too old");
        };
        assert_eq!(e.code, Code::CursorTooOld);
        assert_eq!(e.details["snapshot"]["seq"], 12);
        assert_eq!(
            e.details["snapshot"]["location"],
            "/v1/groups/g/snapshots/latest"
        );
        assert_eq!(
            Policy::default().check_replay(&g, 0, 20, None),
            Replay::Serve
        );
    }

    #[test]
    fn a_keyless_driver_decides_alike_but_signs_nothing() {
        let policy = Policy {
            snapshot_every: Some(1),
            ..Policy::default()
        };
        let mut a = Authority::keyless(policy, None);
        assert!(a.config().is_none());
        // Any authority key is accepted: its callers hold the key.
        let other = SecretKey::for_transcript("elsewhere").public();
        let Step::Accepted(commit) = a.handle_command(&open(other), 1).expect("decides") else {
            panic!("a keyless authority accepts any authority_key");
        };
        let due = commit.snapshot.expect("due at seq 1");
        assert!(!due.signable());
        assert_eq!(due.sign().expect_err("no key").code, Code::NotPermitted);
        assert_eq!(a.snapshot().expect_err("no key").code, Code::NotPermitted);
        assert!(a.poll_tick(u64::MAX).expect("polls").is_none());
    }

    #[test]
    fn check_decides_as_handle_command_without_applying() {
        let a = Authority::new(config(Policy::default()));
        let other = SecretKey::for_transcript("elsewhere").public();
        let Decision::Rejected(r) = a.check(&open(other), 1).expect("decides") else {
            panic!("check runs the open_group key check too");
        };
        assert_eq!(r.code, Code::NotPermitted);
        let key = a.config().expect("keyed").public_key();
        assert!(matches!(
            a.check(&open(key), 1).expect("decides"),
            Decision::Accepted(_)
        ));
        assert!(a.state().is_none(), "nothing applied");
    }
}
