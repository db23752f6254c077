//! Health by keepalived: the director runs keepalived (VRRP only) as a lab
//! daemon, with one `vrrp_script` per replica that asks the replica's
//! control API for `/health` every second and one peerless VRRP instance
//! per replica that tracks it. The instance's notify scripts call
//! `wanopt-cluster-notify` (shipped as `dist/cluster/wanopt-cluster-notify`
//! and written into the lab's state directory), which rewrites the bucket
//! map and drops a failed replica's conntrack entries.
//!
//! Why not keepalived's own checkers: they drive IPVS (`virtual_server`,
//! `real_server`, `HTTP_GET`), and this kernel has no IPVS. A VRRP instance
//! with no peers only moves with its tracked script: BACKUP or MASTER while
//! the check passes (both mean healthy here), FAULT from the first failed
//! check (`fall 1`), back from the first passing one (`rise 1`). With
//! `interval 1` and curl's `-m 1`, a replica that stops answering is out
//! of the map about a second later (a killed one: at the next check).
//!
//! Everything lives in `{state}/cluster/`: `keepalived.conf`,
//! `cluster.conf` (the notify script's), the script, keepalived's own pid
//! files (per lab prefix: labs side by side each run their own),
//! `health/ADDR` (each replica's last state), `buckets.nft` (the last map
//! written) and `notify.log` (one line per change, with its time in unix
//! milliseconds).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::director::{MAP, TABLE};
use super::topology::{ClusterError, VRRP_IF};
use super::{Cores, Replica, BUCKETS, CONTROL_PORT};
use crate::topology::{Lab, Node, TopologyError};

/// The notify script, as shipped in `dist/cluster/`.
pub const NOTIFY_SCRIPT: &str = include_str!("../../../../dist/cluster/wanopt-cluster-notify");

/// The name keepalived is recorded under.
pub const DAEMON: &str = "keepalived";

/// The path on each replica's control API that keepalived asks.
pub const HEALTH_PATH: &str = "/health";

/// The cluster's directory in the lab's state directory.
pub fn cluster_dir(lab: &Lab) -> PathBuf {
    lab.state_dir().join("cluster")
}

/// The files keepalived and its notify script use.
#[derive(Debug, Clone)]
pub struct Files {
    /// keepalived's configuration.
    pub keepalived_conf: PathBuf,
    /// The notify script's configuration.
    pub cluster_conf: PathBuf,
    /// The notify script.
    pub notify: PathBuf,
    /// The notify script's state directory (`health/`, `lock`).
    pub state: PathBuf,
    /// The notify script's log.
    pub log: PathBuf,
}

impl Files {
    /// The files of `lab`'s cluster.
    pub fn of(lab: &Lab) -> Files {
        let dir = cluster_dir(lab);
        Files {
            keepalived_conf: dir.join("keepalived.conf"),
            cluster_conf: dir.join("cluster.conf"),
            notify: dir.join("wanopt-cluster-notify"),
            log: dir.join("notify.log"),
            state: dir,
        }
    }
}

/// The notify script's configuration for `cores`.
pub fn cluster_conf(cores: Cores, files: &Files) -> String {
    let replicas: Vec<String> = cores.replicas().map(Replica::addr).collect();
    format!(
        "# wanopt-cluster-notify's configuration, written by `wanopt lab up --cores {cores}`.\n\
         replicas {}\n\
         buckets {BUCKETS}\n\
         table ip {TABLE}\n\
         map {MAP}\n\
         state_dir {}\n\
         log {}\n",
        replicas.join(" "),
        files.state.display(),
        files.log.display()
    )
}

/// keepalived's configuration for `cores`: a health check and a VRRP
/// instance per replica, `router_id` naming the lab. `curl` is the path of
/// curl.
pub fn keepalived_conf(lab_name: &str, cores: Cores, files: &Files, curl: &str) -> String {
    let mut conf = format!(
        "# keepalived on the director of the wanopt lab's core cluster, written by\n\
         # `wanopt lab up --cores {cores}`. No IPVS here: each replica's health\n\
         # check moves a peerless VRRP instance, whose notify script rewrites\n\
         # the director's nftables bucket map.\n\
         global_defs {{\n\
         \x20 router_id wanopt-lab-{lab_name}\n\
         \x20 script_user root\n\
         \x20 enable_script_security\n\
         }}\n"
    );
    let notify = format!(
        "{} -c {}",
        files.notify.display(),
        files.cluster_conf.display()
    );
    for replica in cores.replicas() {
        let (k, addr) = (replica.number(), replica.addr());
        let _ = write!(
            conf,
            "\nvrrp_script core{k}_health {{\n\
             \x20 script \"{curl} -fsS -m 1 -o /dev/null http://{addr}:{CONTROL_PORT}{HEALTH_PATH}\"\n\
             \x20 interval 1\n\
             \x20 timeout 2\n\
             \x20 fall 1\n\
             \x20 rise 1\n\
             }}\n\
             \n\
             vrrp_instance core{k} {{\n\
             \x20 state BACKUP\n\
             \x20 interface {VRRP_IF}\n\
             \x20 virtual_router_id {id}\n\
             \x20 priority 100\n\
             \x20 advert_int 1\n\
             \x20 virtual_ipaddress {{\n\
             \x20   169.254.5.{id}/32 dev {VRRP_IF}\n\
             \x20 }}\n\
             \x20 track_script {{\n\
             \x20   core{k}_health\n\
             \x20 }}\n\
             \x20 notify_master \"{notify} {addr} up\"\n\
             \x20 notify_backup \"{notify} {addr} up\"\n\
             \x20 notify_fault \"{notify} {addr} down\"\n\
             }}\n",
            id = 10 + u32::from(k),
        );
    }
    conf
}

