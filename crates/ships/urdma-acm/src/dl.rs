//! Loading a provider file the way the daemon does (`dlopen(path,
//! RTLD_LAZY)`, then `dlsym(handle, "provider_query")`), in a child process:
//! a library whose constructor crashes or hangs takes down the child, not
//! doctor. The child is this program again, run with a first argument
//! no one types ([`CHILD_COMMAND`], [`child`]); the parent ([`probe`])
//! reads its verdict. Nothing in the library is called: its constructors
//! run (as in the daemon), its `provider_query` does not.
//!
//! With `verbs.rs`, the tool's only `unsafe` code.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// `<dlfcn.h>`, glibc on Linux.
const RTLD_LAZY: c_int = 0x0001;

// In libc from glibc 2.34, in libdl before; Rust's standard library links
// both on linux-gnu.
extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}

/// The first argument that makes this program the child (see main.rs).
pub const CHILD_COMMAND: &str = "__load-provider";

/// How long loading may take before the child is killed.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The child's answer: the last line of its output that starts with this.
const MARK: &str = "urdma-acm-load: ";

/// What loading a file the daemon's way gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Load {
    /// It loads and has `provider_query`.
    Ok,
    /// `dlopen` fails: the loader's message (`dlerror()`), verbatim.
    Dlopen(String),
    /// It loads but has no `provider_query`: `dlerror()`, verbatim.
    NoSymbol(String),
    /// The child died or hung while loading it: how.
    Crashed(String),
    /// No child could be run to try it: why.
    Untested(String),
    /// `dlopen` stopped at an undefined symbol that the daemon's executable
    /// defines (a provider that calls the daemon's helpers, linked
    /// `-z now`): it loads in the daemon, and everything before that
    /// symbol (glibc versions, libraries) was checked. The symbol.
    NeedsDaemon(String),
}

/// The last `dlerror()` message, or `what` if there is none.
fn last_error(what: &str) -> String {
    // SAFETY: dlerror takes no argument; it returns NULL or a NUL-terminated
    // string that stays valid until the next dl* call of this thread, and is
    // copied at once.
    let msg = unsafe { dlerror() };
    if msg.is_null() {
        return what.to_string();
    }
    // SAFETY: non-NULL, NUL-terminated (above).
    unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned()
}

/// The child's side: loads `path` as the daemon does and prints the
/// outcome. Exit status 0: loaded with `provider_query`; 3: `dlopen`
/// failed; 4: no `provider_query`. The library stays loaded until exit.
pub fn child(path: &Path) -> ExitCode {
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        println!("{MARK}dlopen {}: a NUL byte in the path", path.display());
        return ExitCode::from(3);
    };
    // SAFETY: a NUL-terminated path. Loading runs the library's
    // constructors, which is what this child is for: whatever they do
    // happens in this disposable process. The handle is never closed.
    let handle = unsafe { dlopen(cpath.as_ptr(), RTLD_LAZY) };
    if handle.is_null() {
        println!("{MARK}dlopen {}", last_error("dlopen failed"));
        return ExitCode::from(3);
    }
    // SAFETY: a handle dlopen returned, and a NUL-terminated symbol name.
    // The address is compared with NULL only, never called.
    let sym = unsafe { dlsym(handle, c"provider_query".as_ptr()) };
    if sym.is_null() {
        println!("{MARK}dlsym {}", last_error("provider_query not found"));
        return ExitCode::from(4);
    }
    println!("{MARK}ok");
    ExitCode::SUCCESS
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

/// The parent's side: loads `path` in a child (this program, run with
/// [`CHILD_COMMAND`]) and says how it went.
pub fn probe(path: &Path) -> Load {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Load::Untested(format!("cannot run a child to load it: {e}")),
    };
    let spawned = Command::new(exe)
        .arg(CHILD_COMMAND)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Load::Untested(format!("cannot run a child to load it: {e}")),
    };
    // Read while waiting: a chatty constructor must not block on a full pipe.
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    let out = String::from_utf8_lossy(&out);
    let answer = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(MARK))
        .unwrap_or("");
    let Some(status) = status else {
        return Load::Crashed(format!("it hangs (killed after {} s)", TIMEOUT.as_secs()));
    };
    match (status.code(), answer) {
        (Some(0), "ok") => Load::Ok,
        (Some(3), msg) => Load::Dlopen(msg.strip_prefix("dlopen ").unwrap_or(msg).to_string()),
        (Some(4), msg) => Load::NoSymbol(msg.strip_prefix("dlsym ").unwrap_or(msg).to_string()),
        _ => match status.signal() {
            Some(sig) => Load::Crashed(format!("killed by {}", signal_name(sig))),
            None => Load::Crashed(format!(
                "the process exits with status {}",
                status.code().unwrap_or(-1)
            )),
        },
    }
}
