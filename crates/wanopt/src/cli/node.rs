//! `wanopt edge` and `wanopt core`: flags, the TOML config file, and their
//! merge into the node's validated configuration (flags override the file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;

use wanopt_node::budget::DEFAULT_COMPRESSOR_MEMORY;
use wanopt_node::class::{Classes, TrafficClass};
use wanopt_node::core::{CoreConfig, ListenTcp};
use wanopt_node::datagram::DuplicationMode;
use wanopt_node::datagram::FecMode;
use wanopt_node::edge::{
    EdgeConfig, FailMode, Forward, PathUse, TransportChoice, WanPath, MAX_PATHS,
};
use wanopt_node::flow::udp::edge::UdpForward;
use wanopt_node::identity::PrivateKey;
use wanopt_node::limits::FlowLimitsConfig;
use wanopt_node::reduce::{
    CompressionMode, ReduceConfig, DEFAULT_CACHE_CHECKPOINT, DEFAULT_CACHE_SIZE,
};
use wanopt_node::tunnel::{Congestion, TunnelTuning};

use super::config_file::{other_role, read_file, FileConfig};
use super::peers::{rules, Mode, Peers};
use super::size::parse_size;
use super::size::{size_setting, window_setting};

/// Options both node roles share.
#[derive(Debug, Clone, Args, Default)]
pub struct CommonArgs {
    /// TOML file with any of these options (kebab-case keys); flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// This node's private key file (from `wanopt keygen`).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// A peer's public key to accept (repeatable).
    #[arg(long = "peer-key", value_name = "PUB")]
    pub peer_key: Vec<String>,
    /// Serve /status, /flows and /metrics on this address.
    #[arg(long, value_name = "ADDR")]
    pub control: Option<SocketAddr>,
    /// File the node writes its control token to at start (mode 0600);
    /// requests that change the node (`wanopt cache clear`) must send it
    /// [default: /run/wanopt/control-PORT.token for root, else
    /// $XDG_RUNTIME_DIR/wanopt/control-PORT.token].
    #[arg(long, value_name = "FILE")]
    pub control_token: Option<PathBuf>,
    /// Timeout of TCP connections this node opens [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,
    /// How long live flows may drain on SIGINT/SIGTERM [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub drain: Option<Duration>,
    /// Flows carried at once; more are refused (reset), counted and logged
    /// [default: the file-descriptor limit less 512].
    #[arg(long, value_name = "N")]
    pub max_flows: Option<usize>,
    /// Flows carried at once from one source address [default: half of
    /// --max-flows].
    #[arg(long, value_name = "N")]
    pub max_flows_per_source: Option<usize>,
    /// Reset flows that carry no byte either way for this long [default:
    /// never].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub flow_idle_timeout: Option<Duration>,
    /// End a UDP flow that carries no datagram either way for this long
    /// [default: 60s]; the core ends its side 10 s after that.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub udp_idle_timeout: Option<Duration>,
    /// Tunnel congestion control: bbr, cubic or newreno [default: bbr].
    #[arg(long)]
    pub congestion: Option<Congestion>,
    /// Repeat datagrams under the tunnel: `tails` sends the last datagrams
    /// of each burst a second time once the path falls quiet, so a lost
    /// tail costs no retransmission timeout; `auto` does so on paths that
    /// lose at least 0.1% of packets; `off` never [default: auto].
    #[arg(long, value_name = "MODE")]
    pub duplication: Option<DuplicationMode>,
    /// Forward error correction under the tunnel, for every datagram it
    /// sends: `auto` adds Reed-Solomon repair datagrams on paths that lose
    /// packets, as many as the loss the peer measures calls for (within
    /// --fec-budget), and none on a clean path; `K:M` always sends M
    /// repairs per K datagrams; `off` never [default: auto].
    #[arg(long, value_name = "auto|off|K:M", value_parser = parse_fec)]
    pub fec: Option<FecMode>,
    /// Most repair traffic `--fec auto` may add, percent of the datagrams
    /// it protects [default: 20].
    #[arg(long, value_name = "PCT")]
    pub fec_budget: Option<f64>,
    /// Largest UDP payload path MTU discovery may probe; PMTUD settles on
    /// what the path allows [default: 1472, a 1500-byte MTU's].
    #[arg(long, value_name = "BYTES")]
    pub max_mtu: Option<u16>,
    /// How long a tunnel may stay silent before the node declares it dead
    /// and (an edge) redials, e.g. 1500ms; keepalives go out at a quarter
    /// of it. Short in a core cluster, so that an edge leaves a dead
    /// replica quickly; long enough to ride out the path's outages
    /// [default: 8s; 400ms to 10min].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub tunnel_timeout: Option<Duration>,
    /// Worker threads of the node's runtime: its packets, flows and codec
    /// run on this many cores at most [default: the CPUs the process may
    /// use, e.g. as `taskset` leaves them]. Read at start; a reload keeps
    /// the running value.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Largest per-flow receive window of the tunnel, e.g. 16MiB: a flow's
    /// window grows up to it while its receiver keeps up [default: 48MiB;
    /// at least 64KiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub stream_window: Option<u64>,
    /// A flow's receive window when it opens [default: 4MiB; at least
    /// 64KiB; at most --stream-window].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub stream_window_initial: Option<u64>,
    /// The tunnel's base receive window shared by flows beyond their own,
    /// and its send window, e.g. 64MiB [default: 96MiB; at least 64KiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub connection_window: Option<u64>,
    /// Flow receive windows the node grants at once over all its tunnels,
    /// e.g. 512MiB: what peers may have sent and receivers not yet read
    /// [default: 1GiB; at least 64KiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub window_budget: Option<u64>,
    /// Turn data reduction (compression and the byte cache) off: TCP
    /// optimization only. Both ends must run it for a flow to be reduced.
    #[arg(long)]
    pub no_reduce: bool,
    /// Directory of the persistent byte cache, one subdirectory per peer
    /// [default: /var/cache/wanopt for root, else ~/.cache/wanopt].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Bound on each peer's byte cache on disk, e.g. 512MiB, 20GB
    /// [default: 4GiB]; the oldest data is evicted beyond it.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub cache_size: Option<u64>,
    /// How often the byte cache is synced to disk and its journal folded
    /// into a snapshot, e.g. 30s [default: 10s]: a power cut loses at
    /// most what the peer acknowledged since (a crashed process loses
    /// nothing: every acknowledgement is journaled as it comes); at least 1s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub cache_checkpoint: Option<Duration>,
    /// Compression of literals: auto (LZMA2, and PPMd for runs of text,
    /// while the tunnel's estimated rate is under 3 Mbit/s, zstd under 100
    /// Mbit/s, LZ4 above), lz4, zstd, lzma, max (PPMd for text, LZMA2 for
    /// the rest) or off [default: auto]. Every codec is decoded whatever
    /// the peer's setting.
    #[arg(long, value_name = "MODE")]
    pub compression: Option<CompressionMode>,
    /// Bound on the memory all flows' stream compressors may hold, e.g.
    /// 256MiB [default: 512MiB]. A flow's LZMA2 or slow zstd stream holds
    /// 7-13 MiB while it sends; a flow that does not fit steps down to
    /// zstd level 3 (3 MiB), then to LZ4 (none), and back up when memory
    /// is returned. 0 keeps every flow on LZ4.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub compressor_memory: Option<u64>,
}

