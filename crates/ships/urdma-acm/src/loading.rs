//! Which files of the provider directory the daemon loads, by its release's
//! rules, and whether they load at all: what decides whether urdma is
//! there, once, when the daemon starts.
//!
//! Every release lists `provider_lib_path` (its option, else a compiled-in
//! directory), skips symbolic links (lstat), and loads a file whose name
//! contains `.so` (rdma-core 28 and older) or ends in `.so` (29 and later)
//! with `dlopen(path, RTLD_LAZY)` and `dlsym(handle, "provider_query")`. A
//! file that fails is logged and skipped.

use crate::daemon::{
    Options, BUILTIN_DEFAULT, DEFAULT_PROVIDER_DIR, DEFAULT_PROVIDER_DIR_RPM, URDMA, URDMA_FILE,
};
use crate::dl::Load;
use crate::release::Rule;
use std::fs;
use std::path::{Path, PathBuf};

/// The daemon's compiled-in provider directory, and how it was found: the
/// one of the two defaults that `ibacm` (the executable's bytes) holds,
/// else the one that exists, else Debian's.
pub fn compiled_in_dir(
    ibacm: &str,
    bytes: Option<&[u8]>,
    exists: impl Fn(&str) -> bool,
) -> (PathBuf, String) {
    let holds = |dir: &str| {
        let mut needle = dir.as_bytes().to_vec();
        needle.push(0);
        bytes.is_some_and(|b| b.windows(needle.len()).any(|w| w == needle))
    };
    let defaults = [DEFAULT_PROVIDER_DIR, DEFAULT_PROVIDER_DIR_RPM];
    if let Some(dir) = defaults.iter().find(|d| holds(d)) {
        return (dir.into(), format!("the compiled-in default of {ibacm}"));
    }
    let why = match bytes {
        Some(_) => format!("{ibacm} holds neither default directory"),
        None => format!("{ibacm} cannot be read"),
    };
    match defaults.iter().find(|d| exists(d)) {
        Some(dir) => (
            dir.into(),
            format!("the compiled-in default that exists; {why}"),
        ),
        None => (
            DEFAULT_PROVIDER_DIR.into(),
            format!("the compiled-in default of Debian and Ubuntu; {why}"),
        ),
    }
}

/// The dynamic symbols an ELF64 little-endian executable defines (what
/// it exports to the libraries it loads); empty if `bytes` is not one.
pub fn defined_dynamic_symbols(bytes: &[u8]) -> Vec<String> {
    let u16_at = |o: usize| -> Option<usize> {
        Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?).into())
    };
    let u32_at = |o: usize| -> Option<usize> {
        usize::try_from(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?)).ok()
    };
    let u64_at = |o: usize| -> Option<usize> {
        usize::try_from(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?)).ok()
    };
    let symbols = || -> Option<Vec<String>> {
        // ELFCLASS64, ELFDATA2LSB.
        if bytes.get(..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        let (shoff, shentsize, shnum) = (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?);
        let section = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
        const SHT_DYNSYM: usize = 11;
        let dynsym = (0..shnum).find_map(|i| {
            let h = section(i)?;
            (u32_at(h + 4)? == SHT_DYNSYM).then_some(h)
        })?;
        let (off, size) = (u64_at(dynsym + 24)?, u64_at(dynsym + 32)?);
        let strtab = section(u32_at(dynsym + 40)?)?;
        let (str_off, str_size) = (u64_at(strtab + 24)?, u64_at(strtab + 32)?);
        let strings = bytes.get(str_off..str_off.checked_add(str_size)?)?;
        let table = bytes.get(off..off.checked_add(size)?)?;
        Some(
            table
                .chunks_exact(24)
                // st_shndx 0: undefined (an import).
                .filter(|sym| sym[6..8] != [0, 0])
                .filter_map(|sym| {
                    let name = u32::from_le_bytes(sym[..4].try_into().ok()?) as usize;
                    let rest = strings.get(name..)?;
                    let end = rest.iter().position(|&b| b == 0)?;
                    (end > 0).then(|| String::from_utf8_lossy(&rest[..end]).into_owned())
                })
                .collect(),
        )
    };
    symbols().unwrap_or_default()
}

/// `dlopen`'s message about an undefined symbol, if it is one: the name.
fn undefined_symbol(msg: &str) -> Option<&str> {
    let (_, rest) = msg.split_once(": undefined symbol: ")?;
    Some(rest.split([',', ' ']).next().unwrap_or(rest))
}

