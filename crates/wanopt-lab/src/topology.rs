//! The lab's topology: five network namespaces joined by four veth pairs.
//!
//! ```text
//!  client          edge                     wan                  core                    server
//!  eth0 ──────── lan0    wan0 ─────────── e0 [emulator] c0 ──── wan0    lan0 ──────────── eth0
//!  198.18.1.2   198.18.1.1  198.18.2.1        (no IP)        198.18.2.2  198.18.3.1     198.18.3.2
//! ```
//!
//! `edge` and `core` share one L2 segment (198.18.2.0/24) through the `wan`
//! bump, which forwards raw Ethernet frames between `e0` and `c0`. Every
//! namespace name carries the lab's prefix so that several labs (tests) can
//! exist side by side; the default prefix is empty.
//!
//! `lab up --sites N` adds a client and an edge namespace per extra site,
//! each with its own link into `wan` and on to `core` (the `sites` module);
//! `lab up --cores N` adds N core replicas behind `core` (the `cluster`
//! module).
//!
//! The lab records each namespace it creates (name and namespace inode, in
//! `created` in its state directory) and tears down only those: a
//! namespace that merely has a lab's name is left alone (and `create`
//! refuses to build over it). The veth pairs are created inside the
//! namespaces and go with them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use crate::node::Node;

/// Errors from building, inspecting or tearing down the lab.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A helper program (`ip`, `ethtool`, ...) could not be started.
    #[error(
        "cannot run `{program}`: {cause} (is it installed? try `apt-get install iproute2 ethtool`)"
    )]
    Spawn {
        /// The program that failed to start.
        program: String,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A helper program ran and failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line that failed.
        command: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The node name is not one of the lab's namespaces.
    #[error("{}", crate::node::UnknownNode(.0.clone()))]
    UnknownNode(String),
    /// The lab state directory could not be read or written.
    #[error("lab state {path}: {cause}")]
    State {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The lab is not up.
    #[error("the lab is not up (no namespace `{0}`): run `wanopt lab up` first")]
    NotUp(String),
    /// A namespace with a lab's name exists that the lab did not create.
    #[error("network namespace `{0}` exists and this lab did not create it: it is left alone; delete it yourself (`ip netns del {0}`) or choose another WANOPT_LAB_PREFIX")]
    Foreign(String),
}

/// What [`Lab::destroy`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Teardown {
    /// Namespaces it created and deleted now.
    pub removed: Vec<String>,
    /// Namespaces with the lab's names that it did not create, left alone.
    pub foreign: Vec<String>,
    /// Recorded processes it ended (still running in the lab).
    pub processes: usize,
}

impl Teardown {
    /// Whether there was nothing of this lab to remove.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.processes == 0
    }
}

/// The inode of the namespace mounted at `/run/netns/{name}`, if any:
/// what tells the lab's own namespace from a later one of the same name.
fn netns_inode(name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(Path::new("/run/netns").join(name))
        .ok()
        .map(|m| m.ino())
}

pub use crate::node::{
    CLIENT_ADDR, CORE_LAN_ADDR, CORE_WAN_ADDR, EDGE_LAN_ADDR, EDGE_LAN_IF, EDGE_WAN_ADDR,
    SERVER_ADDR, WAN_CORE_IF, WAN_EDGE_IF,
};
/// Fixed MAC of the edge's WAN interface (so neighbours are static).
const EDGE_WAN_MAC: &str = "02:00:c6:12:02:01";
/// Fixed MAC of the core's WAN interface.
const CORE_WAN_MAC: &str = "02:00:c6:12:02:02";

/// Both ends of each of the four veths from the client to the server.
const PATH_INTERFACES: [(Node, &str); 8] = [
    (Node::Client, "eth0"),
    (Node::Edge, EDGE_LAN_IF),
    (Node::Edge, "wan0"),
    (Node::Wan, WAN_EDGE_IF),
    (Node::Wan, WAN_CORE_IF),
    (Node::Core, "wan0"),
    (Node::Core, "lan0"),
    (Node::Server, "eth0"),
];

/// A handle on one lab: its namespace prefix and its state directory.
#[derive(Debug, Clone)]
pub struct Lab {
    prefix: String,
}

impl Lab {
    /// The lab whose namespaces are named `{prefix}client`, `{prefix}edge`, ...
    pub fn new(prefix: &str) -> Lab {
        Lab {
            prefix: prefix.to_string(),
        }
    }

    /// The default lab (no prefix): namespaces `client`, `edge`, `wan`, `core`, `server`.
    pub fn default_lab() -> Lab {
        Lab::new(&std::env::var("WANOPT_LAB_PREFIX").unwrap_or_default())
    }

