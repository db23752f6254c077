//! One transfer of `waas-3g` with the real clients: what it needs
//! prepared (files to send, an SMB session), the WAN counters around the
//! timed part, and the check of every file that arrived, on the client or
//! in the share.

use std::path::PathBuf;
use std::time::Duration;

use super::super::clients::{self, ClientError, SmbSession};
use super::super::files::{self, FileSpec};
use super::super::results::{PathSample, Sample};
use super::super::servers::{self, UPLOADS};
use super::super::transfer::{compare, Test};
use super::context::{Context, Failure, Unit, SETTLE, STALL_SECONDS};
use super::counters::{tunnel_counters, tunnel_delta};
use crate::clock::unix_ms;
use crate::link::link_totals;
use crate::optimize::{CORE_CONTROL, EDGE_CONTROL};
use crate::topology::Node;

/// What a client measured: the time of the test (for edit-save open plus
/// save), and its parts where the test has them.
#[derive(Debug, Clone, Copy, Default)]
struct Timing {
    seconds: f64,
    open: Option<f64>,
    save: Option<f64>,
    session: Option<f64>,
}

/// A received file, compared with what it should be.
fn check(path: &std::path::Path, want: &[u8], what: &str) -> Result<(), Failure> {
    let got = std::fs::read(path)
        .map_err(|e| Failure::Failed(format!("{what}: cannot read {}: {e}", path.display())))?;
    compare(&got, want)
        .map_err(|detail| Failure::Corrupted(format!("CONTENT MISMATCH in {what}: {detail}")))
}

fn write_file(path: &std::path::Path, data: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, data)
        .map_err(|e| Failure::Failed(format!("cannot write {}: {e}", path.display())))
}

/// What a transfer prepared before its timed part.
struct Prepared {
    test: Test,
    generation: u64,
    /// The unit's first (for most tests its only) file.
    first: &'static FileSpec,
    /// The file set's directory in the share.
    set: &'static str,
    /// What a save sends (empty for the other tests).
    edited: Vec<u8>,
    /// The client's scratch directory for this transfer.
    scratch: PathBuf,
    /// The name an upload gets in the share.
    remote: String,
    /// The directory a copy up creates in the share.
    copy_dir: String,
}

/// The original bytes of `name`.
fn original<'c>(ctx: &'c Context<'_>, name: &str) -> &'c [u8] {
    ctx.library.get(name).map(Vec::as_slice).unwrap_or(&[])
}

/// Runs one transfer with the real clients: prepares what it needs
/// (files to send, an SMB session and its directory), reads the WAN
/// counters, runs the timed part, reads them again, then checks every
/// file that arrived and cleans up.
pub(super) fn transfer(
    ctx: &Context<'_>,
    test: Test,
    unit: &Unit,
    generation: u64,
    optimized: bool,
) -> Result<Sample, Failure> {
    let stall = Duration::from_secs(STALL_SECONDS);
    let failed = |e: ClientError| Failure::Failed(e.to_string());
    let prepared = prepare(ctx, test, unit, generation)?;
    let mut session = if test.is_cifs() {
        Some(open_session(ctx, &prepared, stall).map_err(failed)?)
    } else {
        None
    };
    let tunnels = || {
        optimized.then(|| {
            (
                tunnel_counters(ctx, Node::Edge, EDGE_CONTROL),
                tunnel_counters(ctx, Node::Core, CORE_CONTROL),
            )
        })
    };
    let tunnels_before = tunnels();
    let before = link_totals(ctx.lab, unix_ms()).map_err(Failure::Failed)?;
    let timed = timed(ctx, &prepared, session.as_mut(), stall);
    let end = unix_ms();
    let after = link_totals(ctx.lab, end + SETTLE.as_millis() as u64);
    let tunnels_after = tunnels();
    if let Some(s) = session {
        s.close();
    }
    let timing = timed.map_err(failed)?;
    let wan = after.map_err(Failure::Failed)?.since(&before);
    check_arrivals(ctx, unit, &prepared)?;
    let share = ctx.layout.share();
    let _ = std::fs::remove_file(share.join(UPLOADS).join(&prepared.remote));
    let _ = std::fs::remove_dir_all(&prepared.scratch);
    let (edge, core) = match (tunnels_before, tunnels_after) {
        (Some((e0, c0)), Some((e1, c1))) => (tunnel_delta(e0, e1), tunnel_delta(c0, c1)),
        _ => (None, None),
    };
    Ok(Sample {
        seconds: timing.seconds,
        wan_bytes_up: wan.up.tx_bytes,
        wan_bytes_down: wan.down.tx_bytes,
        open_seconds: timing.open,
        save_seconds: timing.save,
        sent_seconds: None,
        session_seconds: timing.session,
        path: PathSample {
            lost_up: wan.up.lost_frames,
            lost_down: wan.down.lost_frames,
            queue_drops_up: wan.up.queue_drops,
            queue_drops_down: wan.down.queue_drops,
            edge,
            core,
        },
    })
}

