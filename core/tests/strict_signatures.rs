//! The strict signature rule (SPEC §2): weak keys are refused where they enter a group, and
//! every signature is checked strictly, so the forgeries that a cofactorless but lenient
//! check lets through (a small-order key with the signature `01 00…`, a small-order `R`)
//! are refused. Each case also shows that ed25519-dalek's lenient `verify` accepts the
//! forgery: without the rule, the test would fail.

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::CompressedEdwardsY;
use curve25519_dalek::scalar::Scalar;
use ed25519_dalek::Verifier;
use mwp_core::command::{AddMember, Contract, CreateWork, MemberSpec, OpenGroup, Risk, Role};
use mwp_core::event::{EventKind, GroupOpened};
use mwp_core::{
    accept, Body, Code, Command, Decision, Error, Event, GroupState, Hash, Id, KeyFault, Limits,
    PublicKey, SecretKey, Signature,
};
use serde_json::json;
use sha2::{Digest, Sha512};

fn id(s: &str) -> Id {
    Id::new(s).expect("valid id")
}

fn key_hex(s: &str) -> PublicKey {
    PublicKey::from_hex(s).expect("64 hex digits")
}

/// The eight points of small order, each in its canonical encoding.
const SMALL_ORDER: [&str; 8] = [
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
];

/// Non-canonical encodings of small-order points: `x = 0` with the sign bit set, and
/// `y = p`, `y = p + 1` (that is 0 and 1) with either sign.
const NON_CANONICAL: [&str; 6] = [
    "0100000000000000000000000000000000000000000000000000000000000080",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
];

/// The identity point and the signature of the issue: `01` and zeros.
const IDENTITY: &str = SMALL_ORDER[0];

fn forged_signature() -> Signature {
    let mut sig = [0u8; 64];
    sig[0] = 1;
    Signature(sig)
}

fn lenient_verify(key: &PublicKey, message: &[u8], sig: &Signature) -> bool {
    ed25519_dalek::VerifyingKey::from_bytes(&key.0).is_ok_and(|k| {
        k.verify(message, &ed25519_dalek::Signature::from_bytes(&sig.0))
            .is_ok()
    })
}

#[test]
fn the_small_order_points_are_what_they_claim() {
    for hex in SMALL_ORDER {
        let point = CompressedEdwardsY(key_hex(hex).0)
            .decompress()
            .expect("a point");
        assert!(point.is_small_order(), "{hex}");
        assert_eq!(point.compress().0, key_hex(hex).0, "{hex} is canonical");
        assert_eq!(
            key_hex(hex).check().err(),
            Some(KeyFault::SmallOrder),
            "{hex}"
        );
    }
    for hex in NON_CANONICAL {
        let point = CompressedEdwardsY(key_hex(hex).0).decompress();
        assert!(
            point.is_some_and(|p| p.is_small_order() && p.compress().0 != key_hex(hex).0),
            "{hex} is another encoding of a small-order point"
        );
        assert_eq!(
            key_hex(hex).check().err(),
            Some(KeyFault::NotCanonical),
            "{hex}"
        );
    }
}

#[test]
fn every_non_canonical_y_is_refused_as_such() {
    // y = p + k for k in 0..19 are the only 255-bit values at or above p.
    for k in 0u8..19 {
        for sign in [0u8, 0x80] {
            let mut bytes = [0xff; 32];
            bytes[0] = 0xed + k;
            bytes[31] = 0x7f | sign;
            assert_eq!(
                PublicKey(bytes).check().err(),
                Some(KeyFault::NotCanonical),
                "y = p + {k}, sign {sign}"
            );
        }
    }
    // Some of them decode, by reduction, to points not of small order: the lenient decoder
    // takes them, the strict check does not.
    let mixed = (2u8..19)
        .map(|k| {
            let mut bytes = [0xff; 32];
            bytes[0] = 0xed + k;
            bytes[31] = 0x7f;
            bytes
        })
        .filter_map(|b| CompressedEdwardsY(b).decompress())
        .filter(|p| !p.is_small_order())
        .count();
    assert!(mixed > 0, "some non-canonical y decodes to a large point");
}