    /// The namespace prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The network namespace name of `node`.
    pub fn netns(&self, node: Node) -> String {
        format!("{}{}", self.prefix, node.name())
    }

    /// The directory holding pid files, settings and counters of this lab.
    pub fn state_dir(&self) -> PathBuf {
        let name = if self.prefix.is_empty() {
            "default"
        } else {
            self.prefix.trim_end_matches(['-', '_'])
        };
        PathBuf::from("/run/wanopt-lab").join(name)
    }

    /// Whether every namespace of the lab exists.
    pub fn is_up(&self) -> bool {
        Node::ALL
            .iter()
            .all(|n| Path::new("/run/netns").join(self.netns(*n)).exists())
    }

    /// Creates the namespaces, veths, addresses and routes (clearing what
    /// a previous run of this lab created first; a namespace of the lab's
    /// names that it did not create is an error). Starts no process.
    pub fn create(&self) -> Result<(), TopologyError> {
        self.destroy()?;
        if let Some(ns) = Node::ALL
            .iter()
            .map(|&n| self.netns(n))
            .find(|ns| netns_inode(ns).is_some())
        {
            return Err(TopologyError::Foreign(ns));
        }
        let dir = self.state_dir();
        fs::create_dir_all(dir.join("pids")).map_err(|source| TopologyError::State {
            path: dir.clone(),
            cause: source,
        })?;
        for node in Node::ALL {
            self.add_netns(node)?;
        }
        self.veth(Node::Client, "eth0", Node::Edge, EDGE_LAN_IF)?;
        self.veth(Node::Edge, "wan0", Node::Wan, WAN_EDGE_IF)?;
        self.veth(Node::Wan, WAN_CORE_IF, Node::Core, "wan0")?;
        self.veth(Node::Core, "lan0", Node::Server, "eth0")?;
        self.ip_in(
            Node::Edge,
            &["link", "set", "wan0", "address", EDGE_WAN_MAC],
        )?;
        self.ip_in(
            Node::Core,
            &["link", "set", "wan0", "address", CORE_WAN_MAC],
        )?;

        let addrs: [(Node, &str, &str); 6] = [
            (Node::Client, "eth0", CLIENT_ADDR),
            (Node::Edge, EDGE_LAN_IF, EDGE_LAN_ADDR),
            (Node::Edge, "wan0", EDGE_WAN_ADDR),
            (Node::Core, "wan0", CORE_WAN_ADDR),
            (Node::Core, "lan0", CORE_LAN_ADDR),
            (Node::Server, "eth0", SERVER_ADDR),
        ];
        for (node, dev, addr) in addrs {
            self.ip_in(node, &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
        }
        for (node, dev) in PATH_INTERFACES {
            self.ip_in(node, &["link", "set", dev, "mtu", "1500", "up"])?;
            self.offloads_off(node, dev)?;
        }
        self.ip_in(Node::Wan, &["link", "set", WAN_EDGE_IF, "promisc", "on"])?;
        self.ip_in(Node::Wan, &["link", "set", WAN_CORE_IF, "promisc", "on"])?;
        self.ip_in(
            Node::Client,
            &["route", "add", "default", "via", EDGE_LAN_ADDR],
        )?;
        self.ip_in(
            Node::Server,
            &["route", "add", "default", "via", CORE_LAN_ADDR],
        )?;
        self.ip_in(
            Node::Edge,
            &["route", "add", "198.18.3.0/24", "via", CORE_WAN_ADDR],
        )?;
        self.ip_in(
            Node::Core,
            &["route", "add", "198.18.1.0/24", "via", EDGE_WAN_ADDR],
        )?;
        // Static neighbours across the WAN: no ARP through the emulated link.
        self.ip_in(
            Node::Edge,
            &[
                "neigh",
                "replace",
                CORE_WAN_ADDR,
                "lladdr",
                CORE_WAN_MAC,
                "dev",
                "wan0",
                "nud",
                "permanent",
            ],
        )?;
        self.ip_in(
            Node::Core,
            &[
                "neigh",
                "replace",
                EDGE_WAN_ADDR,
                "lladdr",
                EDGE_WAN_MAC,
                "dev",
                "wan0",
                "nud",
                "permanent",
            ],
        )?;
        for node in [Node::Edge, Node::Core] {
            self.sysctl(node, "net.ipv4.ip_forward", "1")?;
        }
        Ok(())
    }

    /// Sets the MTU of every interface on the path from the client to the
    /// server (both ends of each of the four veths) to `mtu` bytes.
    pub fn set_mtu(&self, mtu: u16) -> Result<(), TopologyError> {
        let mtu = mtu.to_string();
        for (node, dev) in PATH_INTERFACES {
            self.ip_in(node, &["link", "set", dev, "mtu", &mtu])?;
        }
        Ok(())
    }

    /// Creates the namespace of `node` (refusing one of its name that
    /// exists), records it as the lab's, brings `lo` up and turns IPv6 off.
    pub(crate) fn add_netns(&self, node: Node) -> Result<(), TopologyError> {
        let ns = self.netns(node);
        if netns_inode(&ns).is_some() {
            return Err(TopologyError::Foreign(ns));
        }
        ip(&["netns", "add", &ns])?;
        self.record_created(&ns)?;
        self.ip_in(node, &["link", "set", "lo", "up"])?;
        // No IPv6: no router solicitations or DAD noise through the emulator.
        self.sysctl(node, "net.ipv6.conf.all.disable_ipv6", "1")?;
        self.sysctl(node, "net.ipv6.conf.default.disable_ipv6", "1")
    }

    /// The file listing the namespaces this lab created.
    fn created_path(&self) -> PathBuf {
        self.state_dir().join("created")
    }

    /// Notes that the lab created namespace `ns` (with its inode).
    fn record_created(&self, ns: &str) -> Result<(), TopologyError> {
        let inode = netns_inode(ns).unwrap_or(0);
        self.record_line(&format!("netns {ns} {inode}"))
    }

    /// Notes that the lab created the cgroup directory `dir` (a core
    /// replica's, `lab up --cores N --core-cpu F`): `destroy` removes it.
    pub(crate) fn record_cgroup(&self, dir: &Path) -> Result<(), TopologyError> {
        self.record_line(&format!("cgroup {}", dir.display()))
    }

    /// Appends one line to the record of what the lab created.
    fn record_line(&self, line: &str) -> Result<(), TopologyError> {
        use std::io::Write;
        let path = self.created_path();
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"))
            .map_err(|source| TopologyError::State {
                path,
                cause: source,
            })
    }

    /// The cgroup directories recorded as created by this lab.
    fn created_cgroups(&self) -> Vec<PathBuf> {
        let text = fs::read_to_string(self.created_path()).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.strip_prefix("cgroup "))
            .map(PathBuf::from)
            .collect()
    }

