//! wanopt's path tools, as a library: what a path is and what it needs
//! from TCP. The `wanopt` binary parses their flags, calls these
//! functions and prints what they return.
//!
//! - [`probe`] (`wanopt probe`): a path's round-trip time, and its loss,
//!   reordering, duplication and bottleneck rate each way, measured with
//!   numbered UDP datagrams against a reflector ([`probe::UdpReflector`],
//!   `wanopt probe --listen`).
//! - [`window`](mod@window) (`wanopt window`): the TCP window and buffers a path needs
//!   and what it costs to go without them, for a path given by its rate
//!   and RTT ([`PathFlags`]) or as a probe measured it ([`probed`]).
//! - [`host`] (`wanopt host-check`): this host's TCP settings against
//!   that need.
//!
//! The arithmetic is the first two reference documents': a single TCP
//! connection moves at most one window per round trip, so filling a path
//! takes a window of rate x RTT (the bandwidth-delay product); beyond 64 KB
//! that needs window scaling; Linux advertises about half of a socket's
//! buffer as window (the rest pays for the kernel's per-packet overhead),
//! so the buffers' maximum must be twice the product; and on a lossy path
//! a loss-based TCP is held to about `MSS / RTT x 1.22 / sqrt(loss)`
//! (Mathis, Semke, Mahdavi and Ott, 1997) whatever its window ([`need`](mod@need)).
//!
//! Errors are one enum per operation: [`PathError`] for a path that
//! cannot be worked out from the flags (a usage error),
//! [`host::HostCheckError`], [`probe::ConfigError`],
//! [`probe::ProbeError`] and [`probe::ListenError`].
//!
//! ```
//! use wanopt_path::{window, PathFlags, DEFAULT_MSS};
//!
//! let flags = PathFlags {
//!     rate: Some("250mbit"),
//!     rtt: Some("150ms"),
//!     loss: None,
//!     mss: DEFAULT_MSS,
//!     probe: None,
//!     window: Some(256 << 10),
//! };
//! let text = window(&flags).unwrap();
//! assert!(text.contains("bandwidth-delay product: 4687500 bytes"));
//! assert!(text.contains("with a 262144-byte window: at most 13.98 Mbit/s (5.6% of the path)"));
//! ```

pub mod flags;
pub mod host;
pub mod need;
pub mod probe;
pub mod probed;
pub mod text;
pub mod window;

pub use flags::{FlagError, Overrides, PathFlags};
pub use host::{host_check, host_need, HostCheckError, HostReport};
pub use need::{need, Need, DEFAULT_MSS};
pub use probed::{ProbeFileError, ProbedPath, ProbedPathError};
pub use text::rate_text;
pub use window::{window, PathError};
