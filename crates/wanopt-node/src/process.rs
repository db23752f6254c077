//! The node's process and its host: the open-file limit, the allocator's
//! free memory.

/// Raises the soft limit on open file descriptors to the hard limit (each
/// flow holds one or two; the default soft limit is often 1024). Returns
/// the limits before and after, or `None` when nothing changed.
pub fn raise_fd_limit() -> Option<(u64, u64)> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return None;
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    Some((soft, hard))
}

/// Ignores SIGHUP until the node installs its own handler (its reload):
/// by default a SIGHUP kills the process, and one sent while the node
/// starts (`systemctl reload` right after `start`) must not.
pub fn hold_hangups() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: SIG_IGN installs no handler code; nothing else of the
    // process has set one for SIGHUP yet (tokio's, installed later,
    // replaces it).
    if let Err(e) = unsafe { signal(Signal::SIGHUP, SigHandler::SigIgn) } {
        tracing::debug!("cannot ignore SIGHUP while starting: {e}");
    }
}

/// Returns the allocator's free memory to the system (glibc's
/// `malloc_trim`, which unmaps the free pages of every arena).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
