//! The discovery rounds a daemon logged as late (`discovery thread N ms
//! behind: ...`, at most one line a second): how far behind they were and
//! how much of it went in sending: what the fleet bench prints beside a
//! storm's times.

/// The late rounds a daemon logged (`discovery thread N ms behind: ...`):
/// how many, and in all how far behind and how long sending.
#[derive(Default, Clone, Copy)]
pub struct LateRounds {
    rounds: u64,
    behind_ms: u64,
    sending_ms: u64,
    most_ms: u64,
}

impl LateRounds {
    /// Those in `log` (a daemon's log, or the part of it since a moment).
    pub fn of(log: &str) -> LateRounds {
        let mut late = LateRounds::default();
        for line in log.lines() {
            let Some(rest) = line.split_once("discovery thread ").map(|(_, r)| r) else {
                continue;
            };
            let ms_before = |marker: &str| -> Option<u64> {
                let head = rest.split_once(marker)?.0;
                head.rsplit(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse()
                    .ok()
            };
            let Some(behind) = ms_before(" ms behind") else {
                continue;
            };
            late.rounds += 1;
            late.behind_ms += behind;
            late.most_ms = late.most_ms.max(behind);
            late.sending_ms += ms_before(" ms sending").unwrap_or(0);
        }
        late
    }
}

impl std::ops::Add for LateRounds {
    type Output = LateRounds;

    fn add(self, o: LateRounds) -> LateRounds {
        LateRounds {
            rounds: self.rounds + o.rounds,
            behind_ms: self.behind_ms + o.behind_ms,
            sending_ms: self.sending_ms + o.sending_ms,
            most_ms: self.most_ms.max(o.most_ms),
        }
    }
}

impl std::fmt::Display for LateRounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.rounds == 0 {
            return write!(f, "none");
        }
        write!(
            f,
            "{} (mean {} ms behind, {} ms of it sending; most {} ms)",
            self.rounds,
            self.behind_ms / self.rounds,
            self.sending_ms / self.rounds,
            self.most_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::LateRounds;

    #[test]
    fn late_rounds_are_read_from_the_daemons_warning() {
        let log = "2026-11-27T18:10:15.913: urdma: warning: discovery thread 882 ms behind: woke \
                   60 ms after its deadline, then 0 ms in the neighbour table, 0 ms deciding, \
                   822 ms sending\nurdma: info: discovery on UDP port 4791\n\
                   x: urdma: warning: discovery thread 300 ms behind: woke 300 ms after its \
                   deadline, then 0 ms in the neighbour table, 0 ms deciding, 0 ms sending\n";
        let late = LateRounds::of(log);
        assert_eq!(
            (late.rounds, late.behind_ms, late.sending_ms, late.most_ms),
            (2, 1182, 822, 882)
        );
        assert_eq!(
            (late + late).to_string(),
            "4 (mean 591 ms behind, 411 ms of it sending; most 882 ms)"
        );
        assert_eq!(
            LateRounds::of("urdma: info: discovery thread started").to_string(),
            "none"
        );
    }
}
