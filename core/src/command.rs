//! Commands: the signed envelopes an authority decides (SPEC §2).

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Strictness, TextFault};
use crate::crypto::{Hash, PreparedKey, PublicKey, SecretKey, Signature};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::lease::LeaseId;
use crate::limits::Limits;
use crate::opaque::{self, Opaque};

/// A signed Command envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Command {
    /// Organization.
    pub org: Id,
    /// Group the command is for.
    pub group: Id,
    /// Sender.
    pub actor: Id,
    /// Sender's action ID: the idempotency key, with `actor`.
    pub action: Id,
    /// Sender's session epoch (≥ 1).
    pub session: u64,
    /// Expected revision of the target aggregate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<u64>,
    /// What the command asks for.
    pub body: Body,
    /// Ed25519 signature over the canonical CBOR of every other field.
    pub sig: Signature,
}

/// The signed part of a [`Command`]: every field but `sig`.
struct Content<'a> {
    org: &'a Id,
    group: &'a Id,
    actor: &'a Id,
    action: &'a Id,
    session: u64,
    expect: Option<u64>,
    body: &'a Body,
}

canonical::encode_struct! {
    Content<'a> { org, group, actor, action, session, expect if is_some, body }
}

impl Command {
    /// Builds and signs a command.
    #[allow(clippy::too_many_arguments)]
    pub fn signed(
        org: Id,
        group: Id,
        actor: Id,
        action: Id,
        session: u64,
        expect: Option<u64>,
        body: Body,
        key: &SecretKey,
    ) -> Result<Command> {
        let mut cmd = Command {
            org,
            group,
            actor,
            action,
            session,
            expect,
            body,
            sig: Signature([0; 64]),
        };
        cmd.sign(key)?;
        Ok(cmd)
    }

    /// (Re-)signs the command with `key`.
    pub fn sign(&mut self, key: &SecretKey) -> Result<()> {
        self.sig = key.sign(&self.content_bytes()?);
        Ok(())
    }

