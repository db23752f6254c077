//! The real servers of `waas-3g`, run in the lab's server namespace:
//! nginx (HTTP), vsftpd (FTP, anonymous, uploads into `up/`) and Samba
//! (`smbd`, one share, user `root`), all from Debian (`scripts/deps`).
//!
//! Everything they need is written under one directory, [`Layout`], in the
//! lab's state directory: their configurations, logs, pid and state files,
//! and the share they serve (`office-set/`, `ooxml-set/` and `up/`), which
//! the client side reads back to check every transfer. They run as lab
//! daemons (`destroy` ends them with the namespaces) and the directory
//! goes with the state directory: nothing is left behind.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::topology::{Lab, Node, SERVER_ADDR};

/// Samba's share name.
pub const SHARE: &str = "files";
/// The Samba account the client logs in as (a Unix user must exist).
pub const SMB_USER: &str = "root";
/// Its password (the lab's own Samba database, in the layout).
pub const SMB_PASSWORD: &str = "wanopt-lab";
/// The share's directory for uploads (FTP's anonymous uploads too).
pub const UPLOADS: &str = "up";

/// Samba's `smb encrypt` for the CIFS tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SmbEncrypt {
    /// Samba's default: SMB3 encryption offered, not required (smbclient
    /// does not ask for it, so sessions are not encrypted; only the session
    /// setup is signed).
    #[default]
    Default,
    /// `smb encrypt = required`: every session encrypted (AES-GCM), so the
    /// payload is incompressible and never the same twice on the WAN.
    Required,
}

impl SmbEncrypt {
    /// `default` or `required`, as in `smb.conf`.
    pub fn name(self) -> &'static str {
        match self {
            SmbEncrypt::Default => "default",
            SmbEncrypt::Required => "required",
        }
    }
}

/// Errors of the servers.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A program is not installed.
    #[error(
        "{0} is not installed: run scripts/deps (nginx-light, vsftpd, samba, smbclient, curl)"
    )]
    Missing(&'static str),
    /// A file or directory could not be written.
    #[error("cannot write {path}: {cause}")]
    Write {
        /// The path.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// A command failed.
    #[error("{what}: {detail}")]
    Command {
        /// What was run.
        what: String,
        /// Its error or output.
        detail: String,
    },
    /// A server did not listen in time.
    #[error("{server} did not start listening on {port}: {log}")]
    NotListening {
        /// The server.
        server: &'static str,
        /// Its port.
        port: u16,
        /// The end of its log.
        log: String,
    },
}

/// Where the servers' files live.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout of `lab` (in its state directory).
    pub fn of(lab: &Lab) -> Layout {
        Layout {
            root: lab.state_dir().join("apps"),
        }
    }

    /// The layout under `root`.
    pub fn at(root: PathBuf) -> Layout {
        Layout { root }
    }

    /// The served directory (nginx's root, vsftpd's anonymous root, the
    /// Samba share).
    pub fn share(&self) -> PathBuf {
        self.root.join("share")
    }

    /// Configurations, logs and state of the servers.
    pub fn etc(&self) -> PathBuf {
        self.root.join("etc")
    }

    /// The client's working directory (downloads land here).
    pub fn client(&self) -> PathBuf {
        self.root.join("client")
    }

    /// The smbclient configuration.
    pub fn client_conf(&self) -> PathBuf {
        self.etc().join("smbclient.conf")
    }

    /// `smb.conf`.
    pub fn smb_conf(&self) -> PathBuf {
        self.etc().join("samba").join("smb.conf")
    }
}

fn write(path: &Path, data: &[u8], mode: u32) -> Result<(), ServerError> {
    let err = |cause| ServerError::Write {
        path: path.to_path_buf(),
        cause,
    };
    std::fs::write(path, data).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)
}

fn mkdir(path: &Path, mode: u32) -> Result<(), ServerError> {
    let err = |cause| ServerError::Write {
        path: path.to_path_buf(),
        cause,
    };
    std::fs::create_dir_all(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)
}

/// The full path of an installed program (`PATH`, then the sbin
/// directories, where Debian puts the daemons).
pub fn program(name: &'static str) -> Result<PathBuf, ServerError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(ServerError::Missing(name))
}

