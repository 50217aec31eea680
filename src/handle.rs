//! Handles of what the daemon opened (devices, ports, endpoints,
//! addresses), one type per kind so that one cannot be passed for another.

/// A handle the daemon keeps for what it opened, as its context pointer:
/// never zero, so the context is never NULL, and unique across the four
/// kinds (one counter), so a context of one kind given where another is
/// expected finds nothing rather than the wrong thing.
pub trait Handle: Copy {
    fn raw(self) -> u64;
    fn from_raw(raw: u64) -> Self;
}

macro_rules! handle {
    ($name:ident, $what:literal) => {
        #[doc = concat!("Handle of ", $what, ".")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u64);

        impl Handle for $name {
            #[inline]
            fn raw(self) -> u64 {
                self.0
            }
            #[inline]
            fn from_raw(raw: u64) -> Self {
                $name(raw)
            }
        }
    };
}

handle!(DeviceId, "a device");
handle!(PortId, "a port");
handle!(EndpointId, "an endpoint");
handle!(AddressId, "an address");
