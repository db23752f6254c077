//! The waas-3g scenario's own `wanopt lab` commands: its file set
//! (`lab waas-files`), its report rewritten from results (`lab
//! waas-report`), and the internal server and client of its transfers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use crate::exit::usage;

/// Options of the internal `lab waas-server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// HTTP listen address.
    #[arg(long)]
    pub http: SocketAddr,
    /// File service listen address.
    #[arg(long)]
    pub file: SocketAddr,
    /// Seed of the file set.
    #[arg(long, default_value_t = crate::waas::files::DEFAULT_SEED)]
    pub seed: u64,
    /// Congestion control of every connection.
    #[arg(long)]
    pub congestion: Option<String>,
    /// Give up on a connection that makes no progress for this many seconds.
    #[arg(long, default_value_t = 90)]
    pub stall_seconds: u64,
    /// File to create once listening.
    #[arg(long)]
    pub ready: Option<PathBuf>,
}

/// Options of the internal `lab waas-client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// The server's address.
    #[arg(long)]
    pub server: std::net::IpAddr,
    /// The test.
    #[arg(long, value_enum)]
    pub test: crate::waas::transfer::Test,
    /// The file (e.g. 2M.xls).
    #[arg(long)]
    pub file: String,
    /// Seed of the file set.
    #[arg(long, default_value_t = crate::waas::files::DEFAULT_SEED)]
    pub seed: u64,
    /// Edit generation of edit-save's upload.
    #[arg(long, default_value_t = 1)]
    pub generation: u64,
    /// Congestion control of the client's sockets.
    #[arg(long)]
    pub congestion: Option<String>,
    /// Give up when a connection makes no progress for this many seconds.
    #[arg(long, default_value_t = 90)]
    pub stall_seconds: u64,
}

/// `lab waas-report`.
pub fn report(dir: &std::path::Path) -> anyhow::Result<i32> {
    let path = dir.join("results.json");
    let results: crate::waas::results::Results = match std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => return usage(format!("{}: {e}", path.display())),
    };
    crate::waas::run::write_outputs(&results, dir)?;
    eprintln!("wrote {}/report.md and the plots", dir.display());
    Ok(0)
}

/// The internal `lab waas-server`.
pub fn server(args: ServerArgs) -> anyhow::Result<i32> {
    let config = crate::waas::transfer::ServerConfig {
        http: args.http,
        file: args.file,
        seed: args.seed,
        congestion: args.congestion,
        stall: Duration::from_secs(args.stall_seconds.clamp(1, 3600)),
    };
    crate::waas::transfer::serve(config, args.ready.as_deref())?;
    Ok(0)
}

/// The internal `lab waas-client`: [`crate::waas::transfer::EXIT_MISMATCH`]
/// when a byte arrived wrong.
pub fn client(args: ClientArgs) -> anyhow::Result<i32> {
    use crate::waas::transfer::{self, TransferError};
    if crate::waas::files::find(&args.file).is_none() {
        return usage(TransferError::UnknownFile(args.file));
    }
    let config = transfer::ClientConfig {
        server: args.server,
        http_port: transfer::HTTP_PORT,
        file_port: transfer::FILE_PORT,
        test: args.test,
        file: args.file,
        seed: args.seed,
        generation: args.generation,
        congestion: args.congestion,
        stall: Duration::from_secs(args.stall_seconds.clamp(1, 3600)),
    };
    match transfer::run_client(&config) {
        Ok(report) => {
            println!("{}", serde_json::to_string(&report)?);
            Ok(0)
        }
        Err(e @ TransferError::Mismatch { .. }) => {
            eprintln!("{e}");
            Ok(transfer::EXIT_MISMATCH)
        }
        Err(e) => {
            eprintln!("{e}");
            Ok(1)
        }
    }
}

/// `lab waas-files`: writes the file set and prints name, size, estimated
/// LZ ratio.
pub fn files(out: &std::path::Path, seed: u64) -> anyhow::Result<i32> {
    use crate::waas::files;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let mut text = String::new();
    for spec in files::FILE_SET {
        let data = files::generate(&spec, seed);
        let path = out.join(spec.name);
        std::fs::write(&path, &data).with_context(|| format!("cannot write {}", path.display()))?;
        let ratio = data.len() as f64 / files::lz_estimate(&data).max(1) as f64;
        text.push_str(&format!(
            "{:<9} {:>9} {:<10} LZ ratio {ratio:.2}\n",
            spec.name,
            data.len(),
            spec.kind.label()
        ));
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    Ok(0)
}
