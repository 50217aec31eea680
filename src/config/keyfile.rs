//! The key file of `urdma_auth_key_file` (docs/protocol.md,
//! Authentication): read and checked here, with the other files the
//! provider reads; what the keys do is `discovery/seal.rs` and
//! `discovery/auth.rs`.

use super::Diagnostic;
use std::fmt;
use std::path::Path;

/// Shortest key accepted: 128 bits.
pub const MIN_KEY_BYTES: usize = 16;
/// HMAC-SHA256 hashes longer keys down to 32 bytes anyway.
pub const MAX_KEY_BYTES: usize = 64;

/// The keys of a key file, in its order: the first signs, all verify (so
/// keys can be rotated host by host without a flag day).
pub struct KeyFile {
    keys: Vec<(u32, Vec<u8>)>,
}

impl fmt::Debug for KeyFile {
    // Never key material, even in a debug print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.0).collect();
        f.debug_struct("KeyFile").field("ids", &ids).finish()
    }
}

impl KeyFile {
    /// Reads a key file, refusing one that other users can read or write:
    /// whoever reads the key can forge every binding of the segment. It
    /// must be a regular file, not a symbolic link (whoever can change the
    /// link chooses the key), owned by root or by the user the daemon runs
    /// as. Problems with the whole file are at line 0.
    pub fn load(path: &Path) -> Result<KeyFile, Diagnostic> {
        use std::io::Read;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
        let shown = path.display().to_string();
        let whole = |message: String| Diagnostic {
            file: shown.clone(),
            line: 0,
            message: format!("urdma_auth_key_file: {message}"),
        };
        // Opened without following a link or waiting on a FIFO, and
        // judged by what was opened, so nothing can be swapped in between.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => {
                    whole("a symbolic link; refused (name the file itself)".into())
                }
                _ => whole(e.to_string()),
            })?;
        let meta = file.metadata().map_err(|e| whole(e.to_string()))?;
        if !meta.is_file() {
            return Err(whole("not a regular file".into()));
        }
        let me = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
        if meta.uid() != 0 && meta.uid() != me {
            return Err(whole(format!(
                "owned by uid {}, not root; refused (chown root: {shown})",
                meta.uid()
            )));
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(whole(format!(
                "mode {mode:04o} lets other users read or change the key; refused \
                 (chmod 600 {shown})"
            )));
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| whole(e.to_string()))?;
        KeyFile::parse(bytes, &shown)
    }

    /// One key per line, `ID HEX`: a key id (decimal or 0x hex, 32 bits)
    /// and the key as 32 to 128 hex digits. `#` starts a comment line,
    /// which may hold any bytes; any other line that is not text makes the
    /// whole file unusable, like any other bad line.
    pub fn parse(bytes: impl AsRef<[u8]>, file: &str) -> Result<KeyFile, Diagnostic> {
        let mut keys: Vec<(u32, Vec<u8>)> = Vec::new();
        let at = |line: usize, message: String| Diagnostic {
            file: file.to_string(),
            line,
            message,
        };
        for (n, line) in acm_proto::text::lines(bytes.as_ref()) {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            let line = acm_proto::text::text(line).map_err(|e| at(n, e))?;
            let mut tokens = line.split_whitespace();
            let (Some(id), Some(hex), None) = (tokens.next(), tokens.next(), tokens.next()) else {
                return Err(at(n, "expected 'KEY-ID HEX-KEY'".into()));
            };
            let id = parse_id(id).ok_or_else(|| at(n, format!("bad key id '{id}'")))?;
            if keys.iter().any(|k| k.0 == id) {
                return Err(at(n, format!("key id {id} listed twice")));
            }
            // The key itself never appears in a message: logs are not secret.
            let bytes = parse_hex(hex).ok_or_else(|| {
                let (lo, hi) = (2 * MIN_KEY_BYTES, 2 * MAX_KEY_BYTES);
                at(n, format!("key {id} is not {lo}-{hi} hex digits"))
            })?;
            keys.push((id, bytes));
        }
        if keys.is_empty() {
            return Err(at(0, "urdma_auth_key_file: no key".into()));
        }
        Ok(KeyFile { keys })
    }

    /// Each key's id and bytes, the signing key first; never empty.
    pub fn keys(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.keys.iter().map(|(id, k)| (*id, k.as_slice()))
    }

    /// The id of the key that signs.
    pub fn signing_id(&self) -> u32 {
        self.keys[0].0
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn parse_id(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let digits = s.as_bytes();
    if !digits.len().is_multiple_of(2)
        || !(2 * MIN_KEY_BYTES..=2 * MAX_KEY_BYTES).contains(&digits.len())
    {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &str = "# rotated 2026-11\n7 000102030405060708090a0b0c0d0e0f\n\
                        0x10 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";

    #[test]
    fn key_files_are_checked_line_by_line() {
        let err = |t: &str| {
            KeyFile::parse(t, "/etc/rdma/urdma.key")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(""),
            "/etc/rdma/urdma.key:0: urdma_auth_key_file: no key"
        );
        assert_eq!(err("# only\n\n"), err(""));
        assert_eq!(
            err("1 00010203"),
            "/etc/rdma/urdma.key:1: key 1 is not 32-128 hex digits"
        );
        assert_eq!(
            err("\n1 000102030405060708090a0b0c0d0e0f extra"),
            "/etc/rdma/urdma.key:2: expected 'KEY-ID HEX-KEY'"
        );
        assert_eq!(
            err("x 000102030405060708090a0b0c0d0e0f"),
            "/etc/rdma/urdma.key:1: bad key id 'x'"
        );
        assert_eq!(
            err("1 000102030405060708090a0b0c0d0e0f\n1 000102030405060708090a0b0c0d0e0f"),
            "/etc/rdma/urdma.key:2: key id 1 listed twice"
        );
        assert!(err("1 000102030405060708090a0b0c0d0e0g").contains("hex digits"));
        assert!(
            !err("1 00010203zz").contains("00010203"),
            "no key material in errors"
        );
        // Bytes: a comment may hold any, a key line must be text.
        let latin1 = b"# cl\xe9 de Fran\xe7ois\n1 000102030405060708090a0b0c0d0e0f\n";
        assert_eq!(KeyFile::parse(latin1, "k").unwrap().signing_id(), 1);
        let bad = b"1 000102030405060708090a0b0c0d0e0f\n2 0001\xe9\n";
        assert_eq!(
            KeyFile::parse(bad, "/etc/rdma/urdma.key")
                .unwrap_err()
                .to_string(),
            "/etc/rdma/urdma.key:2: not valid UTF-8 text (byte 0xe9 at column 7)"
        );
        let f = KeyFile::parse(KEYS, "k").unwrap();
        assert_eq!((f.signing_id(), f.len()), (7, 2));
        assert_eq!(f.keys().nth(1).map(|k| k.1.len()), Some(32));
        assert_eq!(format!("{f:?}"), "KeyFile { ids: [7, 16] }");
    }

    #[test]
    fn key_files_others_can_read_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("urdma-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        std::fs::write(&path, KEYS).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = KeyFile::load(&path).unwrap_err().to_string();
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(KeyFile::load(&path).is_err(), "group-readable too");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(KeyFile::load(&path).unwrap().signing_id(), 7);
        let e = KeyFile::load(&dir).unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (0, "urdma_auth_key_file: not a regular file")
        );
        assert!(KeyFile::load(&dir.join("missing")).is_err());

        // A link is not followed, whatever it points at: whoever can
        // change it would choose the key.
        let link = dir.join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let e = KeyFile::load(&link).unwrap_err().to_string();
        assert!(e.contains("a symbolic link; refused"), "{e}");
        // A FIFO is refused without waiting for a writer.
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o600)).unwrap();
            let e = KeyFile::load(&fifo).unwrap_err().to_string();
            assert!(e.ends_with("not a regular file"), "{e}");
        }
        // Owned by another user, it is that user's key, not root's.
        if std::os::unix::fs::chown(&path, Some(1), None).is_ok() {
            let e = KeyFile::load(&path).unwrap_err().to_string();
            assert!(e.contains("owned by uid 1, not root"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
