//! A `log` backend that writes through the daemon's `acm_write`.
//!
//! The daemon's levels are 0 (errors and configuration summary), 1 (verbose
//! configuration) and 2 (verbose operation); `error`/`warn`/`info` go to 0,
//! `debug` to 1 and `trace` to 2. The bridge sets the `log` max
//! level from the daemon's `log_level`, so a message for a level that would
//! be filtered out is never formatted: the `log` macros test the level
//! before they build their arguments.
//!
//! The daemon writes every level's lines alike, so each message begins with
//! its severity (`error: `, `warning: `, `info: `, `debug: `, `trace: `):
//! an operator can grep or alert on `urdma: error:` whatever `log_level` is.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::sync::OnceLock;

/// Where formatted lines go: `(daemon level, message)`.
pub type Sink = Box<dyn Fn(u8, &str) + Send + Sync>;

struct Bridge {
    sink: Sink,
}

/// The daemon level a `log` level is written at.
pub fn daemon_level(level: Level) -> u8 {
    match level {
        Level::Error | Level::Warn | Level::Info => 0,
        Level::Debug => 1,
        Level::Trace => 2,
    }
}

/// The word a line of this level begins with.
pub fn severity(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warn => "warning",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

/// The most verbose `log` level a daemon `log_level` lets through.
pub fn filter_for(daemon_log_level: u8) -> LevelFilter {
    match daemon_log_level {
        0 => LevelFilter::Info,
        1 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

impl Log for Bridge {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if self.enabled(record.metadata()) {
            let line = format!("{}: {}", severity(record.level()), record.args());
            (self.sink)(daemon_level(record.level()), &line);
        }
    }

    fn flush(&self) {}
}

static INSTALLED: OnceLock<()> = OnceLock::new();

/// Installs the bridge once per process; later calls only adjust the level.
pub fn install(sink: impl FnOnce() -> Sink, daemon_log_level: u8) {
    INSTALLED.get_or_init(|| {
        // Fails only if another logger owns the process (a host program
        // embedding us): then that logger is kept, which is what it wants.
        let _ = log::set_boxed_logger(Box::new(Bridge { sink: sink() }));
    });
    log::set_max_level(filter_for(daemon_log_level));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    struct Counted<'a>(&'a AtomicUsize);
    impl fmt::Display for Counted<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.fetch_add(1, Ordering::SeqCst);
            f.write_str("formatted")
        }
    }

    #[test]
    fn filtered_levels_are_never_formatted_and_levels_map_to_the_daemons() {
        let lines: Arc<Mutex<Vec<(u8, String)>>> = Arc::default();
        let l2 = lines.clone();
        install(
            move || Box::new(move |lvl, s| l2.lock().unwrap().push((lvl, s.to_string()))),
            0,
        );
        let formats = AtomicUsize::new(0);
        log::trace!("{}", Counted(&formats));
        log::debug!("{}", Counted(&formats));
        assert_eq!(
            formats.load(Ordering::SeqCst),
            0,
            "a filtered message was formatted"
        );
        log::error!("broken {}", Counted(&formats));
        log::info!("summary");
        log::warn!("odd");
        assert_eq!(formats.load(Ordering::SeqCst), 1);
        install(|| unreachable!("installed once"), 1);
        log::trace!("{}", Counted(&formats));
        log::debug!("cfg");
        install(|| unreachable!("installed once"), 2);
        log::trace!("op {}", 7);
        assert_eq!(formats.load(Ordering::SeqCst), 1);
        let got = lines.lock().unwrap().clone();
        let want: Vec<(u8, String)> = vec![
            (0, "error: broken formatted".into()),
            (0, "info: summary".into()),
            (0, "warning: odd".into()),
            (1, "debug: cfg".into()),
            (2, "trace: op 7".into()),
        ];
        assert_eq!(got, want);
    }
}
