//! Deterministic simulation of the urdma provider at scale: many hosts,
//! each running the provider's own engine through its sans-IO interface,
//! on a simulated network in virtual time (`net`), checked after every step
//! (`sim`). A seed decides everything, so a failing run is printed with its
//! seed and replays exactly (`urdma-dst run --seed N`).

pub mod attack;
mod check;
mod hostile;
pub mod net;
pub mod plot;
pub mod scenario;
pub mod sim;
pub mod states;
