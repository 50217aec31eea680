//! The provider's own threads (discovery worker, resolvers, hosts-file
//! watcher, metrics writer): supervised, so that a panic in one is logged
//! and the thread starts again instead of leaving requests unanswered, and
//! stoppable, so that none outlives the provider.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The pause before the first restart; it doubles while restarts follow
/// each other, up to [`MAX_BACKOFF`], so a thread that fails again at once
/// costs little and still comes back when the cause is gone.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A run this long counts as healthy: the next panic restarts quickly again.
const HEALTHY: Duration = Duration::from_secs(60);

/// What a panic said, for the log.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// A request to stop, shared by the owner and its threads. A sleeping
/// thread is woken by it, not by a clock: hundreds of daemons on one
/// machine (the fleet bench) each woke their idle threads 20 times a
/// second when they looked at a flag instead.
#[derive(Clone, Default)]
pub struct Stop(Arc<StopInner>);

#[derive(Default)]
struct StopInner {
    flag: AtomicBool,
    sleepers: Mutex<()>,
    woken: Condvar,
}

impl Stop {
    pub fn request(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        // Under the sleepers' lock: one that looked at the flag before the
        // store is already waiting, and gets the notification.
        let _held = self.0.sleepers.lock().unwrap_or_else(|p| p.into_inner());
        self.0.woken.notify_all();
    }

    pub fn requested(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Sleeps `d`, or less if a stop is requested meanwhile; true if it was.
    pub fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        let mut held = self.0.sleepers.lock().unwrap_or_else(|p| p.into_inner());
        while !self.requested() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            held = match self.0.woken.wait_timeout(held, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }
}

/// Runs `body` until it returns, which it does once `stop` is requested.
/// A panic in it is logged, `recover` puts right what the panic left (it
/// answers the requests the thread held), and after a pause `body` runs
/// again. Returns how many times it restarted.
pub fn supervise(
    name: &str,
    stop: &Stop,
    mut body: impl FnMut(),
    mut recover: impl FnMut(),
) -> u32 {
    let mut backoff = FIRST_BACKOFF;
    let mut restarts = 0;
    loop {
        let started = Instant::now();
        let Err(payload) = catch_unwind(AssertUnwindSafe(&mut body)) else {
            return restarts;
        };
        log::error!(
            "{name} thread: internal error: {}; restarting it",
            panic_message(&*payload)
        );
        // The state that made the body panic may make this panic too.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(&mut recover)) {
            log::error!(
                "{name} thread: internal error while recovering: {}",
                panic_message(&*payload)
            );
        }
        if started.elapsed() >= HEALTHY {
            backoff = FIRST_BACKOFF;
        }
        if stop.sleep(backoff) {
            return restarts;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
        restarts += 1;
    }
}

/// The threads a provider started, and their stop.
#[derive(Default)]
pub struct Threads {
    stop: Stop,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// What wakes threads that sleep where the stop flag is not looked at.
    wakers: Mutex<Vec<Box<dyn Fn() + Send>>>,
}

impl Threads {
    /// The flag every thread of this set watches.
    pub fn stop_flag(&self) -> Stop {
        self.stop.clone()
    }

    pub fn stopped(&self) -> bool {
        self.stop.requested()
    }

    /// Starts `body` on a thread named `thread`, under [`supervise`];
    /// `name` is what the log calls it.
    pub fn spawn(
        &self,
        name: &str,
        thread: &str,
        body: impl FnMut() + Send + 'static,
        recover: impl FnMut() + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = self.stop.clone();
        let label = name.to_string();
        let handle = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || {
                supervise(&label, &stop, body, recover);
            })?;
        self.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(handle);
        Ok(())
    }

    /// Asks every thread to stop, calls `wake` to cut short a wait in a
    /// socket, and waits for them to end. Idempotent.
    /// Registers `wake`, called by [`Threads::stop`] to end a wait that
    /// does not look at the stop flag (a blocking receive).
    pub fn on_stop(&self, wake: Box<dyn Fn() + Send>) {
        self.wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(wake);
    }

    pub fn stop(&self, wake: impl Fn()) {
        self.stop.request();
        wake();
        for w in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            w();
        }
        let handles: Vec<_> =
            std::mem::take(&mut *self.handles.lock().unwrap_or_else(|p| p.into_inner()));
        let me = std::thread::current().id();
        for h in handles {
            // A thread cannot join itself (exit() called on one of them).
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn a_panicking_body_is_recovered_and_restarted_until_it_returns() {
        let runs = AtomicU32::new(0);
        let recovered = AtomicU32::new(0);
        let restarts = supervise(
            "test",
            &Stop::default(),
            || {
                if runs.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("boom");
                }
            },
            || {
                recovered.fetch_add(1, Ordering::SeqCst);
            },
        );
        assert_eq!(restarts, 2);
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(recovered.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_panic_in_recovery_does_not_end_supervision() {
        let runs = AtomicU32::new(0);
        let restarts = supervise(
            "test",
            &Stop::default(),
            || {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("first");
                }
            },
            || panic!("recovery"),
        );
        assert_eq!(restarts, 1);
    }

    #[test]
    fn a_stop_ends_a_thread_that_keeps_panicking() {
        let threads = Threads::default();
        let panics = Arc::new(AtomicU32::new(0));
        let p = panics.clone();
        threads
            .spawn(
                "test",
                "test",
                move || {
                    p.fetch_add(1, Ordering::SeqCst);
                    panic!("always");
                },
                || {},
            )
            .unwrap();
        while panics.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let woken = AtomicU32::new(0);
        threads.stop(|| {
            woken.fetch_add(1, Ordering::SeqCst);
        });
        // Joined: the thread is gone, and nothing runs the body any more.
        let after = panics.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(panics.load(Ordering::SeqCst), after);
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert!(threads.stopped());
    }

    #[test]
    fn a_stop_ends_a_working_thread_and_is_idempotent() {
        let threads = Threads::default();
        let stop = threads.stop_flag();
        let ended = Arc::new(AtomicBool::new(false));
        let e = ended.clone();
        threads
            .spawn(
                "test",
                "test",
                move || {
                    while !stop.sleep(Duration::from_secs(3600)) {}
                    e.store(true, Ordering::SeqCst);
                },
                || {},
            )
            .unwrap();
        let t0 = Instant::now();
        threads.stop(|| {});
        assert!(ended.load(Ordering::SeqCst));
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        threads.stop(|| {});
    }

    #[test]
    fn a_sleep_without_a_stop_lasts_its_time_and_one_after_a_stop_none() {
        let stop = Stop::default();
        let t0 = Instant::now();
        assert!(!stop.sleep(Duration::from_millis(30)));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        stop.request();
        let t1 = Instant::now();
        assert!(stop.sleep(Duration::from_secs(3600)));
        assert!(t1.elapsed() < Duration::from_secs(5));
    }
}
