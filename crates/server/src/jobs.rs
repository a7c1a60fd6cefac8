//! Scan jobs as operators see them: `query-show` and `query-abort`.
//!
//! Invariants:
//! - A job is registered before its first record is sent and stays listed while active; once
//!   finished it is kept for `query-show` until `DONE_JOBS_KEPT` newer jobs have finished
//!   (Aerospike's `query-max-done`).
//! - A job's state moves once, from active to one of the done states.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

/// Finished jobs remembered for `query-show`.
const DONE_JOBS_KEPT: usize = 100;

/// How a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum JobState {
    /// Still sending records.
    Active = 0,
    /// Sent every requested record.
    Complete = 1,
    /// Stopped by `query-abort`.
    UserAborted = 2,
    /// Stopped because sending to its client failed (the client went away).
    AbandonedError = 3,
    /// Stopped because its client stopped reading for longer than the socket timeout.
    AbandonedTimeout = 4,
    /// Stopped at the total timeout its client sent; answered TIMEOUT (9).
    TimedOut = 5,
    /// Stopped by an error of its own: an aggregation whose stream UDF failed.
    AbandonedUnknown = 6,
}

impl JobState {
    fn from_u8(value: u8) -> JobState {
        match value {
            1 => JobState::Complete,
            2 => JobState::UserAborted,
            3 => JobState::AbandonedError,
            4 => JobState::AbandonedTimeout,
            5 => JobState::TimedOut,
            6 => JobState::AbandonedUnknown,
            _ => JobState::Active,
        }
    }

    fn label(self) -> &'static str {
        match self {
            JobState::Active => "active",
            JobState::Complete => "done(ok)",
            JobState::UserAborted => "done(user-aborted)",
            JobState::AbandonedError => "done(abandoned-response-error)",
            JobState::AbandonedTimeout => "done(abandoned-response-timeout)",
            JobState::TimedOut => "done(timeout)",
            JobState::AbandonedUnknown => "done(abandoned-unknown)",
        }
    }
}

/// One scan job's identity and progress.
#[derive(Debug)]
pub struct ScanJob {
    /// The client's task id (TRID field).
    pub task_id: u64,
    /// Namespace scanned.
    pub namespace: String,
    /// Set scanned (empty = whole namespace).
    pub set: String,
    /// Partitions the request named.
    pub partitions_requested: usize,
    /// Throttle, 0 = none.
    pub records_per_second: u32,
    /// Records sent so far (a background job: records written).
    pub records_sent: AtomicU64,
    /// A background job's records whose write failed.
    pub records_failed: AtomicU64,
    /// A background job's records its filter expression left out when written.
    pub records_filtered: AtomicU64,
    /// `query-show`'s `job-type`: `basic`, `aggregation`, `background-ops` or
    /// `background-udf`.
    pub job_type: &'static str,
    /// Partitions walked to their end.
    pub partitions_done: AtomicU64,
    /// Bytes of replies handed to the connection.
    pub bytes_sent: AtomicU64,
    /// Times a thread waited for the throttle.
    pub throttled: AtomicU64,
    /// Scan threads still running.
    pub active_threads: AtomicUsize,
    abort_requested: AtomicBool,
    timed_out: AtomicBool,
    failed: AtomicBool,
    state: AtomicU8,
    started: Instant,
    finished: Mutex<Option<Instant>>,
}

impl ScanJob {
    /// A new active job.
    pub fn new(
        task_id: u64,
        namespace: String,
        set: String,
        partitions_requested: usize,
        records_per_second: u32,
    ) -> ScanJob {
        ScanJob {
            task_id,
            namespace,
            set,
            partitions_requested,
            records_per_second,
            records_sent: AtomicU64::new(0),
            records_failed: AtomicU64::new(0),
            records_filtered: AtomicU64::new(0),
            job_type: "basic",
            partitions_done: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            active_threads: AtomicUsize::new(0),
            abort_requested: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            state: AtomicU8::new(JobState::Active as u8),
            started: Instant::now(),
            finished: Mutex::new(None),
        }
    }

    /// The job, as one of `job_type` (see [`ScanJob::job_type`]).
    #[must_use]
    pub fn with_type(mut self, job_type: &'static str) -> ScanJob {
        self.job_type = job_type;
        self
    }

    /// When the job started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Asks the scan threads to stop; they check between pieces.
    pub fn request_abort(&self) {
        self.abort_requested.store(true, Ordering::Release);
    }

    /// Whether the scan threads should stop.
    pub fn abort_requested(&self) -> bool {
        self.abort_requested.load(Ordering::Acquire)
    }

    /// Stops the scan threads because the client's total timeout passed.
    pub fn time_out(&self) {
        self.timed_out.store(true, Ordering::Release);
        self.request_abort();
    }

