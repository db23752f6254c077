//! Running the `cluster` scenario's phases on the lab.

use std::thread;
use std::time::{Duration, Instant};

use super::results::{Phase, Redials, Row, SteadyCell};
use super::transfer::{self, Outcome};
use super::Plan;
use crate::bringup::{self, UpConfig};
use crate::cluster::director::{bucket_of, home_of};
use crate::cluster::{replicas, Cluster, Cores, CpuShare, Replica};
use crate::link::{link_totals, set_link};
use crate::profile::LINUX;
use crate::sites::{Site, Sites};
use crate::topology::{Lab, Node, EDGE_WAN_ADDR};

/// Site `site`'s client namespace.
fn client(site: u8) -> Node {
    Site::new(site).map_or(Node::Client, Site::client)
}

/// Site `site`'s edge's WAN address (what the director hashes).
fn edge_addr(site: u8) -> String {
    Site::new(site).map_or_else(|| EDGE_WAN_ADDR.to_string(), Site::edge_wan_addr)
}

/// The replica whose bucket `site`'s edge is in while all are healthy.
pub fn home(site: u8, cores: Cores) -> Option<u8> {
    let ip = edge_addr(site).parse().ok()?;
    home_of(bucket_of(ip), cores).map(Replica::number)
}

/// Brings a fresh lab up: `plan.sites` sites, `cores` replicas capped at
/// `cpu`, through wanopt (`reduce` on or off).
pub fn up(
    lab: &Lab,
    exe: &std::path::Path,
    plan: &Plan,
    cores: Cores,
    cpu: Option<CpuShare>,
    reduce: bool,
) -> Result<(), String> {
    let config = UpConfig {
        specs: plan.link().specs().map_err(|e| e.to_string())?,
        profile: &LINUX,
        optimize: true,
        reduce,
        node_args: Vec::new(),
        edge_args: Vec::new(),
        core_args: Vec::new(),
        link2: None,
        sites: Sites::new(plan.sites).ok_or("sites")?,
        cluster: Some(Cluster { cores, cpu }),
        ..UpConfig::default()
    };
    bringup::up(lab, &config, exe).map_err(|e| format!("lab up failed: {e}"))?;
    transfer::serve(lab)
}