#[test]
fn a_real_key_passes_and_a_non_point_is_named() {
    let real = SecretKey::for_transcript("alice").public();
    assert!(real.check().is_ok());
    let not_a_point = (0u8..=255)
        .map(|b| PublicKey([b; 32]))
        .find(|p| ed25519_dalek::VerifyingKey::from_bytes(&p.0).is_err())
        .expect("some 32-byte strings are not points");
    assert_eq!(not_a_point.check().err(), Some(KeyFault::NotAPoint));
}

// ---------------------------------------------------------------------------------------
// Where keys enter: open_group and add_member.

fn open_group(members: Vec<MemberSpec>, authority_key: PublicKey) -> Command {
    Command::signed(
        id("acme"),
        id("g1"),
        id("alice"),
        id("open"),
        1,
        None,
        Body::OpenGroup(OpenGroup {
            mission: id("m1"),
            title: json!("t").into(),
            members,
            authority_key,
        }),
        &SecretKey::for_transcript("alice"),
    )
    .expect("signs")
}

fn member(actor: &str, key: PublicKey) -> MemberSpec {
    MemberSpec {
        actor: id(actor),
        role: if actor == "alice" {
            Role::Owner
        } else {
            Role::Worker
        },
        key,
    }
}

fn real(actor: &str) -> PublicKey {
    SecretKey::for_transcript(actor).public()
}

fn malformed(result: mwp_core::Result<Decision>) -> Error {
    let e = result.and_then(Decision::into_result).expect_err("refused");
    assert_eq!(e.code, Code::Malformed, "{e:?}");
    e
}

fn opened() -> GroupState {
    let cmd = open_group(
        vec![member("alice", real("alice")), member("bob", real("bob"))],
        real("@authority"),
    );
    let Ok(Decision::Accepted(event)) = accept(None, &cmd, 1000, &Limits::default()) else {
        panic!("opens");
    };
    GroupState::genesis(&event).expect("applies")
}

#[test]
fn open_group_refuses_a_weak_member_key_naming_the_field() {
    for hex in SMALL_ORDER.iter().chain(&NON_CANONICAL) {
        let cmd = open_group(
            vec![member("alice", real("alice")), member("bob", key_hex(hex))],
            real("@authority"),
        );
        let e = malformed(accept(None, &cmd, 1000, &Limits::default()));
        assert!(
            e.message.starts_with("`members[1].key` (of bob) is "),
            "{hex}: {}",
            e.message
        );
    }
    // The sender's own key is checked as any other, before its signature.
    let cmd = open_group(vec![member("alice", key_hex(IDENTITY))], real("@authority"));
    let e = malformed(accept(None, &cmd, 1000, &Limits::default()));
    assert!(e
        .message
        .contains("`members[0].key` (of alice) is a small-order"));
}

#[test]
fn open_group_refuses_a_weak_authority_key() {
    for hex in SMALL_ORDER.iter().chain(&NON_CANONICAL) {
        let cmd = open_group(vec![member("alice", real("alice"))], key_hex(hex));
        let e = malformed(accept(None, &cmd, 1000, &Limits::default()));
        assert!(
            e.message.starts_with("`authority_key` is "),
            "{}",
            e.message
        );
    }
}

#[test]
fn add_member_refuses_a_weak_key_naming_the_field() {
    let state = opened();
    for hex in SMALL_ORDER.iter().chain(&NON_CANONICAL) {
        let cmd = Command::signed(
            id("acme"),
            id("g1"),
            id("alice"),
            id("add"),
            1,
            Some(1),
            Body::AddMember(AddMember {
                actor: id("mallory"),
                role: Role::Worker,
                key: key_hex(hex),
            }),
            &SecretKey::for_transcript("alice"),
        )
        .expect("signs");
        let e = malformed(accept(Some(&state), &cmd, 2000, &Limits::default()));
        assert!(
            e.message.starts_with("`key` (of mallory) is "),
            "{}",
            e.message
        );
    }
}

