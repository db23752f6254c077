//! The replicas' wanopt cores: each started in its namespace (and, with
//! `--core-cpu`, its cgroup), its command kept in the cluster's directory
//! so that it can be started again the same way after a failure.

use std::path::{Path, PathBuf};

use super::keepalived::cluster_dir;
use super::topology::{in_cgroup, ClusterError};
use super::Replica;
use crate::topology::{Lab, TopologyError};

/// A replica's command as started: what [`restart`] runs again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplicaCommand {
    /// The wanopt executable.
    pub program: PathBuf,
    /// Its arguments (`core ...`).
    pub args: Vec<String>,
    /// The cgroup it runs in, if its CPU is capped.
    pub cgroup: Option<PathBuf>,
}

/// The file that keeps `replica`'s command.
fn command_path(lab: &Lab, replica: Replica) -> PathBuf {
    cluster_dir(lab).join(format!("{}.command.json", replica.daemon()))
}

/// Starts `program args` in `replica` (in its cgroup, if it has one) as
/// the lab daemon `wanopt-coreK`, and keeps the command; returns its pid.
pub fn spawn(
    lab: &Lab,
    replica: Replica,
    capped: bool,
    program: &Path,
    args: &[String],
) -> Result<u32, TopologyError> {
    let command = ReplicaCommand {
        program: program.to_path_buf(),
        args: args.to_vec(),
        cgroup: capped.then(|| lab.replica_cgroup(replica)),
    };
    let path = command_path(lab, replica);
    let text = serde_json::to_string_pretty(&command).unwrap_or_default();
    std::fs::write(&path, text).map_err(|cause| TopologyError::State {
        path: path.clone(),
        cause,
    })?;
    run(lab, replica, &command)
}

fn run(lab: &Lab, replica: Replica, command: &ReplicaCommand) -> Result<u32, TopologyError> {
    match &command.cgroup {
        Some(cgroup) => {
            let mut inner = vec![
                "ip".to_string(),
                "netns".into(),
                "exec".into(),
                lab.netns(replica.node()),
                command.program.to_string_lossy().into_owned(),
            ];
            inner.extend(command.args.iter().cloned());
            lab.spawn_daemon_command(&replica.daemon(), in_cgroup(cgroup, &inner))
        }
        None => lab.spawn_daemon(
            replica.node(),
            &replica.daemon(),
            &command.program,
            &command.args,
        ),
    }
}

/// Starts `replica`'s wanopt core again as `lab up` started it (ending
/// the running one first, if any); returns its pid.
pub fn restart(lab: &Lab, replica: Replica) -> Result<u32, ClusterError> {
    let path = command_path(lab, replica);
    let text = std::fs::read_to_string(&path).map_err(|cause| TopologyError::State {
        path: path.clone(),
        cause,
    })?;
    let command: ReplicaCommand =
        serde_json::from_str(&text).map_err(|e| TopologyError::State {
            path,
            cause: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
    lab.kill_recorded(&replica.daemon());
    Ok(run(lab, replica, &command)?)
}