/// `wanopt core` options.
#[derive(Debug, Clone, Default, Args)]
pub struct CoreArgs {
    /// UDP address to accept tunnels on, e.g. 0.0.0.0:4433.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Destinations the core may connect to: CIDR[:PORT[-PORT]] (repeatable).
    /// Nothing is allowed by default.
    #[arg(long, value_name = "RULE")]
    pub allow: Vec<String>,
    /// Destinations the core may send UDP flows to, CIDR[:PORT[-PORT]]
    /// (repeatable; --allow does not cover UDP). None by default.
    #[arg(long, value_name = "RULE")]
    pub allow_udp: Vec<String>,
    /// This replica's own address, IP:PORT, for a core behind a cluster's
    /// shared address: told to every edge, whose redials then come here
    /// directly while this replica answers (and its byte cache stays warm).
    #[arg(long, value_name = "ADDR")]
    pub advertise: Option<SocketAddr>,
    /// Where to accept tunnels over TCP, for edges whose networks block or
    /// police UDP: ADDR:PORT, or `off` [default: the --listen address's IP,
    /// port 443; said in the log and skipped when it cannot be bound].
    #[arg(long, value_name = "ADDR|off")]
    pub listen_tcp: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `wanopt edge` options.
#[derive(Debug, Clone, Default, Args)]
pub struct EdgeArgs {
    /// The core's UDP address, HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    pub core: Option<String>,
    /// How the tunnel reaches the core: `quic` (UDP), `tcp` (the same
    /// tunnel carried on TCP, to --tcp-port) or `auto` (QUIC; over TCP when
    /// no QUIC handshake completes within 3 s, UDP goes silent, or a probe
    /// shows UDP policed; back to QUIC for new flows when it works again)
    /// [default: auto].
    #[arg(long, value_name = "auto|quic|tcp")]
    pub transport: Option<TransportChoice>,
    /// The cores' TCP port for tunnels over TCP [default: 443].
    #[arg(long, value_name = "PORT")]
    pub tcp_port: Option<u16>,
    /// Carry connections accepted on LISTEN to DEST through the core
    /// (repeatable), e.g. 127.0.0.1:8080=198.51.100.7:80.
    #[arg(long, value_name = "LISTEN=DEST")]
    pub forward: Vec<String>,
    /// Carry UDP datagrams received on LISTEN to DEST through the core, one
    /// flow per client address, replies back to it (repeatable), e.g.
    /// 127.0.0.1:5353=198.51.100.7:53. The core must --allow-udp DEST.
    #[arg(long, value_name = "LISTEN=DEST")]
    pub forward_udp: Vec<String>,
    /// Accept connections redirected by the firewall (REDIRECT or TPROXY) here.
    #[arg(long, value_name = "LISTEN")]
    pub transparent: Option<SocketAddr>,
    /// Receive UDP datagrams the firewall diverts here with TPROXY (needs
    /// CAP_NET_ADMIN); each (client, original destination) is one flow to
    /// that destination through the core, which must --allow-udp it.
    #[arg(long, value_name = "LISTEN")]
    pub transparent_udp: Option<SocketAddr>,
    /// Optimize only transparent flows to these destinations,
    /// CIDR[:PORT[-PORT]] (repeatable); --print-firewall sends only these to
    /// the edge, which refuses any other. With no rule, everything is
    /// optimized.
    #[arg(long, value_name = "RULE")]
    pub optimize: Vec<String>,
    /// Connect a transparent flow that matches no --optimize rule to its
    /// destination from the edge's own address (it escapes the FORWARD
    /// policy) instead of refusing it.
    #[arg(long)]
    pub pass_unmatched: bool,
    /// When the tunnel is down: `open` closes the transparent listener, so
    /// that under TPROXY rules the kernel routes new flows (FORWARD policy
    /// applies), `closed` waits --tunnel-wait and resets them [default: open].
    #[arg(long, value_name = "open|closed")]
    pub fail: Option<FailMode>,
    /// How long a flow waits for the tunnel before it is reset [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub tunnel_wait: Option<Duration>,
    /// Local UDP address of the tunnel [default: any port].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<SocketAddr>,
    /// A WAN path to the core: datagrams leave from this host's address
    /// LOCAL to the core's address REMOTE (repeatable, in preference
    /// order), e.g. 192.0.2.10=198.51.100.7:4433. Each is probed; data
    /// takes the first that is up and fails over to the next. The tunnel's
    /// socket then binds the wildcard address (the port of --bind).
    /// `,rate=20mbit` declares what the link carries (IP packets, both
    /// ways; `,up=` and `,down=` for one): the tunnel never sends faster
    /// on it, and the core is asked the same for the down rate.
    #[arg(long = "path", value_name = "LOCAL=REMOTE[,rate=R]")]
    pub path: Vec<String>,
    /// How the paths are used: `failover` (one carries the data, the next
    /// takes over within a few round trips of it failing) or `duplicate`
    /// (failover, and each datagram that carries a UDP flow, such as a
    /// call, also goes on every other path that is up; the core keeps the
    /// first copy and answers the same way) or `spread-fec` (failover, and
    /// the FEC repairs go on the least lossy other path that is up; the
    /// core does the same) or `bond` (every path carries data at once,
    /// each datagram on the path where it arrives first, each path paced
    /// by its own controller, so that one flow gets the links' sum; the
    /// receiving node restores the order, and a path that stops answering
    /// hands what it carried to the others; the core does the same)
    /// [default: failover].
    #[arg(long, value_name = "failover|duplicate|spread-fec|bond")]
    pub path_mode: Option<PathUse>,
    /// A traffic class (repeatable; the first that matches a flow is its
    /// class): `name=NAME` and what it matches, `udp` or `tcp`,
    /// `dst=CIDR[:PORT[-PORT]]` and `dscp=ef|af41|cs5|0-63` (each
    /// repeatable; DSCP of a UDP flow's first datagram), then what it gets:
    /// `realtime` (UDP: its datagrams go on every path in duplicate mode
    /// and in FEC's call strand, short blocks with a full code) and
    /// `priority=high|normal|low` (its tunnel stream goes ahead of or
    /// behind the others). E.g. name=voice,udp,dscp=ef,realtime,priority=high.
    /// Without classes every UDP flow is real-time; with classes only those
    /// of a class that says `realtime`.
    #[arg(long = "class", value_name = "SPEC")]
    pub class: Vec<String>,
    /// Optimized flows to these destinations, CIDR[:PORT[-PORT]], get TCP
    /// optimization only, no data reduction (repeatable), e.g. 0.0.0.0/0:443
    /// for traffic that is already encrypted.
    #[arg(long, value_name = "RULE")]
    pub no_reduce_to: Vec<String>,
    /// Print the firewall rules (TPROXY first, then REDIRECT) that send the
    /// flows --optimize selects to --transparent, with their teardown, and exit.
    #[arg(long)]
    pub print_firewall: bool,
    /// LAN interface the clients arrive on, for --print-firewall
    /// [default: eth0].
    #[arg(long, value_name = "IF")]
    pub lan_if: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The largest UDP payload QUIC allows (RFC 9000's max_udp_payload_size).
const MAX_UDP_PAYLOAD: u16 = 65527;

/// The longest duration a node takes: a year. A longer one could not be
/// added to a clock (`--drain 10000000000000000000s` would panic at
/// shutdown).
const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration (`10s`, `500ms`, `2h`) of at most [`MAX_DURATION`].
fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if d > MAX_DURATION {
        return Err(format!("{text} is longer than a year"));
    }
    Ok(d)
}

fn duration(
    flag: Option<Duration>,
    file: Option<&str>,
    name: &str,
    default: Duration,
) -> anyhow::Result<Duration> {
    match (flag, file) {
        (Some(d), _) => Ok(d),
        (None, Some(text)) => parse_duration(text).map_err(|e| {
            anyhow::anyhow!("config file: {name} = {text:?} is not a duration of at most a year (e.g. 10s, 500ms): {e}")
        }),
        (None, None) => Ok(default),
    }
}

/// `d` unless it is zero (a zero timeout fails everything it guards).
fn positive(d: Duration, name: &str) -> anyhow::Result<Duration> {
    if d.is_zero() {
        bail!("--{name} must be more than 0 (e.g. 10s)");
    }
    Ok(d)
}

/// Flags win; lists from flags replace lists from the file.
fn list(flags: &[String], file: Vec<String>) -> Vec<String> {
    if flags.is_empty() {
        file
    } else {
        flags.to_vec()
    }
}

struct Common {
    key: PrivateKey,
    peers: Peers,
    control: Option<SocketAddr>,
    control_token: Option<PathBuf>,
    connect_timeout: Duration,
    drain: Duration,
    tuning: TunnelTuning,
    reduce: Option<ReduceConfig>,
    limits: FlowLimitsConfig,
    flow_idle_timeout: Option<Duration>,
    udp_idle_timeout: Duration,
}

/// The permission bits of `path` when group or others may read or write
/// it (`None` when they may not, or it cannot be read).
fn exposed_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o066 != 0).then_some(mode)
}