/// Checks that the unit's files are in the library, makes the client's
/// scratch directory and puts there what the client will send.
fn prepare(
    ctx: &Context<'_>,
    test: Test,
    unit: &Unit,
    generation: u64,
) -> Result<Prepared, Failure> {
    let Some(first) = unit.files.first().copied() else {
        return Err(Failure::Failed("no file".into()));
    };
    if let Some(missing) = unit
        .files
        .iter()
        .find(|f| !ctx.library.contains_key(f.name))
    {
        return Err(Failure::Failed(format!(
            "{} is not in the run's file library",
            missing.name
        )));
    }
    let set = files::set_name(first);
    let edited = matches!(test, Test::EditSave | Test::CifsSave)
        .then(|| files::content(first.name, ctx.options.seed, generation.max(1)))
        .flatten()
        .unwrap_or_default();
    let scratch = ctx
        .layout
        .client()
        .join(format!("{}-{generation}-{}", test.name(), unit.label));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| Failure::Failed(format!("{}: {e}", scratch.display())))?;
    match test {
        Test::Upload => write_file(&scratch.join(first.name), original(ctx, first.name))?,
        Test::CifsSave => write_file(&scratch.join(first.name), &edited)?,
        Test::CifsCopyUp => {
            for f in &unit.files {
                write_file(&scratch.join(f.name), original(ctx, f.name))?;
            }
        }
        _ => {}
    }
    Ok(Prepared {
        test,
        generation,
        first,
        set,
        edited,
        scratch,
        remote: format!("{generation}-{}", first.name),
        copy_dir: format!("copy-{generation}-{set}"),
    })
}

/// The SMB session of a CIFS test, in the directory it works in.
fn open_session(
    ctx: &Context<'_>,
    prepared: &Prepared,
    stall: Duration,
) -> Result<SmbSession, ClientError> {
    let test = prepared.test;
    let dir = if test == Test::CifsCopyUp {
        UPLOADS
    } else {
        prepared.set
    };
    let mut s = SmbSession::open(ctx.lab, &ctx.layout, dir, &prepared.scratch, stall)?;
    if test.is_copy() {
        // No question per file.
        s.run("prompt")?;
    }
    if test == Test::CifsCopyUp {
        s.run(&format!("mkdir {}", prepared.copy_dir))?;
        s.run(&format!("cd {}", prepared.copy_dir))?;
    }
    if ctx.smb_session.borrow().is_none() {
        *ctx.smb_session.borrow_mut() = servers::session_protection(&ctx.layout);
    }
    Ok(s)
}

