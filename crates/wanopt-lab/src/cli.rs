//! `wanopt lab ...` command line.
//!
//! Exit codes: 0 success, 1 a runtime failure, 2 a usage error (bad option
//! value, unknown node or profile). `lab exec` returns the command's own code.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::bringup::{self, UpConfig};
use crate::exit::{exit_code, usage};
use crate::link::LinkOptions;
use crate::profile::Profile;
use crate::topology::{Lab, Node};
use crate::traffic::{self, Direction, Workload};
use crate::waas::commands;

/// The `wanopt lab` subcommands.
// Parsed once per process: the size of `lab up`'s options does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build the lab: namespaces client, edge, wan, core, server, the emulated WAN between edge and core (and with --sites N, clientK and edgeK with their own link for sites 2..N; with --edges 2, a second edge edgeb behind one VRRP address; with --cores N, replicas core1..coreN behind the director core).
    Up(UpArgs),
    /// Remove every namespace and process of the lab (idempotent).
    Down,
    /// Run a command inside a lab node and return its exit code.
    Exec(ExecArgs),
    /// Print a node's address on the lab network.
    Addr {
        /// client, edge, core or server (clientN, edgeN: site N of --sites; edgeb: the second edge of --edges 2; coreN: replica N of --cores).
        node: String,
    },
    /// Show the link settings and the emulator's counters per direction.
    Status,
    /// Cut a WAN link or restore it while things run (1, or 2 with `lab up --link2`).
    Link {
        /// The link: 1, or 2.
        number: u32,
        /// down (every frame on it is lost, both ways) or up.
        #[arg(value_enum)]
        state: LinkState,
    },
    /// Change a WAN link's middlebox rules while the lab runs (`none` or "" clears them; see docs/lab.md).
    Middlebox {
        /// The link: 1, or 2 with `lab up --link2`.
        #[arg(long, default_value_t = 1)]
        link: u32,
        /// The rules, as `lab up --middlebox` takes them (e.g. "port 443 block-udp; police-udp 2mbit").
        #[arg(allow_hyphen_values = true)]
        rules: String,
    },
    /// Run a scenario (`tcp-opt`, `waas-3g`, `lossy`, `realtime`, `bond`, `sites`, `cluster`, `cellular`, `reach`, `path-brokenness`, `initcwnd`, `fwsm` or a TOML file) and write results, a report and plots.
    Run(crate::scenario::RunArgs),
    /// Measure the emulator's own ceiling (pps, Gbit/s of 1500-byte packets each way) with iperf3.
    BenchCeiling {
        /// Seconds per measurement.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Runs per mode (the median is reported).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// Internal: raw frame blaster of `bench-ceiling`.
    #[command(hide = true)]
    Blast {
        /// Interface to send on.
        #[arg(long)]
        interface: String,
        /// How long.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Pace at this many Mbit/s of IP packets (default: as fast as possible).
        #[arg(long)]
        mbit: Option<f64>,
    },
    /// Internal: the emulator's packet driver (runs inside `wan`).
    #[command(hide = true)]
    Emulate(EmulateArgs),
    /// Internal: the traffic generator's server (runs inside `server`).
    #[command(hide = true)]
    GenServer {
        /// Address to listen on.
        #[arg(long)]
        listen: SocketAddr,
        /// File to create once listening.
        #[arg(long)]
        ready: Option<PathBuf>,
        /// Congestion control of every connection.
        #[arg(long)]
        congestion: Option<String>,
    },
    /// Internal: the traffic generator's client; prints a JSON report.
    #[command(hide = true)]
    GenClient(GenClientArgs),
    /// Internal: a workload of the lossy scenario (runs inside `client`); prints a JSON report.
    #[command(hide = true)]
    LossyClient(crate::lossy::client::ClientArgs),
    /// Internal: the cellular scenario's download and ping (runs inside `client`); prints a JSON report.
    #[command(hide = true)]
    CellularClient(crate::cellular::client::ClientArgs),
    /// Internal: an end of the realtime scenario's voice and video streams (runs inside `client` or `server`).
    #[command(hide = true)]
    RtPeer(crate::realtime::peer::PeerArgs),
    /// Internal: the bond scenario's checked download (runs inside `client`); prints a JSON report.
    #[command(hide = true)]
    BondClient(crate::bond::client::ClientArgs),
    /// Write the waas-3g file set (the reference's Table 1, generated from a seed) to a directory.
    WaasFiles {
        /// Directory to write the files to (created if needed).
        #[arg(long)]
        out: PathBuf,
        /// Seed of the file set.
        #[arg(long, default_value_t = crate::waas::files::DEFAULT_SEED)]
        seed: u64,
    },
    /// Rewrite report.md and the plots of a waas-3g output directory from its results.json.
    WaasReport {
        /// The directory `lab run waas-3g --out` wrote.
        dir: PathBuf,
    },
    /// Internal: the waas-3g file server (runs inside `server`).
    #[command(hide = true)]
    WaasServer(commands::ServerArgs),
    /// Internal: one waas-3g transfer (runs inside `client`); prints a JSON report.
    #[command(hide = true)]
    WaasClient(commands::ClientArgs),
}

