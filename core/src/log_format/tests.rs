use proptest::prelude::*;

use super::*;

fn gid() -> Id {
    Id::new("g1").unwrap()
}

fn segment(first_seq: u64, batches: &[&[&[u8]]]) -> Vec<u8> {
    let mut out = FileHeader {
        magic: SEGMENT_MAGIC,
        first_seq,
        prev: Hash([0; 32]),
        group: gid(),
    }
    .encode()
    .to_vec();
    let mut seq = first_seq;
    for b in batches {
        out.extend(encode_batch(seq, b.iter().copied()));
        seq += b.len() as u64;
    }
    out
}

fn spec(first_seq: u64, last: bool) -> ScanSpec {
    ScanSpec {
        file_len: 0,
        first_seq,
        contiguous: true,
        may_be_torn: last,
        reserve: last,
    }
}

fn none(_: u64) -> Option<Erased> {
    None
}

/// Drives a [`Scanner`] over `file` the way a host does: reading only what it asks for.
fn scan_chunked(file: &[u8], spec: ScanSpec, chunk: usize) -> Result<(Vec<u64>, ScanEnd), Damage> {
    let mut s = Scanner::new(ScanSpec {
        file_len: file.len() as u64,
        ..spec
    })
    .with_chunk(chunk);
    let mut buf: &[u8] = &[];
    let mut start = 0;
    let mut seqs = Vec::new();
    for _ in 0..1_000_000 {
        match s.step(buf, start, &none) {
            Step::Record(r) => seqs.push(r.header.seq),
            Step::Need(n) => {
                assert!(n.at as usize + n.len <= file.len());
                buf = &file[n.at as usize..n.at as usize + n.len];
                start = n.at;
            }
            Step::End(e) => return Ok((seqs, e)),
            Step::Corrupt(d) => return Err(d),
        }
    }
    panic!("the scanner does not finish");
}

#[test]
fn crc32c_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c_append(crc32c(b"1234"), b"56789"), 0xE306_9283);
    assert_eq!(crc32c(b""), 0);
}

#[test]
fn headers_round_trip_and_check() {
    let h = FileHeader {
        magic: SEGMENT_MAGIC,
        first_seq: 7,
        prev: Hash([9; 32]),
        group: gid(),
    };
    let b = h.encode();
    assert_eq!(FileHeader::decode(&b, SEGMENT_MAGIC), Ok(h.clone()));
    assert_eq!(
        FileHeader::decode(&b, OVERLAY_MAGIC),
        Err("wrong magic".into())
    );
    assert_eq!(FileHeader::check(&b, SEGMENT_MAGIC, &gid(), Some(7)), Ok(h));
    assert_eq!(
        FileHeader::check(&b, SEGMENT_MAGIC, &gid(), Some(8))
            .unwrap_err()
            .offset,
        12
    );
    let other = Id::new("g2").unwrap();
    assert_eq!(
        FileHeader::check(&b, SEGMENT_MAGIC, &other, None)
            .unwrap_err()
            .offset,
        52
    );
    assert_eq!(
        FileHeader::check(&b[..100], SEGMENT_MAGIC, &gid(), None),
        Err(Damage::new(0, "file is shorter than its header"))
    );
    let mut bad = b;
    bad[60] ^= 1;
    assert_eq!(
        FileHeader::decode(&bad, SEGMENT_MAGIC),
        Err("header checksum mismatch".into())
    );
}

#[test]
fn records_and_erasure() {
    let mut out = Vec::new();
    encode_record(&mut out, 5, 4, b"hello");
    let h = RecordHeader::parse(&out).unwrap();
    assert_eq!((h.len, h.seq, h.batch), (5, 5, 4));
    assert!(h.matches(&out[RECORD_HEADER_LEN..]));
    assert!(!h.is_erased(&out[RECORD_HEADER_LEN..]));
    let patch = h.erase_patch();
    out[20..].copy_from_slice(&patch);
    let erased = RecordHeader::parse(&out).unwrap();
    assert!(erased.is_erased(&out[RECORD_HEADER_LEN..]));
    assert_eq!(RecordHeader::parse(&out[..23]), None);
    let entry = encode_overlay_entry(Erased { len: 5, crc: 77 }, b"red");
    assert_eq!(
        decode_overlay_entry(&entry),
        Some((Erased { len: 5, crc: 77 }, &b"red"[..]))
    );
    assert_eq!(decode_overlay_entry(&entry[..7]), None);
}

