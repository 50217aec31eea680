//! The daemon's options file is shared: the daemon and every provider scan
//! all of it, each taking its own keys and ignoring the others. A line
//! means what the daemon's `sscanf("%s%s")` makes of it, so every reader
//! here splits it that way, through this one tokenizer: a reader that split
//! on other white space, or after decoding the line as UTF-8, would see a
//! key the daemon does not, or miss one it sees.

use crate::text;

/// A line of the options file that holds a key: its first two tokens.
/// Which line wins when a key repeats is the reader's business (the
/// daemon's rule is the last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting<'a> {
    /// The line's number, from 1.
    pub line: usize,
    /// The first token as written; keys compare case-insensitively.
    pub key: &'a [u8],
    /// The second token; the daemon ignores any after it.
    pub value: Option<&'a [u8]>,
    /// The whole line, for lines with rules of their own (the daemon splits
    /// its `provider` lines on spaces only).
    pub raw: &'a [u8],
}

impl Setting<'_> {
    /// Whether the key is `name`, compared as the daemon does (`strcasecmp`).
    pub fn is(&self, name: &str) -> bool {
        self.key.eq_ignore_ascii_case(name.as_bytes())
    }
}

/// The settings of an options file, in file order: a `#` in column 0 makes
/// a comment, of any bytes; a line without a token is skipped.
pub fn settings(bytes: &[u8]) -> impl Iterator<Item = Setting<'_>> {
    text::lines(bytes)
        .filter(|(_, raw)| raw.first() != Some(&b'#'))
        .filter_map(|(line, raw)| {
            let mut tokens = text::tokens(raw);
            Some(Setting {
                line,
                key: tokens.next()?,
                value: tokens.next(),
                raw,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Line number, key and value of a setting.
    type Row<'a> = (usize, &'a [u8], Option<&'a [u8]>);

    #[test]
    fn settings_are_the_first_two_tokens_of_lines_that_are_not_comments() {
        let got: Vec<Row> = settings(
            b"# urdma_mtu 256\n\n \t\nLog_Level 2 extra\n  urdma_sl\n#x\n\xe9 caf\xe9\r\n",
        )
        .map(|s| (s.line, s.key, s.value))
        .collect();
        assert_eq!(
            got,
            [
                (4, &b"Log_Level"[..], Some(&b"2"[..])),
                (5, b"urdma_sl", None),
                (7, b"\xe9", Some(b"caf\xe9")),
            ]
        );
        let first = settings(b"Provider_Lib_Path /opt\n").next().unwrap();
        assert!(first.is("provider_lib_path") && !first.is("provider"));
        assert_eq!(first.raw, b"Provider_Lib_Path /opt");
    }
}
