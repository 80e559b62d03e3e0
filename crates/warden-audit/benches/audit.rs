//! Audit log cost: time per `append` (= latency added to a tool call, and
//! records per second) for each fsync mode, what write-ahead adds to a
//! call (the pending record written before the send, and the result
//! after), and `verify` throughput.
//!
//! `cargo bench -p warden-audit --bench audit`. Logs are written under `AUDIT_BENCH_DIR`
//! (default: the system temp folder); put it on the disk you will use.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use warden_audit::FsyncMode;
use warden_audit::{
    AuditLog, AuditOptions, DecisionRecord, Event, Outcome, ResultRecord, ToolCallRecord, verify,
};
use warden_core::{Effect, Stage};

/// A typical allowed call's pending record: a few short arguments, one
/// reason (about 750 bytes as a line).
fn event() -> Event {
    let args = json!({"path": "/srv/repo/src/main.rs", "head": 40, "encoding": "utf-8"});
    Event::ToolCall(ToolCallRecord {
        call_id: "5d0c9f5e-7a1b-4c3d-9e8f-0a1b2c3d4e5f".into(),
        server: Some("fs".into()),
        tool: Some("read_text_file".into()),
        qualified: "mcp__fs__read_text_file".into(),
        caller: warden_audit::Caller::Model,
        args_sha256: warden_audit::args_digest(&args),
        arguments: args,
        decision: Some(DecisionRecord {
            effect: Effect::Allow,
            stage: Stage::Rules,
            reasons: vec!["allow: mcp__fs__read_text_file(path: /srv/repo/**)".into()],
            policy_sha256: Some("ab".repeat(32)),
        }),
        outcome: Outcome::Pending,
        error: None,
    })
}

/// Its `tool_result` (about 330 bytes).
fn result() -> Event {
    Event::ToolResult(ResultRecord {
        call_id: "5d0c9f5e-7a1b-4c3d-9e8f-0a1b2c3d4e5f".into(),
        outcome: Outcome::Ok,
        duration_ms: 3,
        result_sha256: Some("cd".repeat(32)),
        error: None,
    })
}

fn options(fsync: FsyncMode, key: bool) -> AuditOptions {
    AuditOptions {
        session: "2b1f4c3e-9a8d-4e5f-8a7b-6c5d4e3f2a1b".into(),
        fsync,
        key: key.then(|| b"bench key, thirty-two bytes long".to_vec()),
        redact: vec!["/password".into(), "/token".into()],
        secrets: vec![
            "ghp_000000000000000000000000000000000000".into(),
            "sk-bench-secret".into(),
        ],
        ..AuditOptions::default()
    }
}

fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("AUDIT_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .expect("bench temp dir")
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("audit_append");
    group.throughput(Throughput::Elements(1));
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    let template = event();

    group.bench_function("event_clone_only", |b| {
        b.iter(|| black_box(template.clone()));
    });
    for (name, fsync, key) in [
        ("never", FsyncMode::Never, false),
        ("batch", FsyncMode::Batch, false),
        ("batch_hmac", FsyncMode::Batch, true),
        ("every_record", FsyncMode::EveryRecord, false),
    ] {
        let dir = bench_dir();
        let log = AuditLog::open(&dir.path().join("audit.jsonl"), options(fsync, key))
            .expect("open bench log");
        if fsync == FsyncMode::EveryRecord {
            group.sample_size(10);
        }
        group.bench_function(name, |b| {
            b.iter(|| log.append(template.clone()).expect("append"));
        });
        log.close().expect("close");
    }
    group.finish();
}

/// The latency a tool call sees: `append` timed alone, with a simulated
/// call (100 µs asleep, as a call waits on its server) between appends, so
/// the batch writer is not saturated as in the back-to-back group above.
fn call_latency(c: &mut Criterion) {
    let mut group = c.benchmark_group("audit_call_latency");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    let template = event();
    for (name, fsync) in [
        ("never", FsyncMode::Never),
        ("batch", FsyncMode::Batch),
        ("every_record", FsyncMode::EveryRecord),
    ] {
        let dir = bench_dir();
        let log = AuditLog::open(&dir.path().join("audit.jsonl"), options(fsync, false))
            .expect("open bench log");
        if fsync == FsyncMode::EveryRecord {
            group.sample_size(10);
        }
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let event = template.clone();
                    let start = Instant::now();
                    log.append(event).expect("append");
                    total += start.elapsed();
                }
                total
            });
        });
        log.close().expect("close");
    }
    group.finish();
}

