//! [`TestDevice`]: an in-memory [`Device`] modelling a disk with a volatile write cache, for
//! crash and fault-injection tests.
//!
//! It keeps three things: the durable image (what survives power loss), the writes completed
//! since the last successful sync (pending, in order), and the visible image (the durable image
//! with the pending writes applied), which is what `read_at` returns.
//!
//! Invariants:
//! - `visible == durable` with every pending write applied in order; `sync` empties the pending
//!   list by applying it to `durable`, so then `visible == durable`.
//! - Disks write 512-byte sectors atomically but not a multi-sector write: a crash or a failed
//!   write keeps each sector of a write whole or not at all, never part of a sector. Sectors are
//!   aligned to absolute device offsets, so a write inside one sector is never torn.
//! - Every random choice (crash outcomes, torn writes, flipped bits) comes from one `SmallRng`
//!   seeded at construction, so a failing test replays from its seed given the same calls.
//! - Ranges beyond `size_bytes` are rejected with `InvalidInput`, exactly as `FileDevice` does.

use std::fmt;
use std::io;
use std::ops::Range;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::Device;
use crate::file_device::check_range;

/// Bytes a disk writes atomically; torn writes and media corruption happen per sector.
pub const SECTOR_BYTES: u64 = 512;

/// Which calls an armed failure (see [`TestDevice::fail_after`]) applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// `read_at` calls.
    Read,
    /// `write_at` calls.
    Write,
    /// `sync` calls.
    Sync,
    /// Every call: reads, writes and syncs.
    Any,
}

impl FaultOp {
    fn covers(self, op: FaultOp) -> bool {
        self == FaultOp::Any || self == op
    }
}

/// Counts of calls that returned `Ok` on a [`TestDevice`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestDeviceStats {
    /// Successful `read_at` calls.
    pub reads: u64,
    /// Successful `write_at` calls.
    pub writes: u64,
    /// Successful `sync` calls.
    pub syncs: u64,
    /// Bytes passed to successful `write_at` calls.
    pub bytes_written: u64,
    /// Successful `prepare` calls.
    pub prepares: u64,
}

/// An in-memory [`Device`] that loses, tears and corrupts writes on demand (see the module
/// documentation for the model).
pub struct TestDevice {
    name: String,
    size_bytes: u64,
    seed: u64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct PendingWrite {
    offset: usize,
    data: Vec<u8>,
}

/// A call kind that fails once `successes_left` more calls of it have succeeded.
#[derive(Debug)]
struct ArmedFailure {
    what: FaultOp,
    successes_left: u64,
}

struct State {
    rng: SmallRng,
    durable: Vec<u8>,
    visible: Vec<u8>,
    pending: Vec<PendingWrite>,
    flip_probability: f64,
    failures: Vec<ArmedFailure>,
    stats: TestDeviceStats,
}

impl TestDevice {
    /// A zero-filled device of `size_bytes` whose random choices all come from `seed`.
    ///
    /// # Panics
    /// If `size_bytes` does not fit in memory's address space (`usize`).
    pub fn new(name: &str, size_bytes: u64, seed: u64) -> TestDevice {
        let len = usize::try_from(size_bytes).expect("TestDevice size_bytes must fit in usize");
        TestDevice::from_image(name, vec![0; len], seed)
    }

    fn from_image(name: &str, image: Vec<u8>, seed: u64) -> TestDevice {
        TestDevice {
            name: name.to_owned(),
            size_bytes: image.len() as u64,
            seed,
            state: Mutex::new(State {
                rng: SmallRng::seed_from_u64(seed),
                visible: image.clone(),
                durable: image,
                pending: Vec::new(),
                flip_probability: 0.0,
                failures: Vec::new(),
                stats: TestDeviceStats::default(),
            }),
        }
    }