/// A replica's `/status` (null when it does not answer).
fn status(lab: &Lab, replica: Replica) -> serde_json::Value {
    let out = lab
        .command(Node::Core, "curl")
        .args(["-fsS", "-m", "2"])
        .arg(format!("http://{}/status", replica.control()))
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

/// Bytes each replica has carried toward the clients so far.
fn carried_bytes(lab: &Lab, cores: Cores) -> Vec<u64> {
    cores
        .replicas()
        .map(|r| status(lab, r)["bytes_to_client"].as_u64().unwrap_or(0))
        .collect()
}

/// The tunnels each replica carries: the edges' addresses (no port).
fn carried(lab: &Lab, replica: Replica) -> Vec<String> {
    let doc = status(lab, replica);
    doc["peers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["state"] == "up")
        .filter_map(|p| p["address"].as_str())
        .filter_map(|a| a.rsplit_once(':').map(|(ip, _)| ip.to_string()))
        .collect()
}

/// The replica carrying `site`'s tunnel, waiting up to `within` for one.
fn replica_of(lab: &Lab, cores: Cores, site: u8, within: Duration) -> Option<u8> {
    let edge = edge_addr(site);
    let deadline = Instant::now() + within;
    loop {
        let found = cores
            .replicas()
            .find(|&r| carried(lab, r).contains(&edge))
            .map(Replica::number);
        if found.is_some() || Instant::now() >= deadline {
            return found;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Every site's download of `length` bytes at once (seeds apart); the
/// outcomes in site order and the wall seconds.
fn all_at_once(lab: &Lab, sites: u8, length: u64, seed: u64) -> (Vec<Outcome>, f64) {
    let started = Instant::now();
    let handles: Vec<_> = (1..=sites)
        .map(|site| {
            let lab = lab.clone();
            thread::spawn(move || {
                transfer::download(
                    &lab,
                    client(site),
                    seed + u64::from(site),
                    length,
                    Duration::from_secs(20),
                    None,
                )
            })
        })
        .collect();
    let outcomes = handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| Outcome {
                failure: Some("panicked".into()),
                ..Outcome::default()
            })
        })
        .collect();
    (outcomes, started.elapsed().as_secs_f64())
}

fn resets(outcome: &Outcome) -> u32 {
    u32::from(outcome.failure.as_deref().is_some_and(transfer::is_reset))
}

/// The steady phase through `cores` replicas: rows and totals.
pub fn steady(lab: &Lab, plan: &Plan, cores: Cores) -> Result<(Vec<Row>, SteadyCell), String> {
    let placed: Vec<Option<u8>> = (1..=plan.sites)
        .map(|site| replica_of(lab, cores, site, Duration::from_secs(5)))
        .collect();
    let (outcomes, seconds) = all_at_once(lab, plan.sites, plan.bytes_per_site, 1000);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        let site = i as u8 + 1;
        if let Some(f) = &outcome.failure {
            failures.push(format!("site {site}: {f}"));
        }
        rows.push(Row {
            replicas: cores.count(),
            sites: plan.sites,
            phase: Phase::Steady,
            site,
            replica: placed[i],
            mbit_s: Some(outcome.mbit_s()),
            mbit_s_before: None,
            first_flow_ms: None,
            resets: resets(outcome),
            wrong_bytes: outcome.wrong_bytes,
            failure: outcome.failure.clone(),
        });
    }
    let bytes: u64 = outcomes.iter().map(|o| o.bytes).sum();
    let per_replica = cores
        .replicas()
        .map(|r| placed.iter().filter(|p| **p == Some(r.number())).count() as u8)
        .collect();
    let cell = SteadyCell {
        replicas: cores.count(),
        bytes,
        seconds,
        mbit_s: bytes as f64 * 8.0 / seconds / 1e6,
        sites_per_replica: per_replica,
    };
    if !failures.is_empty() {
        return Err(failures.join("; "));
    }
    Ok((rows, cell))
}

/// Ends replica `number`'s wanopt core with SIGKILL.
fn kill(lab: &Lab, number: u8) -> Result<(), String> {
    let replica = Replica::new(number).ok_or("no such replica")?;
    let pid = lab
        .running_pid(&replica.daemon())
        .ok_or_else(|| format!("core{number}'s wanopt is not running"))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|e| format!("kill {pid}: {e}"))
}

/// How long a first flow after a kill may take before the phase gives up
/// on it.
const FIRST_FLOW_LIMIT: Duration = Duration::from_secs(15);

/// New small flows from `site` every 100 ms until one works: the
/// milliseconds since `since` when it did.
fn first_flow(lab: &Lab, site: u8, since: Instant, seed: u64) -> Option<f64> {
    while since.elapsed() < FIRST_FLOW_LIMIT {
        let outcome = transfer::download(
            lab,
            client(site),
            seed,
            64 * 1024,
            Duration::from_secs(1),
            None,
        );
        if outcome.complete() {
            return Some(since.elapsed().as_secs_f64() * 1000.0);
        }
        thread::sleep(Duration::from_millis(100));
    }
    None
}