/// What a directory entry is, by `lstat`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Regular,
    Symlink,
    /// Not a regular file, or cannot be stat'ed: why.
    Other(String),
}

/// A directory entry whose name contains `.so`: one the daemon considers
/// by one release's rule or the other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub file: String,
    pub kind: Kind,
    /// It is the urdma provider: by its name, or by its bytes.
    pub urdma: bool,
    /// Loading it the daemon's way, for the regular files the daemon in
    /// force may load; `None`: not tried.
    pub load: Option<Load>,
}

/// Bytes every build of the urdma provider holds (one of its option keys),
/// and no other provider.
const URDMA_MARK: &[u8] = b"urdma_hosts_file";

/// Whether `path` (followed if a link) is urdma: by name, else by bytes.
fn is_urdma(file: &str, path: &Path) -> bool {
    file.starts_with("libibacm_urdma")
        || fs::read(path).is_ok_and(|b| b.windows(URDMA_MARK.len()).any(|w| w == URDMA_MARK))
}

/// Whether a daemon whose rule is `contains` (28 and older) or not takes
/// `file` by its name.
fn name_taken(file: &str, contains: bool) -> bool {
    if contains {
        file.contains(".so")
    } else {
        file.ends_with(".so")
    }
}

/// The candidates of `dir` in directory order (the daemon's load order),
/// each regular file the daemon may load under `rule` loaded by `probe`.
/// `daemon_symbols`: what the daemon's executable defines, which a
/// provider may need and a process other than the daemon lacks.
pub fn candidates(
    dir: &Path,
    rule: Rule,
    daemon_symbols: &[String],
    probe: impl Fn(&Path) -> Load,
) -> Result<Vec<Candidate>, String> {
    let probe = |path: &Path| match probe(path) {
        Load::Dlopen(msg) => match undefined_symbol(&msg) {
            Some(sym) if daemon_symbols.iter().any(|s| s == sym) => {
                Load::NeedsDaemon(sym.to_string())
            }
            _ => Load::Dlopen(msg),
        },
        other => other,
    };
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if !file.contains(".so") {
            continue;
        }
        let path = entry.path();
        let kind = match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => Kind::Symlink,
            Ok(m) if !m.is_file() => Kind::Other("not a regular file".into()),
            Ok(_) => Kind::Regular,
            Err(e) => Kind::Other(format!("cannot stat: {e}")),
        };
        let may_load = kind == Kind::Regular && name_taken(&file, rule != Rule::EndsWith);
        out.push(Candidate {
            urdma: is_urdma(&file, &path),
            load: may_load.then(|| probe(&path)),
            kind,
            file,
        });
    }
    Ok(out)
}

impl Candidate {
    /// Whether a daemon of that rule (`contains`: 28 and older) loads it.
    pub fn loaded_by(&self, contains: bool) -> bool {
        self.kind == Kind::Regular
            && name_taken(&self.file, contains)
            && matches!(
                self.load,
                Some(Load::Ok | Load::NeedsDaemon(_) | Load::Untested(_))
            )
    }

    /// The provider name, for the files this tool knows.
    pub fn name(&self) -> Option<&'static str> {
        if self.urdma {
            Some(URDMA)
        } else if self.file == "libibacmp.so" {
            Some(BUILTIN_DEFAULT)
        } else {
            None
        }
    }

    /// The report's line for it, without the indent.
    pub fn describe(&self, rule: Rule) -> String {
        let f = &self.file;
        let skipped = "skipped by the daemon";
        match &self.kind {
            Kind::Symlink => {
                return format!(
                    "{f}: {skipped}: a symbolic link (the daemon loads only regular files)"
                )
            }
            Kind::Other(why) => return format!("{f}: {skipped}: {why}"),
            Kind::Regular => {}
        }
        let ends = f.ends_with(".so");
        if rule == Rule::EndsWith && !ends {
            return format!("{f}: {skipped}: its name does not end in .so (ibacm 29 and later)");
        }
        let what = match &self.load {
            None => return format!("{f}: not tried"),
            Some(Load::Ok) => format!(
                "loaded ({})",
                self.name().unwrap_or("name unknown to urdma-acm")
            ),
            Some(Load::NeedsDaemon(sym)) => format!(
                "loaded ({}; it uses the daemon's {sym}, so it was checked only up to that symbol)",
                self.name().unwrap_or("name unknown to urdma-acm")
            ),
            Some(Load::Dlopen(msg)) => format!("{skipped}: dlopen fails: {msg}"),
            Some(Load::Untested(why)) => format!(
                "not checked ({why}); counted as loaded ({})",
                self.name().unwrap_or("name unknown to urdma-acm")
            ),
            Some(Load::NoSymbol(msg)) => format!("{skipped}: no provider_query symbol ({msg})"),
            Some(Load::Crashed(how)) => {
                format!("loading it fails: {how}; the daemon would fail the same way")
            }
        };
        if rule == Rule::Unknown && !ends {
            format!("{f}: by ibacm 28 and older: {what}; by 29 and later: skipped (its name does not end in .so)")
        } else {
            format!("{f}: {what}")
        }
    }
}