    /// The seed it was created with; a test prints it so a failure can be replayed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Simulates power loss: returns a new device (same name and size, fresh faults and stats,
    /// a seed drawn from this device's rng) holding the durable image plus, for each pending
    /// write in order, independently: all of it, none of it, or some of its sectors (a prefix
    /// or an arbitrary subset).
    pub fn crash(&self) -> TestDevice {
        let mut state = self.state.lock();
        let State {
            rng,
            durable,
            pending,
            ..
        } = &mut *state;
        let mut image = durable.clone();
        for write in pending.iter() {
            for piece in surviving_pieces(rng, write) {
                apply_piece(&mut image, write, piece);
            }
        }
        let seed = rng.random();
        TestDevice::from_image(&self.name, image, seed)
    }

    /// Simulates power loss where the cache loses everything unsynced: only the durable image
    /// survives. The new device's seed is drawn from this device's rng.
    pub fn crash_losing_all_unsynced(&self) -> TestDevice {
        let mut state = self.state.lock();
        let seed = state.rng.random();
        TestDevice::from_image(&self.name, state.durable.clone(), seed)
    }

    /// Simulates a process kill (the OS keeps its cache): every completed write survives.
    /// The new device's seed is drawn from this device's rng.
    pub fn crash_keeping_all(&self) -> TestDevice {
        let mut state = self.state.lock();
        let seed = state.rng.random();
        TestDevice::from_image(&self.name, state.visible.clone(), seed)
    }

    /// From now on each `read_at` flips, with this probability, one random bit of the buffer
    /// it returns (the stored image is untouched). `0.0` turns it off.
    ///
    /// # Panics
    /// If `probability` is not within `0.0..=1.0`.
    pub fn flip_bits_on_read(&self, probability: f64) {
        assert!(
            (0.0..=1.0).contains(&probability),
            "flip probability {probability} is not within 0.0..=1.0"
        );
        self.state.lock().flip_probability = probability;
    }

    /// Models media corruption: flips one random bit in each sector overlapping
    /// `offset..offset + len` (only within that range), in both the durable and the visible
    /// image. A pending write covering the bit may still overwrite it at a crash.
    ///
    /// # Panics
    /// If the range lies beyond `size_bytes`.
    pub fn corrupt(&self, offset: u64, len: u64) {
        let end = offset.checked_add(len);
        assert!(
            end.is_some_and(|end| end <= self.size_bytes),
            "corrupt range {offset}+{len} lies beyond {} bytes",
            self.size_bytes
        );
        // Both fit in usize: they are at most size_bytes, which new() checked.
        let (start, len) = (offset as usize, len as usize);
        let mut state = self.state.lock();
        for piece in sector_pieces(start, len) {
            let byte = start + state.rng.random_range(piece);
            let mask = 1u8 << state.rng.random_range(0..8);
            state.durable[byte] ^= mask;
            state.visible[byte] ^= mask;
        }
    }

    /// After `calls` more successful calls of kind `what`, every later call of that kind fails
    /// with an `Other` error "injected fault", until [`clear_faults`](Self::clear_faults).
    ///
    /// A failing `write_at` first applies a random prefix of its sectors (possibly none, possibly
    /// all); a failing `sync` makes nothing durable. Several failures may be armed at once.
    pub fn fail_after(&self, calls: u64, what: FaultOp) {
        self.state.lock().failures.push(ArmedFailure {
            what,
            successes_left: calls,
        });
    }

    /// Disarms every armed fault: call failures and bit flips on read.
    pub fn clear_faults(&self) {
        let mut state = self.state.lock();
        state.failures.clear();
        state.flip_probability = 0.0;
    }

    /// A copy of what would survive a power loss that drops every unsynced write.
    pub fn durable_image(&self) -> Vec<u8> {
        self.state.lock().durable.clone()
    }

    /// Writes completed since the last successful sync (including a failed write's prefix).
    pub fn pending_write_count(&self) -> usize {
        self.state.lock().pending.len()
    }

    /// Counts of successful calls so far.
    pub fn stats(&self) -> TestDeviceStats {
        self.state.lock().stats
    }

