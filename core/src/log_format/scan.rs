//! [`Scanner`]: the records of one log file, checked, and where the good ones end (the tail
//! rule of docs/format.md). Sans IO: the host reads the bytes the scanner asks for.

use super::{record_crc, RecordHeader, FILE_HEADER_LEN, MAX_RECORD_LEN, RECORD_HEADER_LEN};

/// How many bytes a [`Scanner`] asks for at least, when the file has them (1 MiB).
pub const DEFAULT_CHUNK: usize = 1 << 20;

/// How often a [`Scanner`] has damage followed by a later batch read again before it reports
/// it.
pub const MAX_REREADS: u32 = 3;

/// What the overlay says about a redacted record: its original length and CRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Erased {
    /// Payload length of the record before erasure.
    pub len: u32,
    /// CRC of the record before erasure.
    pub crc: u32,
}

/// Where a record stands with respect to redaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Erasure {
    /// Not redacted: the payload is the event.
    None,
    /// Redacted but not yet erased (or interrupted): the overlay holds the event; the
    /// payload must be zeroed.
    Pending,
    /// Redacted and zeroed: the overlay holds the event.
    Done,
}

/// One good record, as a [`Scanner`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Offset of the record header in the file.
    pub offset: u64,
    /// Parsed header.
    pub header: RecordHeader,
    /// The payload bytes as stored.
    pub payload: &'a [u8],
    /// Redaction status.
    pub erasure: Erasure,
}

/// How a scan of one file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanEnd {
    /// Offset just past the last good record.
    pub end: u64,
    /// Seq of the last good record (`first_seq - 1` when there is none).
    pub last_seq: u64,
    /// A torn tail found after `end`: its length in bytes.
    pub torn: Option<u64>,
    /// Zero bytes after `end`, up to the end of the file: space reserved for later appends
    /// (only where [`ScanSpec::reserve`] allows it).
    pub reserved: u64,
}

/// Damage the tail rule does not explain: `LOG_CORRUPT` at `offset` of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Offset in the file.
    pub offset: u64,
    /// What is wrong there.
    pub what: String,
}

impl Damage {
    /// Damage at `offset`.
    pub fn new(offset: u64, what: impl Into<String>) -> Damage {
        Damage {
            offset,
            what: what.into(),
        }
    }

    /// The `LOG_CORRUPT` error naming `file` and the offset.
    pub fn into_error(self, file: &str) -> crate::Error {
        super::corrupt_at(file, self.offset, self.what)
    }
}

/// What a [`Scanner`] checks one file against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSpec {
    /// Length of the file in bytes.
    pub file_len: u64,
    /// Seq the first record must carry.
    pub first_seq: u64,
    /// Whether seqs must follow each other (segments) or merely be present (overlay).
    pub contiguous: bool,
    /// Whether damage at the end may be a torn tail (the last segment, the overlay).
    pub may_be_torn: bool,
    /// Whether the file may end in zero bytes reserved for later appends (the last segment).
    pub reserve: bool,
}

/// Bytes of the file a [`Scanner`] needs: the host reads `len` bytes at `at` from the file
/// (afresh: not from a copy it already holds) and passes them to the next
/// [`Scanner::step`] with `buf_start = at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Offset in the file.
    pub at: u64,
    /// Number of bytes (never past the end of the file).
    pub len: usize,
}

/// What one [`Scanner::step`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'b> {
    /// The next good record, in file order.
    Record(Record<'b>),
    /// Bytes to read before the next step.
    Need(Need),
    /// The scan is over: where the good records end. Every later step says the same.
    End(ScanEnd),
    /// The scan is over: damage the tail rule does not explain. Every later step says the
    /// same.
    Corrupt(Damage),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Reading records at `Scanner::pos`.
    Records,
    /// Damage at `at`: are the bytes `[at, file_len)` all zero (checked up to `next`)?
    Zeros { at: u64, next: u64, what: String },
    /// Damage at `at`: does a record of a later write batch follow it?
    Later { at: u64, what: String },
    /// Over.
    Done(Result<ScanEnd, Damage>),
}