/// The names of the providers the daemon loads, in load order (by the
/// rule of 29 and later when the release is unknown).
pub fn loaded_names(files: &[Candidate], rule: Rule) -> Vec<&'static str> {
    files
        .iter()
        .filter(|c| c.loaded_by(rule == Rule::Contains))
        .filter_map(Candidate::name)
        .collect()
}

/// Why urdma will not be there, or not once, with what to do: empty when
/// the daemon loads urdma exactly once.
pub fn problems(
    files: &[Candidate],
    rule: Rule,
    dir: &Path,
    opts: &Options,
    opts_file: &str,
) -> Vec<String> {
    let urdma: Vec<&Candidate> = files.iter().filter(|c| c.urdma).collect();
    let mut out = Vec::new();
    out.extend(not_loaded(&urdma, rule, dir, opts, opts_file));
    out.extend(loaded_twice(&urdma, rule, dir));
    out.extend(crashing_others(files, rule, dir));
    out
}

/// Why none of the `urdma` files loads, and how to fix each; `None` if
/// one does (by the stricter rule when the release is unknown).
fn not_loaded(
    urdma: &[&Candidate],
    rule: Rule,
    dir: &Path,
    opts: &Options,
    opts_file: &str,
) -> Option<String> {
    let present_rule = rule == Rule::Contains;
    if urdma.iter().any(|c| c.loaded_by(present_rule)) {
        return None;
    }
    let dir = dir.display();
    let mut p = if urdma.is_empty() {
        format!("urdma is not installed: no regular file {URDMA_FILE} in {dir}")
    } else {
        format!("no file in {dir} provides a loadable urdma provider")
    };
    for fix in urdma.iter().filter_map(|c| c.fix_to_load(present_rule)) {
        p += &format!("\n  - {fix}");
    }
    if let Some((name, line)) = &opts.default {
        if name.eq_ignore_ascii_case(URDMA) {
            p += &format!(
                "\n  - `provider {name} default` ({opts_file} line {line}) names a provider \
                 that will not load: ibacm 33 then segfaults at start-up"
            );
        }
    }
    Some(p)
}

impl Candidate {
    /// What to do so that this urdma file loads (`by_contains`: under the
    /// rule of ibacm 28 and older); `None` if nothing about it is known to
    /// be wrong.
    fn fix_to_load(&self, by_contains: bool) -> Option<String> {
        let f = &self.file;
        let fix = match (&self.kind, &self.load) {
            (Kind::Symlink, _) => {
                format!("{f}: replace the symlink with a regular file: ibacm skips symlinks")
            }
            (Kind::Other(why), _) => {
                format!("{f}: {why}: install the provider as a regular file")
            }
            _ if !by_contains && !f.ends_with(".so") => format!(
                "{f}: rename it to {URDMA_FILE}: ibacm 29 and later load only files whose name ends in .so"
            ),
            (_, Some(Load::Dlopen(msg))) if msg.contains("GLIBC_") && msg.contains("not found") => format!(
                "{f}: it needs a newer glibc than this system's: rebuild for an older glibc or install the package built by `make dist`"
            ),
            (_, Some(Load::Dlopen(_))) => {
                format!("{f}: the loader refuses it (above): reinstall the provider")
            }
            (_, Some(Load::NoSymbol(_))) => format!(
                "{f}: not an ibacm provider (no provider_query): install {URDMA_FILE} from the package"
            ),
            (_, Some(Load::Crashed(_))) => format!(
                "{f}: loading it fails (above): rebuild it or install the package built by `make dist`"
            ),
            _ => return None,
        };
        Some(fix)
    }
}