/// The first `program` on `PATH`, or the bare name.
fn on_path(program: &str) -> String {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
        .map_or_else(|| program.to_string(), |p| p.to_string_lossy().into_owned())
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Writes the cluster's files and starts keepalived in the director.
pub fn start(lab: &Lab, cores: Cores) -> Result<(), ClusterError> {
    for program in ["keepalived", "nft", "conntrack", "curl"] {
        if !runs(program) {
            return Err(ClusterError::Missing(program));
        }
    }
    let files = Files::of(lab);
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|cause| TopologyError::State {
            path: path.to_path_buf(),
            cause,
        })
    };
    let dir = cluster_dir(lab);
    std::fs::create_dir_all(dir.join("health")).map_err(|cause| TopologyError::State {
        path: dir.clone(),
        cause,
    })?;
    write(&files.notify, NOTIFY_SCRIPT)?;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(&files.notify, mode).map_err(|cause| TopologyError::State {
            path: files.notify.clone(),
            cause,
        })?;
    }
    write(&files.cluster_conf, &cluster_conf(cores, &files))?;
    let lab_name = lab
        .state_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let conf = keepalived_conf(&lab_name, cores, &files, &on_path("curl"));
    write(&files.keepalived_conf, &conf)?;
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let args: Vec<String> = vec![
        "--dont-fork".into(),
        "--log-console".into(),
        "--no-syslog".into(),
        "--vrrp".into(),
        "--use-file".into(),
        s(files.keepalived_conf.clone()),
        "--pid".into(),
        s(dir.join("keepalived.pid")),
        "--vrrp_pid".into(),
        s(dir.join("keepalived-vrrp.pid")),
        "--checkers_pid".into(),
        s(dir.join("keepalived-checkers.pid")),
    ];
    lab.spawn_daemon(Node::Core, DAEMON, Path::new("keepalived"), &args)?;
    Ok(())
}

/// Each replica's last state as keepalived reported it: `Some(true)`
/// healthy, `Some(false)` failed, `None` not reported yet.
pub fn health(lab: &Lab, cores: Cores) -> Vec<(Replica, Option<bool>)> {
    let dir = cluster_dir(lab).join("health");
    cores
        .replicas()
        .map(|replica| {
            let state = std::fs::read_to_string(dir.join(replica.addr())).ok();
            (replica, state.map(|s| s.trim() == "up"))
        })
        .collect()
}