// ---------------------------------------------------------------------------------------
// Signatures: the forgery of the issue and a small-order R.

fn create_work(actor: &str, sig: Signature) -> Command {
    let mut cmd = Command::signed(
        id("acme"),
        id("g1"),
        id(actor),
        id("forged"),
        1,
        None,
        Body::CreateWork(CreateWork {
            work: id("w1"),
            contract: Contract {
                max_attempts: 1,
                backoff_base_ms: 0,
                backoff_max_ms: 0,
                cost_budget: 0,
                deadline_at: None,
                risk: Risk::Low,
            },
            after: vec![],
            spec: json!({"evil": true}).into(),
        }),
        &SecretKey::for_transcript(actor),
    )
    .expect("signs");
    cmd.sig = sig;
    cmd
}

#[test]
fn a_weak_key_already_in_a_log_signs_nothing() {
    // A log written before the rule may list a small-order key: its genesis is applied as
    // it lies in the log, without `accept`.
    let kind = EventKind::GroupOpened(GroupOpened {
        org: id("acme"),
        mission: id("m1"),
        title: json!("t").into(),
        members: vec![
            member("alice", real("alice")),
            member("mallory", key_hex(IDENTITY)),
        ],
        authority_key: real("@authority"),
    });
    let genesis = Event::seal(
        id("g1"),
        1,
        1000,
        id("alice"),
        id("open"),
        Hash::ZERO,
        "group".to_owned(),
        1,
        Hash::ZERO,
        kind,
    )
    .expect("seals");
    let state = GroupState::genesis(&genesis).expect("applies");
    let forged = create_work("mallory", forged_signature());
    let content = forged.content_bytes().expect("encodes");
    assert!(
        lenient_verify(&key_hex(IDENTITY), &content, &forged.sig),
        "the lenient check accepts the forgery"
    );
    assert!(!key_hex(IDENTITY).verify(&content, &forged.sig));
    assert!(!forged.verify(&key_hex(IDENTITY)).expect("encodes"));
    assert!(state
        .members
        .get(&id("mallory"))
        .expect("listed")
        .prepared_key()
        .is_none());
    let e = accept(Some(&state), &forged, 2000, &Limits::default())
        .and_then(Decision::into_result)
        .expect_err("refused");
    assert_eq!(e.code, Code::BadSignature, "{e:?}");
}

/// A signature whose `R` is the identity, made by the holder of `seed`: `S = k·a`. It
/// satisfies `[S]B = R + [k]A` exactly, so only the small-order check refuses it.
fn small_order_r_signature(seed: &[u8; 32], message: &[u8]) -> Signature {
    let expanded = Sha512::digest(seed);
    let mut a = [0u8; 32];
    a.copy_from_slice(&expanded[..32]);
    a[0] &= 248;
    a[31] &= 127;
    a[31] |= 64;
    let a = Scalar::from_bytes_mod_order(a);
    let public = (ED25519_BASEPOINT_POINT * a).compress();
    let r = key_hex(IDENTITY).0;
    let k = Scalar::from_hash(
        Sha512::new()
            .chain_update(r)
            .chain_update(public.0)
            .chain_update(message),
    );
    let mut sig = [0u8; 64];
    sig[..32].copy_from_slice(&r);
    sig[32..].copy_from_slice((k * a).as_bytes());
    Signature(sig)
}

fn transcript_seed(actor: &str) -> [u8; 32] {
    SecretKey::for_transcript(actor).to_bytes()
}

#[test]
fn a_small_order_r_is_refused_though_the_equation_holds() {
    let state = opened();
    let unsigned = create_work("bob", Signature([0; 64]));
    let content = unsigned.content_bytes().expect("encodes");
    let sig = small_order_r_signature(&transcript_seed("bob"), &content);
    let cmd = create_work("bob", sig);
    assert!(
        lenient_verify(&real("bob"), &content, &sig),
        "the lenient check accepts it"
    );
    assert!(!real("bob").verify(&content, &sig));
    let e = accept(Some(&state), &cmd, 2000, &Limits::default())
        .and_then(Decision::into_result)
        .expect_err("refused");
    assert_eq!(e.code, Code::BadSignature, "{e:?}");
    // The same command, signed as usual, is accepted.
    let good = create_work("bob", SecretKey::for_transcript("bob").sign(&content));
    assert!(matches!(
        accept(Some(&state), &good, 2000, &Limits::default()),
        Ok(Decision::Accepted(_))
    ));
}

