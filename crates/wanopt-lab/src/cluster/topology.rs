//! The cluster's namespaces and links: a replica namespace per core, its
//! veth into the director's bridge, the routes that make the replicas
//! reachable from the edges and the server, and (with `--core-cpu`) a
//! cgroup v1 `cpu` group per replica.
//!
//! ```text
//!  director (core)                                 core1
//!  cluster0 198.18.5.1/24 ─┬─ rep1 ──────────── eth0 198.18.5.11  default via 198.18.5.1
//!                          ├─ rep2 ──────────── eth0 198.18.5.12  (core2)
//!                          └─ ...
//!  vrrp0 169.254.5.1/32 ── vrrp0p   (keepalived's VRRP instances: no peers)
//! ```

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Cluster, CpuShare, Replica, CLUSTER_BRIDGE, CLUSTER_NET, DIRECTOR_ADDR};
use crate::sites::Sites;
use crate::topology::{Lab, Node, TopologyError, CORE_LAN_ADDR, CORE_WAN_ADDR};

/// The director's interface for keepalived's VRRP instances: one end of a
/// veth pair whose other end ([`VRRP_PEER_IF`]) is also the director's, so
/// their advertisements reach no one (this kernel has no `dummy` links).
pub const VRRP_IF: &str = "vrrp0";
/// The other end of [`VRRP_IF`].
pub const VRRP_PEER_IF: &str = "vrrp0p";
/// The address of [`VRRP_IF`] (keepalived needs an IPv4 address there),
/// link-local: nothing routes to it.
pub const VRRP_ADDR: &str = "169.254.5.1";

/// Where the cgroup v1 `cpu` controller is mounted.
pub const CPU_CGROUP_ROOT: &str = "/sys/fs/cgroup/cpu";

/// Errors building the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A namespace, link, address or route could not be made.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// `--core-cpu` needs the cgroup v1 `cpu` controller.
    #[error("--core-cpu needs the cgroup v1 cpu controller at {CPU_CGROUP_ROOT} (cpu.cfs_quota_us), which this machine does not have")]
    NoCpuController,
    /// A replica's cgroup could not be made or set.
    #[error("cgroup {}: {cause}", path.display())]
    Cgroup {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// keepalived is not installed.
    #[error("--cores needs keepalived, nftables and conntrack (apt-get install keepalived nftables conntrack curl): cannot run `{0}`")]
    Missing(&'static str),
    /// keepalived did not start or did not report a replica healthy.
    #[error("{0}")]
    Health(String),
}

impl Lab {
    /// Adds the cluster to a lab whose director `core` exists: the replica
    /// namespaces and their links, the VRRP interface, the routes from
    /// `sites`' edges and the server to the cluster segment, and each
    /// replica's cgroup when `cluster.cpu` caps them. `mtu` is the lab's
    /// (the replicas' packets cross the same path).
    pub fn create_cluster(
        &self,
        cluster: Cluster,
        sites: Sites,
        mtu: Option<u16>,
    ) -> Result<(), ClusterError> {
        let mtu = mtu.unwrap_or(1500).to_string();
        for replica in cluster.cores.replicas() {
            self.add_netns(replica.node())?;
        }
        self.ip_in(
            Node::Core,
            &["link", "add", CLUSTER_BRIDGE, "type", "bridge"],
        )?;
        self.ip_in(
            Node::Core,
            &[
                "addr",
                "add",
                &format!("{DIRECTOR_ADDR}/24"),
                "dev",
                CLUSTER_BRIDGE,
            ],
        )?;
        for replica in cluster.cores.replicas() {
            self.create_replica_link(replica, &mtu)?;
        }
        self.ip_in(Node::Core, &["link", "set", CLUSTER_BRIDGE, "up"])?;
        self.veth(Node::Core, VRRP_IF, Node::Core, VRRP_PEER_IF)?;
        self.ip_in(
            Node::Core,
            &["addr", "add", &format!("{VRRP_ADDR}/32"), "dev", VRRP_IF],
        )?;
        for dev in [VRRP_IF, VRRP_PEER_IF] {
            self.ip_in(Node::Core, &["link", "set", dev, "up"])?;
        }
        // The replicas' own addresses, from both ends of the path.
        self.ip_in(
            Node::Edge,
            &["route", "add", CLUSTER_NET, "via", CORE_WAN_ADDR],
        )?;
        for site in sites.extra() {
            self.ip_in(
                site.edge(),
                &["route", "add", CLUSTER_NET, "via", &site.core_wan_addr()],
            )?;
        }
        self.ip_in(
            Node::Server,
            &["route", "add", CLUSTER_NET, "via", CORE_LAN_ADDR],
        )?;
        if let Some(share) = cluster.cpu {
            for replica in cluster.cores.replicas() {
                self.create_cgroup(replica, share)?;
            }
        }
        Ok(())
    }

    /// Replica `replica`'s veth (`repK` in the director's bridge, `eth0`
    /// in the replica), its address and its default route.
    fn create_replica_link(&self, replica: Replica, mtu: &str) -> Result<(), TopologyError> {
        let node = replica.node();
        let director_if = replica.director_if();
        self.veth(Node::Core, &director_if, node, "eth0")?;
        self.ip_in(
            Node::Core,
            &["link", "set", &director_if, "master", CLUSTER_BRIDGE],
        )?;
        self.ip_in(
            node,
            &[
                "addr",
                "add",
                &format!("{}/24", replica.addr()),
                "dev",
                "eth0",
            ],
        )?;
        for (node, dev) in [(Node::Core, director_if.as_str()), (node, "eth0")] {
            self.ip_in(node, &["link", "set", dev, "mtu", mtu, "up"])?;
            // As on the path: the replicas' packets leave the director
            // through the emulator at their wire size.
            self.offloads_off(node, dev)?;
        }
        self.ip_in(node, &["route", "add", "default", "via", DIRECTOR_ADDR])
    }

    /// Whether replica `replica`'s namespace exists.
    pub fn has_replica(&self, replica: Replica) -> bool {
        Path::new("/run/netns")
            .join(self.netns(replica.node()))
            .exists()
    }

    /// The cgroup v1 `cpu` group of `replica` in this lab (one per lab
    /// prefix and replica, so labs side by side keep their own).
    pub fn replica_cgroup(&self, replica: Replica) -> PathBuf {
        let lab = self
            .state_dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Path::new(CPU_CGROUP_ROOT).join(format!("wanopt-lab-{lab}-core{}", replica.number()))
    }

    /// Creates `replica`'s cgroup, capped at `share` of one CPU, and
    /// records it so that `destroy` removes it.
    fn create_cgroup(&self, replica: Replica, share: CpuShare) -> Result<(), ClusterError> {
        if !Path::new(CPU_CGROUP_ROOT).join("cpu.cfs_quota_us").exists() {
            return Err(ClusterError::NoCpuController);
        }
        let dir = self.replica_cgroup(replica);
        let cgroup_error = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| ClusterError::Cgroup { path, cause }
        };
        // A group left by a lab that was not taken down goes first.
        if dir.exists() {
            crate::topology::remove_cgroup(&dir);
        }
        fs::create_dir(&dir).map_err(cgroup_error(&dir))?;
        self.record_cgroup(&dir)?;
        for (file, value) in [
            ("cpu.cfs_period_us", share.period_us()),
            ("cpu.cfs_quota_us", share.quota_us()),
        ] {
            let path = dir.join(file);
            fs::write(&path, format!("{value}\n")).map_err(cgroup_error(&path))?;
        }
        // On a lab machine whose few cores also run the edges, emulators
        // and hosts, a capped replica would lose the quota of a period in
        // which it waited for a core: it is first in line (a weight of 8
        // where others have 1) and may spend a period's unused quota in
        // the next (burst), so that it gets its share, no more. Kernels
        // without burst (before 5.14) only get the weight.
        let weight = dir.join("cpu.shares");
        fs::write(&weight, "8192\n").map_err(cgroup_error(&weight))?;
        let burst = dir.join("cpu.cfs_burst_us");
        if burst.exists() {
            fs::write(&burst, format!("{}\n", share.quota_us())).map_err(cgroup_error(&burst))?;
        }
        Ok(())
    }
}