    /// Canonical CBOR of every field but `sig`: the bytes that are signed.
    pub fn content_bytes(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(&self.content())?)
    }

    /// The signed part, as the encoder takes it.
    fn content(&self) -> Content<'_> {
        Content {
            org: &self.org,
            group: &self.group,
            actor: &self.actor,
            action: &self.action,
            session: self.session,
            expect: self.expect,
            body: &self.body,
        }
    }

    /// Content hash: SHA-256 of [`Command::content_bytes`].
    pub fn content_hash(&self) -> Result<Hash> {
        Ok(Hash::of(&self.content_bytes()?))
    }

    /// Whether `sig` verifies under `key`.
    pub fn verify(&self, key: &PublicKey) -> Result<bool> {
        Ok(key.verify(&self.content_bytes()?, &self.sig))
    }

    /// Whether `sig` verifies under a key decoded beforehand (the same answer as
    /// [`Command::verify`] with that key).
    pub fn verify_prepared(&self, key: &PreparedKey) -> Result<bool> {
        Ok(self.verify_once(key)?.is_some())
    }

    /// Checks `sig` under `key` and keeps what was checked: the [`Verified`] command, which
    /// [`crate::accept::accept_verified`] decides without encoding its content again, or
    /// `None` when the signature does not verify (the same answer as
    /// [`Command::verify_prepared`]).
    pub fn verify_once(&self, key: &PreparedKey) -> Result<Option<Verified<'_>>> {
        let content = self.content_bytes()?;
        Ok(key.verify(&content, &self.sig).then(|| Verified {
            cmd: self,
            content,
            key: key.public(),
        }))
    }

    /// Parses the JSON form. Unknown fields, floats, bad IDs, a key given twice in one
    /// object and an integer beyond -2^63 ..= 2^64 − 1 are `MALFORMED`; the last two are
    /// placed in the text (`at line L column C`).
    pub fn from_json(bytes: &[u8], limits: &Limits) -> Result<Command> {
        if bytes.len() > limits.max_command_bytes * 4 {
            return Err(too_large(bytes.len(), limits));
        }
        let refused = |found: canonical::Found| Error::malformed(format!("command JSON: {found}"));
        let cmd: Command = serde_json::from_slice(bytes).map_err(|e| {
            // An opaque object's repeated key is refused once the object is read whole, and
            // a body is read whole before its fields: the text says where.
            // A field's integer beyond u64 or i64 is handed over as a float: named as the
            // opaque values' is.
            let words = e.to_string();
            let fault: Option<fn(&TextFault) -> bool> =
                if words.starts_with(canonical::DUPLICATE_KEY) {
                    Some(|f| matches!(f, TextFault::DuplicateKey(_)))
                } else if words.starts_with("invalid type: floating point") {
                    Some(|f| matches!(f, TextFault::IntegerOutOfRange(_)))
                } else {
                    None
                };
            match fault.map(|wanted| canonical::text_fault(bytes, wanted)) {
                Some(Some(found)) => refused(found),
                _ => Error::malformed(format!("command JSON: {e}")),
            }
        })?;
        // The parse hands an integer beyond u64 or i64 over as a float: one in the text is
        // named before any float is.
        let has_float = cmd.body.opaque_fields().iter().any(|(_, v)| v.has_float());
        let out_of_range = |f: &TextFault| matches!(f, TextFault::IntegerOutOfRange(_));
        if let Some(found) = has_float
            .then(|| canonical::text_fault(bytes, out_of_range))
            .flatten()
        {
            return Err(refused(found));
        }
        cmd.check(limits)?;
        Ok(cmd)
    }

    /// Parses the CBOR form. Non-canonical key order and integer widths are accepted (the
    /// content is re-encoded before hashing); floats, tags, indefinite lengths, duplicate and
    /// unknown fields are `MALFORMED`.
    pub fn from_cbor(bytes: &[u8], limits: &Limits) -> Result<Command> {
        if bytes.len() > limits.max_command_bytes {
            return Err(too_large(bytes.len(), limits));
        }
        let cmd: Command = canonical::from_slice(bytes, Strictness::Lenient)
            .map_err(|e| Error::malformed(format!("command CBOR: {e}")))?;
        cmd.check(limits)?;
        Ok(cmd)
    }

    /// Canonical CBOR of the whole command, `sig` included.
    pub fn to_cbor(&self) -> Result<Vec<u8>> {
        Ok(canonical::to_vec(self)?)
    }

    /// Checks the limits and payload rules of SPEC §1 that types alone cannot express.
    pub fn check(&self, limits: &Limits) -> Result<()> {
        if self.session == 0 {
            return Err(Error::malformed("`session` must be at least 1"));
        }
        // Payload rules first: they name the offending field, which a failed encoding cannot.
        self.body.check(limits)?;
        let len = self.content_bytes()?.len();
        if len > limits.max_command_bytes {
            return Err(too_large(len, limits));
        }
        Ok(())
    }
}

fn too_large(len: usize, limits: &Limits) -> Error {
    Error::malformed(format!(
        "command is {len} bytes; the limit is {} bytes",
        limits.max_command_bytes
    ))
    .with("limit", limits.max_command_bytes)
}

/// A command whose signature the core has checked, with the content bytes it checked and the
/// key they verified under ([`Command::verify_once`]). Only the core makes one, from the
/// command it borrows, so the bytes are that command's and the key the one that verified
/// them: a host that checks signatures before taking its lock hands this on
/// ([`crate::accept::accept_verified`]), and the content is encoded once per accept.
#[derive(Debug)]
pub struct Verified<'c> {
    cmd: &'c Command,
    content: Vec<u8>,
    key: PublicKey,
}

impl<'c> Verified<'c> {
    /// The command.
    pub fn command(&self) -> &'c Command {
        self.cmd
    }

    /// The key its signature verified under.
    pub fn key(&self) -> &PublicKey {
        &self.key
    }

    /// Its content bytes ([`Command::content_bytes`]), as verified.
    pub(crate) fn content(&self) -> &[u8] {
        &self.content
    }
}

/// Member roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Runs the group: membership, approvals, redaction, archive.
    Owner,
    /// Creates, claims and executes work.
    Worker,
    /// Resolves blocks, cancels, reassigns, decides approvals.
    Reviewer,
    /// Reads only.
    Observer,
}

/// A member as listed in `open_group`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberSpec {
    /// The member's actor ID.
    pub actor: Id,
    /// Its role.
    pub role: Role,
    /// Its Ed25519 public key.
    pub key: PublicKey,
}

/// Risk class of a work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// No approval needed.
    Low,
    /// Starting needs a granted approval, as does every effect.
    High,
}