/// Walks the records of one file after its header, checking framing, CRCs and seqs, and
/// decides where the good records end (docs/format.md, "Tail rule"). It does no IO: each
/// [`Scanner::step`] takes the bytes the host holds (`buf`, starting at file offset
/// `buf_start`) and gives the next record, or says which bytes it needs.
///
/// Memory stays bounded by the largest record and the chunk size, except after damage in a
/// file that may be torn, where the scanner asks for the rest of the file at once (at most
/// a segment) to look for a later write batch.
///
/// A reader beside a live writer (a read-only open) may hold bytes read before the writer
/// finished them while the bytes after were written later: damage followed by a later batch
/// is read again from the file (up to [`MAX_REREADS`] times, as a [`Step::Need`]) before it
/// is called damage. A writer completes each batch before it starts the next, so a fresh
/// read shows the earlier batch whole; on a file nobody writes, the same bytes come back and
/// the damage stands.
#[derive(Debug, Clone)]
pub struct Scanner {
    spec: ScanSpec,
    chunk: usize,
    pos: u64,
    expected: u64,
    last_seq: u64,
    /// The `batch` of the last good record of this file (`None` before the first).
    last_batch: Option<u64>,
    rereads: u32,
    phase: Phase,
}

/// The `n` bytes at file offset `at`, if `buf` (starting at `buf_start`) holds them.
fn window(buf: &[u8], buf_start: u64, at: u64, n: usize) -> Option<&[u8]> {
    let from = usize::try_from(at.checked_sub(buf_start)?).ok()?;
    buf.get(from..from.checked_add(n)?)
}

impl Scanner {
    /// A scanner at the first record (just after the file header).
    pub fn new(spec: ScanSpec) -> Scanner {
        Scanner {
            spec,
            chunk: DEFAULT_CHUNK,
            pos: FILE_HEADER_LEN as u64,
            expected: spec.first_seq,
            last_seq: spec.first_seq.saturating_sub(1),
            last_batch: None,
            rereads: 0,
            phase: Phase::Records,
        }
    }

    /// Asks for at least `chunk` bytes at a time (at least 1) where the file has them.
    pub fn with_chunk(mut self, chunk: usize) -> Scanner {
        self.chunk = chunk.max(1);
        self
    }

    /// The first bytes to read: where the records start.
    pub fn first_need(&self) -> Need {
        self.need(self.pos, RECORD_HEADER_LEN)
    }

    /// How many times damage followed by a later batch was read again so far.
    pub fn rereads(&self) -> u32 {
        self.rereads
    }

    fn need(&self, at: u64, n: usize) -> Need {
        let left = self.spec.file_len.saturating_sub(at);
        let want = n.max(self.chunk) as u64;
        // At most `want`, a usize.
        Need {
            at,
            len: want.min(left) as usize,
        }
    }