/// The timed part of a transfer: the client at work.
fn timed(
    ctx: &Context<'_>,
    prepared: &Prepared,
    session: Option<&mut SmbSession>,
    stall: Duration,
) -> Result<Timing, ClientError> {
    let Prepared {
        test,
        generation,
        first,
        set,
        ..
    } = *prepared;
    let path_of = |name: &str| format!("{set}/{name}");
    let local = prepared.scratch.join(first.name);
    let upload = clients::url("ftp", &format!("{UPLOADS}/{}", prepared.remote));
    Ok(match test {
        Test::HttpDownload => {
            let url = clients::url("http", &path_of(first.name));
            let t = clients::curl(ctx.lab, &url, &local, false, stall)?;
            Timing {
                seconds: t.total,
                ..Timing::default()
            }
        }
        Test::Download | Test::Upload => {
            let t = if test == Test::Download {
                let url = clients::url("ftp", &path_of(first.name));
                clients::curl(ctx.lab, &url, &local, false, stall)?
            } else {
                clients::curl(ctx.lab, &upload, &local, true, stall)?
            };
            Timing {
                seconds: t.transfer(),
                session: Some(t.total),
                ..Timing::default()
            }
        }
        Test::EditSave => {
            let url = clients::url("ftp", &path_of(first.name));
            let open = clients::curl(ctx.lab, &url, &local, false, stall)?;
            // The edit: what the checks expect on the server.
            let saved = prepared.scratch.join(format!("edited-{}", first.name));
            std::fs::write(&saved, &prepared.edited)
                .map_err(|e| ClientError::Failed(format!("{}: {e}", saved.display())))?;
            let save = clients::curl(ctx.lab, &upload, &saved, true, stall)?;
            Timing {
                seconds: open.transfer() + save.transfer(),
                open: Some(open.transfer()),
                save: Some(save.transfer()),
                session: Some(open.total + save.total),
            }
        }
        Test::CifsOpen | Test::CifsSave | Test::CifsCopyDown | Test::CifsCopyUp => {
            let Some(s) = session else {
                return Err(ClientError::Failed("no SMB session".into()));
            };
            let took = match test {
                Test::CifsOpen => s.run(&format!("get {}", first.name))?,
                Test::CifsSave => {
                    // As Office saves: a temporary file, renamed over
                    // the original.
                    let temporary = format!("~wrl{:04}.tmp", generation % 10_000);
                    s.run(&format!("put {} {temporary}", first.name))?
                        + s.run(&format!("rename {temporary} {} -f", first.name))?
                }
                Test::CifsCopyDown => s.run("mget *")?,
                _ => s.run("mput *")?,
            };
            Timing {
                seconds: took.as_secs_f64(),
                ..Timing::default()
            }
        }
    })
}

/// Checks every file that arrived, on either side, against the bytes it
/// should hold (and puts a saved original back).
fn check_arrivals(ctx: &Context<'_>, unit: &Unit, prepared: &Prepared) -> Result<(), Failure> {
    let Prepared {
        test, first, set, ..
    } = *prepared;
    let (scratch, remote, edited) = (&prepared.scratch, &prepared.remote, &prepared.edited);
    let share = ctx.layout.share();
    let what = |name: &str| format!("{} {name}", test.name());
    let first_original = original(ctx, first.name);
    match test {
        Test::HttpDownload | Test::Download | Test::CifsOpen => {
            check(&scratch.join(first.name), first_original, &what(first.name))?
        }
        Test::Upload => check(
            &share.join(UPLOADS).join(remote),
            first_original,
            &what(first.name),
        )?,
        Test::EditSave => {
            check(&scratch.join(first.name), first_original, &what(first.name))?;
            check(
                &share.join(UPLOADS).join(remote),
                edited,
                &format!("saved {}", first.name),
            )?;
        }
        Test::CifsSave => {
            let saved = share.join(set).join(first.name);
            check(&saved, edited, &format!("saved {}", first.name))?;
            // The original back for the next transfer (on the server's
            // disk, not across the WAN).
            write_file(&saved, first_original)?;
        }
        Test::CifsCopyDown => {
            for f in &unit.files {
                check(&scratch.join(f.name), original(ctx, f.name), &what(f.name))?;
            }
        }
        Test::CifsCopyUp => {
            let dir = share.join(UPLOADS).join(&prepared.copy_dir);
            for f in &unit.files {
                check(&dir.join(f.name), original(ctx, f.name), &what(f.name))?;
            }
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    Ok(())
}