/// Options of `lab up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The emulated link.
    #[command(flatten)]
    pub link: LinkOptions,
    /// Endpoint TCP profile for client and server: linux or legacy.
    #[arg(long, default_value = "linux")]
    pub profile: String,
    /// Also start a wanopt edge (transparent) in `edge` and a wanopt core in `core`.
    #[arg(long)]
    pub optimize: bool,
    /// With --optimize: TCP optimization only, no data reduction (by default
    /// the nodes compress and deduplicate, with their byte caches in the
    /// lab's state directory).
    #[arg(long, requires = "optimize")]
    pub no_reduce: bool,
    /// With --optimize: one more argument for both nodes, after the lab's
    /// own (repeatable; e.g. `--node-arg=--duplication=off`).
    #[arg(
        long = "node-arg",
        value_name = "ARG",
        requires = "optimize",
        allow_hyphen_values = true
    )]
    pub node_args: Vec<String>,
    /// With --optimize: one more argument for the edge only, after
    /// --node-arg's (repeatable; e.g. `--edge-arg=--forward-udp=...`).
    #[arg(
        long = "edge-arg",
        value_name = "ARG",
        requires = "optimize",
        allow_hyphen_values = true
    )]
    pub edge_args: Vec<String>,
    /// With --optimize: one more argument for the core only, after
    /// --node-arg's (repeatable; e.g. `--core-arg=--allow-udp=...`).
    #[arg(
        long = "core-arg",
        value_name = "ARG",
        requires = "optimize",
        allow_hyphen_values = true
    )]
    pub core_args: Vec<String>,
    /// A second emulated WAN between edge and core.
    #[command(flatten)]
    pub link2: crate::link::Link2Options,
    /// Branch sites, 1 to 16: sites 2..N get namespaces clientN and edgeN
    /// and their own emulated link (the same link options, their own
    /// seed) to the one core; with --optimize each edge runs a wanopt
    /// edge with its own key and the core accepts them all.
    #[arg(long, value_name = "N", default_value = "1")]
    pub sites: crate::sites::Sites,
    /// A core cluster of N replicas, 1 to 8: core becomes a director that
    /// balances the tunnels (UDP 4433, by the edge's address) over
    /// namespaces core1..coreN with nftables, keepalived checking each
    /// replica's health; with --optimize each replica runs a wanopt core.
    #[arg(long, value_name = "N")]
    pub cores: Option<crate::cluster::Cores>,
    /// With --cores: each replica's wanopt process may use this share of
    /// one CPU, 0.01 to 1.0 (a cgroup v1 cpu group per replica).
    #[arg(long = "core-cpu", value_name = "FRACTION", requires = "cores")]
    pub core_cpu: Option<crate::cluster::CpuShare>,
    /// Site 1's edges, 1 or 2: with 2 an edge pair, edge and edgeb, on the
    /// client's LAN behind one VRRP address (the client's gateway
    /// 198.18.1.1, keepalived in each edge), edgeb with its own link to
    /// the core; with --optimize both run a wanopt edge.
    #[arg(long, value_name = "N", default_value = "1")]
    pub edges: crate::edge_pair::Edges,
}