/// What write-ahead costs a call, per fsync mode, as the call sees it
/// (100 µs asleep between calls, as a call waits on its server):
/// `pending` is the `write_ahead` of the pending record alone (on the
/// path before the send); `pending_and_result` adds the `append` of the
/// `tool_result` after the answer, i.e. everything the audit log costs one
/// call. Compare with `audit_call_latency/*`, one `append` per call, as
/// calls were recorded before write-ahead.
fn write_ahead(c: &mut Criterion) {
    let mut group = c.benchmark_group("audit_write_ahead");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    let (pending, done) = (event(), result());
    for (name, fsync) in [
        ("never", FsyncMode::Never),
        ("batch", FsyncMode::Batch),
        ("every_record", FsyncMode::EveryRecord),
    ] {
        let dir = bench_dir();
        let log = AuditLog::open(&dir.path().join("audit.jsonl"), options(fsync, false))
            .expect("open bench log");
        if fsync == FsyncMode::EveryRecord {
            group.sample_size(10);
        }
        group.bench_function(format!("pending/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let event = pending.clone();
                    let start = Instant::now();
                    log.write_ahead(event).expect("write ahead");
                    total += start.elapsed();
                }
                total
            });
        });
        group.bench_function(format!("pending_and_result/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let (p, r) = (pending.clone(), done.clone());
                    let start = Instant::now();
                    log.write_ahead(p).expect("write ahead");
                    total += start.elapsed();
                    std::thread::sleep(Duration::from_micros(100));
                    let start = Instant::now();
                    log.append(r).expect("append");
                    total += start.elapsed();
                }
                total
            });
        });
        // What a call waits for when the session fails closed: the
        // result record too is in the file before the result goes back.
        group.bench_function(format!("pending_and_result_written/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let (p, r) = (pending.clone(), done.clone());
                    let start = Instant::now();
                    log.write_ahead(p).expect("write ahead");
                    total += start.elapsed();
                    std::thread::sleep(Duration::from_micros(100));
                    let start = Instant::now();
                    log.write_ahead(r).expect("write ahead");
                    total += start.elapsed();
                }
                total
            });
        });
        log.close().expect("close");
    }
    group.finish();
}

/// CPU time this thread has used (user + system): unlike wall time, it
/// does not count waiting for a core, so it stays meaningful on a machine
/// shared with other builds.
fn thread_cpu() -> Duration {
    use nix::time::{ClockId, clock_gettime};
    Duration::from(clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("thread CPU clock"))
}

/// [`write_ahead`] and [`call_latency`] in thread CPU time: what one call
/// costs the core it runs on (the `write(2)`, the locks, serialising and
/// hashing), without the time spent waiting for a core. Not for
/// `every_record`, whose cost is waiting for the disk.
fn write_ahead_cpu(c: &mut Criterion) {
    let mut group = c.benchmark_group("audit_write_ahead_cpu");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    let (pending, done) = (event(), result());
    for (name, fsync) in [("never", FsyncMode::Never), ("batch", FsyncMode::Batch)] {
        let dir = bench_dir();
        let log = AuditLog::open(&dir.path().join("audit.jsonl"), options(fsync, false))
            .expect("open bench log");
        group.bench_function(format!("one_append_per_call/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let event = pending.clone();
                    let start = thread_cpu();
                    log.append(event).expect("append");
                    total += thread_cpu() - start;
                }
                total
            });
        });
        group.bench_function(format!("pending/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let event = pending.clone();
                    let start = thread_cpu();
                    log.write_ahead(event).expect("write ahead");
                    total += thread_cpu() - start;
                }
                total
            });
        });
        group.bench_function(format!("pending_and_result/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    std::thread::sleep(Duration::from_micros(100));
                    let (p, r) = (pending.clone(), done.clone());
                    let start = thread_cpu();
                    log.write_ahead(p).expect("write ahead");
                    total += thread_cpu() - start;
                    std::thread::sleep(Duration::from_micros(100));
                    let start = thread_cpu();
                    log.append(r).expect("append");
                    total += thread_cpu() - start;
                }
                total
            });
        });
        log.close().expect("close");
    }
    group.finish();
}

/// The CPU core of a record: serialise, canonicalise, SHA-256.
fn record_cpu(c: &mut Criterion) {
    let template = event();
    c.bench_function("audit_record_cpu/serialize_canonical_sha256", |b| {
        b.iter(|| {
            let v = serde_json::to_value(black_box(&template)).expect("serialise");
            black_box(warden_core::digest::sha256_hex(
                warden_core::digest::canonical_json(&v).as_bytes(),
            ))
        });
    });
}

fn verify_throughput(c: &mut Criterion) {
    const N: u64 = 10_000;
    let dir = bench_dir();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, options(FsyncMode::Never, false)).expect("open");
    for _ in 0..N {
        log.append(event()).expect("append");
    }
    log.close().expect("close");
    let mut group = c.benchmark_group("audit_verify");
    group.throughput(Throughput::Elements(N));
    group.sample_size(10);
    group.bench_function("10k_records", |b| {
        b.iter(|| assert!(verify(&path, None).is_ok()));
    });
    group.finish();
}

criterion_group!(
    benches,
    record_cpu,
    call_latency,
    write_ahead,
    write_ahead_cpu,
    append,
    verify_throughput
);
criterion_main!(benches);