/// The group order ℓ, little-endian.
const GROUP_ORDER: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

#[test]
fn a_non_canonical_s_is_refused() {
    let state = opened();
    let content = create_work("bob", Signature([0; 64]))
        .content_bytes()
        .expect("encodes");
    let good = SecretKey::for_transcript("bob").sign(&content);
    // S + ℓ: the same scalar, not reduced.
    let mut sig = good;
    let mut carry = 0u16;
    for (s, l) in sig.0[32..].iter_mut().zip(GROUP_ORDER) {
        let sum = u16::from(*s) + u16::from(l) + carry;
        *s = (sum & 0xff) as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0, "S + ℓ fits in 32 bytes");
    assert_ne!(sig, good);
    assert!(!real("bob").verify(&content, &sig));
    let e = accept(
        Some(&state),
        &create_work("bob", sig),
        2000,
        &Limits::default(),
    )
    .and_then(Decision::into_result)
    .expect_err("refused");
    assert_eq!(e.code, Code::BadSignature, "{e:?}");
}

#[test]
fn a_snapshot_key_is_held_to_the_same_rule() {
    // Snapshots are checked with `PublicKey::verify` under the trusted key: a small-order
    // trusted key with the forged signature verifies nothing.
    assert!(lenient_verify(
        &key_hex(IDENTITY),
        b"any snapshot",
        &forged_signature()
    ));
    assert!(!key_hex(IDENTITY).verify(b"any snapshot", &forged_signature()));
}

// ---------------------------------------------------------------------------------------
// The shared vectors (tests/vectors/weak_keys.jsonl) carry hand-made signatures: each is
// the construction its action names, over the very command the transcript runner builds.

fn vector_command(step: &serde_json::Value) -> Command {
    let envelope = json!({
        "org": "acme", "group": "g1", "actor": step["actor"], "action": step["action"],
        "session": 1, "body": step["body"], "sig": "00".repeat(64),
    });
    Command::from_json(
        &serde_json::to_vec(&envelope).expect("JSON"),
        &Limits::default(),
    )
    .expect("a command")
}

#[test]
fn the_vector_signatures_are_the_constructions_they_name() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/weak_keys.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("the weak-key vectors");
    let mut seen = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let step: serde_json::Value = serde_json::from_str(line).expect("JSON");
        let Some(sig) = step["sig"].as_str() else {
            continue;
        };
        let sig = Signature::from_hex(sig).expect("hex");
        let cmd = vector_command(&step);
        let content = cmd.content_bytes().expect("encodes");
        let actor = step["actor"].as_str().expect("actor");
        let want = match step["action"].as_str().expect("action") {
            "forged" => forged_signature(),
            "small-order-r" => {
                let want = small_order_r_signature(&transcript_seed(actor), &content);
                assert!(lenient_verify(&real(actor), &content, &want));
                want
            }
            "s-plus-l" => {
                let good = SecretKey::for_transcript(actor).sign(&content);
                let mut want = good;
                let mut carry = 0u16;
                for (s, l) in want.0[32..].iter_mut().zip(GROUP_ORDER) {
                    let sum = u16::from(*s) + u16::from(l) + carry;
                    *s = (sum & 0xff) as u8;
                    carry = sum >> 8;
                }
                assert_eq!(carry, 0);
                want
            }
            other => panic!("no construction named {other}"),
        };
        assert_eq!(sig, want, "{line}\nwant sig {want}");
        assert!(!real(actor).verify(&content, &sig));
        seen += 1;
    }
    assert_eq!(seen, 3, "forged, small-order-r and s-plus-l");
}