/// Which of the `urdma` files to remove when the daemon would load more
/// than one (by the looser rule when the release is unknown); `None` if it
/// loads at most one.
fn loaded_twice(urdma: &[&Candidate], rule: Rule, dir: &Path) -> Option<String> {
    let twice_rule = rule != Rule::EndsWith;
    let loaded: Vec<&&Candidate> = urdma.iter().filter(|c| c.loaded_by(twice_rule)).collect();
    if loaded.len() <= 1 {
        return None;
    }
    let dir = dir.display();
    let keep = loaded
        .iter()
        .position(|c| c.file == URDMA_FILE)
        .unwrap_or(0);
    let names: Vec<&str> = loaded.iter().map(|c| c.file.as_str()).collect();
    let by = if rule == Rule::Unknown {
        "by ibacm 28 and older"
    } else {
        "by the daemon"
    };
    let mut p = format!("urdma would be loaded twice {by}: {}", names.join(", "));
    for (i, c) in loaded.iter().enumerate() {
        if i == keep {
            continue;
        }
        let f = &c.file;
        if f.ends_with(".so") {
            p += &format!("\n  - remove {f}: the daemon loads every regular file in {dir} whose name ends in .so");
        } else {
            p += &format!(
                "\n  - remove {f}: ibacm 28 and older load every file whose name contains .so"
            );
        }
    }
    Some(p)
}

