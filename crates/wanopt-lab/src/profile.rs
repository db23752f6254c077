//! Endpoint TCP profiles, applied to the `client` and `server` namespaces.
//!
//! What split TCP gains depends on the end hosts, so every run sets the
//! endpoints' TCP stacks explicitly. The `net.ipv4.tcp_*` sysctls used here
//! are per network namespace; the initial windows are route attributes.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::topology::{Lab, Node, TopologyError, CORE_LAN_ADDR, EDGE_LAN_ADDR};

/// Errors in choosing or applying a profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// No profile has this name.
    #[error("unknown profile `{0}`: expected one of linux, legacy")]
    Unknown(String),
    /// A sysctl or route could not be set.
    #[error("cannot apply profile `{profile}`: {cause}")]
    Apply {
        /// The profile.
        profile: &'static str,
        /// The underlying error.
        cause: TopologyError,
    },
}

/// One endpoint TCP configuration. `None` leaves the namespace's default
/// (a new namespace inherits the host's values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Profile {
    /// The profile's name.
    pub name: &'static str,
    /// What it stands for.
    pub description: &'static str,
    /// Congestion control of the generator's sockets (`TCP_CONGESTION`).
    ///
    /// Set per socket because this kernel refuses some defaults through the
    /// `tcp_congestion_control` sysctl inside a namespace (cubic gives EIO);
    /// the sysctl is still tried, for other programs run with `lab exec`.
    pub congestion_control: Option<&'static str>,
    /// `net.ipv4.tcp_rmem` (min default max, bytes).
    pub rmem: Option<&'static str>,
    /// `net.ipv4.tcp_wmem` (min default max, bytes).
    pub wmem: Option<&'static str>,
    /// `net.ipv4.tcp_sack`.
    pub sack: Option<bool>,
    /// `net.ipv4.tcp_ecn` (0 off, 1 request and accept, 2 accept only).
    pub ecn: Option<u8>,
    /// `net.ipv4.tcp_timestamps`.
    pub timestamps: Option<bool>,
    /// Route `initcwnd` (segments).
    pub initcwnd: Option<u32>,
    /// Route `initrwnd` (segments).
    pub initrwnd: Option<u32>,
}

/// This kernel's defaults, exactly as a new namespace gets them (on this
/// machine: BBR, `tcp_rmem` max 32 MiB, SACK, timestamps, ECN on request).
pub const LINUX: Profile = Profile {
    name: "linux",
    description: "this kernel's defaults, as a new namespace inherits them",
    congestion_control: None,
    rmem: None,
    wmem: None,
    sack: None,
    ecn: None,
    timestamps: None,
    initcwnd: None,
    initrwnd: None,
};

/// A host whose receive window stays around 1 MB, as in the reference
/// capture ("the window size remained mostly stable at around 1,000,000
/// Bytes"), CUBIC, no ECN. On this kernel a `tcp_rmem` maximum of 1.6 MB
/// gives a receive window of 1.0 MB (`ss -ti`: `rcv_space:998656` at
/// 100 ms): the kernel advertises about 62% of the buffer, the rest covers
/// socket buffer overhead.
pub const LEGACY: Profile = Profile {
    name: "legacy",
    description: "receive window capped around 1 MB (tcp_rmem max 1.6 MB), cubic, no ECN",
    congestion_control: Some("cubic"),
    rmem: Some("4096 131072 1600000"),
    wmem: Some("4096 16384 4194304"),
    sack: Some(true),
    ecn: Some(0),
    timestamps: Some(true),
    initcwnd: None,
    initrwnd: None,
};

/// Every built-in profile.
pub const PROFILES: [&Profile; 2] = [&LINUX, &LEGACY];

/// The sysctls reported as a profile's effective settings.
pub const REPORTED_SYSCTLS: [&str; 6] = [
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_timestamps",
];

impl Profile {
    /// The built-in profile called `name`.
    pub fn named(name: &str) -> Result<&'static Profile, ProfileError> {
        PROFILES
            .into_iter()
            .find(|p| p.name == name)
            .ok_or_else(|| ProfileError::Unknown(name.to_string()))
    }

    /// The sysctls this profile must set.
    pub fn sysctls(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![("net.ipv4.tcp_no_metrics_save", "1".to_string())];
        if let Some(x) = self.rmem {
            v.push(("net.ipv4.tcp_rmem", x.to_string()));
        }
        if let Some(x) = self.wmem {
            v.push(("net.ipv4.tcp_wmem", x.to_string()));
        }
        if let Some(x) = self.sack {
            v.push(("net.ipv4.tcp_sack", u8::from(x).to_string()));
        }
        if let Some(x) = self.ecn {
            v.push(("net.ipv4.tcp_ecn", x.to_string()));
        }
        if let Some(x) = self.timestamps {
            v.push(("net.ipv4.tcp_timestamps", u8::from(x).to_string()));
        }
        v
    }

    /// Applies the profile to the client and the server of `lab`.
    pub fn apply(&self, lab: &Lab) -> Result<(), ProfileError> {
        for (node, gateway) in [(Node::Client, EDGE_LAN_ADDR), (Node::Server, CORE_LAN_ADDR)] {
            self.apply_to(lab, node, gateway)?;
        }
        Ok(())
    }

    /// Applies the profile to the endpoint `node` of `lab`, whose default
    /// route goes via `gateway` (a site's client: `lab up --sites`).
    pub fn apply_to(&self, lab: &Lab, node: Node, gateway: &str) -> Result<(), ProfileError> {
        let err = |source| ProfileError::Apply {
            profile: self.name,
            cause: source,
        };
        for (key, value) in self.sysctls() {
            lab.sysctl(node, key, &value).map_err(err)?;
        }
        if let Some(cc) = self.congestion_control {
            // Best effort, see `congestion_control`.
            let _ = lab.sysctl(node, "net.ipv4.tcp_congestion_control", cc);
        }
        let mut args = vec!["route", "replace", "default", "via", gateway];
        let cwnd = self.initcwnd.map(|v| v.to_string());
        let rwnd = self.initrwnd.map(|v| v.to_string());
        if let Some(c) = &cwnd {
            args.extend(["initcwnd", c.as_str()]);
        }
        if let Some(r) = &rwnd {
            args.extend(["initrwnd", r.as_str()]);
        }
        lab.ip_in(node, &args).map_err(err)
    }

    /// The effective TCP settings of `node` (read back after applying).
    pub fn effective(lab: &Lab, node: Node) -> BTreeMap<String, String> {
        REPORTED_SYSCTLS
            .iter()
            .filter_map(|k| {
                lab.read_sysctl(node, k).ok().map(|v| {
                    (
                        k.to_string(),
                        v.split_whitespace().collect::<Vec<_>>().join(" "),
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve() {
        assert_eq!(Profile::named("linux").map(|p| p.name).ok(), Some("linux"));
        assert_eq!(
            Profile::named("legacy").map(|p| p.name).ok(),
            Some("legacy")
        );
        assert!(Profile::named("windows95").is_err());
    }

    #[test]
    fn legacy_caps_the_receive_window_near_one_megabyte() {
        let max: u64 = LEGACY
            .rmem
            .unwrap_or("")
            .split_whitespace()
            .nth(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        // About 62% of the buffer is advertised as window.
        let window = max as f64 * 0.62;
        assert!((900_000.0..=1_100_000.0).contains(&window), "{window}");
    }
}