fn common(flags: &CommonArgs, file: &mut FileConfig, mode: Mode) -> anyhow::Result<Common> {
    let (key, key_path) = key(flags, file)?;
    let peers = Peers::read(
        &list(&flags.peer_key, std::mem::take(&mut file.peer_key)),
        &file.peer,
        &key,
        &key_path,
        mode,
    )
    .map_err(|e| in_file(flags.config.as_deref(), e))?;
    let tuning = tuning(flags, file)?;
    let reduce = reduce(flags, file)?;
    let limits = limits(flags, file)?;
    let flow_idle_timeout = match (flags.flow_idle_timeout, file.flow_idle_timeout.as_deref()) {
        (None, None) => None,
        (flag, file) => Some(positive(
            duration(flag, file, "flow-idle-timeout", Duration::ZERO)?,
            "flow-idle-timeout",
        )?),
    };
    let control = flags.control.or(file.control);
    let control_token = flags.control_token.clone().or(file.control_token.take());
    if control.is_none() && control_token.is_some() {
        bail!("--control-token needs --control ADDR (the node serves no control API without it)");
    }
    let udp_idle_timeout = positive(
        duration(
            flags.udp_idle_timeout,
            file.udp_idle_timeout.as_deref(),
            "udp-idle-timeout",
            wanopt_node::flow::udp::DEFAULT_UDP_IDLE_TIMEOUT,
        )?,
        "udp-idle-timeout",
    )?;
    Ok(Common {
        limits,
        flow_idle_timeout,
        udp_idle_timeout,
        reduce,
        key,
        peers,
        control,
        control_token,
        connect_timeout: positive(
            duration(
                flags.connect_timeout,
                file.connect_timeout.as_deref(),
                "connect-timeout",
                Duration::from_secs(10),
            )?,
            "connect-timeout",
        )?,
        drain: duration(
            flags.drain,
            file.drain.as_deref(),
            "drain",
            Duration::from_secs(10),
        )?,
        tuning,
    })
}