/// Other providers whose loading kills or hangs the process: the daemon
/// loads them all at start-up, so each takes urdma down with it.
fn crashing_others(files: &[Candidate], rule: Rule, dir: &Path) -> Vec<String> {
    let dir = dir.display();
    files
        .iter()
        .filter(|c| matches!(c.load, Some(Load::Crashed(_))) && !c.urdma && c.kind == Kind::Regular)
        .filter(|c| rule != Rule::EndsWith || c.file.ends_with(".so"))
        .map(|c| {
            let f = &c.file;
            format!(
                "loading {f} kills or hangs the process, and the daemon loads every provider at start-up\n  - remove {f} from {dir}"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_exports_are_read_from_its_dynamic_symbol_table() {
        let ibacm = fs::read(crate::daemon::IBACM);
        if let Ok(bytes) = ibacm {
            let syms = defined_dynamic_symbols(&bytes);
            assert!(syms.iter().any(|s| s == "acm_free_sa_mad"), "{syms:?}");
            // Imports are not exports.
            assert!(!syms.iter().any(|s| s == "malloc"), "{syms:?}");
        }
        assert!(defined_dynamic_symbols(b"not an ELF file").is_empty());
        assert_eq!(
            undefined_symbol("/x/libibacmp.so: undefined symbol: acm_free_sa_mad"),
            Some("acm_free_sa_mad")
        );
        assert_eq!(
            undefined_symbol("/x/a.so: undefined symbol: f, version V_1"),
            Some("f")
        );
        assert_eq!(
            undefined_symbol("/x/a.so: cannot open shared object file"),
            None
        );
    }

    #[test]
    fn the_compiled_in_directory_is_found_in_the_executable() {
        let none = |_: &str| false;
        let deb = format!("xx\0{DEFAULT_PROVIDER_DIR}\0yy").into_bytes();
        let deb = deb.as_slice();
        let rpm = b"xx\0/usr/lib64/ibacm\0yy";
        let (d, why) = compiled_in_dir("/usr/sbin/ibacm", Some(deb), none);
        assert_eq!(d, PathBuf::from(DEFAULT_PROVIDER_DIR));
        assert_eq!(why, "the compiled-in default of /usr/sbin/ibacm");
        let (d, _) = compiled_in_dir("/usr/sbin/ibacm", Some(rpm), none);
        assert_eq!(d, PathBuf::from(DEFAULT_PROVIDER_DIR_RPM));
        // A longer path is not the directory.
        let other = b"\0/usr/lib64/ibacm/x\0";
        let (d, why) = compiled_in_dir("/usr/sbin/ibacm", Some(other), |d| {
            d == DEFAULT_PROVIDER_DIR_RPM
        });
        assert_eq!(d, PathBuf::from(DEFAULT_PROVIDER_DIR_RPM));
        assert!(
            why.contains("exists; /usr/sbin/ibacm holds neither"),
            "{why}"
        );
        let (d, why) = compiled_in_dir("/usr/sbin/ibacm", None, none);
        assert_eq!(d, PathBuf::from(DEFAULT_PROVIDER_DIR));
        assert!(why.contains("cannot be read"), "{why}");
    }

    fn file(name: &str, kind: Kind, urdma: bool, load: Option<Load>) -> Candidate {
        Candidate {
            file: name.into(),
            kind,
            urdma,
            load,
        }
    }

    fn problems_of(files: &[Candidate], rule: Rule) -> Vec<String> {
        let opts = Options::parse("provider urdma default\n");
        problems(files, rule, Path::new("/p"), &opts, "opts.cfg")
    }

    #[test]
    fn a_backup_copy_loads_urdma_twice_on_28_and_is_harmless_on_29() {
        let files = [
            file(URDMA_FILE, Kind::Regular, true, Some(Load::Ok)),
            file("libibacm_urdma.so.bak", Kind::Regular, true, Some(Load::Ok)),
        ];
        let p = problems_of(&files, Rule::Contains);
        assert_eq!(p, vec!["urdma would be loaded twice by the daemon: libibacm_urdma.so, libibacm_urdma.so.bak\n  \
                           - remove libibacm_urdma.so.bak: ibacm 28 and older load every file whose name contains .so".to_string()]);
        assert!(problems_of(&files, Rule::EndsWith).is_empty());
        let p = problems_of(&files, Rule::Unknown);
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("urdma would be loaded twice by ibacm 28 and older"),
            "{p:?}"
        );
        assert_eq!(
            files[1].describe(Rule::EndsWith),
            "libibacm_urdma.so.bak: skipped by the daemon: its name does not end in .so (ibacm 29 and later)"
        );
        assert_eq!(
            files[1].describe(Rule::Contains),
            "libibacm_urdma.so.bak: loaded (urdma)"
        );
        assert_eq!(
            files[1].describe(Rule::Unknown),
            "libibacm_urdma.so.bak: by ibacm 28 and older: loaded (urdma); by 29 and later: skipped (its name does not end in .so)"
        );
        assert_eq!(loaded_names(&files, Rule::Contains), vec!["urdma", "urdma"]);
        assert_eq!(loaded_names(&files, Rule::Unknown), vec!["urdma"]);
    }

    #[test]
    fn a_versioned_name_alone_is_not_loaded_from_29_on() {
        let files = [file(
            "libibacm_urdma.so.1",
            Kind::Regular,
            true,
            Some(Load::Ok),
        )];
        assert!(problems_of(&files, Rule::Contains).is_empty());
        for rule in [Rule::EndsWith, Rule::Unknown] {
            let p = problems_of(&files, rule);
            assert_eq!(p.len(), 1, "{p:?}");
            assert!(p[0].starts_with("no file in /p provides a loadable urdma provider\n  - libibacm_urdma.so.1: rename it to libibacm_urdma.so: ibacm 29 and later load only files whose name ends in .so"), "{p:?}");
            assert!(p[0].ends_with("\n  - `provider urdma default` (opts.cfg line 1) names a provider that will not load: ibacm 33 then segfaults at start-up"), "{p:?}");
        }
    }

    #[test]
    fn each_reason_urdma_is_missing_has_its_fix() {
        let glibc = "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.99' not found (required by /p/libibacm_urdma.so)";
        let files = [
            file(
                URDMA_FILE,
                Kind::Regular,
                true,
                Some(Load::Dlopen(glibc.into())),
            ),
            file("urdma-link.so", Kind::Symlink, true, None),
            file(
                "libother.so",
                Kind::Regular,
                false,
                Some(Load::NoSymbol("x".into())),
            ),
        ];
        let p = problems_of(&files, Rule::EndsWith);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("\n  - libibacm_urdma.so: it needs a newer glibc than this system's: rebuild for an older glibc or install the package built by `make dist`"), "{p:?}");
        assert!(p[0].contains("\n  - urdma-link.so: replace the symlink with a regular file: ibacm skips symlinks"), "{p:?}");
        assert!(!p[0].contains("libother"), "{p:?}");
        assert_eq!(
            files[0].describe(Rule::EndsWith),
            format!("libibacm_urdma.so: skipped by the daemon: dlopen fails: {glibc}")
        );
        assert_eq!(
            files[2].describe(Rule::EndsWith),
            "libother.so: skipped by the daemon: no provider_query symbol (x)"
        );
        let p = problems_of(&[], Rule::EndsWith);
        assert!(
            p[0].starts_with("urdma is not installed: no regular file libibacm_urdma.so in /p"),
            "{p:?}"
        );
    }

    #[test]
    fn a_provider_that_crashes_the_loader_fails_the_check() {
        let files = [
            file(URDMA_FILE, Kind::Regular, true, Some(Load::Ok)),
            file(
                "libbad.so",
                Kind::Regular,
                false,
                Some(Load::Crashed("signal 11".into())),
            ),
        ];
        let p = problems_of(&files, Rule::EndsWith);
        assert_eq!(p, vec!["loading libbad.so kills or hangs the process, and the daemon loads every provider at start-up\n  - remove libbad.so from /p".to_string()]);
    }
}