#[test]
fn snapshot_files() {
    let f = encode_snapshot_file(9, b"cbor");
    assert_eq!(decode_snapshot_file(&f), Ok((9, &b"cbor"[..])));
    // The header a writer puts before a payload it writes from where it lies.
    assert_eq!(f[..SNAPSHOT_HEADER_LEN], snapshot_file_header(9, b"cbor"));
    assert_eq!(
        decode_snapshot_file(&f[..f.len() - 1]),
        Err("length field says 4 bytes, the file holds 3".into())
    );
    assert_eq!(
        decode_snapshot_file(&f[..10]),
        Err("shorter than its header".into())
    );
}

#[test]
fn names() {
    assert_eq!(segment_name(1), "00000000000000000001.seg");
    assert_eq!(parse_numbered("00000000000000000001.seg", "seg"), Some(1));
    assert_eq!(parse_numbered("00000000000000000001.seg", "snap"), None);
    assert_eq!(parse_numbered("1.seg", "seg"), None);
    assert_eq!(snapshot_name(100_000), "00000000000000100000.snap");
    assert_eq!(group_dir_name(&Id::new("G1").unwrap()), "~i4yq");
    assert_eq!(group_dir_name(&gid()), "g1");
    for id in ["G1", "Team.A", "a", "x:y@z~", &"Z".repeat(128)] {
        let id = Id::new(id).unwrap();
        assert_eq!(group_from_dir_name(&group_dir_name(&id)), Some(id));
    }
    for name in ["G1", "..", ".", "~I4YQ", "~i4yq=", "", "~"] {
        assert_eq!(group_from_dir_name(name), None, "{name}");
    }
}

#[test]
fn scan_good_file_in_any_chunk_size() {
    let f = segment(1, &[&[b"a", b"bb"], &[b"ccc"]]);
    for chunk in [1, 7, 24, 100, DEFAULT_CHUNK] {
        let (seqs, end) = scan_chunked(&f, spec(1, true), chunk).unwrap();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert_eq!(
            end,
            ScanEnd {
                end: f.len() as u64,
                last_seq: 3,
                torn: None,
                reserved: 0
            }
        );
    }
}

#[test]
fn scan_reserved_zeros_and_torn_tail() {
    let mut f = segment(1, &[&[b"a"]]);
    let end = f.len() as u64;
    f.extend([0u8; 100]);
    let (_, e) = scan_chunked(&f, spec(1, true), 16).unwrap();
    assert_eq!((e.end, e.reserved, e.torn), (end, 100, None));
    // Zeros are damage where no reserve is allowed (an earlier segment).
    assert_eq!(
        scan_chunked(&f, spec(1, false), 16).unwrap_err(),
        Damage::new(end, "record checksum mismatch (seq field 0)")
    );
    f[end as usize + 50] = 1;
    let (_, e) = scan_chunked(&f, spec(1, true), 16).unwrap();
    assert_eq!((e.end, e.reserved, e.torn), (end, 0, Some(100)));
}