    fn range(&self, offset: u64, len: usize) -> io::Result<Range<usize>> {
        check_range(&self.name, self.size_bytes, offset, len)?;
        // In range, so at most size_bytes, which new() checked fits in usize.
        let start = offset as usize;
        Ok(start..start + len)
    }
}

impl State {
    /// Counts a call of kind `op` against the armed failures; says whether it must fail.
    fn call_fails(&mut self, op: FaultOp) -> bool {
        let fails = self
            .failures
            .iter()
            .any(|failure| failure.what.covers(op) && failure.successes_left == 0);
        if !fails {
            // Only successful calls count down, so each armed failure trips exactly on time.
            for failure in self.failures.iter_mut().filter(|f| f.what.covers(op)) {
                failure.successes_left -= 1;
            }
        }
        fails
    }

    fn apply_pending(&mut self, write: PendingWrite) {
        let end = write.offset + write.data.len();
        self.visible[write.offset..end].copy_from_slice(&write.data);
        self.pending.push(write);
    }

    fn flip_one_bit(&mut self, buf: &mut [u8]) {
        if buf.is_empty() || self.flip_probability == 0.0 {
            return;
        }
        if self.rng.random_bool(self.flip_probability) {
            let byte = self.rng.random_range(0..buf.len());
            buf[byte] ^= 1u8 << self.rng.random_range(0..8);
        }
    }
}

impl Device for TestDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let range = self.range(offset, buf.len())?;
        let mut state = self.state.lock();
        if state.call_fails(FaultOp::Read) {
            return Err(injected_fault());
        }
        buf.copy_from_slice(&state.visible[range]);
        state.flip_one_bit(buf);
        state.stats.reads += 1;
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let range = self.range(offset, data.len())?;
        let mut state = self.state.lock();
        if state.call_fails(FaultOp::Write) {
            let pieces = sector_pieces(range.start, data.len());
            let kept = state.rng.random_range(0..=pieces.len());
            let kept_bytes = pieces[..kept].last().map_or(0, |piece| piece.end);
            if kept_bytes > 0 {
                state.apply_pending(PendingWrite {
                    offset: range.start,
                    data: data[..kept_bytes].to_vec(),
                });
            }
            return Err(injected_fault());
        }
        if !data.is_empty() {
            state.apply_pending(PendingWrite {
                offset: range.start,
                data: data.to_vec(),
            });
        }
        state.stats.writes += 1;
        state.stats.bytes_written += data.len() as u64;
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.call_fails(FaultOp::Sync) {
            return Err(injected_fault());
        }
        let pending = std::mem::take(&mut state.pending);
        for write in &pending {
            apply_piece(&mut state.durable, write, 0..write.data.len());
        }
        debug_assert!(
            state.durable == state.visible,
            "synced image differs from visible"
        );
        state.stats.syncs += 1;
        Ok(())
    }

    /// Counts the call; a zero-filled image has nothing to ready.
    fn prepare(&self, offset: u64, len_bytes: usize) -> io::Result<()> {
        check_range(&self.name, self.size_bytes, offset, len_bytes)?;
        self.state.lock().stats.prepares += 1;
        Ok(())
    }
}

