//! The control socket (`crate::control`): a thread of the provider's own
//! answers `urdma-acm show`, `forget` and `health` on a unix socket only
//! root (the daemon's user) can reach, one client at a time, each within a
//! second or two. The daemon's own socket and event loop are not touched.

use super::{lock, Runtime};
use crate::control::{Answer, Request, MAX_REQUEST, SOCKET};
use crate::daemon::Daemon;
use crate::engine::inspect;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a client may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Listens at `path`, reachable by root only from the start: bound under a
/// name of its own, made 0600, then renamed into place, and whatever
/// connected before that is dropped unanswered. A socket left by a daemon
/// that died is replaced; one another provider listens on is not.
fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if UnixStream::connect(path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "another provider listens on it",
        ));
    }
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    listener.set_nonblocking(true)?;
    while listener.accept().is_ok() {}
    listener.set_nonblocking(false)?;
    Ok(listener)
}

/// Starts the control socket's thread; without it (logged) the provider
/// serves on, and `urdma-acm health` says it is not running.
pub fn spawn<D: Daemon + Copy + 'static>(rt: &'static Runtime<D>) {
    let path = PathBuf::from(SOCKET);
    let listener = match bind(&path) {
        Ok(l) => l,
        Err(e) => {
            log::error!(
                "control socket {}: {e}; urdma-acm show, forget and health cannot reach this provider",
                path.display()
            );
            return;
        }
    };
    let stop = rt.threads.stop_flag();
    let wake = path.clone();
    rt.threads.on_stop(Box::new(move || {
        let _ = UnixStream::connect(&wake);
    }));
    let spawned = rt.threads.spawn(
        "control socket",
        "urdma-control",
        move || loop {
            let client = listener.accept();
            if stop.requested() {
                let _ = std::fs::remove_file(&path);
                return;
            }
            match client {
                Ok((stream, _)) => serve(rt, stream),
                Err(e) => {
                    log::warn!("control socket: {e}");
                    if stop.sleep(Duration::from_millis(100)) {
                        return;
                    }
                }
            }
        },
        || {},
    );
    if let Err(e) = spawned {
        log::error!("cannot start the control socket's thread: {e}");
    }
}

/// Reads one request from `stream` and answers it.
fn serve<D: Daemon + Copy + 'static>(rt: &'static Runtime<D>, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(CLIENT_TIMEOUT));
    let _ = stream.set_write_timeout(Some(CLIENT_TIMEOUT));
    let mut line = String::new();
    let read = BufReader::new((&stream).take(MAX_REQUEST as u64 + 1)).read_line(&mut line);
    let answer = match read {
        Err(e) => Answer::refused(format!("cannot read the request: {e}")),
        Ok(_) if line.len() > MAX_REQUEST => Answer::refused("request too long"),
        Ok(_) => match Request::parse(&line) {
            Err(e) => Answer::refused(e),
            Ok(request) => answer(rt, request),
        },
    };
    let _ = (&stream).write_all(answer.encode().as_bytes());
}

fn answer<D: Daemon + Copy + 'static>(rt: &'static Runtime<D>, request: Request) -> Answer {
    let now = Instant::now();
    match request {
        Request::Show(only) => inspect::show(&lock(&rt.engine), only.as_ref(), now),
        Request::Forget(which) => rt.with_engine(|e| inspect::forget(e, which.as_ref(), now)),
        Request::Health => {
            let problems = rt.problems();
            Answer {
                health: Some(inspect::health(&lock(&rt.engine), problems)),
                ..Answer::default()
            }
        }
    }
}
