//! The daemon reads its files as bytes, one line at a time, and so must
//! everything that reads them for it or beside it (the provider's options,
//! hosts and key files; `urdma-acm check-config` and `doctor`): a reader of
//! its own, or one that takes the file as UTF-8 text, would lose a whole
//! file to one Latin-1 comment, or report a line the daemon reads fine.
//! One line that is not valid text is a problem at its `file:line`, never a
//! reason to lose the rest of the file; comments may hold any bytes.
//!
//! One reader for every program, so they all report the same problems in
//! the same words.

use std::fmt;
use std::io;
use std::path::Path;

/// A problem found in a file, located for the operator (line 0: the whole
/// file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl Diagnostic {
    pub fn new(file: &str, line: usize, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: file.to_string(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// The whole file, `None` when it does not exist; any other failure to read
/// it is the error.
pub fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The lines of `bytes` with their numbers from 1, without the `\n` (or
/// `\r\n`) that ends them.
#[inline]
pub fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let empty = bytes.is_empty();
    body.split(|&b| b == b'\n')
        .filter(move |_| !empty)
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l))
}

/// `line` as text, or why it is not: the message names the first byte
/// that is not UTF-8 and its column, so the operator can find it.
#[inline]
pub fn text(line: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(line).map_err(|e| {
        let at = e.valid_up_to();
        format!(
            "not valid UTF-8 text (byte {:#04x} at column {})",
            line[at],
            at + 1
        )
    })
}

/// What C's `isspace` calls white space in the "C" locale, which is how
/// the daemon's `sscanf("%s")` splits a line.
#[inline]
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The white-space separated tokens of a line, as bytes.
#[inline]
pub fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| is_space(b)).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_and_lose_their_terminators() {
        let got: Vec<(usize, &[u8])> = lines(b"a\r\n\nb c\n").collect();
        assert_eq!(got, [(1, &b"a"[..]), (2, b""), (3, b"b c")]);
        assert_eq!(lines(b"last").count(), 1, "a last line without \\n");
        assert_eq!(lines(b"").count(), 0);
    }

    #[test]
    fn bytes_that_are_not_text_are_located() {
        assert_eq!(
            text(b"caf\xe9 au lait"),
            Err("not valid UTF-8 text (byte 0xe9 at column 4)".to_string())
        );
        assert_eq!(text("café".as_bytes()), Ok("café"));
    }

    #[test]
    fn tokens_split_on_c_white_space() {
        let got: Vec<&[u8]> = tokens(b" a\tb\x0bc\x0c d ").collect();
        assert_eq!(got, [&b"a"[..], b"b", b"c", b"d"]);
    }
}
