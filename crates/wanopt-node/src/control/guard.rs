//! Who may do what on the control API. Every request must name the node by
//! a name no web page can rebind (`Host`: an IP address, `localhost` or the
//! host's own name) and must not come from a foreign web page (`Origin`,
//! when sent, is the node itself); a request that changes anything (any
//! method but GET and HEAD) must carry the node's token.

use std::net::IpAddr;
use std::path::PathBuf;

use axum::http::{header, HeaderMap, Method, StatusCode};

use super::token::ControlToken;

/// Why a request was refused: its status and a one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 (no or wrong token) or 403 (foreign Host or Origin).
    pub status: StatusCode,
    /// One line for the client.
    pub message: String,
}

/// The checks of a node's control API.
#[derive(Debug)]
pub struct Guard {
    token: ControlToken,
    token_path: PathBuf,
    host_name: Option<String>,
}

impl Guard {
    /// Checks against `token` (kept in `token_path`, named in refusals so
    /// the operator knows where to find it); the host's own name (if any)
    /// is accepted in `Host`.
    pub fn new(token: ControlToken, token_path: PathBuf, host_name: Option<String>) -> Guard {
        Guard {
            token,
            token_path,
            host_name: host_name.map(|n| n.to_ascii_lowercase()),
        }
    }

    /// Checks a request by its method and headers.
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = match headers.get(header::HOST) {
            // HTTP/1.0 clients may leave Host out; browsers never do.
            None => None,
            Some(value) => {
                let host = value.to_str().ok().filter(|h| self.is_own_host(h));
                Some(host.ok_or_else(|| Refusal {
                    status: StatusCode::FORBIDDEN,
                    message: format!(
                        "Host {:?} does not name this node: use an IP address, localhost{}",
                        String::from_utf8_lossy(value.as_bytes()),
                        self.host_name
                            .as_deref()
                            .map(|n| format!(" or {n}"))
                            .unwrap_or_default()
                    ),
                })?)
            }
        };
        if let Some(origin) = headers.get(header::ORIGIN) {
            let same = host.is_some_and(|host| {
                origin
                    .to_str()
                    .ok()
                    .and_then(|o| o.strip_prefix("http://"))
                    .is_some_and(|o| o.eq_ignore_ascii_case(host))
            });
            if !same {
                return Err(Refusal {
                    status: StatusCode::FORBIDDEN,
                    message: format!(
                        "requests from web pages (Origin {:?}) are refused",
                        String::from_utf8_lossy(origin.as_bytes())
                    ),
                });
            }
        }
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        match presented {
            Some(token) if self.token.matches(token) => Ok(()),
            presented => Err(Refusal {
                status: StatusCode::UNAUTHORIZED,
                message: format!(
                    "{} control token: this request changes the node; send Authorization: Bearer with the token in {} (readable by the node's user)",
                    if presented.is_some() { "wrong" } else { "no" },
                    self.token_path.display()
                ),
            }),
        }
    }

    /// Whether `host` (a Host header: name or address, maybe a port)
    /// names this node in a way DNS rebinding cannot forge: an IP literal
    /// (a rebinding page's requests carry its own name), `localhost`, or
    /// the host's own name. The port is not checked (an SSH forward
    /// changes it).
    fn is_own_host(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            // [v6] or [v6]:port
            Some(rest) => match rest.split_once(']') {
                Some((addr, port)) if port.is_empty() || is_port(port) => {
                    return addr.parse::<std::net::Ipv6Addr>().is_ok();
                }
                _ => return false,
            },
            None => match host.rsplit_once(':') {
                Some((name, port)) if is_port(port) => name,
                Some(_) => return false,
                None => host,
            },
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        if name.is_empty() {
            return false;
        }
        name.parse::<IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || self
                .host_name
                .as_deref()
                .is_some_and(|own| name.eq_ignore_ascii_case(own))
    }
}

fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .unwrap_or(text)
        .parse::<u16>()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn guard() -> Guard {
        Guard::new(
            ControlToken::parse(&"a".repeat(64)).unwrap(),
            "/run/wanopt/control-7447.token".into(),
            Some("Node1".into()),
        )
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn status_of(method: Method, pairs: &[(header::HeaderName, &str)]) -> Option<u16> {
        guard()
            .check(&method, &headers(pairs))
            .err()
            .map(|r| r.status.as_u16())
    }

    #[test]
    fn hosts_no_rebinding_page_can_send_are_accepted() {
        let g = guard();
        for host in [
            "127.0.0.1:7447",
            "127.0.0.1",
            "10.1.2.3:80",
            "[::1]:7447",
            "[::1]",
            "localhost:7447",
            "LOCALHOST",
            "localhost.:9000",
            "node1:7447",
            "node1",
        ] {
            assert!(g.is_own_host(host), "{host}");
        }
        for host in [
            "evil.example:7447",
            "evil.example",
            "127.0.0.1.nip.io:7447",
            "localhost.evil.example",
            "node1.evil.example",
            "",
            ":7447",
            "[::1",
            "[::1]x",
            "127.0.0.1:port",
            "[evil.example]:80",
        ] {
            assert!(!g.is_own_host(host), "{host}");
        }
    }

    #[test]
    fn reads_need_an_own_host_and_no_foreign_origin() {
        assert_eq!(status_of(Method::GET, &[]), None);
        assert_eq!(
            status_of(Method::GET, &[(header::HOST, "127.0.0.1:7447")]),
            None
        );
        assert_eq!(
            status_of(Method::GET, &[(header::HOST, "rebound.example:7447")]),
            Some(403)
        );
        assert_eq!(
            status_of(
                Method::GET,
                &[
                    (header::HOST, "127.0.0.1:7447"),
                    (header::ORIGIN, "http://127.0.0.1:7447")
                ]
            ),
            None
        );
        for origin in [
            "http://evil.example",
            "null",
            "https://127.0.0.1:7447",
            "http://127.0.0.1:8080",
        ] {
            assert_eq!(
                status_of(
                    Method::GET,
                    &[(header::HOST, "127.0.0.1:7447"), (header::ORIGIN, origin)]
                ),
                Some(403),
                "{origin}"
            );
        }
        assert_eq!(
            status_of(Method::GET, &[(header::ORIGIN, "http://x")]),
            Some(403)
        );
    }

    #[test]
    fn changes_need_the_token() {
        let host = (header::HOST, "127.0.0.1:7447");
        assert_eq!(
            status_of(Method::POST, std::slice::from_ref(&host)),
            Some(401)
        );
        assert_eq!(
            status_of(Method::DELETE, std::slice::from_ref(&host)),
            Some(401)
        );
        let wrong = format!("Bearer {}", "b".repeat(64));
        assert_eq!(
            status_of(
                Method::POST,
                &[host.clone(), (header::AUTHORIZATION, &wrong)]
            ),
            Some(401)
        );
        let right = format!("Bearer {}", "a".repeat(64));
        assert_eq!(
            status_of(
                Method::POST,
                &[host.clone(), (header::AUTHORIZATION, &right)]
            ),
            None
        );
        // A cross-site form post cannot carry the header, and its Origin
        // gives it away first.
        assert_eq!(
            status_of(
                Method::POST,
                &[
                    host,
                    (header::ORIGIN, "http://evil.example"),
                    (header::AUTHORIZATION, &right)
                ]
            ),
            Some(403)
        );
        let refusal = guard().check(&Method::POST, &headers(&[])).unwrap_err();
        assert!(refusal.message.contains("/run/wanopt/control-7447.token"));
        assert!(!refusal.message.contains('\n'));
    }
}