/// The budgets a work item runs within.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// Attempts allowed, counting failures (≥ 1).
    pub max_attempts: u32,
    /// First retry backoff.
    pub backoff_base_ms: u64,
    /// Longest retry backoff.
    pub backoff_max_ms: u64,
    /// Total cost that may be charged.
    pub cost_budget: u64,
    /// Time after which the item may not be claimed or retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<u64>,
    /// Risk class.
    pub risk: Risk,
}

/// How an effect may be repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectMode {
    /// Reads only: safe to repeat.
    ReadOnly,
    /// Carries an idempotency key its target honours: safe to repeat.
    Keyed,
    /// Declares nothing: an unknown outcome must be reconciled.
    Undeclared,
}

/// What a blocked item needs to continue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Needs {
    /// Correlation key `resolve_block` must name.
    pub key: Id,
    /// What kind of resolution is needed (free text).
    pub kind: String,
}

/// A work item to create (`create_work`, and each entry of `expand`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewWork {
    /// Optional tag, `"create_work"`, when written as a full body inside `expand`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Work item ID.
    pub work: Id,
    /// Its contract.
    pub contract: Contract,
    /// Items that must succeed first.
    pub after: Vec<Id>,
    /// Opaque description.
    pub spec: Opaque,
}

// Handed to the canonical encoder in canonical key order (JSON gets the declared order), and
// read by the hand-written readers.
canonical::codec_struct! {
    MemberSpec { actor, role, key }
    Contract {
        max_attempts, backoff_base_ms, backoff_max_ms, cost_budget,
        deadline_at if is_some, risk,
    }
    NewWork { tag as "type" if is_some, work, contract, after, spec }
}

canonical::decode_struct! {
    Needs { key, kind }
}

