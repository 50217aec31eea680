//! Discovery's shared key, as the daemons read it: a file named by an
//! option, which the provider refuses unless only root can read it. Tests
//! of authentication need files with a given mode and content that outlive
//! any one host, since the daemons read them at start-up.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// A key file with `keys`, mode `mode`, in a directory of its own that is
/// removed on drop. It lives outside the hosts' temp directories because
/// it must exist before the daemons start.
pub struct KeyFile(pub PathBuf);

impl KeyFile {
    pub fn new(name: &str, keys: &str, mode: u32) -> KeyFile {
        crate::interrupt::clean_up_on_signals();
        let dir = std::env::temp_dir().join(format!("urdma-key-{}-{name}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("urdma.key");
        fs::write(&path, keys).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        KeyFile(path)
    }

    pub fn opt(&self) -> String {
        format!("urdma_auth_key_file {}", self.0.display())
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(self.0.parent().unwrap());
    }
}
