//! InfiniBand's encodings of MTU and rate (`enum ibv_mtu`, `enum
//! ibv_rate`, and the width and speed of `ibv_port_attr`), shared by the
//! options, this host's ports and the path records.

/// `enum ibv_mtu` for a size in bytes, if it is one of the IB MTUs.
pub fn mtu_enum(bytes: u32) -> Option<u8> {
    match bytes {
        256 => Some(1),
        512 => Some(2),
        1024 => Some(3),
        2048 => Some(4),
        4096 => Some(5),
        _ => None,
    }
}

/// `ibv_port_attr.active_width` encoding → number of lanes.
fn lanes(width: u8) -> Option<u32> {
    match width {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// `ibv_port_attr.active_speed` encoding → lane speed in units of 0.1 Gb/s
/// (the data rate names in `enum ibv_rate`, not the signalling rate).
fn lane_speed_x10(speed: u8) -> Option<u32> {
    match speed {
        1 => Some(25),      // SDR
        2 => Some(50),      // DDR
        4 | 8 => Some(100), // QDR, FDR10
        16 => Some(140),    // FDR
        32 => Some(250),    // EDR
        64 => Some(500),    // HDR
        128 => Some(1000),  // NDR
        _ => None,
    }
}

/// `enum ibv_rate` for a link rate in units of 0.1 Gb/s.
pub fn rate_enum_x10(gbps_x10: u32) -> Option<u8> {
    RATES.iter().find(|(r, _)| *r == gbps_x10).map(|(_, e)| *e)
}

/// The link rate of an `enum ibv_rate`, in units of 0.1 Gb/s.
pub fn rate_x10(rate: u8) -> Option<u32> {
    RATES.iter().find(|(_, e)| *e == rate).map(|(r, _)| *r)
}

/// The slower of two `enum ibv_rate` values (the enum is not ordered).
pub fn min_rate(a: u8, b: u8) -> u8 {
    match (rate_x10(a), rate_x10(b)) {
        (Some(x), Some(y)) if y < x => b,
        (None, Some(_)) => b,
        _ => a,
    }
}

const RATES: [(u32, u8); 23] = [
    (25, 2),
    (50, 5),
    (100, 3),
    (140, 11),
    (200, 6),
    (250, 15),
    (280, 19),
    (300, 4),
    (400, 7),
    (500, 20),
    (560, 12),
    (600, 8),
    (800, 9),
    (1000, 16),
    (1120, 13),
    (1200, 10),
    (1680, 14),
    (2000, 17),
    (3000, 18),
    (4000, 21),
    (6000, 22),
    (8000, 23),
    (12000, 24),
];

/// The rate of a port from its width and speed, through HDR and NDR, which
/// the daemon's own `acm_get_rate` does not know.
pub fn port_rate(width: u8, speed: u8) -> Option<u8> {
    rate_enum_x10(lanes(width)? * lane_speed_x10(speed)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_through_ndr() {
        assert_eq!(port_rate(2, 32), Some(16)); // 4x EDR = 100 Gb/s
        assert_eq!(port_rate(2, 64), Some(17)); // 4x HDR = 200
        assert_eq!(port_rate(2, 128), Some(21)); // 4x NDR = 400
        assert_eq!(port_rate(8, 128), Some(24)); // 12x NDR = 1200
        assert_eq!(port_rate(1, 16), Some(11)); // 1x FDR = 14
        assert_eq!(port_rate(2, 8), Some(7)); // 4x FDR10 = 40
        assert_eq!(port_rate(16, 64), Some(16)); // 2x HDR = 100
        assert_eq!(port_rate(0, 0), None); // a port that reports nothing
        assert_eq!(port_rate(2, 3), None);
        assert_eq!(min_rate(16, 3), 3, "10 Gb/s is slower than 100");
        assert_eq!(min_rate(7, 21), 7);
        assert_eq!(min_rate(16, 99), 16, "an unknown rate never wins");
    }
}