macro_rules! bodies {
    ($( $(#[$doc:meta])* $variant:ident($ty:ident) { $( $(#[$fattr:meta])* $field:ident : $fty:ty ),* $(,)? } )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Deserialize)]
            #[serde(deny_unknown_fields)]
            pub struct $ty {
                $( $(#[$fattr])* pub $field: $fty, )*
            }
        )*

        /// The body of a Command; `type` is its tag.
        #[derive(Debug, Clone, PartialEq, Deserialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum Body {
            $( $(#[$doc])* $variant($ty), )*
        }

        /// What serde's derive writes for the internally tagged enum, the `type` entry in
        /// canonical key order among the fields for the canonical encoder
        /// (`canonical::EncodeFields`).
        impl Serialize for Body {
            fn serialize<S: serde::Serializer>(
                &self,
                serializer: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let tag = Some(self.type_name());
                match self {
                    $( Body::$variant(b) => canonical::EncodeFields::encode_fields(b, tag, serializer), )*
                }
            }
        }
    };
}

bodies! {
    /// Genesis: opens the group.
    OpenGroup(OpenGroup) {
        /// Mission ID.
        mission: Id,
        /// Opaque title.
        title: Opaque,
        /// Initial members; the sender must be an owner among them.
        members: Vec<MemberSpec>,
        /// Key that signs ticks and snapshots.
        authority_key: PublicKey,
    }
    /// Adds a member (CAS on `members`).
    AddMember(AddMember) {
        /// New member.
        actor: Id,
        /// Its role.
        role: Role,
        /// Its key.
        key: PublicKey,
    }
    /// Removes a member and revokes its leases (CAS on `members`).
    RemoveMember(RemoveMember) {
        /// Member to remove.
        actor: Id,
    }
    /// Changes a member's role (CAS on `members`).
    ChangeRole(ChangeRole) {
        /// Member.
        actor: Id,
        /// New role.
        role: Role,
    }
    /// Starts a new session epoch for the sender (the envelope's `session`).
    ReplaceSession(ReplaceSession) {}
    /// Creates a work item.
    CreateWork(CreateWork) {
        /// Work item ID.
        work: Id,
        /// Its contract.
        contract: Contract,
        /// Items that must succeed first.
        after: Vec<Id>,
        /// Opaque description.
        spec: Opaque,
    }
    /// Claims a queued item on the frontier (CAS).
    ClaimWork(ClaimWork) {
        /// Work item.
        work: Id,
        /// Lease length.
        lease_ms: u64,
        /// Time allowed before `start_work`.
        start_within_ms: u64,
    }
    /// Starts leased work.
    StartWork(StartWork) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
    }
    /// Extends a lease (CAS).
    RenewLease(RenewLease) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// New length from now.
        lease_ms: u64,
    }
    /// Records progress and releases the lease.
    Checkpoint(Checkpoint) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Opaque checkpoint.
        data: Opaque,
    }
    /// Parks the item until `resolve_block`, releasing the lease.
    Block(Block) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Opaque checkpoint.
        data: Opaque,
        /// What is needed.
        needs: Needs,
    }
    /// Resolves a block.
    ResolveBlock(ResolveBlock) {
        /// Work item.
        work: Id,
        /// The block's `needs.key`.
        key: Id,
        /// Opaque resolution.
        resolution: Opaque,
    }
    /// Submits the result.
    Submit(Submit) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Opaque result.
        result: Opaque,
    }
    /// Reports a failure.
    Fail(Fail) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Opaque error.
        error: Opaque,
        /// Whether a retry may help.
        retryable: bool,
    }
    /// Cancels an item.
    Cancel(Cancel) {
        /// Work item.
        work: Id,
        /// Opaque reason.
        reason: Opaque,
    }
    /// Revokes the current lease and re-queues the item.
    Reassign(Reassign) {
        /// Work item.
        work: Id,
        /// Opaque reason.
        reason: Opaque,
    }
    /// Records an effect's intent before it is dispatched.
    IntendEffect(IntendEffect) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Logical operation ID.
        op: Id,
        /// Repeatability.
        mode: EffectMode,
        /// Whether it cannot be undone.
        irreversible: bool,
        /// Opaque target.
        target: Opaque,
    }
    /// Records an effect's outcome.
    SettleEffect(SettleEffect) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Logical operation ID.
        op: Id,
        /// Outcome (JSON).
        outcome: Opaque,
        /// Opaque external receipt.
        receipt: Opaque,
    }
    /// Settles an effect whose outcome was unknown.
    ReconcileEffect(ReconcileEffect) {
        /// Work item.
        work: Id,
        /// Effect key.
        key: Hash,
        /// Whether it happened.
        happened: bool,
        /// Opaque external receipt.
        receipt: Opaque,
    }
    /// Charges cost, optionally with checkpoint data, atomically.
    Charge(Charge) {
        /// Work item.
        work: Id,
        /// Lease ID.
        lease: LeaseId,
        /// Cost to add.
        cost: u64,
        /// Optional opaque checkpoint (`null` is a checkpoint holding `null`).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "crate::canonical::some"
        )]
        data: Option<Opaque>,
    }
    /// Asks for an approval naming a work item.
    RequestApproval(RequestApproval) {
        /// Approval ID.
        approval: Id,
        /// Work item.
        work: Id,
        /// Opaque reason.
        reason: Opaque,
    }
    /// Grants or denies an approval (CAS).
    DecideApproval(DecideApproval) {
        /// Approval ID.
        approval: Id,
        /// Granted?
        grant: bool,
    }
    /// Creates the work items that a terminal event's disposition calls for.
    Expand(Expand) {
        /// Seq of the terminal event.
        trigger: u64,
        /// Items to create.
        work: Vec<NewWork>,
    }
    /// Erases the opaque values of an event.
    Redact(Redact) {
        /// Seq of the event.
        seq: u64,
        /// Opaque reason.
        reason: Opaque,
    }
    /// Archives the group.
    Archive(Archive) {
        /// Opaque reason.
        reason: Opaque,
    }
    /// Expires due leases (`@authority` only).
    Tick(Tick) {}
}

// Each body written and read by its fields: handed to the canonical encoder in canonical key
// order, with its `type` entry (JSON gets the declared order after `type`, as serde's derive
// wrote it), and read by the hand-written readers.
canonical::codec_struct! {
    OpenGroup { mission, title, members, authority_key }
    AddMember { actor, role, key }
    RemoveMember { actor }
    ChangeRole { actor, role }
    ReplaceSession {}
    CreateWork { work, contract, after, spec }
    ClaimWork { work, lease_ms, start_within_ms }
    StartWork { work, lease }
    RenewLease { work, lease, lease_ms }
    Checkpoint { work, lease, data }
    Block { work, lease, data, needs }
    ResolveBlock { work, key, resolution }
    Submit { work, lease, result }
    Fail { work, lease, error, retryable }
    Cancel { work, reason }
    Reassign { work, reason }
    IntendEffect { work, lease, op, mode, irreversible, target }
    SettleEffect { work, lease, op, outcome, receipt }
    ReconcileEffect { work, key, happened, receipt }
    Charge { work, lease, cost, data if is_some }
    RequestApproval { approval, work, reason }
    DecideApproval { approval, grant }
    Expand { trigger, work }
    Redact { seq, reason }
    Archive { reason }
    Tick {}
}

