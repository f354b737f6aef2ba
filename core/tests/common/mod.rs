//! What the core's integration tests share: a transcript host that keeps what it is given.

use mwp_core::memory::MemoryAuthority;
use mwp_core::transcript::{Host, Runner};
use mwp_core::{Command, Decision, Event, GroupState, Id, Result, WorkState};

/// The in-memory authority as a transcript host that keeps every command it is sent and
/// every event it accepts, and hands each command, with the state of its group before it, to
/// `check` first.
pub struct Recorder<F = fn(Option<&GroupState>, &Command, u64)> {
    /// The authority.
    pub inner: MemoryAuthority,
    /// Every command sent, in order.
    pub commands: Vec<Command>,
    /// Every event accepted, in order.
    pub events: Vec<Event>,
    check: F,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::checking(|_, _, _| {})
    }
}

impl<F: FnMut(Option<&GroupState>, &Command, u64)> Recorder<F> {
    /// A recorder that hands every command to `check` before the authority decides it.
    pub fn checking(check: F) -> Self {
        Recorder {
            inner: MemoryAuthority::new(),
            commands: Vec::new(),
            events: Vec::new(),
            check,
        }
    }
}

impl<F: FnMut(Option<&GroupState>, &Command, u64)> Host for Recorder<F> {
    fn submit(&mut self, cmd: &Command, now_ms: u64) -> Result<Decision> {
        let state = self.inner.group(&cmd.group).and_then(|g| g.state());
        (self.check)(state, cmd, now_ms);
        self.commands.push(cmd.clone());
        let d = self.inner.submit(cmd, now_ms)?;
        if let Decision::Accepted(e) = &d {
            self.events.push((**e).clone());
        }
        Ok(d)
    }
    fn restart(&mut self) -> Result<()> {
        self.inner.restart()
    }
    fn state(&self, group: &Id) -> Option<GroupState> {
        Host::state(&self.inner, group)
    }
    fn work_state(&self, group: &Id, work: &Id) -> Option<WorkState> {
        self.inner.work_state(group, work)
    }
}

/// Every transcript of `tests/transcripts`, as (file name, text), in name order.
pub fn transcripts() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("transcripts")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

/// Runs `text` through `host`.
pub fn run<H: Host>(host: &mut H, text: &str) {
    Runner::new(host).run_all(text);
}

/// The states every transcript's groups pass through, event by event: each `every`-th
/// (counted over a transcript's events), and each group's last when `every` skips some.
/// Members, work items with leases, past leases, effects, checkpoints and outcomes,
/// approvals, receipts, expansions.
#[allow(dead_code)] // each test file includes this module; not all of them read states
pub fn transcript_states(every: usize) -> Vec<GroupState> {
    let mut states = Vec::new();
    for (_, text) in transcripts() {
        let mut host = Recorder::default();
        run(&mut host, &text);
        let mut by_group: std::collections::BTreeMap<Id, Option<GroupState>> = Default::default();
        for (i, e) in host.events.iter().enumerate() {
            let state = by_group.entry(e.group.clone()).or_default();
            GroupState::apply_to(state, e).expect("a transcript's event applies");
            if (i + 1) % every == 0 {
                states.extend(state.clone());
            }
        }
        if every > 1 {
            states.extend(by_group.into_values().flatten());
        }
    }
    states
}

/// Every event the transcripts make, each followed by itself redacted: every kind, with and
/// without its opaque values.
#[allow(dead_code)] // each test file includes this module; not all of them read these
pub fn transcript_events() -> &'static [Event] {
    static EVENTS: std::sync::OnceLock<Vec<Event>> = std::sync::OnceLock::new();
    EVENTS.get_or_init(|| {
        let mut events = Vec::new();
        for (_, text) in transcripts() {
            let mut host = Recorder::default();
            run(&mut host, &text);
            for e in host.events {
                let mut redacted = e.clone();
                redacted.redact().expect("redacts");
                events.push(e);
                events.push(redacted);
            }
        }
        events
    })
}

/// `bytes` damaged as a property test draws it: bytes overwritten, then cut short, then
/// extended.
#[allow(dead_code)] // each test file includes this module; not all of them damage bytes
pub fn damage(
    bytes: &mut Vec<u8>,
    edits: &[(proptest::sample::Index, u8)],
    cut: Option<proptest::sample::Index>,
    extra: &[u8],
) {
    for (at, value) in edits {
        let i = at.index(bytes.len());
        bytes[i] = *value;
    }
    if let Some(cut) = cut {
        bytes.truncate(cut.index(bytes.len()));
    }
    bytes.extend_from_slice(extra);
}

/// Counts of changed inputs a hand-written reader and serde's derive both took, both refused,
/// and only the derive took ([`agrees_with_derive`]).
#[allow(dead_code)] // each test file includes this module; not all of them compare readers
#[derive(Default, Debug)]
pub struct Agreement {
    /// Both took it, alike.
    pub accepted: usize,
    /// Both refused it.
    pub refused: usize,
    /// Only the derive took it: never the canonical encoding of what the derive read.
    pub stricter: usize,
}

/// Holds a hand-written reader, `read`, to serde's derive (`canonical::from_slice` at
/// `Strictness::Canonical`) on `value`'s canonical encoding, each third byte of it changed
/// four ways and every seventh cut of it: what `read` takes, the derive takes and reads alike;
/// where the derive takes what `read` refuses, the input is not the canonical encoding of what
/// the derive read (serde's buffering of an internally tagged enum's entries takes a struct
/// given as an array, or a byte string as a key, which canonical reading refuses).
#[allow(dead_code)] // each test file includes this module; not all of them compare readers
pub fn agrees_with_derive<T>(
    value: &T,
    read: fn(&[u8]) -> std::result::Result<T, mwp_core::canonical::CanonError>,
    counts: &mut Agreement,
) where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    use mwp_core::canonical::{from_slice, to_vec, Strictness};
    let by_derive = |bytes: &[u8]| from_slice::<T>(bytes, Strictness::Canonical).ok();
    let bytes = to_vec(value).expect("encodes");
    assert_eq!(read(&bytes).as_ref(), Ok(value));
    assert_eq!(by_derive(&bytes).as_ref(), Some(value));
    for i in (0..bytes.len()).step_by(3) {
        for flip in [0x01, 0x20, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[i] ^= flip;
            match (read(&bad).ok(), by_derive(&bad)) {
                (Some(r), d) => {
                    assert_eq!(Some(r), d, "byte {i} ^ {flip:#x}");
                    counts.accepted += 1;
                }
                (None, None) => counts.refused += 1,
                (None, Some(d)) => {
                    let again = to_vec(&d).expect("encodes");
                    assert_ne!(again, bad, "byte {i} ^ {flip:#x}: canonical, refused");
                    counts.stricter += 1;
                }
            }
        }
    }
    for cut in (0..bytes.len()).step_by(7) {
        assert!(read(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}
