//! Finding a node's control token for a request that changes the node:
//! the file `--control-token` names, else where a node of this user writes
//! it for the control port (`wanopt_node::control::token::default_path`).

use std::net::SocketAddr;
use std::path::Path;

use wanopt_node::control::token::{default_path, ControlToken, TokenError};

use super::status::Refused;

/// The token found for a node, or why none was.
#[derive(Debug)]
pub(crate) struct Credential {
    token: Option<ControlToken>,
    missing: Option<String>,
}

impl Credential {
    /// The token to send, if one was found.
    pub(crate) fn token(&self) -> Option<&ControlToken> {
        self.token.as_ref()
    }

    /// `error`, with why no token was sent when the node refused for want
    /// of one.
    pub(crate) fn explain(&self, error: anyhow::Error) -> anyhow::Error {
        match (error.downcast_ref::<Refused>(), &self.missing) {
            (Some(refused), Some(missing)) if refused.status == 401 => anyhow::anyhow!(
                "{refused} ({missing}: run this as the node's user, or give --control-token FILE)"
            ),
            _ => error,
        }
    }
}

/// The token for the node at `control`: from `file` (an error if it cannot
/// be read), else from the default path of its port (none if it cannot be
/// read: the node says whether it needs one).
pub(crate) fn find(control: SocketAddr, file: Option<&Path>) -> anyhow::Result<Credential> {
    if let Some(file) = file {
        return Ok(Credential {
            token: Some(ControlToken::read(file)?),
            missing: None,
        });
    }
    let path = default_path(control.port());
    Ok(match ControlToken::read(&path) {
        Ok(token) => Credential {
            token: Some(token),
            missing: None,
        },
        Err(e) => {
            let missing = match &e {
                TokenError::Read { source, .. }
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    format!("this user has no token at {}", path.display())
                }
                TokenError::Read { source, .. }
                    if source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    format!("this user may not read {}", path.display())
                }
                _ => e.to_string(),
            };
            Credential {
                token: None,
                missing: Some(missing),
            }
        }
    })
}