impl Body {
    /// The `type` tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            Body::OpenGroup(_) => "open_group",
            Body::AddMember(_) => "add_member",
            Body::RemoveMember(_) => "remove_member",
            Body::ChangeRole(_) => "change_role",
            Body::ReplaceSession(_) => "replace_session",
            Body::CreateWork(_) => "create_work",
            Body::ClaimWork(_) => "claim_work",
            Body::StartWork(_) => "start_work",
            Body::RenewLease(_) => "renew_lease",
            Body::Checkpoint(_) => "checkpoint",
            Body::Block(_) => "block",
            Body::ResolveBlock(_) => "resolve_block",
            Body::Submit(_) => "submit",
            Body::Fail(_) => "fail",
            Body::Cancel(_) => "cancel",
            Body::Reassign(_) => "reassign",
            Body::IntendEffect(_) => "intend_effect",
            Body::SettleEffect(_) => "settle_effect",
            Body::ReconcileEffect(_) => "reconcile_effect",
            Body::Charge(_) => "charge",
            Body::RequestApproval(_) => "request_approval",
            Body::DecideApproval(_) => "decide_approval",
            Body::Expand(_) => "expand",
            Body::Redact(_) => "redact",
            Body::Archive(_) => "archive",
            Body::Tick(_) => "tick",
        }
    }

    /// The work item this command targets, if any.
    pub fn work(&self) -> Option<&Id> {
        match self {
            Body::CreateWork(b) => Some(&b.work),
            Body::ClaimWork(b) => Some(&b.work),
            Body::StartWork(b) => Some(&b.work),
            Body::RenewLease(b) => Some(&b.work),
            Body::Checkpoint(b) => Some(&b.work),
            Body::Block(b) => Some(&b.work),
            Body::ResolveBlock(b) => Some(&b.work),
            Body::Submit(b) => Some(&b.work),
            Body::Fail(b) => Some(&b.work),
            Body::Cancel(b) => Some(&b.work),
            Body::Reassign(b) => Some(&b.work),
            Body::IntendEffect(b) => Some(&b.work),
            Body::SettleEffect(b) => Some(&b.work),
            Body::ReconcileEffect(b) => Some(&b.work),
            Body::Charge(b) => Some(&b.work),
            _ => None,
        }
    }

    /// The lease this command is made under, if any.
    pub fn lease(&self) -> Option<&LeaseId> {
        match self {
            Body::StartWork(b) => Some(&b.lease),
            Body::RenewLease(b) => Some(&b.lease),
            Body::Checkpoint(b) => Some(&b.lease),
            Body::Block(b) => Some(&b.lease),
            Body::Submit(b) => Some(&b.lease),
            Body::Fail(b) => Some(&b.lease),
            Body::IntendEffect(b) => Some(&b.lease),
            Body::SettleEffect(b) => Some(&b.lease),
            Body::Charge(b) => Some(&b.lease),
            _ => None,
        }
    }

    /// Every opaque payload in the body, with its field name.
    pub fn opaque_fields(&self) -> Vec<(&'static str, &Opaque)> {
        match self {
            Body::OpenGroup(b) => vec![("title", &b.title)],
            Body::CreateWork(b) => vec![("spec", &b.spec)],
            Body::Checkpoint(b) => vec![("data", &b.data)],
            Body::Block(b) => vec![("data", &b.data)],
            Body::ResolveBlock(b) => vec![("resolution", &b.resolution)],
            Body::Submit(b) => vec![("result", &b.result)],
            Body::Fail(b) => vec![("error", &b.error)],
            Body::Cancel(b) => vec![("reason", &b.reason)],
            Body::Reassign(b) => vec![("reason", &b.reason)],
            Body::IntendEffect(b) => vec![("target", &b.target)],
            Body::SettleEffect(b) => vec![("outcome", &b.outcome), ("receipt", &b.receipt)],
            Body::ReconcileEffect(b) => vec![("receipt", &b.receipt)],
            Body::Charge(b) => b.data.iter().map(|d| ("data", d)).collect(),
            Body::RequestApproval(b) => vec![("reason", &b.reason)],
            Body::Expand(b) => b.work.iter().map(|w| ("spec", &w.spec)).collect(),
            Body::Redact(b) => vec![("reason", &b.reason)],
            Body::Archive(b) => vec![("reason", &b.reason)],
            _ => vec![],
        }
    }

    /// Limits and payload rules (SPEC §1).
    pub fn check(&self, limits: &Limits) -> Result<()> {
        for (field, value) in self.opaque_fields() {
            opaque::validate(value, field, limits.max_payload_bytes)?;
        }
        match self {
            Body::OpenGroup(b) => {
                if b.members.len() > limits.max_members {
                    return Err(Error::malformed(format!(
                        "{} members listed; the limit is {}",
                        b.members.len(),
                        limits.max_members
                    ))
                    .with("limit", limits.max_members));
                }
                let mut seen = std::collections::BTreeSet::new();
                for m in &b.members {
                    if m.actor.is_authority() {
                        return Err(Error::malformed(
                            "`@authority` is reserved and cannot be a member",
                        ));
                    }
                    if !seen.insert(&m.actor) {
                        return Err(Error::malformed(format!(
                            "member {} is listed twice",
                            m.actor
                        )));
                    }
                }
                for (i, m) in b.members.iter().enumerate() {
                    check_key(&m.key, &format!("members[{i}].key"), Some(&m.actor))?;
                }
                check_key(&b.authority_key, "authority_key", None)
            }
            Body::AddMember(b) if b.actor.is_authority() => Err(Error::malformed(
                "`@authority` is reserved and cannot be a member",
            )),
            Body::AddMember(b) => check_key(&b.key, "key", Some(&b.actor)),
            Body::CreateWork(b) => check_new_work(&b.work, &b.contract, &b.after, limits),
            Body::Expand(b) => {
                // An empty list is the empty disposition: the trigger is disposed of with no
                // new work (SPEC §5).
                let mut seen = std::collections::BTreeSet::new();
                for w in &b.work {
                    if w.tag.as_deref().is_some_and(|t| t != "create_work") {
                        return Err(Error::malformed(format!(
                            "`expand` entries are create_work bodies; got type {:?}",
                            w.tag
                        )));
                    }
                    if !seen.insert(&w.work) {
                        return Err(Error::malformed(format!("`expand` lists {} twice", w.work)));
                    }
                    check_new_work(&w.work, &w.contract, &w.after, limits)?;
                }
                check_acyclic(&b.work)
            }
            _ => Ok(()),
        }
    }
}

