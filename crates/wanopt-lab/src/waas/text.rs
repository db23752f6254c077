//! English-like text for the generated documents: sentences of business
//! words drawn with a Zipf-like frequency, paragraphs, headings, small
//! tables, and per-document boilerplate that recurs.

use crate::rng::Rng;

/// Words of business English; the text builder draws them Zipf-like, most
/// frequent first.
#[rustfmt::skip]
pub(crate) const WORDS: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "for", "is", "on", "that", "by", "this", "with", "be",
    "are", "from", "at", "as", "will", "our", "we", "it", "or", "an", "all", "has", "have", "not",
    "their", "which", "new", "more", "market", "sales", "customer", "customers", "quarter",
    "revenue", "growth", "product", "products", "service", "services", "team", "region", "plan",
    "year", "business", "support", "project", "network", "branch", "office", "data", "cost",
    "costs", "performance", "results", "management", "report", "first", "second", "third",
    "increase", "decrease", "compared", "previous", "period", "budget", "forecast", "target",
    "targets", "strategy", "partners", "channel", "account", "accounts", "pipeline", "order",
    "orders", "delivery", "schedule", "review", "meeting", "issues", "risk", "risks", "mitigation",
    "action", "actions", "owner", "status", "complete", "pending", "approved", "proposal",
    "contract", "terms", "pricing", "discount", "margin", "margins", "operating", "expenses",
    "capital", "investment", "return", "total", "average", "annual", "monthly", "weekly", "daily",
    "section", "table", "figure", "summary", "overview", "background", "scope", "objectives",
    "requirements", "design", "implementation", "testing", "deployment", "migration", "training",
    "users", "application", "applications", "server", "servers", "storage", "capacity",
    "bandwidth", "latency", "availability", "security", "policy", "policies", "compliance",
    "audit", "process", "processes", "quality", "improvement", "efficiency", "productivity",
    "headcount", "hiring", "regional", "national", "global", "north", "south", "east", "west",
    "central", "europe", "americas", "asia", "pacific", "enterprise", "commercial", "public",
    "sector", "education", "healthcare", "finance", "retail", "manufacturing", "should", "would",
    "could", "must", "may", "can", "also", "each", "other", "such", "these", "those", "than",
    "into", "over", "under", "between", "within", "across", "during", "after", "before", "while",
    "where", "when", "because", "however", "therefore", "including", "based", "expected",
    "current", "remaining", "additional", "significant", "key", "major", "minor", "initial",
    "final", "next", "last", "several", "many", "most", "some", "any", "every", "both", "only",
    "well", "further", "still", "about", "approximately", "percent", "million", "thousand",
    "level", "levels", "rate", "rates", "share", "shares", "value", "values", "number", "numbers",
    "time", "times", "date", "dates", "week", "month", "months", "days", "goal", "goals",
    "priority", "priorities", "feedback", "survey", "analysis", "model", "models", "assumptions",
    "scenario", "scenarios", "option", "options", "recommendation", "recommendations", "decision",
    "decisions", "approval", "leadership", "board", "director", "manager", "engineer", "engineers",
    "staff", "resources", "vendor", "vendors", "supplier", "suppliers", "inventory", "shipping",
    "logistics", "warehouse", "launch", "campaign", "marketing", "brand", "awareness",
    "opportunity", "opportunities", "competitive", "competitors", "position", "advantage",
];

/// First names for labels (customers, owners, authors).
#[rustfmt::skip]
pub(crate) const NAMES: &[&str] = &[
    "Anderson", "Baker", "Chen", "Davis", "Evans", "Fischer", "Garcia", "Hughes", "Ito", "Jensen",
    "Kowalski", "Lopez", "Martin", "Nguyen", "Okafor", "Patel", "Quinn", "Rossi", "Schmidt",
    "Tanaka", "Urban", "Varga", "Weber", "Xu", "Young", "Zimmer",
];

/// Places for labels and titles.
#[rustfmt::skip]
pub(crate) const PLACES: &[&str] = &[
    "Boston", "Chicago", "Dallas", "Denver", "Frankfurt", "London", "Madrid", "Milan", "Munich",
    "Paris", "Seattle", "Singapore", "Sydney", "Tokyo", "Toronto", "Zurich",
];

/// Appends one English-like sentence.
pub(crate) fn sentence(rng: &mut Rng, out: &mut Vec<u8>) {
    let n = rng.range(6, 22);
    for i in 0..n {
        let word = WORDS[rng.zipf(WORDS.len())];
        if i == 0 {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase().to_string().bytes());
                out.extend(chars.as_str().bytes());
            }
        } else {
            out.push(b' ');
            if rng.chance(0.04) {
                // Figures: years, amounts, percentages.
                let figure = match rng.below(3) {
                    0 => format!("{}", rng.range(2005, 2010)),
                    1 => format!("{}.{} million", rng.range(1, 99), rng.below(10)),
                    _ => format!("{}%", rng.range(1, 60)),
                };
                out.extend(figure.bytes());
                out.push(b' ');
            }
            out.extend(word.bytes());
        }
        if i + 1 < n && rng.chance(0.08) {
            out.push(b',');
        }
    }
    out.push(b'.');
}

/// Appends one paragraph (Word ends paragraphs with `\r`).
fn paragraph(rng: &mut Rng, out: &mut Vec<u8>) {
    if rng.chance(0.08) {
        // A heading.
        let heading = format!(
            "{}.{} {} {}\r",
            rng.range(1, 9),
            rng.range(1, 9),
            capitalized(WORDS[rng.zipf(WORDS.len())]),
            WORDS[rng.zipf(WORDS.len())]
        );
        out.extend(heading.bytes());
    }
    let sentences = rng.range(2, 7);
    for i in 0..sentences {
        if i > 0 {
            out.push(b' ');
        }
        sentence(rng, out);
    }
    out.push(b'\r');
    if rng.chance(0.05) {
        // A small table: Word separates cells with 0x07.
        let rows = rng.range(2, 6);
        for _ in 0..rows {
            let cells = [
                PLACES[rng.zipf(PLACES.len())].to_string(),
                format!("{}", rng.range(10, 9999)),
                format!("{}%", rng.range(1, 99)),
            ];
            for cell in cells {
                out.extend(cell.bytes());
                out.push(0x07);
            }
            out.push(0x07);
        }
    }
}

pub(crate) fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// English-like 8-bit text of exactly `len` bytes. A document repeats
/// itself: a quarter of its sentences come from its own small stock of
/// boilerplate (disclaimers, recurring phrases, cross-references).
pub(crate) fn text(rng: &mut Rng, len: usize) -> Vec<u8> {
    let stock: Vec<Vec<u8>> = (0..40)
        .map(|_| {
            let mut s = Vec::new();
            sentence(rng, &mut s);
            s
        })
        .collect();
    let mut out = Vec::with_capacity(len + 2048);
    while out.len() < len {
        if rng.chance(0.25) {
            out.extend_from_slice(&stock[rng.zipf(stock.len())]);
            out.extend_from_slice(if rng.chance(0.5) { b" " } else { b"\r" });
        } else {
            paragraph(rng, &mut out);
        }
    }
    out.resize(len, 0);
    out
}
