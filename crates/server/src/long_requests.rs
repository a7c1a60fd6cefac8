//! The long-request pool: threads that run, at a lower CPU priority than the runtime's workers,
//! the requests that can take long (large batches, commands with many ops, whole-keyspace Redis
//! commands), so that they never hold the threads serving everyone else.
//!
//! A connection hands the pool a job that owns what it needs (its session, the request, its
//! output buffer), awaits the job's result, and goes on; meanwhile the runtime worker serves
//! other connections. The pool's threads run at nice [`LONG_REQUEST_NICE`] like the scan
//! threads, so when every core is busy, a new ordinary request preempts long work at once and
//! long work gets the CPU that is left.
//!
//! Invariants:
//! - At most `queue_jobs_max` jobs wait or run: a connection takes a permit (waiting for one,
//!   without holding a thread) before it submits, so a flood of long requests queues at the
//!   connections, not in memory the pool owns.
//! - Every submitted job runs exactly once and answers its connection; a connection that left
//!   meanwhile drops the answer. A job that panics answers with [`JobPanicked`] and the thread
//!   goes on with the next job.
//! - Writes a job makes wait for their durability on the connection: the job hands back what
//!   it must wait for as a value (`engine::Acks`), which the connection awaits.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use tokio::sync::{Semaphore, oneshot};
use tracing::debug;

/// Nice value of long-request and scan threads (the runtime's workers run at 0).
pub const LONG_REQUEST_NICE: i32 = 10;
/// Jobs that may wait or run per pool thread before connections wait to submit.
const QUEUED_JOBS_PER_THREAD: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// The pool.
#[derive(Debug)]
pub struct LongRequests {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    permits: Arc<Semaphore>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Jobs submitted (statistics' `long_request_jobs`).
    pub jobs: AtomicU64,
}

/// The job panicked: a bug, reported as a failed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobPanicked;

impl LongRequests {
    /// Starts `threads` threads (at least one).
    ///
    /// # Errors
    /// When the OS cannot start a thread.
    pub fn start(threads: usize) -> std::io::Result<LongRequests> {
        let threads = threads.max(1);
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let mut handles = Vec::with_capacity(threads);
        for thread_index in 0..threads {
            let receiver = Arc::clone(&receiver);
            let handle = std::thread::Builder::new()
                .name(format!("long-{thread_index}"))
                .spawn(move || {
                    lower_this_thread_priority();
                    run_jobs(&receiver);
                })?;
            handles.push(handle);
        }
        Ok(LongRequests {
            sender: Mutex::new(Some(sender)),
            permits: Arc::new(Semaphore::new(threads * QUEUED_JOBS_PER_THREAD)),
            threads: Mutex::new(handles),
            jobs: AtomicU64::new(0),
        })
    }

    /// Runs `job` on a pool thread and returns its result, waiting first for room in the queue.
    ///
    /// # Errors
    /// [`JobPanicked`] when the job panicked, or the pool was stopped.
    pub async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, JobPanicked> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| JobPanicked)?;
        let (answer, answered) = oneshot::channel();
        let boxed: Job = Box::new(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(job));
            drop(permit);
            // The connection may have left; its answer is then dropped.
            let _ = answer.send(result.map_err(|_| JobPanicked));
        });
        let sent = match &*self.sender.lock() {
            Some(sender) => sender.send(boxed).is_ok(),
            None => false,
        };
        if !sent {
            return Err(JobPanicked);
        }
        self.jobs.fetch_add(1, Ordering::Relaxed);
        answered.await.map_err(|_| JobPanicked)?
    }

    /// Stops the pool once the jobs already submitted have run.
    pub fn stop(&self) {
        drop(self.sender.lock().take());
        for thread in self.threads.lock().drain(..) {
            let _ = thread.join();
        }
    }
}

fn run_jobs(receiver: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // The lock is held only while taking a job, not while running it.
        let job = receiver.lock().recv();
        match job {
            Ok(job) => job(),
            Err(mpsc::RecvError) => return,
        }
    }
}

/// Gives the calling thread a lower CPU priority (a higher nice value) than the threads serving
/// ordinary requests, so that long work saturating every core still lets them run as soon as
/// they arrive; the long work gets whatever CPU is left.
pub fn lower_this_thread_priority() {
    // On Linux, PRIO_PROCESS with a thread id applies to that thread only.
    let thread_id = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread_id), LONG_REQUEST_NICE) {
        debug!(%error, "cannot lower a thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn jobs_run_on_pool_threads_at_a_lower_priority_and_answer() {
        let pool = LongRequests::start(2).unwrap();
        let (name, nice) = runtime()
            .block_on(pool.run(|| {
                let name = std::thread::current().name().map(str::to_owned);
                (name, rustix::process::getpriority_process(None))
            }))
            .unwrap();
        assert!(name.unwrap().starts_with("long-"));
        assert_eq!(nice.ok(), Some(LONG_REQUEST_NICE));
        pool.stop();
    }

    #[test]
    fn a_panicking_job_fails_alone_and_the_pool_goes_on() {
        let pool = LongRequests::start(1).unwrap();
        let runtime = runtime();
        let failed = runtime.block_on(pool.run(|| -> u32 { panic!("a bug") }));
        assert_eq!(failed, Err(JobPanicked));
        assert_eq!(runtime.block_on(pool.run(|| 7)), Ok(7));
        pool.stop();
        assert_eq!(runtime.block_on(pool.run(|| 7)), Err(JobPanicked));
    }

    #[test]
    fn more_jobs_than_the_queue_holds_all_run() {
        let pool = Arc::new(LongRequests::start(1).unwrap());
        let runtime = runtime();
        let total = runtime.block_on(async {
            let jobs = (0..3 * QUEUED_JOBS_PER_THREAD as u64).map(|n| {
                let pool = Arc::clone(&pool);
                async move { pool.run(move || n).await.unwrap() }
            });
            let mut total = 0;
            for answer in futures_join(jobs).await {
                total += answer;
            }
            total
        });
        let n = 3 * QUEUED_JOBS_PER_THREAD as u64;
        assert_eq!(total, n * (n - 1) / 2);
        pool.stop();
    }

    /// Awaits every future concurrently, in one task.
    async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handles: Vec<_> = futures.map(tokio::spawn).collect();
        let mut outputs = Vec::new();
        for handle in handles {
            outputs.push(handle.await.unwrap());
        }
        outputs
    }
}
