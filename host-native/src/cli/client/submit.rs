//! `mwp submit --server URL --key FILE BODY.json|-`: fills in a command's envelope, signs it
//! with the member's key, sends it and prints the receipt (SPEC §2, docs/http.md).
//!
//! BODY is a command body (`{"type": "claim_work", …}`) or an envelope without `sig`
//! (`{"org", "group", "actor", "action", "session", "expect", "body"}`, each optional);
//! flags win over the envelope's fields. Filled in when missing: `action` (a fresh random
//! ID), `session` (1), an `open_group`'s `authority_key` (the server's, `GET /v1/authority`)
//! and the sender's own `key` in its `members`. A `lease` written `"<work>#<epoch>"` is
//! replaced by the derived lease ID, as in transcripts (SPEC §12).

use std::path::PathBuf;

use clap::Args;
use mwp_core::lease::LeaseId;
use mwp_core::{Body, Command, Id, PublicKey};
use serde_json::{json, Map, Value};

use super::super::{input, Failure, Outcome, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use super::{id, OutputArgs, ServerArgs};

/// `mwp submit` arguments.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The server.
    #[command(flatten)]
    pub server: ServerArgs,
    /// The member's key file (64 hex digits, mode 0600, as `mwp keygen --out` writes).
    #[arg(long, env = "MWP_KEY", value_name = "FILE")]
    pub key: PathBuf,
    /// The org (else the envelope's `org`).
    #[arg(long, env = "MWP_ORG")]
    pub org: Option<String>,
    /// The group (else the envelope's `group`).
    #[arg(long, env = "MWP_GROUP")]
    pub group: Option<String>,
    /// The sending member (else the envelope's `actor`).
    #[arg(long, env = "MWP_ACTOR")]
    pub actor: Option<String>,
    /// The action ID, the idempotency key: send the same one to retry safely. Default: a
    /// fresh random ID.
    #[arg(long)]
    pub action: Option<String>,
    /// The member's session epoch (else the envelope's, else 1).
    #[arg(long)]
    pub session: Option<u64>,
    /// Expected revision of the command's target (SPEC §4); required by CAS commands such
    /// as `claim_work`.
    #[arg(long, value_name = "REVISION")]
    pub expect: Option<u64>,
    /// The body (or envelope) as JSON: a file, or `-` for stdin.
    #[arg(value_name = "BODY.json|-")]
    pub body: PathBuf,
    /// How to print.
    #[command(flatten)]
    pub output: OutputArgs,
}

fn bad(message: impl Into<String>) -> Failure {
    Failure::new(EXIT_BAD_INPUT, message)
}

fn read_body(path: &std::path::Path) -> Result<Value, Failure> {
    let (name, text) = if path.as_os_str() == "-" {
        let bytes = input::read_capped(std::io::stdin().lock(), input::MAX_BODY_BYTES)
            .map_err(|e| bad(format!("cannot read the body from stdin: {e}")))?;
        ("stdin".to_owned(), bytes)
    } else {
        let bytes = input::read(path, input::MAX_BODY_BYTES)
            .map_err(|e| bad(format!("cannot read body {}: {e}", path.display())))?;
        (path.display().to_string(), bytes)
    };
    serde_json::from_slice(&text).map_err(|e| bad(format!("{name} is not JSON: {e}")))
}

/// The envelope's field `name`, from the flag or the file.
fn field(flag: Option<&String>, file: &Map<String, Value>, name: &str) -> Result<Id, Failure> {
    match (flag, file.get(name)) {
        (Some(v), _) => id(v, &format!("--{name}")),
        (None, Some(Value::String(v))) => id(v, name),
        (None, Some(other)) => Err(bad(format!("{name}: {other} is not an ID"))),
        (None, None) => Err(bad(format!(
            "the envelope needs {name}: give --{name} (or MWP_{}), or \"{name}\" in the file",
            name.to_uppercase()
        ))),
    }
}

fn number(
    flag: Option<u64>,
    file: &Map<String, Value>,
    name: &str,
) -> Result<Option<u64>, Failure> {
    match (flag, file.get(name)) {
        (Some(n), _) => Ok(Some(n)),
        (None, None | Some(Value::Null)) => Ok(None),
        (None, Some(v)) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("{name}: {v} is not a non-negative integer"))),
    }
}

/// A fresh action ID: `cli-` and 16 random hex digits.
fn fresh_action() -> Result<Id, Failure> {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| bad(format!("no random bytes for an action ID: {e}")))?;
    id(&format!("cli-{}", hex::encode(bytes)), "action")
}