    /// The namespaces recorded as created by this lab, with their inodes.
    fn created(&self) -> Vec<(String, u64)> {
        let text = fs::read_to_string(self.created_path()).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                match (words.next(), words.next(), words.next()) {
                    (Some("netns"), Some(ns), Some(inode)) => {
                        Some((ns.to_owned(), inode.parse().ok()?))
                    }
                    _ => None,
                }
            })
            .collect()
    }

    /// Ends the lab's recorded processes and deletes the namespaces it
    /// created (still the same namespaces: same inode), with whatever
    /// runs in them; a namespace that only has a lab's name is left alone
    /// and reported. Idempotent.
    pub fn destroy(&self) -> Result<Teardown, TopologyError> {
        let mut teardown = Teardown {
            processes: self.kill_recorded_processes(),
            ..Teardown::default()
        };
        let created = self.created();
        let cgroups = self.created_cgroups();
        for node in Node::every_possible() {
            let ns = self.netns(node);
            let Some(inode) = netns_inode(&ns) else {
                continue;
            };
            if !created
                .iter()
                .any(|(name, ino)| *name == ns && *ino == inode)
            {
                teardown.foreign.push(ns);
                continue;
            }
            // Anything still running inside belongs to the lab.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    if let Ok(pid) = pid.parse::<i32>() {
                        kill_and_wait(pid);
                    }
                }
            }
            ip(&["netns", "del", &ns])?;
            teardown.removed.push(ns);
        }
        // Their processes are gone: the groups are empty now (or soon).
        for dir in cgroups {
            remove_cgroup(&dir);
        }
        let dir = self.state_dir();
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(|source| TopologyError::State {
                path: dir,
                cause: source,
            })?;
        }
        Ok(teardown)
    }

    /// Records the pid of a process that `destroy` must end.
    pub fn record_pid(&self, name: &str, pid: u32) -> Result<(), TopologyError> {
        let path = self.state_dir().join("pids").join(format!("{name}.pid"));
        fs::write(&path, format!("{pid}\n")).map_err(|source| TopologyError::State {
            path,
            cause: source,
        })
    }

    /// Whether the process recorded under `name` has ended (or none is
    /// recorded): its pid is gone or a zombie (a daemon's parent does not
    /// reap it while the lab command runs).
    pub fn daemon_exited(&self, name: &str) -> bool {
        let path = self.state_dir().join("pids").join(format!("{name}.pid"));
        let Some(pid) = fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
        else {
            return true;
        };
        process_ended(pid)
    }

    /// Ends the process recorded under `name`, if any, and if it still
    /// runs in one of the namespaces this lab created: a recorded pid
    /// reused since by another process is left alone. Returns whether it
    /// ended one.
    pub fn kill_recorded(&self, name: &str) -> bool {
        let path = self.state_dir().join("pids").join(format!("{name}.pid"));
        let pid = fs::read_to_string(&path)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .filter(|&pid| self.runs_in_lab(pid));
        if let Some(pid) = pid {
            kill_and_wait(pid);
        }
        let _ = fs::remove_file(path);
        pid.is_some()
    }

    /// The pid recorded under `name`, if that process still runs in one of
    /// the namespaces this lab created.
    pub fn running_pid(&self, name: &str) -> Option<i32> {
        let path = self.state_dir().join("pids").join(format!("{name}.pid"));
        fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<i32>().ok())
            .filter(|&pid| self.runs_in_lab(pid) && !process_ended(pid as u32))
    }

    /// Whether process `pid` runs in a namespace this lab created.
    fn runs_in_lab(&self, pid: i32) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(ns) = fs::metadata(format!("/proc/{pid}/ns/net")) else {
            return false;
        };
        self.created().iter().any(|&(_, inode)| inode == ns.ino())
    }

    /// Ends every recorded process; returns how many it ended.
    fn kill_recorded_processes(&self) -> usize {
        let dir = self.state_dir().join("pids");
        let Ok(entries) = fs::read_dir(&dir) else {
            return 0;
        };
        let mut ended = 0;
        for entry in entries.flatten() {
            if let Some(name) = entry.path().file_stem().and_then(|s| s.to_str()) {
                ended += usize::from(self.kill_recorded(name));
            }
        }
        ended
    }

    /// A `Command` that runs `program` inside the namespace of `node`.
    pub fn command(&self, node: Node, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns(node), program]);
        cmd
    }

    /// Runs `ip ARGS` inside the namespace of `node`.
    pub fn ip_in(&self, node: Node, args: &[&str]) -> Result<(), TopologyError> {
        let ns = self.netns(node);
        let mut full: Vec<&str> = vec!["-n", ns.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Sets a sysctl inside the namespace of `node` (per-namespace keys only).
    pub fn sysctl(&self, node: Node, key: &str, value: &str) -> Result<(), TopologyError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let mut cmd = self.command(node, "sh");
        cmd.args(["-c", "printf '%s\\n' \"$2\" > \"$1\"", "sh", &path, value]);
        run(cmd)
    }

    /// Reads a sysctl inside the namespace of `node`.
    pub fn read_sysctl(&self, node: Node, key: &str) -> Result<String, TopologyError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let mut cmd = self.command(node, "cat");
        cmd.arg(&path);
        let out = output(cmd)?;
        Ok(out.trim().to_string())
    }

    /// Starts `program ARGS` as a background process inside `node`, in its
    /// own process group, logging to `{state_dir}/{name}.log`, and records
    /// its pid under `name` so that `destroy` ends it.
    pub fn spawn_daemon(
        &self,
        node: Node,
        name: &str,
        program: &Path,
        args: &[String],
    ) -> Result<u32, TopologyError> {
        let mut cmd = self.command(node, &program.to_string_lossy());
        cmd.args(args);
        self.spawn_daemon_command(name, cmd)
    }

    /// Starts `cmd` (which enters a lab namespace itself) as a background
    /// process in its own process group, logging to
    /// `{state_dir}/{name}.log`, and records its pid under `name` so that
    /// `destroy` ends it.
    pub fn spawn_daemon_command(&self, name: &str, mut cmd: Command) -> Result<u32, TopologyError> {
        use std::os::unix::process::CommandExt;
        let log_path = self.state_dir().join(format!("{name}.log"));
        let log = fs::File::create(&log_path).map_err(|source| TopologyError::State {
            path: log_path.clone(),
            cause: source,
        })?;
        let log2 = log.try_clone().map_err(|source| TopologyError::State {
            path: log_path.clone(),
            cause: source,
        })?;
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        let child = cmd.spawn().map_err(|source| TopologyError::Spawn {
            program: "ip".to_string(),
            cause: source,
        })?;
        let pid = child.id();
        self.record_pid(name, pid)?;
        Ok(pid)
    }

    /// The last lines of a daemon's log (for error messages).
    pub fn daemon_log(&self, name: &str) -> String {
        let text =
            fs::read_to_string(self.state_dir().join(format!("{name}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join(" | ")
    }

    /// Creates a veth pair: `a_if` in `a`, `b_if` in `b`.
    pub(crate) fn veth(
        &self,
        a: Node,
        a_if: &str,
        b: Node,
        b_if: &str,
    ) -> Result<(), TopologyError> {
        ip(&[
            "link",
            "add",
            "name",
            a_if,
            "netns",
            &self.netns(a),
            "type",
            "veth",
            "peer",
            "name",
            b_if,
            "netns",
            &self.netns(b),
        ])
    }

    /// Turns checksum and segmentation offloads off on `dev` in `node`.
    pub(crate) fn offloads_off(&self, node: Node, dev: &str) -> Result<(), TopologyError> {
        let mut cmd = self.command(node, "ethtool");
        // `tx off`: frames relayed by the AF_PACKET bump must carry real
        // checksums, not CHECKSUM_PARTIAL placeholders.
        cmd.args([
            "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ]);
        run(cmd)
    }
}

/// Runs `ip ARGS` in the current namespace.
fn ip(args: &[&str]) -> Result<(), TopologyError> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run(cmd)
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs a command to completion; an error carries its stderr.
pub(crate) fn run(cmd: Command) -> Result<(), TopologyError> {
    output(cmd).map(|_| ())
}

/// Runs a command to completion and returns its stdout.
pub(crate) fn output(mut cmd: Command) -> Result<String, TopologyError> {
    cmd.stdin(Stdio::null());
    let out = cmd.output().map_err(|source| TopologyError::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        cause: source,
    })?;
    if !out.status.success() {
        return Err(TopologyError::Command {
            command: describe(&cmd),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Sends SIGTERM to `pid`, waits up to 2 s, then SIGKILL.
pub(crate) fn kill_and_wait(pid: i32) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    if pid <= 1 {
        return;
    }
    let pid = Pid::from_raw(pid);
    if kill(pid, Signal::SIGTERM).is_err() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        // Reap it if it is our child; otherwise poll for its disappearance.
        let _ = nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        if kill(pid, None).is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = kill(pid, Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(pid, None);
}

/// Whether process `pid` is gone or a zombie (`/proc/PID/stat`: the state
/// follows the parenthesised command name).
fn process_ended(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

impl From<crate::node::UnknownNode> for TopologyError {
    fn from(e: crate::node::UnknownNode) -> TopologyError {
        TopologyError::UnknownNode(e.0)
    }
}

/// Removes a cgroup directory once its processes are gone (they may take
/// a moment to leave after being killed); gives up after 2 s.
pub(crate) fn remove_cgroup(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while dir.exists() {
        if fs::remove_dir(dir).is_ok() || Instant::now() > deadline {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_pid_outside_the_lab_is_not_killed() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let lab = Lab::new(&format!("pidtest{}-", std::process::id()));
        fs::create_dir_all(lab.state_dir().join("pids")).unwrap();
        // A process of this (root) namespace whose pid a stale record
        // names, as after pid reuse.
        let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
        lab.record_pid("gen-server", bystander.id()).unwrap();
        let teardown = lab.destroy().unwrap();
        assert_eq!(teardown.removed, Vec::<String>::new());
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "the bystander was killed"
        );
        let _ = bystander.kill();
        let _ = bystander.wait();
    }

    #[test]
    fn a_zombie_or_missing_process_has_ended_a_running_one_has_not() {
        let mut running = Command::new("sleep").arg("30").spawn().unwrap();
        let mut done = Command::new("true").spawn().unwrap();
        // `true` exits at once; unreaped, it stays a zombie.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !process_ended(done.id()) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(process_ended(done.id()));
        assert!(!process_ended(running.id()));
        assert!(!process_ended(std::process::id()));
        running.kill().unwrap();
        running.wait().unwrap();
        done.wait().unwrap();
        assert!(process_ended(running.id()));
    }

    #[test]
    fn prefixed_names() {
        let lab = Lab::new("t1-");
        assert_eq!(lab.netns(Node::Wan), "t1-wan");
        assert_eq!(lab.state_dir(), PathBuf::from("/run/wanopt-lab/t1"));
        assert_eq!(
            Lab::new("").state_dir(),
            PathBuf::from("/run/wanopt-lab/default")
        );
    }
}