    fn finish(&mut self, result: Result<ScanEnd, Damage>) -> Step<'static> {
        self.phase = Phase::Done(result.clone());
        match result {
            Ok(end) => Step::End(end),
            Err(d) => Step::Corrupt(d),
        }
    }

    /// Damage at `at`: zeros reserved for appends, a torn tail, or corruption.
    fn damaged(&mut self, at: u64, what: String) {
        self.phase = if self.spec.reserve {
            Phase::Zeros { at, next: at, what }
        } else {
            Phase::Later { at, what }
        };
    }

    /// The next record, the bytes needed first, or the end of the scan. `erased` says what
    /// the overlay knows of a seq (segments; `|_| None` for the overlay itself). `buf` holds
    /// the file's bytes from offset `buf_start` on (what the host read for the last
    /// [`Step::Need`]; anything, e.g. nothing, before the first).
    pub fn step<'b>(
        &mut self,
        buf: &'b [u8],
        buf_start: u64,
        erased: &dyn Fn(u64) -> Option<Erased>,
    ) -> Step<'b> {
        loop {
            match std::mem::replace(&mut self.phase, Phase::Records) {
                Phase::Done(result) => return self.finish(result),
                Phase::Records => match self.record(buf, buf_start, erased) {
                    Ok(step) => return step,
                    Err((at, what)) => self.damaged(at, what),
                },
                Phase::Zeros { at, next, what } => {
                    let len = self.spec.file_len;
                    if next >= len {
                        return self.finish(Ok(ScanEnd {
                            end: at,
                            last_seq: self.last_seq,
                            torn: None,
                            reserved: len.saturating_sub(at),
                        }));
                    }
                    // At most the chunk size, a usize.
                    let n = (len - next).min(self.chunk as u64) as usize;
                    let Some(bytes) = window(buf, buf_start, next, n) else {
                        self.phase = Phase::Zeros { at, next, what };
                        return Step::Need(Need { at: next, len: n });
                    };
                    self.phase = if bytes.iter().all(|&b| b == 0) {
                        Phase::Zeros {
                            at,
                            next: next + n as u64,
                            what,
                        }
                    } else {
                        Phase::Later { at, what }
                    };
                }
                Phase::Later { at, what } => {
                    if !self.spec.may_be_torn {
                        return self.finish(Err(Damage::new(at, what)));
                    }
                    let Ok(n) = usize::try_from(self.spec.file_len.saturating_sub(at)) else {
                        return self.finish(Err(Damage::new(
                            at,
                            format!("{what}, and the rest of the file is too large to check"),
                        )));
                    };
                    let Some(rest) = window(buf, buf_start, at, n) else {
                        self.phase = Phase::Later { at, what };
                        return Step::Need(Need { at, len: n });
                    };
                    match later_batch(rest, self.expected, self.spec.contiguous) {
                        Some(_) if self.rereads < MAX_REREADS => {
                            self.rereads += 1;
                            self.pos = at;
                            self.phase = Phase::Records;
                            return Step::Need(self.need(at, RECORD_HEADER_LEN));
                        }
                        Some(i) => {
                            let later = at + i as u64;
                            return self.finish(Err(Damage::new(
                                at,
                                format!(
                                    "{what}, but a later write batch starts at offset {later}: \
                                     acknowledged data is damaged"
                                ),
                            )));
                        }
                        None => {
                            return self.finish(Ok(ScanEnd {
                                end: at,
                                last_seq: self.last_seq,
                                torn: Some(self.spec.file_len.saturating_sub(at)),
                                reserved: 0,
                            }))
                        }
                    }
                }
            }
        }
    }

    /// One record at `self.pos`: a step, or damage (offset, what) the tail rule decides on.
    fn record<'b>(
        &mut self,
        buf: &'b [u8],
        buf_start: u64,
        erased: &dyn Fn(u64) -> Option<Erased>,
    ) -> Result<Step<'b>, (u64, String)> {
        let pos = self.pos;
        let len = self.spec.file_len;
        if pos == len {
            return Ok(self.finish(Ok(ScanEnd {
                end: pos,
                last_seq: self.last_seq,
                torn: None,
                reserved: 0,
            })));
        }
        if len.saturating_sub(pos) < RECORD_HEADER_LEN as u64 {
            return Err((pos, "incomplete record header".into()));
        }
        let Some(h) = window(buf, buf_start, pos, RECORD_HEADER_LEN).and_then(RecordHeader::parse)
        else {
            return Ok(Step::Need(self.need(pos, RECORD_HEADER_LEN)));
        };
        if h.len > MAX_RECORD_LEN {
            return Err((
                pos,
                format!("record length {} exceeds {MAX_RECORD_LEN}", h.len),
            ));
        }
        let total = RECORD_HEADER_LEN + h.len as usize;
        if len - pos < total as u64 {
            return Err((pos, "record extends past the end of the file".into()));
        }
        let Some(rec) = window(buf, buf_start, pos, total) else {
            return Ok(Step::Need(self.need(pos, total)));
        };
        let payload = &rec[RECORD_HEADER_LEN..];
        let crc_ok = record_crc(rec, payload) == h.crc;
        let expected = self.expected;
        let seq_ok = if self.spec.contiguous {
            h.seq == expected
        } else {
            h.seq >= 1
        };
        let erasure = match if seq_ok { erased(h.seq) } else { None } {
            None => Erasure::None,
            Some(e) if e.len != h.len => {
                return Err((
                    pos,
                    format!(
                        "redacted record seq {} has length {}, the overlay says {}",
                        h.seq, h.len, e.len
                    ),
                ));
            }
            Some(_) if crc_ok && payload.iter().all(|&b| b == 0) => Erasure::Done,
            // The original bytes, or an erasure a crash interrupted: the overlay holds the
            // record (checked against its length above), so redo the erasure.
            Some(_) => Erasure::Pending,
        };
        if erasure == Erasure::None && !crc_ok {
            return Err((
                pos,
                format!("record checksum mismatch (seq field {})", h.seq),
            ));
        }
        let wrong_seq = || format!("record has seq {}, expected {expected}", h.seq);
        if !seq_ok {
            if crc_ok {
                // A whole, checksummed record with the wrong seq is not a torn write.
                return Ok(self.finish(Err(Damage::new(pos, wrong_seq()))));
            }
            return Err((pos, wrong_seq()));
        }
        if let Some(what) = self.batch_error(&h) {
            // The header is whole (its checksum, or the overlay's copy of the record, holds):
            // a batch no writer writes is not a torn write.
            return Ok(self.finish(Err(Damage::new(pos, what))));
        }
        let Some(next) = h.seq.checked_add(1) else {
            return Ok(self.finish(Err(Damage::new(
                pos,
                format!("record seq {} leaves no seq after it", h.seq),
            ))));
        };
        self.last_seq = h.seq;
        self.last_batch = Some(h.batch);
        self.expected = next;
        self.pos = pos + total as u64;
        Ok(Step::Record(Record {
            offset: pos,
            header: h,
            payload,
            erasure,
        }))
    }
}

