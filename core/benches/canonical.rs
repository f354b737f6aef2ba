//! Encode and decode speed of canonical CBOR on a typical ~300-byte command.

// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;

use ciborium::Value;
use criterion::{criterion_group, criterion_main, Criterion};
use mwp_core::canonical::{decode, encode_value, from_slice, hash, to_vec, Strictness};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Command {
    Submit {
        org: String,
        group: String,
        mission: String,
        actor: String,
        op: String,
        work: String,
        now_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        parent: Option<String>,
        deps: Vec<String>,
        labels: BTreeMap<String, String>,
        spec: serde_json::Value,
        prev_hash: String,
    },
}

fn sample() -> Command {
    Command::Submit {
        org: "acme".into(),
        group: "research.team-7".into(),
        mission: "m:2026-q3".into(),
        actor: "agent@planner".into(),
        op: "op-000123".into(),
        work: "w.fetch-sources".into(),
        now_ms: 1_767_225_600_123,
        parent: None,
        deps: vec!["w.plan".into(), "w.setup".into()],
        labels: [("priority", "high"), ("kind", "fetch")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        spec: serde_json::json!({
            "urls": ["https://example.invalid/a", "https://example.invalid/b"],
            "retries": 3,
            "dry_run": false,
            "limit": null,
        }),
        prev_hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
    }
}

fn bench(c: &mut Criterion) {
    let cmd = sample();
    let bytes = to_vec(&cmd).expect("the sample encodes");
    assert_eq!(
        from_slice::<Command>(&bytes, Strictness::Canonical).expect("and decodes"),
        cmd
    );
    println!("sample command: {} bytes of canonical CBOR", bytes.len());

    let mut g = c.benchmark_group("encode");
    g.bench_function("to_vec", |b| b.iter(|| to_vec(black_box(&cmd))));
    g.bench_function("value_path", |b| {
        b.iter(|| {
            let v = Value::serialized(black_box(&cmd)).expect("the sample serializes");
            encode_value(&v)
        })
    });
    g.bench_function("hash", |b| b.iter(|| hash(black_box(&cmd))));
    g.finish();

    let mut g = c.benchmark_group("decode");
    g.bench_function("from_slice_canonical", |b| {
        b.iter(|| from_slice::<Command>(black_box(&bytes), Strictness::Canonical))
    });
    g.bench_function("decode_canonical", |b| {
        b.iter(|| decode(black_box(&bytes), Strictness::Canonical))
    });
    g.bench_function("decode_lenient", |b| {
        b.iter(|| decode(black_box(&bytes), Strictness::Lenient))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