/// Fills in what the body may leave out (see the module doc).
fn complete_body(
    body: &mut Map<String, Value>,
    group: &Id,
    actor: &Id,
    me: &PublicKey,
    authority: &PublicKey,
) -> Result<(), Failure> {
    if let (Some(Value::String(lease)), Some(Value::String(_))) =
        (body.get("lease"), body.get("work"))
    {
        if let Some((work, epoch)) = lease.split_once('#') {
            let epoch = epoch.parse::<u64>().map_err(|_| {
                bad(format!(
                    "lease {lease:?}: the epoch after # is not a number"
                ))
            })?;
            let derived = LeaseId::derive(group, &id(work, "lease")?, epoch);
            body.insert("lease".into(), json!(derived));
        }
    }
    if body.get("type").and_then(Value::as_str) == Some("open_group") {
        body.entry("authority_key")
            .or_insert_with(|| json!(authority));
        if let Some(Value::Array(members)) = body.get_mut("members") {
            for m in members.iter_mut().filter_map(Value::as_object_mut) {
                if m.get("actor").and_then(Value::as_str) == Some(actor.as_str()) {
                    m.entry("key").or_insert_with(|| json!(me));
                }
            }
        }
    }
    Ok(())
}

/// Checks that a receipt the server answered is of `cmd`: its group, actor, action and
/// content hash. Another command's receipt is not a decision on this one: the server is not
/// an mwp server (exit 2), and nothing is printed as if it were.
fn check_receipt(receipt: &mwp_core::Receipt, cmd: &Command) -> Result<(), Failure> {
    let content = cmd
        .content_hash()
        .map_err(|e| bad(format!("cannot hash the command: {e}")))?;
    let mismatch = [
        ("group", receipt.group == cmd.group),
        ("actor", receipt.actor == cmd.actor),
        ("action", receipt.action == cmd.action),
        ("content_hash", receipt.content_hash == content),
    ]
    .into_iter()
    .find(|(_, same)| !same);
    match mismatch {
        None => Ok(()),
        Some((field, _)) => Err(bad(format!(
            "the server answered a receipt of another command (its {field} differs: action {} by {} in {}): not an mwp server's answer; the command may or may not have been decided, send it again with --action {} to find out",
            receipt.action, receipt.actor, receipt.group, cmd.action
        ))),
    }
}

/// Runs `mwp submit`.
pub fn run(args: &SubmitArgs) -> Outcome {
    let key = super::keygen::load(&args.key)?;
    let file = read_body(&args.body)?;
    let Value::Object(file) = file else {
        return Err(bad(
            "the body must be a JSON object: a command body or an envelope",
        ));
    };
    let (envelope, body) = match file.get("body") {
        Some(Value::Object(body)) => (file.clone(), body.clone()),
        Some(_) => return Err(bad("the envelope's body must be a JSON object")),
        None => (Map::new(), file),
    };
    let org = field(args.org.as_ref(), &envelope, "org")?;
    let group = field(args.group.as_ref(), &envelope, "group")?;
    let actor = field(args.actor.as_ref(), &envelope, "actor")?;
    let action = match (&args.action, envelope.get("action")) {
        (None, None) => fresh_action()?,
        _ => field(args.action.as_ref(), &envelope, "action")?,
    };
    let session = number(args.session, &envelope, "session")?.unwrap_or(1);
    let expect = number(args.expect, &envelope, "expect")?;

    let client = args.server.client()?;
    // Asked first: it tells an mwp server from anything else before a command is sent.
    let authority = client
        .authority_key()
        .map_err(|e| super::server_failure("the server did not answer GET /v1/authority", &e))?;
    let mut body = body;
    complete_body(&mut body, &group, &actor, &key.public(), &authority)?;
    let body: Body = serde_json::from_value(Value::Object(body))
        .map_err(|e| bad(format!("the body is not a command body (SPEC §2): {e}")))?;
    let cmd = Command::signed(org, group, actor, action, session, expect, body, &key)
        .map_err(|e| bad(format!("cannot sign the command: {e}")))?;

    let json = args.output.json();
    match client.submit(&cmd) {
        Ok(submitted) => {
            check_receipt(&submitted.receipt, &cmd)?;
            let outcome = if submitted.duplicate {
                "duplicate"
            } else {
                "accepted"
            };
            let r = &submitted.receipt;
            let value = json!({"outcome": outcome, "receipt": r});
            super::print(json, &value, || {
                format!(
                    "{outcome}: seq {} on {} (revision {}, {}), action {} by {}; event {}",
                    r.seq,
                    r.aggregate,
                    r.revision,
                    value["receipt"]["disposition"].as_str().unwrap_or("?"),
                    r.action,
                    r.actor,
                    r.event_id
                )
            })?;
            Ok(EXIT_OK)
        }
        // Unreachable, failed, or not mwp: no decision was made.
        Err(e) if e.code == mwp_core::Code::Storage => {
            Err(super::server_failure("the command was not decided", &e))
        }
        Err(e) => {
            let value = json!({"outcome": "rejected", "error": e});
            super::print(json, &value, || format!("rejected: {}", json!(e)))?;
            Ok(EXIT_FAILED)
        }
    }
}