fn nginx_conf(layout: &Layout) -> String {
    let etc = layout.etc();
    let e = etc.display();
    format!(
        "daemon off;\nmaster_process on;\nuser root;\nworker_processes 1;\npid {e}/nginx.pid;\n\
         error_log {e}/nginx-error.log warn;\nevents {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {e}/nginx-body;\n  proxy_temp_path {e}/nginx-proxy;\n\
         \x20 fastcgi_temp_path {e}/nginx-fastcgi;\n  uwsgi_temp_path {e}/nginx-uwsgi;\n  scgi_temp_path {e}/nginx-scgi;\n\
         \x20 default_type application/octet-stream;\n  sendfile on;\n  keepalive_timeout 0;\n\
         \x20 server {{ listen {SERVER_ADDR}:80; root {}; }}\n}}\n",
        layout.share().display()
    )
}

fn vsftpd_conf(layout: &Layout) -> String {
    let etc = layout.etc();
    format!(
        "listen=YES\nlisten_ipv6=NO\nlisten_address={SERVER_ADDR}\nlisten_port=21\nbackground=NO\n\
         anonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root={}\nwrite_enable=YES\n\
         anon_upload_enable=YES\nanon_mkdir_write_enable=YES\nanon_other_write_enable=YES\nanon_umask=022\n\
         ftp_username=ftp\nsecure_chroot_dir={}\nseccomp_sandbox=NO\nisolate_network=NO\nisolate=NO\n\
         pasv_enable=YES\nxferlog_enable=NO\nvsftpd_log_file={}\nsyslog_enable=NO\nuse_sendfile=YES\n",
        layout.share().display(),
        etc.join("empty").display(),
        etc.join("vsftpd.log").display(),
    )
}

fn smb_conf(layout: &Layout, encrypt: SmbEncrypt) -> String {
    let s = layout.etc().join("samba");
    let d = |name: &str| s.join(name).display().to_string();
    format!(
        "[global]\n  server role = standalone server\n  workgroup = WANOPTLAB\n  netbios name = LABSERVER\n\
         \x20 interfaces = {SERVER_ADDR}\n  bind interfaces only = yes\n  smb ports = 445\n  disable netbios = yes\n\
         \x20 disable spoolss = yes\n  load printers = no\n  printcap name = /dev/null\n\
         \x20 private dir = {}\n  lock directory = {}\n  state directory = {}\n  cache directory = {}\n\
         \x20 pid directory = {}\n  ncalrpc dir = {}\n  log file = {}\n  log level = 1\n\
         \x20 passdb backend = tdbsam:{}\n  smb encrypt = {}\n\
         [{SHARE}]\n  path = {}\n  read only = no\n  guest ok = no\n",
        d("private"),
        d("lock"),
        d("state"),
        d("cache"),
        d("pid"),
        d("ncalrpc"),
        d("log.%m"),
        d("private/passdb.tdb"),
        encrypt.name(),
        layout.share().display(),
    )
}