/// An error about the config file's contents, naming the file.
fn in_file(path: Option<&std::path::Path>, e: anyhow::Error) -> anyhow::Error {
    match path {
        Some(path) => anyhow::anyhow!("config file {}: {e:#}", path.display()),
        None => e,
    }
}

/// This node's key, and the file it was read from.
fn key(flags: &CommonArgs, file: &mut FileConfig) -> anyhow::Result<(PrivateKey, PathBuf)> {
    let key_path = flags
        .key
        .clone()
        .or(file.key.take())
        .context("no key: give --key FILE (make one with `wanopt keygen --out FILE`)")?;
    let key = PrivateKey::read(&key_path)?;
    if let Some(mode) = exposed_mode(&key_path) {
        // A file without the private-key header was refused above; this
        // one is a private key that others may read or write.
        tracing::warn!(
            "key file {} has mode {mode:o}: other users can read or write this private key; `wanopt keygen` writes private keys 0600",
            key_path.display()
        );
    }
    Ok((key, key_path))
}

/// Most worker threads `--threads` takes.
const MAX_THREADS: usize = 1024;

/// The node's worker threads: `--threads`, else the config file's
/// `threads`, else the CPUs this process may run on.
pub fn threads(flags: &CommonArgs) -> anyhow::Result<usize> {
    match flags.threads {
        Some(n) => threads_setting(Some(n), "--threads"),
        None => {
            let file = read_file(flags.config.as_deref())?;
            threads_setting(file.threads, "config file: threads =")
        }
    }
}

