//! Which of the lab's emulated WAN links: link 1, always there, or link 2
//! (`lab up --link2`), each with its emulator process, its counters file
//! and its two `wan` interfaces.

use super::second::{WAN2_CORE_IF, WAN2_EDGE_IF};

/// One of the lab's emulated WAN links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WanLink {
    /// Link 1: 198.18.2.0/24, always there, carries the routes.
    One,
    /// Link 2: 198.18.4.0/24, with `lab up --link2`.
    Two,
}

impl WanLink {
    /// The link numbered `number` (1 or 2), whether or not the lab has it.
    pub fn from_number(number: u32) -> Option<WanLink> {
        match number {
            1 => Some(WanLink::One),
            2 => Some(WanLink::Two),
            _ => None,
        }
    }

    /// The link's number, 1 or 2.
    pub fn number(self) -> u8 {
        match self {
            WanLink::One => 1,
            WanLink::Two => 2,
        }
    }

    /// The name its emulator process is recorded under.
    pub fn daemon(self) -> &'static str {
        match self {
            WanLink::One => "emulator",
            WanLink::Two => "emulator2",
        }
    }

    /// The file (in the lab's state directory) its emulator writes its
    /// counters to.
    pub fn counters_file(self) -> &'static str {
        match self {
            WanLink::One => "counters.json",
            WanLink::Two => "counters2.json",
        }
    }

    /// Its `wan` interfaces: (facing the edge, facing the core).
    pub fn interfaces(self) -> (&'static str, &'static str) {
        match self {
            WanLink::One => (crate::topology::WAN_EDGE_IF, crate::topology::WAN_CORE_IF),
            WanLink::Two => (WAN2_EDGE_IF, WAN2_CORE_IF),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_numbered_one_and_two() {
        assert_eq!(WanLink::from_number(1), Some(WanLink::One));
        assert_eq!(WanLink::from_number(2).map(WanLink::number), Some(2));
        assert_eq!(WanLink::from_number(0), None);
        assert_eq!(WanLink::from_number(3), None);
        assert_eq!(WanLink::Two.counters_file(), "counters2.json");
        assert_eq!(WanLink::Two.interfaces(), ("e1", "c1"));
    }
}
