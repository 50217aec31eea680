//! Cleaning up when a run is interrupted. A test or bench stopped by
//! SIGTERM (`timeout`, CI) or SIGINT (Ctrl-C) never runs its `Drop`s, and
//! a fleet run left 257 network namespaces and 256 temporary directories
//! behind that way. The first host or network a process makes installs a
//! handler for both signals; on one, a thread of the harness kills what
//! runs in this process's namespaces, deletes the namespaces and the
//! temporary directories, and exits with the signal's status (128 + its
//! number). Everything the harness makes carries this process's id in its
//! name (`urdma-e2e-PID-N`, `urdma-e2e-net-PID-N`, `urdma-key-PID-NAME`),
//! which is how it is found: a thread that was
//! making a host when the signal came cannot hide one from the sweep.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

type Undo = Box<dyn Fn() + Send>;

/// What must be put back besides what [`sweep`] finds by name (settings
/// of the machine a bench changed), run first on a signal.
static UNDO: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());

/// Runs `undo` if the process is stopped by a signal before
/// [`forget_undo`] is called with the returned key (as the value that made
/// the change is dropped).
pub fn undo_on_signal(undo: impl Fn() + Send + 'static) -> u64 {
    clean_up_on_signals();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    UNDO.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((key, Box::new(undo)));
    key
}

/// The change `key` was put back the ordinary way.
pub fn forget_undo(key: u64) {
    UNDO.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(k, _)| *k != key);
}

/// The write end of the pipe the handler signals through (-1: none).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// Set once a signal came: nothing new may be made while the sweep runs.
static STOPPING: AtomicBool = AtomicBool::new(false);
/// How long a thread that was making a namespace when the signal came may
/// take to finish `ip netns add`, before the second sweep.
const SETTLE: Duration = Duration::from_millis(300);

/// Called before anything named for this process is made: once a signal
/// came, the thread waits here for the exit instead.
pub(crate) fn park_if_stopping() {
    while STOPPING.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Installs the handlers once per process; later calls do nothing.
pub(crate) fn clean_up_on_signals() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(install);
}

fn install() {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    #[allow(unsafe_code)]
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        eprintln!("urdma-harness: no pipe for signals; an interrupted run leaves its namespaces");
        return;
    }
    PIPE.store(fds[1], Ordering::SeqCst);
    let read_end = fds[0];
    std::thread::Builder::new()
        .name("harness-signals".into())
        .spawn(move || {
            let mut sig = [0u8; 1];
            // SAFETY: reads one byte into `sig` from the pipe made above,
            // which nothing closes.
            #[allow(unsafe_code)]
            let n = unsafe { libc::read(read_end, sig.as_mut_ptr().cast(), 1) };
            if n == 1 {
                STOPPING.store(true, Ordering::SeqCst);
                for (_, undo) in UNDO.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
                    undo();
                }
                sweep();
                // Whatever a thread was making as the signal came.
                std::thread::sleep(SETTLE);
                sweep();
                std::process::exit(128 + i32::from(sig[0]));
            }
        })
        .expect("spawn the signal thread");
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction with a handler that only calls
        // write(2), which is async-signal-safe.
        #[allow(unsafe_code)]
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = PIPE.load(Ordering::SeqCst);
    let byte = signal as u8;
    // SAFETY: writes one byte from the stack to the pipe; write(2) is
    // async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        libc::write(fd, (&byte as *const u8).cast(), 1);
    }
}

/// What a process of the harness made, found by the id in the names.
#[derive(Debug, Default, PartialEq)]
pub struct Made {
    /// Network namespaces, by name.
    pub namespaces: Vec<String>,
    /// Temporary directories.
    pub dirs: Vec<PathBuf>,
}

/// What process `pid` made and has not removed.
pub fn made_by(pid: u32) -> Made {
    let ours: Vec<String> = ["urdma-e2e", "urdma-e2e-net", "urdma-key"]
        .iter()
        .map(|p| format!("{p}-{pid}-"))
        .collect();
    let names = |dir: &Path| -> Vec<String> {
        let mut found: Vec<String> = fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| ours.iter().any(|p| n.starts_with(p)))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    };
    let tmp = std::env::temp_dir();
    Made {
        namespaces: names(Path::new("/run/netns")),
        dirs: names(&tmp).into_iter().map(|d| tmp.join(d)).collect(),
    }
}

/// The processes running in network namespace `ns`.
pub fn running_in(ns: &str) -> Vec<String> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Everything of this process's: what runs in its namespaces, the
/// namespaces, its temporary directories.
pub fn sweep() {
    let made = made_by(std::process::id());
    for ns in &made.namespaces {
        // The daemons, clients and tools in it first: a namespace with
        // processes left would outlive its name.
        for pid in running_in(ns) {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
        let _ = Command::new("ip").args(["netns", "del", ns]).status();
    }
    for dir in &made.dirs {
        let _ = fs::remove_dir_all(dir);
    }
}
