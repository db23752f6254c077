//! Bringing a whole lab up: topology, emulator, generator server, endpoint
//! profile and (with `--optimize`) the wanopt nodes.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::edge_pair::Edges;
use crate::emulator::EmulatorConfig;
use crate::link::LinkSpecs;
use crate::link::WanLink;
use crate::profile::{Profile, ProfileError};
use crate::sites::Sites;
use crate::topology::{Lab, Node, TopologyError, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// Errors from `lab up`.
#[derive(Debug, thiserror::Error)]
pub enum UpError {
    /// Building the topology failed.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// Applying the endpoint profile failed.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// A lab process did not start.
    #[error("{name} did not start: {log}")]
    Daemon {
        /// The process.
        name: String,
        /// The end of its log.
        log: String,
    },
    /// The path to the running executable is unknown.
    #[error("cannot find the wanopt executable: {0}")]
    Executable(std::io::Error),
    /// The link specs do not parse.
    #[error(transparent)]
    Link(crate::link::LinkOptionError),
    /// Starting the optimizer nodes failed.
    #[error("--optimize: {0}")]
    Optimize(crate::optimize::OptimizeError),
    /// Building the core cluster or starting its director failed.
    #[error("--cores: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
    /// Building the edge pair or starting its VRRP failed.
    #[error("--edges 2: {0}")]
    EdgePair(#[from] crate::edge_pair::EdgePairError),
}

/// What `lab up` builds.
#[derive(Debug, Clone)]
pub struct UpConfig {
    /// The emulated link, per direction.
    pub specs: LinkSpecs,
    /// The endpoints' TCP profile.
    pub profile: &'static Profile,
    /// Whether to start the wanopt edge and core.
    pub optimize: bool,
    /// With `optimize`: data reduction (compression and the byte cache) on
    /// top of TCP optimization.
    pub reduce: bool,
    /// With `optimize`: extra arguments for both nodes (`lab up
    /// --node-arg`), after the lab's own.
    pub node_args: Vec<String>,
    /// With `optimize`: extra arguments for the edge only (`lab up
    /// --edge-arg`, e.g. `--forward-udp`), after `node_args`.
    pub edge_args: Vec<String>,
    /// With `optimize`: extra arguments for the core only (`lab up
    /// --core-arg`, e.g. `--allow-udp`), after `node_args`.
    pub core_args: Vec<String>,
    /// The second emulated link (`lab up --link2`), if any.
    pub link2: Option<LinkSpecs>,
    /// How many branch sites (`lab up --sites`): site 1 is `client` and
    /// `edge`, each other one gets its own namespaces and link.
    pub sites: Sites,
    /// A core cluster (`lab up --cores N`): `core` directs the tunnels to
    /// N replicas, each with its own wanopt core.
    pub cluster: Option<Cluster>,
    /// Site 1's edges (`lab up --edges`): one, or an edge pair behind one
    /// VRRP address (`edge` and `edgeb`).
    pub edges: Edges,
}

impl Default for UpConfig {
    /// The lab of a bare `lab up`: a perfect link, the linux profile, no
    /// wanopt, one site, one edge, one core.
    fn default() -> UpConfig {
        UpConfig {
            specs: LinkSpecs {
                up: String::new(),
                down: String::new(),
                seed: 1,
                middlebox: String::new(),
                mtu: None,
            },
            profile: &crate::profile::LINUX,
            optimize: false,
            reduce: true,
            node_args: Vec::new(),
            edge_args: Vec::new(),
            core_args: Vec::new(),
            link2: None,
            sites: Sites::ONE,
            cluster: None,
            edges: Edges::ONE,
        }
    }
}

/// The settings of a running lab, stored in its state directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// The emulated link.
    pub link: LinkSpecs,
    /// The endpoint profile's name.
    pub profile: String,
    /// Whether the wanopt nodes run.
    pub optimize: bool,
    /// Whether they reduce data (compression and the byte cache).
    #[serde(default)]
    pub reduce: bool,
    /// The second emulated link, if the lab has one.
    #[serde(default)]
    pub link2: Option<LinkSpecs>,
    /// How many branch sites (1 in settings written before `--sites`).
    #[serde(default)]
    pub sites: Sites,
    /// The core cluster, if the lab has one.
    #[serde(default)]
    pub cluster: Option<Cluster>,
    /// Site 1's edges (1 in settings written before `--edges`).
    #[serde(default)]
    pub edges: Edges,
}

/// The file with the running lab's settings.
pub fn settings_path(lab: &Lab) -> PathBuf {
    lab.state_dir().join("settings.json")
}

/// The file where the emulator publishes its counters.
pub fn counters_path(lab: &Lab) -> PathBuf {
    link_counters_path(lab, WanLink::One)
}

/// The file where the emulator of `link` publishes its counters.
pub fn link_counters_path(lab: &Lab, link: WanLink) -> PathBuf {
    lab.state_dir().join(link.counters_file())
}

/// The executable that lab processes run: this one.
pub fn current_exe() -> Result<PathBuf, UpError> {
    std::env::current_exe().map_err(UpError::Executable)
}

/// A private copy of this executable under `/run/wanopt-lab/bin`, for long
/// runs: lab processes started later keep working if the binary is
/// rebuilt (replaced) meanwhile. Remove it when done.
pub fn private_exe() -> Result<PathBuf, UpError> {
    let dir = PathBuf::from("/run/wanopt-lab/bin");
    std::fs::create_dir_all(&dir).map_err(UpError::Executable)?;
    let path = dir.join(format!("wanopt.{}", std::process::id()));
    // /proc/self/exe stays readable even if the file was replaced.
    std::fs::copy("/proc/self/exe", &path).map_err(UpError::Executable)?;
    Ok(path)
}

/// Brings the lab up from scratch (clearing any earlier one); lab
/// processes run `exe`.
pub fn up(lab: &Lab, config: &UpConfig, exe: &Path) -> Result<(), UpError> {
    lab.create()?;
    let result = match config.specs.mtu {
        Some(mtu) => lab.set_mtu(mtu).map_err(UpError::from),
        None => Ok(()),
    }
    .and_then(|()| match &config.link2 {
        Some(_) => lab.create_link2().map_err(UpError::from),
        None => Ok(()),
    })
    .and_then(|()| lab.create_sites(config.sites).map_err(UpError::from))
    .and_then(|()| {
        if config.edges.is_pair() {
            lab.create_edge_pair(config.specs.mtu)
                .map_err(UpError::from)
        } else {
            Ok(())
        }
    })
    .and_then(|()| match config.cluster {
        Some(cluster) => create_cluster(lab, cluster, config),
        None => Ok(()),
    })
    .and_then(|()| start_processes(lab, config, exe));
    if result.is_err() {
        let _ = lab.destroy();
    }
    result
}

/// The cluster's namespaces, links and cgroups, and the director's rules.
fn create_cluster(lab: &Lab, cluster: Cluster, config: &UpConfig) -> Result<(), UpError> {
    lab.create_cluster(cluster, config.sites, config.specs.mtu)?;
    crate::cluster::director::install(lab)?;
    Ok(())
}

fn start_processes(lab: &Lab, config: &UpConfig, exe: &Path) -> Result<(), UpError> {
    start_emulator(lab, &config.specs, exe)?;
    if let Some(specs) = &config.link2 {
        start_link_emulator(lab, WanLink::Two, specs, exe)?;
    }
    start_emulators(lab, config.sites, &config.specs, exe)?;
    if config.edges.is_pair() {
        start_edge_b_emulator(lab, &config.specs, exe)?;
    }
    let ready = lab.state_dir().join("gen-server.ready");
    let mut args: Vec<String> = vec![
        "lab".into(),
        "gen-server".into(),
        "--listen".into(),
        format!("{SERVER_ADDR}:{GENERATOR_PORT}"),
        "--ready".into(),
        ready.to_string_lossy().into_owned(),
    ];
    if let Some(cc) = config.profile.congestion_control {
        args.extend(["--congestion".into(), cc.into()]);
    }
    lab.spawn_daemon(Node::Server, "gen-server", exe, &args)?;
    wait_for(lab, &ready, "gen-server", "generator server")?;
    config.profile.apply(lab)?;
    for site in config.sites.extra() {
        config
            .profile
            .apply_to(lab, site.client(), &site.edge_lan_addr())?;
    }
    if let Some(cluster) = config.cluster {
        crate::cluster::keepalived::start(lab, cluster.cores)?;
    }
    if config.optimize {
        let extra = crate::optimize::ExtraArgs {
            both: &config.node_args,
            edge: &config.edge_args,
            core: &config.core_args,
            two_paths: config.link2.is_some(),
            sites: config.sites,
            cluster: config.cluster,
            edges: config.edges,
        };
        crate::optimize::start(lab, exe, config.reduce, &extra).map_err(UpError::Optimize)?;
    }
    if config.edges.is_pair() {
        // After the nodes: with them, each edge's VRRP tracks its wanopt.
        crate::edge_pair::vrrp::start(lab, config.optimize)?;
        crate::edge_pair::vrrp::wait_master(lab, Duration::from_secs(10))?;
    }
    let settings = Settings {
        link: config.specs.clone(),
        profile: config.profile.name.to_string(),
        optimize: config.optimize,
        reduce: config.optimize && config.reduce && crate::optimize::supports_reduce(exe),
        link2: config.link2.clone(),
        sites: config.sites,
        cluster: config.cluster,
        edges: config.edges,
    };
    let path = settings_path(lab);
    let text = serde_json::to_string_pretty(&settings).unwrap_or_default();
    std::fs::write(&path, text).map_err(|source| TopologyError::State {
        path,
        cause: source,
    })?;
    Ok(())
}

/// (Re)starts the emulator with new link specs, keeping the topology.
pub fn start_emulator(lab: &Lab, specs: &LinkSpecs, exe: &Path) -> Result<(), UpError> {
    start_link_emulator(lab, WanLink::One, specs, exe)
}

/// (Re)starts the emulator of `link` with new specs, keeping the topology.
pub fn start_link_emulator(
    lab: &Lab,
    link: WanLink,
    specs: &LinkSpecs,
    exe: &Path,
) -> Result<(), UpError> {
    let (edge_if, core_if) = link.interfaces();
    let what = match link {
        WanLink::One => "emulator",
        WanLink::Two => "emulator of link 2",
    };
    start_emulator_on(
        lab,
        (link.daemon(), what),
        (edge_if.to_string(), core_if.to_string()),
        link_counters_path(lab, link),
        specs,
        exe,
    )
}

/// (Re)starts an emulator recorded as `daemon` (called `what` in errors)
/// in `wan` between the `interfaces` (facing the edge, facing the core),
/// publishing its counters to `counters`, and waits until it does.
pub(crate) fn start_emulator_on(
    lab: &Lab,
    (daemon, what): (&str, &str),
    interfaces: (String, String),
    counters: PathBuf,
    specs: &LinkSpecs,
    exe: &Path,
) -> Result<(), UpError> {
    lab.kill_recorded(daemon);
    let _ = std::fs::remove_file(&counters);
    let (edge_if, core_if) = interfaces;
    let config =
        EmulatorConfig::new(specs, &edge_if, &core_if, counters.clone()).map_err(UpError::Link)?;
    let config_file = lab.state_dir().join(format!("{daemon}.config.json"));
    std::fs::write(&config_file, config.to_json()).map_err(|cause| {
        UpError::Topology(crate::topology::TopologyError::State {
            path: config_file.clone(),
            cause,
        })
    })?;
    lab.spawn_daemon(
        Node::Wan,
        daemon,
        exe,
        &[
            "lab".to_string(),
            "emulate".into(),
            "--config".into(),
            config_file.to_string_lossy().into_owned(),
        ],
    )?;
    wait_for(lab, &counters, daemon, what)
}

fn wait_for(lab: &Lab, file: &Path, log: &str, name: &str) -> Result<(), UpError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if file.exists() {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(10));
    }
    Err(UpError::Daemon {
        name: name.to_string(),
        log: lab.daemon_log(log),
    })
}