#[test]
fn scan_damage_before_a_later_batch_is_corrupt() {
    let mut f = segment(1, &[&[b"a"], &[b"b"]]);
    let second = FILE_HEADER_LEN + RECORD_HEADER_LEN + 1;
    // Damage the first batch's record: the later batch (seq 2) proves it was acknowledged.
    f[FILE_HEADER_LEN + RECORD_HEADER_LEN] ^= 0xff;
    let mut s = Scanner::new(ScanSpec {
        file_len: f.len() as u64,
        ..spec(1, true)
    });
    let mut needs = 0;
    let damage = loop {
        match s.step(&f, 0, &none) {
            Step::Need(_) => needs += 1,
            Step::Corrupt(d) => break d,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(needs, MAX_REREADS);
    assert_eq!(s.rereads(), MAX_REREADS);
    assert_eq!(damage.offset, FILE_HEADER_LEN as u64);
    assert!(damage
        .what
        .contains(&format!("a later write batch starts at offset {second}")));
    // The same scan again says the same.
    assert_eq!(s.step(&f, 0, &none), Step::Corrupt(damage));
}

#[test]
fn scan_wrong_seq_and_erasures() {
    let f = segment(1, &[&[b"a", b"b"]]);
    let err = scan_slice(&f, spec(2, true), &none).unwrap_err();
    assert_eq!(err.what, "record has seq 1, expected 2");
    let erased = |seq: u64| (seq == 2).then_some(Erased { len: 1, crc: 0 });
    let (recs, _) = scan_slice(&f, spec(1, true), &erased).unwrap();
    assert_eq!(recs[1].erasure, Erasure::Pending);
    let wrong = |seq: u64| (seq == 2).then_some(Erased { len: 9, crc: 0 });
    assert!(scan_slice(&f, spec(1, false), &wrong)
        .unwrap_err()
        .what
        .contains("the overlay says 9"));
}

#[test]
fn scan_hostile_lengths_and_seqs() {
    let mut f = segment(1, &[]);
    f.extend(u32::MAX.to_le_bytes());
    f.extend([0xff; 20]);
    let err = scan_slice(&f, spec(1, false), &none).unwrap_err();
    assert!(err.what.contains("exceeds"));
    // A header that is not there at all.
    assert!(scan_slice(&f[..100], spec(1, true), &none).is_ok());
    // The overlay may hold any seq, up to the last one.
    let mut ov = segment(0, &[]);
    encode_record(&mut ov, u64::MAX, u64::MAX, b"x");
    let over = ScanSpec {
        contiguous: false,
        ..spec(1, true)
    };
    assert!(scan_slice(&ov, over, &none).is_err());
}

proptest! {
    #[test]
    fn scanner_never_panics_on_random_bytes(
        body in proptest::collection::vec(any::<u8>(), 0..600),
        first_seq in any::<u64>(),
        contiguous in any::<bool>(),
        last in any::<bool>(),
        chunk in 1usize..64,
    ) {
        let mut f = segment(1, &[]);
        f.extend(&body);
        let s = ScanSpec { contiguous, ..spec(first_seq, last) };
        let _ = scan_chunked(&f, s, chunk);
        let _ = scan_slice(&f, s, &|seq| (seq % 3 == 0).then_some(Erased { len: 1, crc: 0 }));
        let _ = FileHeader::decode(&body, SEGMENT_MAGIC);
        let _ = FileHeader::check(&body, SEGMENT_MAGIC, &gid(), Some(first_seq));
        let _ = decode_snapshot_file(&body);
        let _ = decode_overlay_entry(&body);
        let _ = RecordHeader::parse(&body);
    }

    #[test]
    fn damaged_good_files_end_in_values(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
        chunk in 1usize..80,
    ) {
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let mut f = segment(1, &[&refs]);
        for (at, x) in flips {
            let i = FILE_HEADER_LEN + at % (f.len() - FILE_HEADER_LEN);
            f[i] ^= x;
        }
        f.truncate(FILE_HEADER_LEN + cut % (f.len() - FILE_HEADER_LEN + 1));
        let chunked = scan_chunked(&f, spec(1, true), chunk);
        let whole = scan_slice(&f, spec(1, true), &none).map(|(r, e)| (r.iter().map(|r| r.header.seq).collect::<Vec<_>>(), e));
        prop_assert_eq!(chunked, whole);
    }

    #[test]
    fn dir_names_round_trip(s in "[A-Za-z0-9._:@~-]{1,128}") {
        let id = Id::new(s).unwrap();
        prop_assert_eq!(group_from_dir_name(&group_dir_name(&id)), Some(id));
    }
}

/// Bytes after damage whose length field is near `u32::MAX` are not a later batch; on a
/// 32-bit target (wasm) adding that length to an offset would wrap. The same case runs in
/// the wasm suite (wasm/tests/node.rs), where it would trap.
#[test]
fn a_hostile_length_after_damage_is_not_a_later_batch() {
    let f = hostile_tail_after_damage();
    let (recs, end) = scan_slice(&f, spec(1, true), &none).expect("a torn tail, not damage");
    assert_eq!(recs.len(), 1);
    assert!(end.torn.is_some());
}

/// A segment with one good record, a damaged one, then a header whose length is
/// `u32::MAX - 8` with `batch <= seq`.
fn hostile_tail_after_damage() -> Vec<u8> {
    let mut f = segment(1, &[&[b"ok"]]);
    let mut bad = Vec::new();
    encode_record(&mut bad, 2, 2, b"payload");
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    f.extend(bad);
    let mut hostile = Vec::new();
    hostile.extend((u32::MAX - 8).to_le_bytes());
    hostile.extend(3u64.to_le_bytes());
    hostile.extend(3u64.to_le_bytes());
    hostile.extend(0u32.to_le_bytes());
    f.extend(hostile);
    f
}

/// Reservations double from 64 KiB up to `reserve_bytes`; `0` reserves nothing.
#[test]
fn reservations_double_from_64_kib_up_to_reserve_bytes() {
    let four = 4 << 20;
    assert_eq!(reserve_len(FILE_HEADER_LEN as u64, four), MIN_RESERVE_BYTES);
    assert_eq!(reserve_len(100 << 10, four), 100 << 10);
    assert_eq!(reserve_len(64 << 20, four), four);
    assert_eq!(reserve_len(1 << 20, 0), 0);
    assert_eq!(reserve_len(u64::MAX, u64::MAX), u64::MAX);
}

/// A segment of `(seq, batch)` records, each with a one-byte payload and its CRC computed.
fn segment_of(first_seq: u64, records: &[(u64, u64)]) -> Vec<u8> {
    let mut out = segment(first_seq, &[]);
    for &(seq, batch) in records {
        encode_record(&mut out, seq, batch, b"x");
    }
    out
}

#[test]
fn a_batch_starts_at_its_own_seq_or_continues_the_one_before() {
    // Batches of one, two and three records: every record is well placed.
    let ok = segment_of(1, &[(1, 1), (2, 2), (3, 2), (4, 4), (5, 4), (6, 4)]);
    for last in [false, true] {
        let (recs, _) = scan_slice(&ok, spec(1, last), &none).expect("every batch is well placed");
        assert_eq!(recs.len(), 6);
    }
    let first = FILE_HEADER_LEN as u64;
    let at = |i: u64| first + i * (RECORD_HEADER_LEN as u64 + 1);
    // Batch 1 at seq 4, after a record of batch 3: no batch holds both (the CRC is right,
    // so only the rule catches it), in the last segment as in any other.
    let lie = segment_of(1, &[(1, 1), (2, 2), (3, 3), (4, 1), (5, 5)]);
    for last in [false, true] {
        let d = scan_slice(&lie, spec(1, last), &none).unwrap_err();
        assert_eq!(d.offset, at(3));
        assert!(d.what.contains("record seq 4 names batch 1"), "{}", d.what);
        assert!(d.what.contains("before it is of batch 3"), "{}", d.what);
    }
    // A file's first record starts a batch: batches never span segments.
    let d = scan_slice(&segment_of(5, &[(5, 4)]), spec(5, true), &none).unwrap_err();
    assert_eq!(d.offset, first);
    assert!(d.what.contains("first record of its file"), "{}", d.what);
    // The overlay: every entry is a batch of its own.
    let mut overlay = segment_of(0, &[(3, 3), (7, 3)]);
    overlay[..8].copy_from_slice(&OVERLAY_MAGIC);
    let d = scan_slice(
        &overlay,
        ScanSpec {
            contiguous: false,
            ..spec(1, true)
        },
        &none,
    )
    .unwrap_err();
    assert_eq!(d.offset, at(1));
    assert!(d.what.contains("entry seq 7 names batch 3"), "{}", d.what);
}