impl Scanner {
    /// What is wrong with the `batch` field of `h`, the record after the last good one
    /// (docs/format.md, "Record"): a record's batch is its own seq (it starts a batch) or
    /// the batch of the record before it in the same file (it continues that batch). A
    /// batch never spans two segments, so a file's first record starts one; every overlay
    /// entry is a batch of its own.
    fn batch_error(&self, h: &RecordHeader) -> Option<String> {
        if h.batch == h.seq {
            return None;
        }
        if h.batch > h.seq {
            return Some(format!(
                "record seq {} names batch {} after it",
                h.seq, h.batch
            ));
        }
        match self.last_batch {
            Some(prev) if self.spec.contiguous && prev == h.batch => None,
            Some(prev) if self.spec.contiguous => Some(format!(
                "record seq {} names batch {}, but the record before it is of batch {prev}: \
                 a record starts a batch at its own seq or continues the one before it",
                h.seq, h.batch
            )),
            None if self.spec.contiguous => Some(format!(
                "record seq {} names batch {}, but it is the first record of its file, \
                 where a batch starts at its own seq",
                h.seq, h.batch
            )),
            _ => Some(format!(
                "entry seq {} names batch {}; every entry is a batch of its own",
                h.seq, h.batch
            )),
        }
    }
}

/// Looks in `rest` (the file's bytes from the damage on) for a checksummed record after its
/// first byte that belongs to a write batch later than the one that should hold seq
/// `expected`: proof that the damage is not a torn last write. Returns its index in `rest`.
fn later_batch(rest: &[u8], expected: u64, contiguous: bool) -> Option<usize> {
    let n = rest.len();
    for i in 1..n.saturating_sub(RECORD_HEADER_LEN - 1) {
        let Some(h) = RecordHeader::parse(&rest[i..]) else {
            break;
        };
        // The length is bounded before it is added: on 32-bit targets (wasm) a hostile
        // length near `u32::MAX` would otherwise wrap the sum.
        if h.len > MAX_RECORD_LEN || h.batch > h.seq {
            continue;
        }
        let end = i + RECORD_HEADER_LEN + h.len as usize;
        if end > n {
            continue;
        }
        // Segments: a batch that starts after the seq the damaged record should hold.
        // The overlay: any entry, since each is synced before the next is written.
        let later = if contiguous {
            h.batch > expected
        } else {
            h.seq >= 1
        };
        if !later {
            continue;
        }
        let rec = &rest[i..end];
        if record_crc(rec, &rec[RECORD_HEADER_LEN..]) == h.crc {
            return Some(i);
        }
    }
    None
}

/// Scans a whole file held in memory (`file`, from offset 0): its good records and where they
/// end, or the damage. The convenience of tests and of hosts that read small files whole.
pub fn scan_slice<'f>(
    file: &'f [u8],
    spec: ScanSpec,
    erased: &dyn Fn(u64) -> Option<Erased>,
) -> Result<(Vec<Record<'f>>, ScanEnd), Damage> {
    let spec = ScanSpec {
        file_len: file.len() as u64,
        ..spec
    };
    let mut scanner = Scanner::new(spec);
    let mut records = Vec::new();
    loop {
        match scanner.step(file, 0, erased) {
            Step::Record(r) => records.push(r),
            // The whole file is at hand: only a re-read asks again, and gets the same bytes.
            Step::Need(_) => {}
            Step::End(end) => return Ok((records, end)),
            Step::Corrupt(d) => return Err(d),
        }
    }
}