/// Waits until keepalived has reported every replica healthy (at most
/// `timeout`); fails at once if keepalived exits.
pub fn wait_healthy(lab: &Lab, cores: Cores, timeout: Duration) -> Result<(), ClusterError> {
    let deadline = Instant::now() + timeout;
    loop {
        if lab.daemon_exited(DAEMON) {
            return Err(ClusterError::Health(format!(
                "keepalived exited: {}",
                lab.daemon_log(DAEMON)
            )));
        }
        let states = health(lab, cores);
        let Some((replica, _)) = states.iter().find(|(_, up)| *up != Some(true)) else {
            return Ok(());
        };
        if Instant::now() > deadline {
            return Err(ClusterError::Health(format!(
                "keepalived has not reported core{} healthy within {} s (is http://{}:{CONTROL_PORT}{HEALTH_PATH} answering 200?): {}",
                replica.number(),
                timeout.as_secs(),
                replica.addr(),
                lab.daemon_log(DAEMON)
            )));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The notify script's log: (unix ms, replica address, `up`/`down`).
pub fn notifications(lab: &Lab) -> Vec<(u64, String, String)> {
    let text = std::fs::read_to_string(Files::of(lab).log).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let at = words.next()?.parse().ok()?;
            Some((at, words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Cores {
        Cores::new(3).unwrap_or_else(|| panic!("3 cores"))
    }

    #[test]
    fn a_check_and_an_instance_per_replica() {
        let lab = Lab::new("wcl-");
        let files = Files::of(&lab);
        let conf = keepalived_conf("wcl", three(), &files, "/usr/bin/curl");
        assert_eq!(conf.matches("vrrp_script core").count(), 3);
        assert_eq!(conf.matches("vrrp_instance core").count(), 3);
        assert!(conf.contains(
            "script \"/usr/bin/curl -fsS -m 1 -o /dev/null http://198.18.5.12:7002/health\""
        ));
        assert!(conf.contains("virtual_router_id 13"));
        assert!(conf.contains(
            "notify_fault \"/run/wanopt-lab/wcl/cluster/wanopt-cluster-notify -c /run/wanopt-lab/wcl/cluster/cluster.conf 198.18.5.13 down\""
        ));
        assert!(conf.contains("router_id wanopt-lab-wcl"));
        let braces = conf.matches('{').count();
        assert_eq!(braces, conf.matches('}').count());
        let cluster = cluster_conf(three(), &files);
        assert!(cluster.contains("replicas 198.18.5.11 198.18.5.12 198.18.5.13\n"));
        assert!(cluster.contains("state_dir /run/wanopt-lab/wcl/cluster\n"));
    }

    /// The shipped script deals a failed replica's buckets to the others
    /// and leaves everyone else's where they were (a dry run: `NFT` and
    /// `CONNTRACK` are `true`).
    #[test]
    fn the_notify_script_moves_only_a_failed_replicas_buckets() {
        let dir = std::env::temp_dir().join(format!("wcl-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::create_dir_all(&dir);
        let files = Files {
            keepalived_conf: dir.join("keepalived.conf"),
            cluster_conf: dir.join("cluster.conf"),
            notify: dir.join("notify"),
            state: dir.clone(),
            log: dir.join("notify.log"),
        };
        let _ = std::fs::write(&files.cluster_conf, cluster_conf(three(), &files));
        let _ = std::fs::write(&files.notify, NOTIFY_SCRIPT);
        let notify = |addr: &str, state: &str| -> Vec<Option<String>> {
            let status = Command::new("sh")
                .arg(&files.notify)
                .arg("-c")
                .arg(&files.cluster_conf)
                .args([addr, state])
                .env("NFT", "true")
                .env("CONNTRACK", "true")
                .status();
            assert!(status.is_ok_and(|s| s.success()), "{addr} {state}");
            let batch = std::fs::read_to_string(dir.join("buckets.nft")).unwrap_or_default();
            let mut owners = vec![None; BUCKETS as usize];
            if let Some(list) = batch.split_once('{').and_then(|(_, l)| l.split_once('}')) {
                for element in list.0.split(',') {
                    if let Some((b, addr)) = element.split_once(':') {
                        if let Ok(b) = b.trim().parse::<usize>() {
                            owners[b] = Some(addr.trim().to_string());
                        }
                    }
                }
            }
            owners
        };
        let addr = |k: u8| format!("198.18.5.{}", 10 + k);
        notify(&addr(1), "up");
        // Replica 3 has not reported yet: its buckets go to 1 and 2.
        notify(&addr(2), "BACKUP");
        let all = notify(&addr(3), "MASTER");
        for (b, owner) in all.iter().enumerate() {
            assert_eq!(owner.as_deref(), Some(addr(b as u8 % 3 + 1).as_str()));
        }
        let without_2 = notify(&addr(2), "FAULT");
        let mut moved_to = std::collections::BTreeMap::new();
        for (b, (before, after)) in all.iter().zip(&without_2).enumerate() {
            if b % 3 == 1 {
                *moved_to.entry(after.clone()).or_insert(0) += 1;
            } else {
                assert_eq!(before, after, "bucket {b} moved");
            }
        }
        // Dealt in turn: 11 buckets to replica 3, 10 to replica 1.
        assert_eq!(moved_to.get(&Some(addr(3))), Some(&11));
        assert_eq!(moved_to.get(&Some(addr(1))), Some(&10));
        notify(&addr(1), "down");
        let none = notify(&addr(3), "down");
        assert!(none.iter().all(Option::is_none));
        let back = notify(&addr(2), "up");
        assert!(back.iter().all(|o| o.as_deref() == Some(addr(2).as_str())));
        let log = std::fs::read_to_string(&files.log).unwrap_or_default();
        assert!(
            log.contains("198.18.5.12 down healthy [198.18.5.11 198.18.5.13]"),
            "{log}"
        );
        // A replica it does not know and a state it does not know: usage errors.
        for args in [["198.18.5.99", "up"], ["198.18.5.11", "sideways"]] {
            let status = Command::new("sh")
                .arg(&files.notify)
                .arg("-c")
                .arg(&files.cluster_conf)
                .args(args)
                .env("NFT", "true")
                .status();
            assert_eq!(status.ok().and_then(|s| s.code()), Some(2), "{args:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