/// `threads` (named `what` in an error) checked, or the CPUs this process
/// may run on.
pub(super) fn threads_setting(threads: Option<usize>, what: &str) -> anyhow::Result<usize> {
    match threads {
        Some(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        Some(n) => bail!("{what} {n}: expected 1 to {MAX_THREADS} worker threads"),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// Bounds of `--tunnel-timeout`: below, a few lost keepalives end a live
/// tunnel; above, quinn's idle timer (a varint of milliseconds) is moot.
const MIN_TUNNEL_TIMEOUT: Duration = Duration::from_millis(400);
const MAX_TUNNEL_TIMEOUT: Duration = Duration::from_secs(600);

/// The tunnel's tuning: congestion control, duplication, MTU and windows.
fn tuning(flags: &CommonArgs, file: &mut FileConfig) -> anyhow::Result<TunnelTuning> {
    let defaults = TunnelTuning::default();
    let tuning = TunnelTuning {
        congestion: flags
            .congestion
            .or(file.congestion)
            .unwrap_or(defaults.congestion),
        duplication: flags
            .duplication
            .or(file.duplication)
            .unwrap_or(defaults.duplication),
        fec: match (flags.fec, file.fec.take()) {
            (Some(f), _) => f,
            (None, Some(f)) => parse_fec(f.as_str()).map_err(|e| anyhow::anyhow!("fec: {e}"))?,
            (None, None) => defaults.fec,
        },
        fec_budget: fec_budget(flags.fec_budget.or(file.fec_budget))?
            .unwrap_or(defaults.fec_budget),
        max_mtu: flags.max_mtu.or(file.max_mtu).unwrap_or(defaults.max_mtu),
        stream_window: window_setting(
            flags.stream_window,
            file.stream_window.take(),
            "stream-window",
            defaults.stream_window,
        )?,
        stream_window_initial: window_setting(
            flags.stream_window_initial,
            file.stream_window_initial.take(),
            "stream-window-initial",
            defaults.stream_window_initial,
        )?,
        connection_window: window_setting(
            flags.connection_window,
            file.connection_window.take(),
            "connection-window",
            defaults.connection_window,
        )?,
        window_budget: std::sync::Arc::new(wanopt_node::tunnel::ReceiveBudget::new(
            window_setting(
                flags.window_budget,
                file.window_budget.take(),
                "window-budget",
                wanopt_node::tunnel::DEFAULT_WINDOW_BUDGET,
            )?,
        )),
        ..defaults
    };
    if tuning.stream_window_initial > tuning.stream_window {
        bail!(
            "--stream-window-initial {} is larger than --stream-window {}",
            tuning.stream_window_initial,
            tuning.stream_window
        );
    }
    let timeout = duration(
        flags.tunnel_timeout,
        file.tunnel_timeout.as_deref(),
        "tunnel-timeout",
        tuning.idle_timeout,
    )?;
    if !(MIN_TUNNEL_TIMEOUT..=MAX_TUNNEL_TIMEOUT).contains(&timeout) {
        bail!(
            "--tunnel-timeout {}: expected 400ms to 10min",
            humantime::format_duration(timeout)
        );
    }
    let tuning = TunnelTuning {
        idle_timeout: timeout,
        keepalive: (timeout / 4).min(tuning.keepalive),
        ..tuning
    };
    if tuning.max_mtu < 1200 {
        bail!(
            "--max-mtu {} is below QUIC's minimum of 1200",
            tuning.max_mtu
        );
    }
    if tuning.max_mtu > MAX_UDP_PAYLOAD {
        bail!(
            "--max-mtu {} is above the largest UDP payload QUIC sends, {MAX_UDP_PAYLOAD}",
            tuning.max_mtu
        );
    }
    Ok(tuning)
}

/// `--fec`'s value.
fn parse_fec(s: &str) -> Result<FecMode, String> {
    s.parse()
}

/// `--fec-budget` in percent, as a share.
fn fec_budget(percent: Option<f64>) -> anyhow::Result<Option<f64>> {
    match percent {
        None => Ok(None),
        Some(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(Some(p / 100.0)),
        Some(p) => bail!("--fec-budget {p} is not a percentage between 0 and 100"),
    }
}

/// Data reduction's settings (`None` with `--no-reduce`).
fn reduce(flags: &CommonArgs, file: &mut FileConfig) -> anyhow::Result<Option<ReduceConfig>> {
    let no_reduce = flags.no_reduce || file.no_reduce.unwrap_or(false);
    let cache_size = size_setting(
        flags.cache_size,
        file.cache_size.as_deref(),
        "cache-size",
        DEFAULT_CACHE_SIZE,
    )?;
    let compressor_memory = size_setting(
        flags.compressor_memory,
        file.compressor_memory.as_deref(),
        "compressor-memory",
        DEFAULT_COMPRESSOR_MEMORY,
    )?;
    let cache_checkpoint = duration(
        flags.cache_checkpoint,
        file.cache_checkpoint.as_deref(),
        "cache-checkpoint",
        DEFAULT_CACHE_CHECKPOINT,
    )?;
    if cache_checkpoint < Duration::from_secs(1) {
        bail!(
            "--cache-checkpoint must be at least 1s (each checkpoint syncs the cache to disk; crashes are covered by the journal between checkpoints)"
        );
    }
    let reduce = (!no_reduce).then(|| ReduceConfig {
        cache_dir: flags
            .cache_dir
            .clone()
            .or(file.cache_dir.take())
            .unwrap_or_else(ReduceConfig::default_dir),
        cache_size,
        cache_checkpoint,
        compression: flags.compression.or(file.compression).unwrap_or_default(),
        compressor_memory,
    });
    Ok(reduce)
}

/// The limits on flows, in total and per source.
fn limits(flags: &CommonArgs, file: &FileConfig) -> anyhow::Result<FlowLimitsConfig> {
    let defaults = FlowLimitsConfig::for_this_process();
    let max_flows = flags
        .max_flows
        .or(file.max_flows)
        .unwrap_or(defaults.max_flows);
    Ok(FlowLimitsConfig {
        max_flows: positive_count(max_flows, "max-flows")?,
        max_flows_per_source: positive_count(
            flags
                .max_flows_per_source
                .or(file.max_flows_per_source)
                .unwrap_or((max_flows / 2).max(1)),
            "max-flows-per-source",
        )?,
    })
}

/// Validates `wanopt core` options into a configuration.
pub fn core_config(args: &CoreArgs) -> anyhow::Result<CoreConfig> {
    core_config_in(args, Mode::Core)
}

/// The core part of a node `mode` runs.
pub(super) fn core_config_in(args: &CoreArgs, mode: Mode) -> anyhow::Result<CoreConfig> {
    let mut file = read_file(args.common.config.as_deref())?;
    if mode == Mode::Core {
        other_role(
            args.common.config.as_deref(),
            &file.edge_keys(),
            "edge",
            "core",
        )?;
    }
    let common = common(&args.common, &mut file, mode)?;
    let listen = args
        .listen
        .or(file.listen)
        .context("no listen address: give --listen ADDR, e.g. 0.0.0.0:4433")?;
    let allow = rules(&list(&args.allow, std::mem::take(&mut file.allow)))?;
    let allow_udp = rules(&list(&args.allow_udp, std::mem::take(&mut file.allow_udp)))?;
    let advertise = args.advertise.or(file.advertise);
    if let Some(addr) = advertise {
        if addr.ip().is_unspecified() || addr.port() == 0 {
            bail!("--advertise {addr}: give the address and port edges reach this replica at, e.g. 198.51.100.11:4433");
        }
    }
    let listen_tcp = match args.listen_tcp.as_deref().or(file.listen_tcp.as_deref()) {
        None => ListenTcp::default_for(listen),
        Some("off") => ListenTcp::Off,
        Some(addr) => match addr.parse::<SocketAddr>() {
            Ok(addr) if addr.port() != 0 => ListenTcp::At(addr),
            _ => bail!("--listen-tcp {addr}: give ADDR:PORT (e.g. 0.0.0.0:443) or off"),
        },
    };
    Ok(CoreConfig {
        listen,
        listen_tcp,
        key: common.key,
        peers: common.peers.accepted(&allow, &allow_udp),
        udp_idle_timeout: common.udp_idle_timeout,
        control: common.control,
        control_token: common.control_token,
        reduce: common.reduce,
        connect_timeout: common.connect_timeout,
        drain: common.drain,
        tuning: common.tuning,
        limits: common.limits,
        flow_idle_timeout: common.flow_idle_timeout,
        advertise,
    })
}

/// Validates `wanopt edge` options into a configuration.
pub fn edge_config(args: &EdgeArgs) -> anyhow::Result<EdgeConfig> {
    edge_config_in(args, Mode::Edge)
}

/// The edge part of a node `mode` runs.
pub(super) fn edge_config_in(args: &EdgeArgs, mode: Mode) -> anyhow::Result<EdgeConfig> {
    let mut file = read_file(args.common.config.as_deref())?;
    if mode == Mode::Edge {
        other_role(
            args.common.config.as_deref(),
            &file.core_keys(),
            "core",
            "edge",
        )?;
    }
    let common = common(&args.common, &mut file, mode)?;
    let core = args.core.clone().or(file.core.take());
    if core.is_none() && !Peers::any_endpoint(&file.peer) && mode != Mode::Run {
        bail!("no core: give --core HOST:PORT, or [[peer]] sections with an endpoint in the config file");
    }
    let upstreams = common
        .peers
        .dialed(core)
        .map_err(|e| in_file(args.common.config.as_deref(), e))?;
    let forwards = list(&args.forward, std::mem::take(&mut file.forward))
        .iter()
        .map(|f| f.parse::<Forward>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let udp_forwards = list(&args.forward_udp, std::mem::take(&mut file.forward_udp))
        .iter()
        .map(|f| f.parse::<UdpForward>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    once_each(forwards.iter().map(|f| f.listen), "--forward")?;
    once_each(udp_forwards.iter().map(|f| f.listen), "--forward-udp")?;
    let paths = list(&args.path, std::mem::take(&mut file.path))
        .iter()
        .map(|p| p.parse::<WanPath>().map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if paths.len() > MAX_PATHS {
        bail!(
            "{} --path options: an edge has at most {MAX_PATHS} paths",
            paths.len()
        );
    }
    let path_use = args.path_mode.or(file.path_mode).unwrap_or_default();
    if path_use != PathUse::Failover && paths.len() < 2 {
        bail!(
            "--path-mode {} needs two --path options or more",
            path_use.mode().name()
        );
    }
    let classes = Classes(
        list(&args.class, std::mem::take(&mut file.class))
            .iter()
            .map(|c| c.parse::<TrafficClass>())
            .collect::<Result<_, _>>()?,
    );
    Ok(EdgeConfig {
        upstreams,
        key: common.key,
        forwards,
        udp_forwards,
        udp_idle_timeout: common.udp_idle_timeout,
        transparent: args.transparent.or(file.transparent),
        transparent_udp: args.transparent_udp.or(file.transparent_udp),
        optimize: rules(&list(&args.optimize, std::mem::take(&mut file.optimize)))?,
        pass_unmatched: args.pass_unmatched || file.pass_unmatched.unwrap_or(false),
        no_reduce_to: rules(&list(
            &args.no_reduce_to,
            std::mem::take(&mut file.no_reduce_to),
        ))?,
        reduce: common.reduce,
        fail: args.fail.or(file.fail).unwrap_or(FailMode::Open),
        path_use,
        classes,
        control: common.control,
        control_token: common.control_token,
        tunnel_wait: duration(
            args.tunnel_wait,
            file.tunnel_wait.as_deref(),
            "tunnel-wait",
            Duration::from_secs(10),
        )?,
        connect_timeout: common.connect_timeout,
        drain: common.drain,
        bind: args.bind.or(file.bind),
        paths,
        tuning: common.tuning,
        limits: common.limits,
        flow_idle_timeout: common.flow_idle_timeout,
        transport: args.transport.or(file.transport).unwrap_or_default(),
        tcp_port: match args.tcp_port.or(file.tcp_port) {
            Some(0) => bail!(
                "--tcp-port 0: give the port the cores accept tunnels over TCP on (default 443)"
            ),
            Some(port) => port,
            None => wanopt_node::transport::carrier::DEFAULT_PORT,
        },
    })
}

/// Refuses a listening address given twice for `flag`.
fn once_each(listens: impl Iterator<Item = SocketAddr>, flag: &str) -> anyhow::Result<()> {
    let mut seen = std::collections::HashSet::new();
    for listen in listens {
        if !seen.insert(listen) {
            bail!("{flag}: {listen} is given twice (one listener takes one destination)");
        }
    }
    Ok(())
}

/// A count that must be at least 1.
fn positive_count(n: usize, name: &str) -> anyhow::Result<usize> {
    if n == 0 {
        bail!("--{name} must be at least 1");
    }
    Ok(n)
}

/// The firewall rules that send the flows `--optimize` selects to the edge's
/// transparent port (see [`super::firewall`]).
pub fn firewall_rules(args: &EdgeArgs) -> anyhow::Result<String> {
    let mut file = read_file(args.common.config.as_deref())?;
    let tcp = args.transparent.or(file.transparent);
    let udp = args.transparent_udp.or(file.transparent_udp);
    if tcp.is_none() && udp.is_none() {
        bail!("--print-firewall needs --transparent LISTEN or --transparent-udp LISTEN");
    }
    let optimize = rules(&list(&args.optimize, std::mem::take(&mut file.optimize)))?;
    super::firewall::rules(&super::firewall::Interception {
        lan_if: args
            .lan_if
            .as_deref()
            .or(file.lan_if.as_deref())
            .unwrap_or("eth0"),
        port: tcp.map(|a| a.port()),
        udp_port: udp.map(|a| a.port()),
        listen_v6: tcp.iter().chain(udp.iter()).all(|a| a.is_ipv6()),
        optimize: &optimize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_others_can_read_are_noticed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("k");
        std::fs::write(&path, "x").unwrap_or_else(|e| panic!("{e}"));
        for (mode, exposed) in [
            (0o600, None),
            (0o400, None),
            (0o644, Some(0o644)),
            (0o620, Some(0o620)),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(exposed_mode(&path), exposed, "{mode:o}");
        }
        assert_eq!(exposed_mode(&dir.path().join("missing")), None);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("20GB"), Ok(20_000_000_000));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("1.5 GiB"), Ok(3 << 29));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
        assert!(parse_size("").is_err());
    }
}
