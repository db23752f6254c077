//! The options of `wanopt lab run`, shared by every scenario.

use std::path::PathBuf;

use clap::Args;

/// Options of `lab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// `tcp-opt`, `waas-3g`, `lossy`, `realtime`, `bond`, `sites`, `cluster`, `cellular`, `path-brokenness`, `initcwnd`, `fwsm` or a path to a scenario TOML file.
    pub scenario: String,
    /// Output directory.
    #[arg(long, default_value = "lab-results")]
    pub out: PathBuf,
    /// Runs per grid point (default: the scenario's).
    #[arg(long)]
    pub runs: Option<usize>,
    /// A reduced grid for a fast look (tcp-opt: RTT 0/100/250 ms, 4 x 10 MB, 1 run; waas-3g: 3 files, 1 run; sites: 1 and 3 sites, 8 s;
    /// lossy: RTT 150 ms, loss 1% and 5%, bulk, 1 MB and rpc; realtime: link 1 at 5% loss, 20 s cells; bond: 15 s, 1 run per cell;
    /// cellular: one recorded trace and the synthetic one, the deep buffer, 20 s cells; path-brokenness: a cell or two
    /// of each experiment; initcwnd: the 200 ms paths, 180 KB, 1 run; fwsm: 1 download of 4 s per cell).
    #[arg(long)]
    pub quick: bool,
    /// realtime: one direct cell of 5 s (a check that the scenario runs).
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// cellular: the directory of recorded traces in Mahimahi's format (its `traces/`: `NAME.down`,
    /// `NAME.up`); default: a Mahimahi installation's, if any.
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
    /// waas-3g: only these tests (comma-separated: http-download, download, upload, edit-save,
    /// cifs-copy-down, cifs-copy-up, cifs-open, cifs-save).
    #[arg(long, value_delimiter = ',', value_name = "TEST,...")]
    pub tests: Vec<crate::waas::transfer::Test>,
    /// waas-3g: Samba's `smb encrypt` for the CIFS tests (`default`: Samba's default, sessions
    /// not encrypted; `required`: every session encrypted).
    #[arg(long, value_name = "MODE")]
    pub smb_encrypt: Option<crate::waas::servers::SmbEncrypt>,
}

/// The most runs per point `--runs` accepts.
pub const MAX_RUNS: usize = 100;

impl RunArgs {
    /// `--runs`, checked to be between 1 and [`MAX_RUNS`].
    pub fn runs(&self) -> Result<Option<usize>, super::error::RunError> {
        match self.runs {
            Some(r) if r == 0 || r > MAX_RUNS => Err(super::error::RunError::Runs),
            other => Ok(other),
        }
    }
}