/// The failover phase: every site downloads for about
/// `plan.failover_seconds`; after a third of it the replica carrying site
/// 1 is killed; the sites it carried open new flows until one works, the
/// others' downloads go on.
pub fn failover(lab: &Lab, plan: &Plan, cores: Cores) -> Result<(Vec<Row>, u8), String> {
    let placed: Vec<Option<u8>> = (1..=plan.sites)
        .map(|site| replica_of(lab, cores, site, Duration::from_secs(5)))
        .collect();
    let victim = placed[0].ok_or("no replica carries site 1")?;
    let length = plan.failover_bytes();
    let (lab2, sites) = (lab.clone(), plan.sites);
    let downloads = thread::spawn(move || all_at_once(&lab2, sites, length, 2000));
    let started = Instant::now();
    thread::sleep(Duration::from_secs_f64(plan.failover_seconds as f64 / 3.0));
    let kill_at = started.elapsed().as_secs_f64();
    let killed = Instant::now();
    kill(lab, victim)?;
    let moved: Vec<u8> = (1..=plan.sites)
        .filter(|s| placed[usize::from(*s) - 1] == Some(victim))
        .collect();
    let firsts: Vec<_> = moved
        .iter()
        .map(|&site| {
            let lab = lab.clone();
            thread::spawn(move || (site, first_flow(&lab, site, killed, 3000 + u64::from(site))))
        })
        .collect();
    let firsts: Vec<(u8, Option<f64>)> = firsts.into_iter().filter_map(|h| h.join().ok()).collect();
    let (outcomes, _) = downloads
        .join()
        .map_err(|_| "the downloads' thread panicked".to_string())?;
    let mut rows = Vec::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        let site = i as u8 + 1;
        let was_moved = moved.contains(&site);
        // The client's connect came a moment after `started`.
        let end = outcome.seconds;
        rows.push(Row {
            replicas: cores.count(),
            sites: plan.sites,
            phase: Phase::Failover,
            site,
            replica: placed[i],
            mbit_s: (!was_moved)
                .then(|| outcome.mbit_s_between(kill_at + 0.5, end))
                .flatten(),
            mbit_s_before: outcome.mbit_s_between(0.5, kill_at),
            first_flow_ms: firsts
                .iter()
                .find(|(s, _)| *s == site)
                .and_then(|(_, ms)| *ms),
            resets: resets(outcome),
            wrong_bytes: outcome.wrong_bytes,
            failure: outcome.failure.clone(),
        });
    }
    Ok((rows, victim))
}

