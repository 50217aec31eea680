//! Where unpredictability comes from. Transaction ids are what keeps an
//! off-path host from forging replies, so in the daemon they come from the
//! kernel's random source; a simulation gives a number instead and then
//! runs the same way every time.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Read;

/// 256 bits to key what must not be guessed.
#[derive(Clone)]
pub struct Seed([u8; 32]);

impl Seed {
    /// From the kernel's random source.
    pub fn random() -> Seed {
        let mut key = [0u8; 32];
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut key));
        if let Err(e) = read {
            // Never expected; std's per-process random keys are the fallback.
            log::warn!("/dev/urandom: {e}; transaction ids keyed from std's random state");
            use std::hash::BuildHasher;
            for (i, chunk) in key.chunks_mut(8).enumerate() {
                let s = std::collections::hash_map::RandomState::new().hash_one(i);
                chunk.copy_from_slice(&s.to_le_bytes());
            }
        }
        Seed(key)
    }

    /// From a number, for simulations.
    pub fn from_u64(n: u64) -> Seed {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&n.to_le_bytes());
        Seed(key)
    }

    /// The `n`-th value of the keyed stream `label` (HMAC-SHA256, a PRF:
    /// knowing any number of values tells nothing of the next).
    pub fn value(&self, label: &[u8], n: u64) -> u64 {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("any key length");
        mac.update(label);
        mac.update(&n.to_le_bytes());
        let out = mac.finalize().into_bytes();
        u64::from_le_bytes(out[..8].try_into().expect("8 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_replay_from_a_number_and_differ_by_key_and_label() {
        let (a, b) = (Seed::from_u64(7), Seed::from_u64(7));
        assert_eq!(a.value(b"t", 1), b.value(b"t", 1));
        assert_ne!(a.value(b"t", 1), a.value(b"t", 2));
        assert_ne!(a.value(b"t", 1), a.value(b"u", 1));
        assert_ne!(a.value(b"t", 1), Seed::from_u64(8).value(b"t", 1));
        assert_ne!(Seed::random().value(b"t", 1), Seed::random().value(b"t", 1));
    }
}
