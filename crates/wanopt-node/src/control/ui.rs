//! The dashboard (`GET /ui`): one HTML page, its CSS and script inline and
//! built into the binary, that reads `/status`, `/flows` and `/history`
//! every second and draws them. It fetches nothing from elsewhere and
//! changes nothing (changes still need the token), so the [`super::guard`]
//! lets it through as any same-origin read.
//!
//! Its Content-Security-Policy allows only the page's own inline script and
//! style, by their SHA-256 hashes, and requests to the node itself; no page
//! may frame it.

use std::sync::LazyLock;

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use base64::Engine;

/// The page.
const PAGE: &str = include_str!("ui/index.html");

/// The page's Content-Security-Policy, computed once.
static POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    HeaderValue::from_str(&content_security_policy(PAGE))
        .expect("a policy of ASCII hashes is a valid header value")
});

/// `GET /ui`.
pub(super) async fn page() -> Response {
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ),
        (header::CONTENT_SECURITY_POLICY, POLICY.clone()),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
    ];
    (headers, PAGE).into_response()
}

/// The policy for `page`: nothing by default; its inline `<script>` and
/// `<style>` elements by hash; fetches to the node itself; no frames.
fn content_security_policy(page: &str) -> String {
    let hashes = |tag: &str| {
        inline_elements(page, tag)
            .map(|text| format!(" 'sha256-{}'", sha256_base64(text)))
            .collect::<String>()
    };
    format!(
        "default-src 'none'; script-src{}; style-src{}; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hashes("script"),
        hashes("style")
    )
}

/// The text of each `<tag>...</tag>` element of `page` (written without
/// attributes, as the page writes them): what a browser hashes.
fn inline_elements<'a>(page: &'a str, tag: &str) -> impl Iterator<Item = &'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut rest = page;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let length = rest[start..].find(&close)?;
        let text = &rest[start..start + length];
        rest = &rest[start + length + close.len()..];
        Some(text)
    })
}

fn sha256_base64(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_exactly_the_inline_script_and_style() {
        let policy = content_security_policy(PAGE);
        assert_eq!(inline_elements(PAGE, "script").count(), 1);
        assert_eq!(inline_elements(PAGE, "style").count(), 1);
        for tag in ["script", "style"] {
            for text in inline_elements(PAGE, tag) {
                assert!(policy.contains(&sha256_base64(text)), "{tag}");
            }
        }
        assert!(policy.starts_with("default-src 'none';"));
        assert!(!policy.contains("unsafe"));
        // Every script and style element is one the policy can hash
        // (written without attributes).
        assert_eq!(PAGE.matches("<script").count(), 1);
        assert_eq!(PAGE.matches("<style").count(), 1);
    }

    #[test]
    fn the_hash_is_sha256_in_base64() {
        // The empty string's, as browsers and `openssl dgst` give it.
        assert_eq!(
            sha256_base64(""),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
        let page = "<style>a{}</style><script>x()</script><script>y()</script>";
        let policy = content_security_policy(page);
        assert!(policy.contains(&format!(
            "script-src 'sha256-{}' 'sha256-{}';",
            sha256_base64("x()"),
            sha256_base64("y()")
        )));
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        // The SVG namespace is a name, not a place the page loads from.
        let page = PAGE.replace(r#""http://www.w3.org/2000/svg""#, "");
        for needle in ["http://", "https://", "src=", "@import", "url(", "//cdn"] {
            assert!(!page.contains(needle), "{needle}");
        }
        // The only link is the blank icon (no request for /favicon.ico).
        assert_eq!(PAGE.matches("href=").count(), 1);
        assert!(PAGE.contains(r#"<link rel="icon" href="data:,">"#));
        // Nothing that changes the node.
        for needle in ["POST", "method:", "Authorization", "<form"] {
            assert!(!PAGE.contains(needle), "{needle}");
        }
    }

    #[tokio::test]
    async fn the_page_is_served_with_its_policy_and_no_framing() {
        let response = page().await;
        let headers = response.headers();
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap(),
            content_security_policy(PAGE)
        );
        assert!(headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
    }
}
