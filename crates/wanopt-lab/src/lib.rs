//! The wanopt lab: network namespaces joined by veth pairs, our user-space WAN
//! emulator as a bump in the wire, endpoint TCP profiles, a traffic generator
//! and scenarios that run the direct and the optimized path back to back.

pub mod cli;
