//! Sans-IO model of an emulated WAN link (one direction).
//!
//! API CONTRACT (used by `wanopt-lab`'s packet driver; keep these names):
//!
//! ```ignore
//! let cfg: LinkConfig = LinkConfig { .. };          // or parsed from units, see `units`
//! let mut link = Link::new(cfg, seed);
//! link.handle_frame(now, frame);                    // an Ethernet II frame arrived at `now`
//! while let Some(frame) = link.poll_transmit(now) { /* send it */ }
//! let next: Option<Instant> = link.poll_timeout();  // when the next frame departs
//! let c: &Counters = link.counters();               // packets, bytes, drops by cause, queue
//! ```
//!
//! Time is `std::time::Instant` passed in by the caller; the model never reads
//! the clock and draws every random number from a generator seeded by `seed`.
