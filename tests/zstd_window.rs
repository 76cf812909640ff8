//! Issue 24: zstd's own window was outside the decompression budget. One
//! zstd bomb with a 128 MiB window (what the decoder allows) costs the
//! process its 128 MiB output buffer and as much again in the C library's
//! window: both now come out of the budget, so that a check holds no more
//! than the budget gave it (and all checks together, the budget).

fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_zstd_bomb_holds_no_more_than_the_batch_limit() {
    use klog::storage::record::{BatchBuilder, Codec};
    use std::io::Write;
    // A records section: one zstd frame with windowLog 27 and no content
    // size, of 120 MiB of zeros (a few kB sent).
    let mut section = Vec::new();
    {
        let mut enc = zstd::stream::write::Encoder::new(&mut section, 1).unwrap();
        enc.window_log(27).unwrap();
        enc.long_distance_matching(true).unwrap();
        enc.include_contentsize(false).unwrap();
        let chunk = vec![0u8; 8 << 20];
        for _ in 0..15 {
            enc.write_all(&chunk).unwrap();
        }
        enc.finish().unwrap();
    }
    let mut b = BatchBuilder::new();
    b.push(1, None, &[], b"x");
    let mut batch = b.finish()[..61].to_vec();
    batch[21..23].copy_from_slice(&(Codec::Zstd as i16).to_be_bytes());
    batch.extend_from_slice(&section);
    let section = section;
    let length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    // Resets the peak resident set to the current one (Linux 4.0+).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    drop(section);
    let before = vm_hwm_kib();
    let mut headers = Vec::new();
    let result = klog::kafka::records::check_produce(&batch, 1 << 20, &mut headers);
    let peak = (vm_hwm_kib() - before) * 1024;
    eprintln!(
        "{} bytes sent, check: {result:?}, peak grew {peak}",
        batch.len()
    );
    // The output buffer (at most the batch limit) and twice the window.
    let limit = u64::from(klog::limits::BATCH_BYTES_MAX);
    let budgeted = limit + 2 * (1 << 27);
    assert!(
        peak < budgeted + limit / 4,
        "checking one {}-byte zstd batch raised the peak resident set by {peak} bytes \
         (the budget gives it {budgeted})",
        batch.len()
    );
}