impl fmt::Debug for TestDevice {
    // The images can be large; name, size and seed identify the device.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDevice")
            .field("name", &self.name)
            .field("size_bytes", &self.size_bytes)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

fn injected_fault() -> io::Error {
    io::Error::other("injected fault")
}

/// Splits `len` bytes at device offset `start` at absolute sector boundaries; the pieces are
/// ranges relative to `start`, in order, covering `0..len`.
fn sector_pieces(start: usize, len: usize) -> Vec<Range<usize>> {
    let sector = SECTOR_BYTES as usize;
    let mut pieces = Vec::with_capacity(len / sector + 2);
    let mut piece_start = 0;
    while piece_start < len {
        let to_boundary = sector - (start + piece_start) % sector;
        let piece_end = len.min(piece_start + to_boundary);
        pieces.push(piece_start..piece_end);
        piece_start = piece_end;
    }
    pieces
}

/// Chooses which pieces of a pending write reach the disk at a crash: all, none, or torn
/// (a strict prefix of its sectors, or an arbitrary subset of them).
fn surviving_pieces(rng: &mut SmallRng, write: &PendingWrite) -> Vec<Range<usize>> {
    let mut pieces = sector_pieces(write.offset, write.data.len());
    match rng.random_range(0..3) {
        0 => pieces,
        1 => Vec::new(),
        _ if pieces.len() < 2 => {
            // A single sector is atomic: torn means whole or lost.
            if rng.random_bool(0.5) {
                pieces
            } else {
                Vec::new()
            }
        }
        _ if rng.random_bool(0.5) => {
            let kept = rng.random_range(1..pieces.len());
            pieces.truncate(kept);
            pieces
        }
        _ => pieces
            .into_iter()
            .filter(|_| rng.random_bool(0.5))
            .collect(),
    }
}

fn apply_piece(image: &mut [u8], write: &PendingWrite, piece: Range<usize>) {
    let target = write.offset + piece.start..write.offset + piece.end;
    image[target].copy_from_slice(&write.data[piece]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const SIZE: u64 = 8 * SECTOR_BYTES;

    fn read(device: &TestDevice, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        device.read_at(offset, &mut buf).expect("read");
        buf
    }

    /// A base seed from OSPREY_SEED, or from the clock; printed so a failure replays.
    fn base_seed() -> u64 {
        let seed = std::env::var("OSPREY_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64)
            });
        println!("OSPREY_SEED={seed}");
        seed
    }

    #[test]
    fn reads_see_unsynced_writes() {
        let device = TestDevice::new("t", SIZE, 1);
        device.write_at(100, b"abc").expect("write");
        assert_eq!(read(&device, 100, 3), b"abc");
        assert_eq!(device.pending_write_count(), 1);
        assert_eq!(device.durable_image()[100..103], [0, 0, 0]);
        let stats = device.stats();
        assert_eq!((stats.reads, stats.writes, stats.bytes_written), (1, 1, 3));
    }

    #[test]
    fn usable_as_shared_dyn_device() {
        let device: Arc<dyn Device> = Arc::new(TestDevice::new("shared", SIZE, 2));
        let writer = Arc::clone(&device);
        std::thread::spawn(move || writer.write_at(0, b"xy").expect("write"))
            .join()
            .expect("thread");
        let mut buf = [0u8; 2];
        device.read_at(0, &mut buf).expect("read");
        assert_eq!(&buf, b"xy");
    }

    #[test]
    fn out_of_range_calls_fail() {
        let device = TestDevice::new("t", SIZE, 3);
        let mut buf = [0u8; 4];
        for offset in [SIZE - 3, SIZE + 1, u64::MAX - 1] {
            let error = device.read_at(offset, &mut buf).expect_err("read");
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            let error = device.write_at(offset, &buf).expect_err("write");
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        }
        assert_eq!(device.stats(), TestDeviceStats::default());
    }

    #[test]
    fn crash_losing_all_unsynced_keeps_only_synced_writes() {
        let device = TestDevice::new("t", SIZE, 4);
        device.write_at(0, b"synced").expect("write");
        device.sync().expect("sync");
        device.write_at(600, b"unsynced").expect("write");
        let crashed = device.crash_losing_all_unsynced();
        assert_eq!(crashed.name(), "t");
        assert_eq!(crashed.size_bytes(), SIZE);
        assert_eq!(read(&crashed, 0, 6), b"synced");
        assert_eq!(read(&crashed, 600, 8), [0; 8]);
        assert_eq!(crashed.pending_write_count(), 0);
        assert_eq!(crashed.durable_image(), device.durable_image());
    }

    #[test]
    fn crash_keeping_all_keeps_unsynced_writes() {
        let device = TestDevice::new("t", SIZE, 5);
        device.write_at(0, b"synced").expect("write");
        device.sync().expect("sync");
        device.write_at(600, b"unsynced").expect("write");
        let crashed = device.crash_keeping_all();
        assert_eq!(read(&crashed, 0, 6), b"synced");
        assert_eq!(read(&crashed, 600, 8), b"unsynced");
        assert_eq!(read(&crashed, 600, 8), &crashed.durable_image()[600..608]);
    }

    /// Sectors 1..5 written with 0xAB; returns how many of them survived a crash, after
    /// checking each sector is whole old or whole new and nothing else changed.
    fn crash_one_multi_sector_write(seed: u64) -> usize {
        let device = TestDevice::new("t", SIZE, seed);
        let sector = SECTOR_BYTES as usize;
        device
            .write_at(SECTOR_BYTES, &vec![0xAB; 4 * sector])
            .expect("write");
        let image = device.crash().durable_image();
        let mut survived = 0;
        for (index, chunk) in image.chunks(sector).enumerate() {
            let in_write = (1..5).contains(&index);
            if in_write && chunk.iter().all(|&b| b == 0xAB) {
                survived += 1;
            } else {
                assert!(
                    chunk.iter().all(|&b| b == 0),
                    "seed {seed}: sector {index} is neither whole old nor whole new"
                );
            }
        }
        survived
    }

    #[test]
    fn crash_produces_whole_lost_and_torn_writes() {
        let (mut whole, mut lost, mut torn) = (0, 0, 0);
        for seed in 0..300 {
            match crash_one_multi_sector_write(seed) {
                4 => whole += 1,
                0 => lost += 1,
                _ => torn += 1,
            }
        }
        assert!(
            whole > 0 && lost > 0 && torn > 0,
            "whole {whole} lost {lost} torn {torn}"
        );
    }

    #[test]
    fn write_inside_one_sector_is_never_torn() {
        for seed in 0..100 {
            let device = TestDevice::new("t", SIZE, seed);
            device.write_at(700, &[0xCD; 300]).expect("write");
            let image = device.crash().durable_image();
            let kept = image[700..1000].iter().filter(|&&b| b == 0xCD).count();
            assert!(kept == 0 || kept == 300, "seed {seed}: kept {kept} of 300");
        }
    }

    #[test]
    fn crash_keeps_only_synced_or_written_bytes() {
        let seed = base_seed();
        let mut rng = SmallRng::seed_from_u64(seed);
        let device = TestDevice::new("t", SIZE, seed);
        let mut old = vec![0u8; SIZE as usize];
        let mut writes = Vec::new();
        for round in 0..20u8 {
            let offset = rng.random_range(0..SIZE);
            let len = rng.random_range(1..=SIZE - offset) as usize;
            device
                .write_at(offset, &vec![round + 1; len])
                .expect("write");
            writes.push((offset as usize, len, round + 1));
            if rng.random_bool(0.2) {
                device.sync().expect("sync");
                old = device.durable_image();
                writes.clear();
            }
        }
        let image = device.crash().durable_image();
        // Every byte holds its synced value or the value of a pending write covering it.
        for (byte, &value) in image.iter().enumerate() {
            let candidates: Vec<u8> = writes
                .iter()
                .filter(|(offset, len, _)| (*offset..offset + len).contains(&byte))
                .map(|&(_, _, v)| v)
                .collect();
            assert!(
                value == old[byte] || candidates.contains(&value),
                "seed {seed}: byte {byte} = {value}"
            );
        }
    }

    #[test]
    fn same_seed_gives_same_crash() {
        let seed = base_seed();
        let run = || {
            let device = TestDevice::new("t", SIZE, seed);
            for (i, offset) in [0u64, 300, 1000, 2048, 3000].into_iter().enumerate() {
                let len = 1000.min(SIZE - offset) as usize;
                device.write_at(offset, &vec![i as u8 + 1; len]).expect("w");
            }
            let crashed = device.crash();
            (crashed.durable_image(), crashed.seed())
        };
        assert_eq!(run(), run(), "seed {seed}");
    }

    #[test]
    fn fail_after_fails_exactly_after_n_calls_until_cleared() {
        let device = TestDevice::new("t", SIZE, 6);
        device.fail_after(3, FaultOp::Write);
        for i in 0..3 {
            device
                .write_at(i * 10, b"ok")
                .expect("the first three writes succeed");
        }
        for _ in 0..2 {
            let error = device.write_at(512, b"x").expect_err("later writes fail");
            assert_eq!(error.kind(), io::ErrorKind::Other);
            assert_eq!(error.to_string(), "injected fault");
        }
        read(&device, 0, 2);
        device.sync().expect("reads and syncs are not affected");
        device.clear_faults();
        device.write_at(0, b"again").expect("cleared");
        assert_eq!(device.stats().writes, 4);
    }

    #[test]
    fn fail_after_any_counts_every_kind() {
        let device = TestDevice::new("t", SIZE, 7);
        device.fail_after(2, FaultOp::Any);
        device.write_at(0, b"a").expect("first call");
        read(&device, 0, 1);
        device.sync().expect_err("third call fails");
        device.read_at(0, &mut [0]).expect_err("reads fail too");
        device.clear_faults();
        device.sync().expect("cleared");
    }

    #[test]
    fn failed_write_applies_only_a_sector_prefix() {
        let (mut none, mut partial) = (0, 0);
        for seed in 0..100 {
            let device = TestDevice::new("t", SIZE, seed);
            device.fail_after(0, FaultOp::Write);
            device
                .write_at(256, &[0xEE; 1024])
                .expect_err("write fails");
            let visible = read(&device, 0, SIZE as usize);
            let kept = visible.iter().filter(|&&b| b == 0xEE).count();
            // Pieces at 256: 256 bytes, 512 bytes, 256 bytes; a prefix of them.
            assert!([0, 256, 768, 1024].contains(&kept), "seed {seed}: {kept}");
            assert!(visible[256..256 + kept].iter().all(|&b| b == 0xEE));
            assert_eq!(device.pending_write_count(), usize::from(kept > 0));
            assert_eq!(
                device.crash_losing_all_unsynced().durable_image(),
                [0; SIZE as usize]
            );
            if kept == 0 {
                none += 1;
            } else {
                partial += 1;
            }
        }
        assert!(none > 0 && partial > 0, "none {none} partial {partial}");
    }

    #[test]
    fn failed_sync_makes_nothing_durable() {
        let device = TestDevice::new("t", SIZE, 8);
        device.write_at(0, b"data").expect("write");
        device.fail_after(0, FaultOp::Sync);
        device.sync().expect_err("sync fails");
        assert_eq!(device.pending_write_count(), 1);
        assert_eq!(read(&device.crash_losing_all_unsynced(), 0, 4), [0; 4]);
        device.clear_faults();
        device.sync().expect("sync");
        assert_eq!(device.pending_write_count(), 0);
        assert_eq!(&device.durable_image()[..4], b"data");
    }

    #[test]
    fn flip_bits_on_read_flips_one_bit_and_not_the_image() {
        let device = TestDevice::new("t", SIZE, 9);
        let data: Vec<u8> = (0..1000).map(|i| (i * 7) as u8).collect();
        device.write_at(10, &data).expect("write");
        device.flip_bits_on_read(1.0);
        for _ in 0..20 {
            let flipped = read(&device, 10, data.len());
            let differing_bits: u32 = flipped
                .iter()
                .zip(&data)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(differing_bits, 1);
        }
        device.flip_bits_on_read(0.0);
        assert_eq!(read(&device, 10, data.len()), data);
        assert_eq!(device.crash_keeping_all().durable_image()[10..1010], data);
    }

    #[test]
    fn corrupt_flips_one_bit_per_sector_of_the_range() {
        let device = TestDevice::new("t", SIZE, 10);
        device.write_at(0, &[0x55; SIZE as usize]).expect("write");
        device.sync().expect("sync");
        device.corrupt(100, 1000);
        let durable = device.durable_image();
        let differing_bits =
            |image: &[u8]| -> u32 { image.iter().map(|b| (b ^ 0x55).count_ones()).sum() };
        // 100..1100 overlaps sectors 0, 1 and 2.
        assert_eq!(differing_bits(&durable), 3);
        assert_eq!(differing_bits(&durable[100..1100]), 3);
        assert_eq!(read(&device, 0, SIZE as usize), durable);
    }
}