/// The state `lab link` puts a link in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkState {
    /// Cut: every frame that arrives or comes due is dropped, both ways.
    Down,
    /// Restored.
    Up,
}

/// Options of `lab exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// client, edge, wan, core or server (clientN, edgeN: site N of --sites; edgeb: the second edge of --edges 2; coreN: replica N of --cores).
    pub node: String,
    /// The command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub command: Vec<String>,
}

/// Options of the internal `lab emulate`.
#[derive(Debug, Args)]
pub struct EmulateArgs {
    /// The file that holds the emulator's configuration as JSON
    /// ([`crate::emulator::EmulatorConfig`]).
    #[arg(long)]
    pub config: std::path::PathBuf,
}

/// Options of the internal `lab gen-client`.
#[derive(Debug, Args)]
pub struct GenClientArgs {
    /// The generator server.
    #[arg(long)]
    pub connect: SocketAddr,
    /// Parallel streams.
    #[arg(long, default_value_t = 4)]
    pub streams: usize,
    /// Bytes per stream (100MB = 10^8, 100MiB = 100 x 2^20).
    #[arg(long, default_value = "100MB")]
    pub bytes: String,
    /// Server to client (like iperf -R).
    #[arg(long)]
    pub reverse: bool,
    /// Congestion control of the client's sockets.
    #[arg(long)]
    pub congestion: Option<String>,
    /// Give up when a stream makes no progress for this many seconds.
    #[arg(long, default_value_t = 60)]
    pub stall_seconds: u64,
}

/// Runs one lab subcommand; returns the process exit code. The library
/// returns typed errors; here the user's become exit code 2 with one line,
/// the machine's propagate (the binary prints them, exit code 1).
pub fn run(command: LabCommand) -> anyhow::Result<i32> {
    let lab = Lab::default_lab();
    match command {
        LabCommand::Up(args) => up(&lab, &args),
        LabCommand::Down => down(&lab),
        LabCommand::Exec(args) => exec(&lab, &args),
        LabCommand::Addr { node } => addr(&node),
        LabCommand::Status => match crate::status::print(&lab) {
            Ok(()) => Ok(0),
            Err(e @ crate::status::StatusError::NotUp(_)) => {
                eprintln!("wanopt lab: {e}");
                Ok(1)
            }
        },
        LabCommand::Link { number, state } => link(&lab, number, state),
        LabCommand::Middlebox { link, rules } => {
            match crate::link::set_middlebox(&lab, link, &rules) {
                Ok(applied) => {
                    println!("{applied}");
                    Ok(0)
                }
                Err(e) if e.is_usage() => usage(e),
                Err(e) => {
                    eprintln!("wanopt lab: {e}");
                    Ok(1)
                }
            }
        }
        LabCommand::Run(args) => lab_run(&lab, &args),
        LabCommand::BenchCeiling { seconds, runs } => {
            crate::bench::run(&lab, seconds.clamp(1, 60), runs.clamp(1, 20))?;
            Ok(0)
        }
        LabCommand::Blast {
            interface,
            seconds,
            mbit,
        } => {
            crate::bench::blast_main(&interface, seconds.clamp(1, 60), mbit)?;
            Ok(0)
        }
        LabCommand::Emulate(args) => emulate(args),
        LabCommand::GenServer {
            listen,
            ready,
            congestion,
        } => gen_server(listen, ready, congestion),
        LabCommand::GenClient(args) => gen_client(&args),
        LabCommand::LossyClient(args) => match crate::lossy::client::run(&args) {
            Ok(report) => {
                println!("{}", serde_json::to_string(&report)?);
                Ok(0)
            }
            Err(e @ crate::lossy::client::ClientError::Usage(_)) => usage(e),
            Err(e) => Err(e.into()),
        },
        LabCommand::CellularClient(args) => match crate::cellular::client::run(&args) {
            Ok(report) => {
                println!("{}", serde_json::to_string(&report)?);
                Ok(0)
            }
            Err(e @ crate::lossy::client::ClientError::Usage(_)) => usage(e),
            Err(e) => Err(e.into()),
        },
        LabCommand::RtPeer(args) => {
            let (sent, received) = crate::realtime::peer::run(&args)?;
            println!("sent {sent} received {received}");
            Ok(0)
        }
        LabCommand::BondClient(args) => match crate::bond::client::run(&args) {
            Ok(report) => {
                println!("{}", serde_json::to_string(&report)?);
                Ok(0)
            }
            Err(e @ crate::bond::client::ClientError::Usage(_)) => usage(e),
            Err(e) => Err(e.into()),
        },
        LabCommand::WaasFiles { out, seed } => commands::files(&out, seed),
        LabCommand::WaasReport { dir } => commands::report(&dir),
        LabCommand::WaasServer(args) => commands::server(args),
        LabCommand::WaasClient(args) => commands::client(args),
    }
}