/// A key entering the group (SPEC §2): refused as `MALFORMED`, naming the field (and whose
/// key it is), unless [`PublicKey::check`] accepts it.
fn check_key(key: &PublicKey, field: &str, actor: Option<&Id>) -> Result<()> {
    key.check().map(drop).map_err(|fault| {
        let whose = actor.map_or_else(String::new, |a| format!(" (of {a})"));
        Error::malformed(format!("`{field}`{whose} {fault}"))
    })
}

fn check_new_work(work: &Id, contract: &Contract, after: &[Id], limits: &Limits) -> Result<()> {
    if after.len() > limits.max_dependencies {
        return Err(Error::malformed(format!(
            "work {work} lists {} dependencies; the limit is {}",
            after.len(),
            limits.max_dependencies
        ))
        .with("limit", limits.max_dependencies));
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in after {
        if a == work {
            return Err(Error::malformed(format!(
                "work {work} cannot depend on itself"
            )));
        }
        if !seen.insert(a) {
            return Err(Error::malformed(format!(
                "work {work} lists dependency {a} twice"
            )));
        }
    }
    if contract.max_attempts == 0 {
        return Err(Error::malformed(
            "`contract.max_attempts` must be at least 1",
        ));
    }
    if contract.backoff_base_ms > contract.backoff_max_ms {
        return Err(Error::malformed(
            "`contract.backoff_base_ms` must not exceed `contract.backoff_max_ms`",
        ));
    }
    Ok(())
}

/// Items of one `expand` may depend on each other, but not in a cycle: such items could never
/// start. (Edges to existing items cannot close a cycle: those never depend on new ones.)
fn check_acyclic(items: &[NewWork]) -> Result<()> {
    use std::collections::BTreeMap;
    let index: BTreeMap<&Id, usize> = items
        .iter()
        .enumerate()
        .map(|(i, w)| (&w.work, i))
        .collect();
    // 0 = unvisited, 1 = on the current path, 2 = done. Iterative, so depth is no concern.
    let mut mark = vec![0u8; items.len()];
    for start in 0..items.len() {
        if mark[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        mark[start] = 1;
        while let Some((node, edge)) = stack.pop() {
            let next = items[node]
                .after
                .get(edge)
                .and_then(|a| index.get(a).copied());
            match (items[node].after.get(edge), next) {
                (None, _) => mark[node] = 2,
                (Some(_), None) => stack.push((node, edge + 1)),
                (Some(_), Some(dep)) => {
                    stack.push((node, edge + 1));
                    match mark[dep] {
                        0 => {
                            mark[dep] = 1;
                            stack.push((dep, 0));
                        }
                        1 => {
                            return Err(Error::malformed(format!(
                                "`expand` items {} and {} depend on each other in a cycle",
                                items[node].work, items[dep].work
                            )))
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command's content reaches the canonical encoder with its entries, its body's `type`
    /// among them, in canonical key order, its opaque values as the canonical bytes they hold:
    /// the encoder puts nothing in order. A body's JSON form has `type` first and reads back
    /// as the same body.
    #[test]
    fn content_reaches_the_encoder_in_canonical_order() {
        let mut types = std::collections::BTreeSet::new();
        let mut commands = Vec::new();
        for (_, text) in crate::test_common::transcripts() {
            let mut host = crate::test_common::Recorder::default();
            crate::test_common::run(&mut host, &text);
            commands.extend(host.commands);
        }
        for cmd in commands {
            let content = Content {
                org: &cmd.org,
                group: &cmd.group,
                actor: &cmd.actor,
                action: &cmd.action,
                session: cmd.session,
                expect: cmd.expect,
                body: &cmd.body,
            };
            assert_eq!(canonical::reorders(&content), Ok(0), "{cmd:?}");
            let json = serde_json::to_value(&cmd.body).expect("JSON");
            let first = json.as_object().expect("a map").keys().next().cloned();
            assert_eq!(first.as_deref(), Some("type"));
            let back: Body = serde_json::from_value(json).expect("reads back");
            assert_eq!(back, cmd.body);
            types.insert(cmd.body.type_name());
        }
        // Every body type.
        assert_eq!(types.len(), 26, "{types:?}");
    }

    /// An optional opaque value that is present is kept, `null` included (SPEC §1: an opaque
    /// payload is arbitrary JSON): a `charge` with `data: null` is signed over `data: null`,
    /// and its JSON and CBOR forms read back as the command that was signed. Read as left
    /// out, its content changed and its signature no longer verified.
    #[test]
    fn a_null_opaque_value_is_kept_where_a_field_is_optional() {
        let key = SecretKey::from_bytes(&[7; 32]);
        let id = |s: &str| Id::new(s).expect("an identifier");
        let limits = Limits::default();
        for data in [
            None,
            Some(Opaque::null()),
            Some(Opaque::from(serde_json::json!({"a": null}))),
        ] {
            let body = Body::Charge(Charge {
                work: id("w1"),
                lease: LeaseId::derive(&id("g1"), &id("w1"), 1),
                cost: 1,
                data: data.clone(),
            });
            let (o, g, a, x) = (id("acme"), id("g1"), id("bob"), id("b1"));
            let cmd = Command::signed(o, g, a, x, 1, None, body, &key).expect("signs");
            let json = serde_json::to_vec(&cmd).expect("JSON");
            let cbor = cmd.to_cbor().expect("encodes");
            for back in [
                Command::from_json(&json, &limits).expect("reads its JSON"),
                Command::from_cbor(&cbor, &limits).expect("reads its CBOR"),
                canonical::from_slice::<Command>(&cbor, canonical::Strictness::Canonical)
                    .expect("reads its canonical CBOR"),
            ] {
                assert_eq!(back, cmd, "{data:?}");
                assert_eq!(back.verify(&key.public()), Ok(true), "{data:?}");
            }
        }
    }

    /// A command's JSON text with `value` written where its `result` goes.
    fn submit_with_result(value: &str) -> Vec<u8> {
        let key = SecretKey::from_bytes(&[7; 32]);
        let id = |s: &str| Id::new(s).expect("an identifier");
        let body = Body::Submit(Submit {
            work: id("w1"),
            lease: LeaseId::derive(&id("g1"), &id("w1"), 1),
            result: Opaque::text("@@"),
        });
        let (o, g, a, x) = (id("acme"), id("g1"), id("bob"), id("b1"));
        let cmd = Command::signed(o, g, a, x, 1, None, body, &key).expect("signs");
        let json = serde_json::to_string_pretty(&cmd).expect("JSON");
        json.replacen("\"@@\"", value, 1).into_bytes()
    }

    /// An opaque object whose key repeats is refused as the command is read, naming the key
    /// and where its second occurrence starts in the text, however the entries differ (a
    /// float, a value the last one would have replaced) and however deep the object sits.
    #[test]
    fn a_repeated_key_in_an_opaque_value_is_refused_where_it_is() {
        let limits = Limits::default();
        let text = String::from_utf8(submit_with_result("\"@@\"")).expect("UTF-8");
        let (line, written) = text
            .lines()
            .enumerate()
            .find_map(|(i, l)| Some((i + 1, l.find("\"@@\"")? + 1)))
            .expect("the result's line");
        // Each value with its repeated key and where that key's second occurrence starts in it.
        for (value, key, at) in [
            (r#"{"a": 1, "a": 2}"#, "a", 9),
            (r#"{"a": 1.5, "b": [{"c": 1, "\u0063": 1}]}"#, "c", 26),
            (r#"[1, {"b": {}, "a": null, "b": {}}]"#, "b", 25),
        ] {
            assert_eq!(&value[at..at + 1], "\"", "{value}");
            let refused = Command::from_json(&submit_with_result(value), &limits)
                .expect_err("a repeated key");
            assert_eq!(refused.code, crate::error::Code::Malformed, "{value}");
            assert_eq!(
                refused.message,
                format!(
                    "command JSON: duplicate map key `{key}` at line {line} column {}",
                    written + at
                ),
                "{value}"
            );
        }
        let read = Command::from_json(&submit_with_result(r#"{"a": {"a": 1}}"#), &limits);
        assert!(read.is_ok(), "{read:?}");
        // As deep as a command's JSON text may nest at all (the parse's limit, 128 levels
        // counted from the command, is reached before the value reader's, counted from the
        // value): the scan that places the fault goes as deep.
        let deep = format!(
            "{}{{\"k\": 1, \"k\": 2}}{}",
            "[".repeat(canonical::MAX_DEPTH - 4),
            "]".repeat(canonical::MAX_DEPTH - 4)
        );
        let text = String::from_utf8(submit_with_result(&deep)).expect("UTF-8");
        let at = text.find(r#""k": 2"#).expect("written");
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line = text[..at].matches('\n').count() + 1;
        let refused = Command::from_json(text.as_bytes(), &limits).expect_err("a repeated key");
        assert_eq!(
            refused.message,
            format!(
                "command JSON: duplicate map key `k` at line {line} column {}",
                at - line_start + 1
            )
        );
    }

    /// An integer beyond u64 or i64 in an opaque value is refused as an integer out of range,
    /// where it starts, not as the float the parse makes of it; the limits themselves read,
    /// and a float is still refused as a float.
    #[test]
    fn an_integer_out_of_range_in_an_opaque_value_is_named_so() {
        let limits = Limits::default();
        for n in [
            "18446744073709551616",
            "-9223372036854775809",
            "1000000000000000000000000000000000000000000",
        ] {
            let value = format!("{{\"x\": [1.5, {n}]}}");
            let text = submit_with_result(&value);
            let at = String::from_utf8_lossy(&text).find(n).expect("written");
            let line_start = text[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            let line = text[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            let refused = Command::from_json(&text, &limits).expect_err("out of range");
            assert_eq!(
                refused.message,
                format!(
                    "command JSON: integer out of range: {n} is not from -2^63 to 2^64 − 1 at line {line} column {}",
                    at - line_start + 1
                )
            );
        }
        // So is one in a field of the envelope.
        let text = String::from_utf8(submit_with_result("1")).expect("UTF-8");
        assert!(text.contains("\"session\": 1,"), "{text}");
        let edited = text.replacen("\"session\": 1,", "\"session\": 18446744073709551616,", 1);
        let refused = Command::from_json(edited.as_bytes(), &limits).expect_err("out of range");
        assert!(
            refused.message.starts_with(
                "command JSON: integer out of range: 18446744073709551616 is not from -2^63 to 2^64 − 1 at line"
            ),
            "{refused}"
        );
        for n in ["18446744073709551615", "-9223372036854775808"] {
            let read = Command::from_json(&submit_with_result(n), &limits);
            assert!(read.is_ok(), "{n}: {read:?}");
        }
        let float =
            Command::from_json(&submit_with_result("[1.5, 1e20]"), &limits).expect_err("a float");
        assert!(
            float
                .message
                .contains("holds the number 1.5; floats are not allowed"),
            "{float:?}"
        );
    }
}