    /// Whether the scan stopped at its total timeout.
    pub fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::Acquire)
    }

    /// Stops the scan threads because the job failed (an aggregation's stream UDF did);
    /// returns whether this call was the first to, so that one failure is reported.
    pub fn fail(&self) -> bool {
        let first = !self.failed.swap(true, Ordering::AcqRel);
        self.request_abort();
        first
    }

    /// Whether the job stopped on a failure of its own.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The job's state.
    pub fn state(&self) -> JobState {
        JobState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Ends the job in `state` (only the first call counts); returns whether this call did.
    pub fn finish(&self, state: JobState) -> bool {
        assert_ne!(state, JobState::Active, "a job finishes in a done state");
        let moved = self
            .state
            .compare_exchange(
                JobState::Active as u8,
                state as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if moved {
            *self.finished.lock() = Some(Instant::now());
        }
        moved
    }

    /// The `query-show` line for this job: colon-separated `key=value` pairs.
    pub fn describe(&self, out: &mut String) {
        let finished = *self.finished.lock();
        let run_time_ms = finished
            .unwrap_or_else(Instant::now)
            .duration_since(self.started)
            .as_millis();
        let since_done_ms = finished.map_or(0, |at| at.elapsed().as_millis());
        let done = self.partitions_done.load(Ordering::Relaxed);
        let progress_pct = match self.state() {
            JobState::Complete => 100.0,
            _ if self.partitions_requested == 0 => 0.0,
            _ => done as f64 * 100.0 / self.partitions_requested as f64,
        };
        let _ = write!(
            out,
            "trid={}:job-type={}:ns={}:set={}:n-pids-requested={}:rps={}:\
             active-threads={}:status={}:job-progress={:.2}:run-time={}:time-since-done={}:\
             recs-throttled={}:recs-filtered-meta=0:recs-filtered-bins={}:recs-succeeded={}:\
             recs-failed={}:net-io-bytes={}",
            self.task_id,
            self.job_type,
            self.namespace,
            if self.set.is_empty() {
                "null"
            } else {
                &self.set
            },
            self.partitions_requested,
            self.records_per_second,
            self.active_threads.load(Ordering::Relaxed),
            self.state().label(),
            progress_pct,
            run_time_ms,
            since_done_ms,
            self.throttled.load(Ordering::Relaxed),
            self.records_filtered.load(Ordering::Relaxed),
            self.records_sent.load(Ordering::Relaxed),
            self.records_failed.load(Ordering::Relaxed),
            self.bytes_sent.load(Ordering::Relaxed),
        );
    }
}

/// Every active job and the most recent finished ones.
#[derive(Debug, Default)]
pub struct ScanJobs {
    jobs: Mutex<VecDeque<Arc<ScanJob>>>,
    /// Scans and queries stopped at their total timeout (statistics' `query_timeout`).
    pub timeouts: AtomicU64,
}

impl ScanJobs {
    /// Lists a new job, forgetting the oldest finished ones beyond what is kept.
    pub fn register(&self, job: Arc<ScanJob>) {
        let mut jobs = self.jobs.lock();
        jobs.push_back(job);
        let mut done_count = jobs
            .iter()
            .filter(|job| job.state() != JobState::Active)
            .count();
        while done_count > DONE_JOBS_KEPT {
            let Some(oldest_done) = jobs.iter().position(|j| j.state() != JobState::Active) else {
                break;
            };
            jobs.remove(oldest_done);
            done_count -= 1;
        }
    }

    /// The most recent job with `task_id`.
    pub fn find(&self, task_id: u64) -> Option<Arc<ScanJob>> {
        self.jobs
            .lock()
            .iter()
            .rev()
            .find(|job| job.task_id == task_id)
            .cloned()
    }

    /// Every listed job, oldest first.
    pub fn all(&self) -> Vec<Arc<ScanJob>> {
        self.jobs.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Several scan threads of one aggregation may fail at once; one FAILURE bin is sent, by
    /// the first, and every thread is told to stop.
    #[test]
    fn a_job_fails_once_and_failing_stops_its_threads() {
        let job = ScanJob::new(1, "test".into(), String::new(), 4096, 0).with_type("aggregation");
        assert!(!job.failed());
        assert!(job.fail(), "the first failure reports");
        assert!(!job.fail(), "a later one does not");
        assert!(job.failed() && job.abort_requested());
        assert!(job.finish(JobState::AbandonedUnknown));
        let mut line = String::new();
        job.describe(&mut line);
        assert!(line.contains(":status=done(abandoned-unknown):"), "{line}");
        assert!(line.contains(":job-type=aggregation:"), "{line}");
    }

    #[test]
    fn finishing_happens_once_and_old_done_jobs_are_forgotten() {
        let jobs = ScanJobs::default();
        let active = Arc::new(ScanJob::new(1, "test".into(), String::new(), 4096, 0));
        jobs.register(active.clone());
        for task_id in 2..(DONE_JOBS_KEPT as u64 + 10) {
            let job = Arc::new(ScanJob::new(task_id, "test".into(), "s".into(), 1, 0));
            assert!(job.finish(JobState::Complete));
            assert!(!job.finish(JobState::AbandonedError), "the first end wins");
            jobs.register(job);
        }
        assert!(jobs.find(1).is_some(), "an active job is never forgotten");
        assert!(jobs.find(2).is_none(), "the oldest done job was forgotten");
        assert_eq!(jobs.all().len(), DONE_JOBS_KEPT + 1);
        let mut line = String::new();
        active.describe(&mut line);
        assert!(line.starts_with("trid=1:"), "{line}");
        assert!(line.contains(":status=active:"), "{line}");
        assert!(line.contains(":set=null:"), "{line}");
        assert!(line.contains(":job-type=basic:"), "{line}");
        let background =
            ScanJob::new(7, "test".into(), "s".into(), 1, 0).with_type("background-ops");
        background.records_sent.store(3, Ordering::Relaxed);
        background.records_failed.store(2, Ordering::Relaxed);
        background.records_filtered.store(1, Ordering::Relaxed);
        let mut line = String::new();
        background.describe(&mut line);
        assert!(line.contains(":job-type=background-ops:"), "{line}");
        assert!(
            line.contains(":recs-filtered-bins=1:recs-succeeded=3:recs-failed=2:"),
            "{line}"
        );
    }
}