/// The added phase: replica `cores` (the last) is stopped before the
/// downloads begin and started again a third of the way in: every
/// download completes, byte for byte, and then every site opens a new
/// flow.
pub fn added(lab: &Lab, plan: &Plan, cores: Cores) -> Result<Vec<Row>, String> {
    let last = Replica::new(cores.count()).ok_or("no replica")?;
    kill(lab, last.number())?;
    // Until keepalived has taken its buckets away, new tunnels would go
    // to it: wait for the map to leave it out.
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr: std::net::Ipv4Addr = last.addr().parse().map_err(|e| format!("{e}"))?;
    while crate::cluster::director::bucket_owners(lab)
        .map(|owners| owners.contains(&Some(addr)))
        .unwrap_or(true)
    {
        if Instant::now() > deadline {
            return Err(format!(
                "core{} kept its buckets after it stopped",
                last.number()
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
    // The sites it carried move now, before the downloads.
    for site in 1..=plan.sites {
        let _ = first_flow(lab, site, Instant::now(), 4000 + u64::from(site));
    }
    let placed: Vec<Option<u8>> = (1..=plan.sites)
        .map(|site| replica_of(lab, cores, site, Duration::from_secs(5)))
        .collect();
    let (lab2, sites, length) = (lab.clone(), plan.sites, plan.bytes_per_site);
    let downloads = thread::spawn(move || all_at_once(&lab2, sites, length, 5000));
    thread::sleep(Duration::from_secs(3));
    replicas::restart(lab, last).map_err(|e| format!("core{}: {e}", last.number()))?;
    let (outcomes, _) = downloads
        .join()
        .map_err(|_| "the downloads' thread panicked".to_string())?;
    let after = Instant::now();
    let mut rows = Vec::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        let site = i as u8 + 1;
        rows.push(Row {
            replicas: cores.count(),
            sites: plan.sites,
            phase: Phase::Added,
            site,
            replica: placed[i],
            mbit_s: Some(outcome.mbit_s()),
            mbit_s_before: None,
            first_flow_ms: first_flow(lab, site, after, 6000 + u64::from(site)),
            resets: resets(outcome),
            wrong_bytes: outcome.wrong_bytes,
            failure: outcome.failure.clone(),
        });
    }
    Ok(rows)
}

/// The redials of site 1 while its replica lives, on a lab with data
/// reduction: site 1's replica is killed and started again, so that its
/// edge is on another replica than its bucket's home; a file crosses once;
/// then `plan.redials` times the site's link is cut for longer than the
/// tunnel timeout and the director forgets the edge's tunnel, the edge
/// redials, and the file crosses again.
pub fn redials(
    lab: &Lab,
    plan: &Plan,
    cores: Cores,
    say: &dyn Fn(String),
) -> Result<Redials, String> {
    let home = home(1, cores).ok_or("no home")?;
    kill(lab, home)?;
    let moved = first_flow(lab, 1, Instant::now(), 7000);
    if moved.is_none() {
        return Err("site 1 found no replica after its own died".into());
    }
    let replica =
        replica_of(lab, cores, 1, Duration::from_secs(5)).ok_or("site 1 on no replica")?;
    replicas::restart(lab, Replica::new(home).ok_or("replica")?)
        .map_err(|e| format!("core{home}: {e}"))?;
    // Its buckets come home once keepalived sees it healthy.
    let deadline = Instant::now() + Duration::from_secs(10);
    let home_addr: std::net::Ipv4Addr = Replica::new(home)
        .ok_or("replica")?
        .addr()
        .parse()
        .map_err(|e| format!("{e}"))?;
    let bucket = bucket_of(edge_addr(1).parse().map_err(|e| format!("{e}"))?);
    while crate::cluster::director::bucket_owners(lab)
        .ok()
        .and_then(|o| o.get(bucket as usize).copied().flatten())
        != Some(home_addr)
    {
        if Instant::now() > deadline {
            return Err(format!("core{home} did not get its buckets back"));
        }
        thread::sleep(Duration::from_millis(100));
    }
    let file = plan.file_bytes;
    let first = transfer::download(lab, Node::Client, 8000, file, Duration::from_secs(10), None);
    if !first.complete() {
        return Err(format!("the file's first download: {:?}", first.failure));
    }
    let mut result = Redials {
        replica,
        home,
        file_bytes: file,
        wrong_bytes: first.wrong_bytes,
        ..Redials::default()
    };
    for round in 1..=plan.redials {
        set_link(lab, 1, true).map_err(|e| e.to_string())?;
        thread::sleep(plan.cut);
        let _ = lab
            .command(Node::Core, "conntrack")
            .args(["-D", "-p", "udp", "-s", &edge_addr(1)])
            .output();
        set_link(lab, 1, false).map_err(|e| e.to_string())?;
        // Up again somewhere; then the replica whose count of bytes
        // toward the clients grows by the file is the one that carried it.
        let _ = replica_of(lab, cores, 1, Duration::from_secs(10));
        let counted = carried_bytes(lab, cores);
        let before = link_totals(lab, crate::clock::unix_ms())?;
        let again =
            transfer::download(lab, Node::Client, 8000, file, Duration::from_secs(10), None);
        let after = link_totals(lab, crate::clock::unix_ms())?;
        let wan = after.since(&before).down.ip_bytes;
        let on = carried_bytes(lab, cores)
            .iter()
            .zip(&counted)
            .enumerate()
            .filter(|(_, (now, then))| now.saturating_sub(**then) >= file)
            .map(|(i, _)| i as u8 + 1)
            .next();
        result.redials += 1;
        result.wrong_bytes += again.wrong_bytes;
        if on == Some(replica) {
            result.returned += 1;
        }
        result.wan_bytes.push(wan);
        say(format!(
            "  redial {round}/{}: on core{} (its replica core{replica}, the director's core{home}); the file's {} bytes crossed as {wan}{}",
            plan.redials,
            on.map_or("?".to_string(), |n| n.to_string()),
            file,
            match &again.failure {
                Some(f) => format!("; the download failed: {f}"),
                None => String::new(),
            }
        ));
    }
    Ok(result)
}
