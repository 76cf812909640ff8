//! Review 24b: `kafka::ends_before` calls a batch cut short by the end of
//! the file "damage" (not a torn write) when its stored CRC32C matches the
//! CRC32C of what is there of it. A producer controls every byte under the
//! CRC32C: a record value holding a run of a CRC32C fixed-point byte keeps
//! the running CRC32C at one value for the whole run, and four bytes after
//! the run bring the batch's CRC32C back to it. A crash that tears that
//! (sound, acknowledged-later) batch anywhere inside the run leaves a tail
//! that recovery refuses as damage: the partition is taken offline by an
//! ordinary torn write.

use std::path::Path;
use std::sync::Arc;

use klog::storage::fs::sim::SimFs;
use klog::storage::fs::Vfs;
use klog::storage::log::{Log, LogConfig, OpenOptions};
use klog::storage::record::{could_be_cut_short, BatchBuilder, Format};

const POLY: u32 = 0x82F6_3B78;

fn table() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (i, e) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
        }
        *e = c;
    }
    t
}

fn update(t: &[u32; 256], s: u32, b: u8) -> u32 {
    t[((s ^ u32::from(b)) & 0xff) as usize] ^ (s >> 8)
}

fn inv_update(t: &[u32; 256], s: u32, b: u8) -> u32 {
    let idx = (0..256).find(|&i| t[i] >> 24 == s >> 24).unwrap();
    ((s ^ t[idx]) << 8) | ((idx as u32 ^ u32::from(b)) & 0xff)
}

/// Four bytes that take the running state `from` to `to`.
fn force(t: &[u32; 256], from: u32, to: u32) -> [u8; 4] {
    let mut v = to;
    for _ in 0..4 {
        v = inv_update(t, v, 0);
    }
    let x = (v ^ from).to_le_bytes();
    let mut s = from;
    for b in x {
        s = update(t, s, b);
    }
    assert_eq!(s, to, "forced");
    x
}

/// The running CRC32C state of `batch`'s bytes from its attributes to `end`.
fn state(batch: &[u8], end: usize) -> u32 {
    !crc32c::crc32c(&batch[21..end])
}

/// A sound producer batch whose running CRC32C equals its stored CRC32C
/// at every byte of a run of `run` bytes; the batch and where the run is.
fn crafted(run: usize) -> (Vec<u8>, std::ops::Range<usize>) {
    let t = table();
    // A fixed point: update(s, b) == s.
    let i = 1usize;
    let mut s = t[i];
    for _ in 0..4 {
        s = t[i] ^ (s >> 8);
    }
    let b = ((s ^ i as u32) & 0xff) as u8;
    assert_eq!(update(&t, s, b), s, "a fixed point");
    let mut value = b"MARKMARK".to_vec();
    value.extend_from_slice(&[0; 4]);
    value.extend(std::iter::repeat_n(b, run));
    value.extend_from_slice(&[0; 4]);
    let mut builder = BatchBuilder::new();
    builder.push(7, None, &[], &value);
    let mut batch = builder.finish().to_vec();
    let v0 = batch.windows(8).position(|w| w == b"MARKMARK").unwrap();
    let f1 = v0 + 8;
    let r = f1 + 4;
    let f2 = r + run;
    assert_eq!(
        f2 + 4 + 1,
        batch.len(),
        "the value ends the batch but for its header count"
    );
    let x1 = force(&t, state(&batch, f1), s);
    batch[f1..f1 + 4].copy_from_slice(&x1);
    let last = batch[batch.len() - 1];
    let x2 = force(&t, s, inv_update(&t, s, last));
    batch[f2..f2 + 4].copy_from_slice(&x2);
    let crc = crc32c::crc32c(&batch[21..]);
    assert_eq!(crc, !s);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    for end in r..=f2 {
        assert_eq!(state(&batch, end), s);
    }
    klog::storage::record::Batch::decode(Format::Kafka, &batch, u32::MAX)
        .expect("the crafted batch is sound")
        .validate(1 << 20)
        .expect("its records are sound");
    (batch, r..f2)
}

#[test]
fn a_torn_write_inside_a_crc_fixed_point_run_can_be_a_short_write() {
    let (batch, run) = crafted(4096);
    let cut = run.start + 2000;
    assert!(
        could_be_cut_short(Format::Kafka, &batch[..cut]),
        "the first {cut} of {} bytes of a sound batch (what a writer cut short leaves) \
         judged a damaged length",
        batch.len()
    );
}

#[test]
fn a_crash_tearing_a_crafted_producer_batch_leaves_the_partition_openable() {
    let sim = SimFs::new();
    let vfs: Arc<dyn Vfs> = Arc::new(sim.clone());
    let dir = Path::new("/data/t-0");
    sim.create_dir_all_durable(dir);
    let config = LogConfig {
        segment_bytes: 1 << 20,
        retention_ms: None,
        ..LogConfig::default()
    };
    let open = OpenOptions {
        writable: true,
        lock: false,
    };
    let mut log = Log::open(Arc::clone(&vfs), dir, config.clone(), open).unwrap();
    let mut first = BatchBuilder::new();
    first.push(7, None, &[], b"durable");
    log.append(&mut first.finish().to_vec(), 0).unwrap();
    log.flush().unwrap();
    let (mut batch, run) = crafted(8192);
    let len = batch.len();
    log.append(&mut batch, 0).unwrap();
    log.write_pending().unwrap();
    // Power cut: the log file keeps the first bytes of the second batch.
    let cut = run.start + 4000;
    sim.crash(&mut |n| if n == len { cut } else { n });
    match Log::open(Arc::clone(&vfs), dir, config, open) {
        Ok(log) => assert_eq!(
            log.next_offset(),
            1,
            "the durable record kept, the torn one cut"
        ),
        Err(e) => panic!("a torn write of an unflushed batch takes the partition offline: {e}"),
    }
}
