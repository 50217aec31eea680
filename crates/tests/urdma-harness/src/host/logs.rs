//! The daemon's files as a test reads them: its log, its output and the
//! provider's metrics file. They stay in the host's directory after the
//! daemon has gone, for checks and for `diagnostics`.

use super::Namespaces;
use std::fs;

impl Namespaces {
    /// The daemon's log file (`log_file`) as it is, each provider line
    /// `urdma: <severity>: <message>`.
    pub fn raw_log(&self) -> String {
        fs::read_to_string(self.path("ibacm.log")).unwrap_or_default()
    }

    /// The daemon's log with the provider's severities left out, so that
    /// tests match `urdma: <message>`: what a message says is one check,
    /// the severity it is written at another (`log_severity`).
    pub fn log(&self) -> String {
        without_severities(&self.raw_log())
    }

    /// The severity of the first provider line whose message begins with
    /// `message`, if one is logged.
    pub fn log_severity(&self, message: &str) -> Option<String> {
        self.raw_log().lines().find_map(|line| {
            let (_, rest) = line.split_once(PREFIX)?;
            let (severity, text) = rest.split_once(": ")?;
            (SEVERITIES.contains(&severity) && text.starts_with(message))
                .then(|| severity.to_string())
        })
    }

    /// The provider's metrics file at its default path (`/run` is the
    /// host's run directory), empty before the first write.
    pub fn metrics_file(&self) -> String {
        fs::read_to_string(self.path("run/ibacm-urdma.prom")).unwrap_or_default()
    }

    /// The daemon's stdout/stderr: simulator messages and acknowledgements.
    pub fn daemon_output(&self) -> String {
        fs::read_to_string(self.path("daemon.out")).unwrap_or_default()
    }

    pub fn log_count(&self, pattern: &str) -> usize {
        self.log().matches(pattern).count()
    }
}

const PREFIX: &str = "urdma: ";
const SEVERITIES: [&str; 5] = ["error", "warning", "info", "debug", "trace"];

/// `text` with `urdma: <severity>: ` written as `urdma: `.
fn without_severities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let (before, after) = rest.split_at(at + PREFIX.len());
        out.push_str(before);
        rest = SEVERITIES
            .iter()
            .find_map(|s| after.strip_prefix(s)?.strip_prefix(": "))
            .unwrap_or(after);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::without_severities;

    #[test]
    fn severities_are_left_out_and_nothing_else() {
        let log =
            "t0: urdma: error: a: b\nt1: urdma: info: urdma: x\nt2: acm_x: urdma: errors: 3\n";
        assert_eq!(
            without_severities(log),
            "t0: urdma: a: b\nt1: urdma: urdma: x\nt2: acm_x: urdma: errors: 3\n"
        );
    }
}