/// `lab up`.
fn up(lab: &Lab, args: &UpArgs) -> anyhow::Result<i32> {
    let specs = match args.link.specs() {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let link2 = match args.link2.specs(specs.seed) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let profile = match Profile::named(&args.profile) {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    if args.edges.is_pair() && (args.cores.is_some() || link2.is_some()) {
        return usage(
            "--edges 2 builds an edge pair on link 1 and one core: it does not combine with --cores or --link2",
        );
    }
    let config = UpConfig {
        specs,
        profile,
        optimize: args.optimize,
        reduce: !args.no_reduce,
        node_args: args.node_args.clone(),
        edge_args: args.edge_args.clone(),
        core_args: args.core_args.clone(),
        link2,
        sites: args.sites,
        cluster: args.cores.map(|cores| crate::cluster::Cluster {
            cores,
            cpu: args.core_cpu,
        }),
        edges: args.edges,
    };
    let exe = bringup::current_exe()?;
    bringup::up(lab, &config, &exe)?;
    let reduce = config.optimize && config.reduce && crate::optimize::supports_reduce(&exe);
    println!(
        "lab up: up [{}] down [{}] seed {} profile {}{}{}{}{}{}{}",
        config.specs.up,
        config.specs.down,
        config.specs.seed,
        profile.name,
        match (config.optimize, reduce) {
            (false, _) => "",
            (true, true) => " optimize (tcp-opt, reduce)",
            (true, false) => " optimize (tcp-opt)",
        },
        if config.specs.middlebox.is_empty() {
            String::new()
        } else {
            format!(" middlebox [{}]", config.specs.middlebox)
        },
        match &config.link2 {
            Some(l) => format!(" link2 up [{}] down [{}] seed {}", l.up, l.down, l.seed),
            None => String::new(),
        },
        if config.sites > crate::sites::Sites::ONE {
            format!(" sites {}", config.sites)
        } else {
            String::new()
        },
        match config.cluster {
            Some(crate::cluster::Cluster {
                cores,
                cpu: Some(cpu),
            }) => format!(" cores {cores} core-cpu {cpu}"),
            Some(cluster) => format!(" cores {}", cluster.cores),
            None => String::new(),
        },
        if config.edges.is_pair() {
            " edges 2"
        } else {
            ""
        }
    );
    Ok(0)
}

/// `lab link N down|up`.
fn link(lab: &Lab, number: u32, state: LinkState) -> anyhow::Result<i32> {
    match crate::link::set_link(lab, number, state == LinkState::Down) {
        Ok(confirmed) => {
            println!(
                "link {} {}{}",
                confirmed.link.number(),
                if confirmed.down { "down" } else { "up" },
                match confirmed.changed_unix_ms {
                    Some(at) => format!(" at {at}"),
                    None => String::new(),
                }
            );
            Ok(0)
        }
        Err(e) if e.is_usage() => usage(e),
        Err(e) => {
            eprintln!("wanopt lab: {e}");
            Ok(1)
        }
    }
}

/// `lab down`.
fn down(lab: &Lab) -> anyhow::Result<i32> {
    let teardown = lab.destroy()?;
    for ns in &teardown.foreign {
        eprintln!(
            "wanopt lab: left namespace `{ns}` alone: this lab did not create it (`ip netns del {ns}` removes it)"
        );
    }
    if teardown.is_empty() {
        println!(
            "lab down: nothing to remove: no lab with prefix {:?} (WANOPT_LAB_PREFIX) was created here",
            lab.prefix()
        );
    } else {
        println!(
            "lab down: removed {} namespace(s) and {} recorded process(es) of prefix {:?}",
            teardown.removed.len(),
            teardown.processes,
            lab.prefix()
        );
    }
    Ok(0)
}

/// `lab exec`: the command's own exit code.
fn exec(lab: &Lab, args: &ExecArgs) -> anyhow::Result<i32> {
    let node: Node = match args.node.parse() {
        Ok(n) => n,
        Err(e) => return usage(e),
    };
    if !lab.is_up() {
        return usage(crate::topology::TopologyError::NotUp(
            lab.prefix().to_string(),
        ));
    }
    if let Node::SiteClient(site) | Node::SiteEdge(site) = node {
        if !lab.has_site(site) {
            return usage(format!(
                "the lab has no site {}: bring it up with `wanopt lab up --sites {}` or more",
                site.number(),
                site.number()
            ));
        }
    }
    if let Node::Replica(replica) = node {
        if !lab.has_replica(replica) {
            return usage(format!(
                "the lab has no core replica {}: bring it up with `wanopt lab up --cores {}` or more",
                replica.number(),
                replica.number()
            ));
        }
    }
    if node == Node::EdgeB && !lab.has_edge_b() {
        return usage("the lab has no edge B: bring it up with `wanopt lab up --edges 2`");
    }
    let Some((program, rest)) = args.command.split_first() else {
        return usage("lab exec needs a command after --");
    };
    let mut cmd = lab.command(node, program);
    cmd.args(rest);
    let status = cmd.status()?;
    Ok(exit_code(status))
}

/// `lab addr`.
fn addr(node: &str) -> anyhow::Result<i32> {
    let node: Node = match node.parse() {
        Ok(n) => n,
        Err(e) => return usage(e),
    };
    match node.address() {
        Some(addr) => {
            println!("{addr}");
            Ok(0)
        }
        None => usage("the wan node is a bump in the wire and has no address"),
    }
}

/// `lab run`: 0 if the scenario passed, 1 if it failed (flow resets, a
/// stop), 2 for a bad option or scenario.
fn lab_run(lab: &Lab, args: &crate::scenario::RunArgs) -> anyhow::Result<i32> {
    use crate::scenario::Verdict;
    match crate::scenario::run(lab, args) {
        Ok(Verdict::Passed) => Ok(0),
        Ok(verdict) => {
            for line in verdict_lines(&verdict) {
                eprintln!("{line}");
            }
            Ok(1)
        }
        Err(e) if e.is_usage() => usage(e),
        Err(e) => Err(e.into()),
    }
}

/// What `lab run` says of a failed run on stderr, one line each.
fn verdict_lines(verdict: &crate::scenario::Verdict) -> Vec<String> {
    let crate::scenario::Verdict::Failed {
        scenario,
        flow_resets,
        stopped,
    } = verdict
    else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if !flow_resets.is_empty() {
        lines.push(format!(
            "wanopt lab: {scenario} FAILED: the nodes reset {} flow(s) (see report.md):",
            flow_resets.len()
        ));
        lines.extend(flow_resets.iter().map(|line| format!("  {line}")));
    }
    if let Some(message) = stopped {
        lines.push(format!("wanopt lab: {scenario} stopped: {message}"));
    }
    lines
}

/// The internal `lab gen-server`.
fn gen_server(
    listen: SocketAddr,
    ready: Option<PathBuf>,
    congestion: Option<String>,
) -> anyhow::Result<i32> {
    std::thread::spawn(move || {
        // The listener binds quickly; mark ready once the port answers.
        for _ in 0..500 {
            if std::net::TcpStream::connect_timeout(&listen, Duration::from_millis(20)).is_ok() {
                if let Some(path) = &ready {
                    let _ = std::fs::write(path, b"ready\n");
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    traffic::serve(listen, congestion)?;
    Ok(0)
}

/// The internal `lab gen-client`.
fn gen_client(args: &GenClientArgs) -> anyhow::Result<i32> {
    let bytes = match traffic::parse_size(&args.bytes) {
        Ok(b) => b,
        Err(e) => return usage(e),
    };
    if args.streams == 0 || args.streams > 1024 {
        return usage("--streams must be between 1 and 1024");
    }
    let workload = Workload {
        streams: args.streams,
        bytes,
        direction: if args.reverse {
            Direction::Download
        } else {
            Direction::Upload
        },
    };
    let report = traffic::run_client(
        args.connect,
        workload,
        Duration::from_secs(args.stall_seconds),
        args.congestion.as_deref(),
    )?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(0)
}

fn emulate(args: EmulateArgs) -> anyhow::Result<i32> {
    let config = match crate::emulator::EmulatorConfig::read(&args.config) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    crate::emulator::run(config)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Verdict;

    #[derive(Debug, clap::Parser)]
    struct Top {
        #[command(subcommand)]
        lab: LabCommand,
    }

    fn parse(args: &[&str]) -> Result<LabCommand, String> {
        use clap::Parser as _;
        Top::try_parse_from(std::iter::once("lab").chain(args.iter().copied()))
            .map(|top| top.lab)
            .map_err(|e| e.to_string())
    }

    /// Role-only node arguments and link 2's options reach `lab up`.
    #[test]
    fn up_takes_role_arguments_and_link2() {
        let command = parse(&[
            "up",
            "--rtt",
            "40ms",
            "--optimize",
            "--node-arg=--fec=auto",
            "--edge-arg=--forward-udp=198.18.1.1:5004=198.18.3.2:5004",
            "--core-arg=--allow-udp=198.18.3.0/24",
            "--link2",
            "rtt 50ms rate 20mbit",
            "--link2-down",
            "loss 5%",
        ]);
        let Ok(LabCommand::Up(args)) = command else {
            panic!("{command:?}")
        };
        assert_eq!(args.node_args, ["--fec=auto"]);
        assert_eq!(
            args.edge_args,
            ["--forward-udp=198.18.1.1:5004=198.18.3.2:5004"]
        );
        assert_eq!(args.core_args, ["--allow-udp=198.18.3.0/24"]);
        let link2 = args.link2.specs(1).ok().flatten();
        assert_eq!(
            link2.map(|s| (s.up, s.down, s.seed)),
            Some((
                "rtt 50ms rate 20mbit".to_string(),
                "rtt 50ms rate 20mbit loss 5%".to_string(),
                1001
            ))
        );
        // Per-direction link-2 specs need --link2; role arguments need --optimize.
        assert!(parse(&["up", "--link2-up", "rate 2mbit"]).is_err());
        assert!(parse(&["up", "--edge-arg=--forward-udp=a=b"]).is_err());
    }

    /// `--sites N` takes 1 to 16 (default 1); anything else is refused
    /// before anything is built, in one line that says the range.
    #[test]
    fn up_takes_a_site_count() {
        let command = parse(&["up", "--sites", "3", "--optimize", "--rtt", "10ms"]);
        let Ok(LabCommand::Up(args)) = command else {
            panic!("{command:?}")
        };
        assert_eq!(args.sites.count(), 3);
        assert!(args.optimize);
        let command = parse(&["up"]);
        let Ok(LabCommand::Up(args)) = command else {
            panic!("{command:?}")
        };
        assert_eq!(args.sites, crate::sites::Sites::ONE);
        for bad in ["0", "17", "three", "-2", ""] {
            let e = parse(&["up", &format!("--sites={bad}")])
                .err()
                .unwrap_or_else(|| panic!("--sites {bad:?} accepted"));
            assert!(e.contains("a lab has 1 to 16 sites"), "{bad:?}: {e}");
        }
        // Site nodes are names for exec and addr (checked when they run).
        let command = parse(&["exec", "client2", "--", "true"]);
        assert!(
            matches!(&command, Ok(LabCommand::Exec(a)) if a.node == "client2"),
            "{command:?}"
        );
    }

    /// `--cores N` takes 1 to 8, `--core-cpu` a share from 0.01 to 1.0 and
    /// only with `--cores`; anything else is one line.
    #[test]
    fn up_takes_a_core_cluster() {
        let command = parse(&["up", "--cores", "3", "--core-cpu", "0.5", "--optimize"]);
        let Ok(LabCommand::Up(args)) = command else {
            panic!("{command:?}")
        };
        assert_eq!(args.cores.map(crate::cluster::Cores::count), Some(3));
        assert_eq!(args.core_cpu.map(|c| c.quota_us()), Some(5_000));
        assert_eq!(args.core_cpu.map(|c| c.period_us()), Some(10_000));
        for (share, period, quota) in [
            (0.01, 100_000, 1_000),
            (0.05, 20_000, 1_000),
            (1.0, 10_000, 10_000),
        ] {
            let share: crate::cluster::CpuShare = share.to_string().parse().unwrap();
            assert_eq!(
                (share.period_us(), share.quota_us()),
                (period, quota),
                "{share}"
            );
        }
        let command = parse(&["up"]);
        assert!(
            matches!(&command, Ok(LabCommand::Up(a)) if a.cores.is_none()),
            "{command:?}"
        );
        for bad in ["0", "9", "many"] {
            let e = parse(&["up", &format!("--cores={bad}")])
                .err()
                .unwrap_or_else(|| panic!("--cores {bad:?} accepted"));
            assert!(e.contains("1 to 8 replicas"), "{bad:?}: {e}");
        }
        for bad in ["0", "1.5", "x"] {
            let e = parse(&["up", "--cores", "2", &format!("--core-cpu={bad}")])
                .err()
                .unwrap_or_else(|| panic!("--core-cpu {bad:?} accepted"));
            assert!(e.contains("0.01 to 1.0"), "{bad:?}: {e}");
        }
        assert!(parse(&["up", "--core-cpu", "0.5"]).is_err());
    }

    /// `--edges N` takes 1 (the default) or 2; anything else is one line.
    #[test]
    fn up_takes_an_edge_count() {
        let command = parse(&["up", "--edges", "2", "--optimize"]);
        assert!(
            matches!(&command, Ok(LabCommand::Up(a)) if a.edges.is_pair()),
            "{command:?}"
        );
        let command = parse(&["up"]);
        assert!(
            matches!(&command, Ok(LabCommand::Up(a)) if a.edges == crate::edge_pair::Edges::ONE),
            "{command:?}"
        );
        for bad in ["0", "3", "two"] {
            let e = parse(&["up", &format!("--edges={bad}")])
                .err()
                .unwrap_or_else(|| panic!("--edges {bad:?} accepted"));
            assert!(e.contains("a branch has 1 or 2 edges"), "{bad:?}: {e}");
        }
        let command = parse(&["exec", "edgeb", "--", "true"]);
        assert!(
            matches!(&command, Ok(LabCommand::Exec(a)) if a.node == "edgeb"),
            "{command:?}"
        );
    }

    #[test]
    fn link_takes_a_number_and_a_state() {
        let command = parse(&["link", "2", "down"]);
        assert!(
            matches!(
                command,
                Ok(LabCommand::Link {
                    number: 2,
                    state: LinkState::Down
                })
            ),
            "{command:?}"
        );
        assert!(parse(&["link", "1", "sideways"]).is_err());
        assert!(parse(&["link", "one", "up"]).is_err());
        let command = parse(&["middlebox", "--link=2", "port 443 block-udp"]);
        assert!(
            matches!(&command, Ok(LabCommand::Middlebox { link: 2, rules }) if rules == "port 443 block-udp"),
            "{command:?}"
        );
    }

    /// A failed run says why in the words `lab run` always used.
    #[test]
    fn a_failed_run_says_why() {
        assert!(verdict_lines(&Verdict::Passed).is_empty());
        let verdict = Verdict::Failed {
            scenario: "waas-3g".into(),
            flow_resets: vec!["edge.log: reset".into()],
            stopped: Some("run 1 cold download 2M.xls: mismatch".into()),
        };
        assert_eq!(
            verdict_lines(&verdict),
            [
                "wanopt lab: waas-3g FAILED: the nodes reset 1 flow(s) (see report.md):",
                "  edge.log: reset",
                "wanopt lab: waas-3g stopped: run 1 cold download 2M.xls: mismatch",
            ]
        );
    }
}