/// Writes the share (each set's files in its own directory, `up/`
/// writable by anyone), the configurations and Samba's account, then
/// starts nginx, vsftpd and smbd in the server namespace and waits until
/// each listens.
pub fn start(
    lab: &Lab,
    layout: &Layout,
    sets: &BTreeMap<&'static str, Vec<(&'static str, &[u8])>>,
    encrypt: SmbEncrypt,
) -> Result<(), ServerError> {
    let nginx = program("nginx")?;
    let vsftpd = program("vsftpd")?;
    let smbd = program("smbd")?;
    let smbpasswd = program("smbpasswd")?;
    let _ = std::fs::remove_dir_all(&layout.root);
    // vsftpd refuses an anonymous root its user can write to.
    mkdir(&layout.root, 0o755)?;
    mkdir(&layout.share(), 0o755)?;
    mkdir(&layout.share().join(UPLOADS), 0o777)?;
    mkdir(&layout.client(), 0o755)?;
    for sub in [
        "empty",
        "samba/private",
        "samba/lock",
        "samba/state",
        "samba/cache",
    ] {
        mkdir(&layout.etc().join(sub), 0o755)?;
    }
    for sub in ["samba/pid", "samba/ncalrpc"] {
        mkdir(&layout.etc().join(sub), 0o755)?;
    }
    for (set, files) in sets {
        let dir = layout.share().join(set);
        mkdir(&dir, 0o755)?;
        for (name, data) in files {
            write(&dir.join(name), data, 0o644)?;
        }
    }
    let etc = layout.etc();
    write(
        &etc.join("nginx.conf"),
        nginx_conf(layout).as_bytes(),
        0o644,
    )?;
    write(
        &etc.join("vsftpd.conf"),
        vsftpd_conf(layout).as_bytes(),
        0o600,
    )?;
    write(
        &layout.smb_conf(),
        smb_conf(layout, encrypt).as_bytes(),
        0o644,
    )?;
    write(
        &layout.client_conf(),
        b"[global]\n  workgroup = WANOPTLAB\n",
        0o644,
    )?;
    add_samba_account(&smbpasswd, layout)?;
    let s = |p: PathBuf| p.to_string_lossy().into_owned();
    let daemons: [(&'static str, &Path, Vec<String>, u16); 3] = [
        (
            "nginx",
            &nginx,
            vec![
                "-c".into(),
                s(etc.join("nginx.conf")),
                "-p".into(),
                s(etc.clone()),
                "-e".into(),
                s(etc.join("nginx-error.log")),
            ],
            80,
        ),
        ("vsftpd", &vsftpd, vec![s(etc.join("vsftpd.conf"))], 21),
        (
            "smbd",
            &smbd,
            vec![
                "--foreground".into(),
                "--no-process-group".into(),
                "--debug-stdout".into(),
                "--configfile".into(),
                s(layout.smb_conf()),
            ],
            445,
        ),
    ];
    for (name, path, args, _) in &daemons {
        lab.spawn_daemon(Node::Server, name, path, args)
            .map_err(|e| ServerError::Command {
                what: format!("start {name}"),
                detail: e.to_string(),
            })?;
    }
    for (name, _, _, port) in &daemons {
        wait_listening(lab, name, *port)?;
    }
    Ok(())
}

fn add_samba_account(smbpasswd: &Path, layout: &Layout) -> Result<(), ServerError> {
    let what = || "smbpasswd -a".to_string();
    let mut child = Command::new(smbpasswd)
        .arg("-c")
        .arg(layout.smb_conf())
        .args(["-s", "-a", SMB_USER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ServerError::Command {
            what: what(),
            detail: e.to_string(),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = writeln!(stdin, "{SMB_PASSWORD}\n{SMB_PASSWORD}");
    }
    let out = child.wait_with_output().map_err(|e| ServerError::Command {
        what: what(),
        detail: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(ServerError::Command {
            what: what(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Whether something listens on TCP `port` in the server namespace.
fn listening(lab: &Lab, port: u16) -> bool {
    let mut cmd = lab.command(Node::Server, "ss");
    cmd.args(["-Hltn", &format!("sport = :{port}")]);
    cmd.output()
        .map(|o| !String::from_utf8_lossy(&o.stdout).trim().is_empty())
        .unwrap_or(false)
}

fn wait_listening(lab: &Lab, server: &'static str, port: u16) -> Result<(), ServerError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if listening(lab, port) {
            return Ok(());
        }
        if lab.daemon_exited(server) {
            break;
        }
        thread::sleep(Duration::from_millis(50));
    }
    Err(ServerError::NotListening {
        server,
        port,
        log: lab.daemon_log(server),
    })
}

/// Stops the servers (their logs stay in the state directory until the
/// lab goes).
pub fn stop(lab: &Lab) {
    for name in ["smbd", "vsftpd", "nginx"] {
        lab.kill_recorded(name);
    }
}

/// What Samba says of a live session (`smbstatus -b`): protocol,
/// encryption and signing, e.g. `SMB3_11, encryption -, signing
/// partial(AES-128-GMAC)`; `None` when no session is listed.
pub fn session_protection(layout: &Layout) -> Option<String> {
    let smbstatus = program("smbstatus").ok()?;
    let out = Command::new(smbstatus)
        .arg("--configfile")
        .arg(layout.smb_conf())
        .arg("-b")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains(SERVER_ADDR) || l.contains("ipv4:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let [.., protocol, encryption, signing] = words.as_slice() else {
        return None;
    };
    Some(format!(
        "{protocol}, encryption {encryption}, signing {signing}"
    ))
}