/// (Re)starts the emulator of edge B's link (`lab up --edges 2`), with
/// the lab's link options and its own seed.
pub fn start_edge_b_emulator(lab: &Lab, link: &LinkSpecs, exe: &Path) -> Result<(), UpError> {
    use crate::edge_pair::{edge_b_specs, EDGE_B_COUNTERS, EDGE_B_EMULATOR, WAN_EDGE_B_IFS};
    start_emulator_on(
        lab,
        (EDGE_B_EMULATOR, "emulator of edge B's link"),
        (WAN_EDGE_B_IFS.0.to_string(), WAN_EDGE_B_IFS.1.to_string()),
        lab.state_dir().join(EDGE_B_COUNTERS),
        &edge_b_specs(link),
        exe,
    )
}

/// Starts the emulator of every extra site's link, with the lab's link
/// options and each site's own seed.
pub fn start_emulators(
    lab: &Lab,
    sites: Sites,
    link: &LinkSpecs,
    exe: &Path,
) -> Result<(), UpError> {
    for site in sites.extra() {
        let counters = lab.state_dir().join(site.counters_file());
        start_emulator_on(
            lab,
            (
                &site.emulator(),
                &format!("emulator of site {}", site.number()),
            ),
            site.wan_interfaces(),
            counters,
            &site.specs(link),
            exe,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(spec: &str, seed: u64) -> LinkSpecs {
        LinkSpecs {
            up: spec.into(),
            down: spec.into(),
            seed,
            middlebox: String::new(),
            mtu: None,
        }
    }

    /// Link 2 is kept with the settings; settings written before link 2
    /// existed still read, without one.
    #[test]
    fn settings_round_trip_with_link2() {
        let settings = Settings {
            link: specs("rtt 40ms", 3),
            profile: "linux".into(),
            optimize: true,
            reduce: false,
            link2: Some(specs("rtt 50ms rate 20mbit loss 5%", 1003)),
            sites: Sites::new(3).unwrap_or_default(),
            cluster: Some(Cluster {
                cores: crate::cluster::Cores::new(3).unwrap_or_else(|| panic!("3 cores")),
                cpu: "0.5".parse().ok(),
            }),
            edges: Edges::PAIR,
        };
        let text = serde_json::to_string(&settings).unwrap_or_default();
        let back: Settings = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.link2, settings.link2);
        assert_eq!(back.sites, settings.sites);
        assert_eq!(back.cluster, settings.cluster);
        assert_eq!(back.edges, Edges::PAIR);
        assert_eq!(back.link, settings.link);
        let old = r#"{"link": {"up": "rtt 10ms", "down": "rtt 10ms", "seed": 1},
            "profile": "linux", "optimize": false, "reduce": false}"#;
        let old: Settings = serde_json::from_str(old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.link2, None);
        assert_eq!(old.sites, Sites::ONE);
        assert_eq!(old.cluster, None);
        assert_eq!(old.edges, Edges::ONE);
    }

    #[test]
    fn each_link_has_its_own_counters() {
        let lab = Lab::new("t8-");
        assert_eq!(
            counters_path(&lab),
            PathBuf::from("/run/wanopt-lab/t8/counters.json")
        );
        assert_eq!(
            link_counters_path(&lab, WanLink::Two),
            PathBuf::from("/run/wanopt-lab/t8/counters2.json")
        );
    }
}