/// `command` (a program and its arguments) wrapped so that the process
/// joins `cgroup` before it runs: `sh -c 'echo $$ > CGROUP/cgroup.procs &&
/// exec "$@"'`, the same pid all along (what the lab records). The wrapper
/// must run outside `ip netns exec`, which mounts a `/sys` of the
/// namespace's own, without the cgroup hierarchy.
pub fn in_cgroup(cgroup: &Path, command: &[String]) -> Command {
    let mut sh = Command::new("sh");
    sh.args([
        "-c",
        r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#,
        "sh",
    ])
    .arg(cgroup)
    .args(command);
    sh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lab_has_its_own_cgroups() {
        let replica = Replica::new(2).unwrap_or_else(|| panic!("replica 2"));
        assert_eq!(
            Lab::new("wcl-").replica_cgroup(replica),
            PathBuf::from("/sys/fs/cgroup/cpu/wanopt-lab-wcl-core2")
        );
        assert_eq!(
            Lab::new("").replica_cgroup(replica),
            PathBuf::from("/sys/fs/cgroup/cpu/wanopt-lab-default-core2")
        );
    }

    #[test]
    fn a_wrapped_command_joins_its_cgroup_and_keeps_its_arguments() {
        let command: Vec<String> = ["ip", "netns", "exec", "wcl-core1", "/bin/wanopt", "a b"]
            .map(String::from)
            .to_vec();
        let sh = in_cgroup(Path::new("/sys/fs/cgroup/cpu/g"), &command);
        let args: Vec<String> = sh
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(sh.get_program(), "sh");
        assert_eq!(
            &args[2..],
            [
                "sh",
                "/sys/fs/cgroup/cpu/g",
                "ip",
                "netns",
                "exec",
                "wcl-core1",
                "/bin/wanopt",
                "a b"
            ]
        );
        // The shell itself: the cgroup is $1, the command the rest.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                r#"shift && exec "$@""#,
                "sh",
                "ignored",
                "echo",
                "a b",
                "c",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        assert_eq!(out, "a b c\n");
    }
}
