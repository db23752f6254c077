//! The monitoring files of `dist/` against real nodes and Prometheus' own
//! tool: every metric that the Grafana dashboard (`dist/grafana/wanopt.json`)
//! and the alerting rules (`dist/prometheus/wanopt.rules.yml`) read is one
//! that a running edge or core exports at `/metrics`; promtool accepts
//! the rules and passes their unit tests (`wanopt.rules.test.yml`); and
//! every query of the dashboard parses as PromQL.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    core_args, echo_server, free_tcp, free_udp, http_get, spawn, two_path_edge, Keys,
};

/// The repository's root (`dist/` is there).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn dashboard() -> Value {
    serde_json::from_str(&read("dist/grafana/wanopt.json"))
        .unwrap_or_else(|e| panic!("dist/grafana/wanopt.json is not JSON: {e}"))
}

/// One query of the dashboard or the rules, and where it is (`panel
/// "TITLE"`, `variable $NAME`, `alert NAME`).
struct Query {
    place: String,
    expr: String,
}

/// Every `expr` of the dashboard, each with the title of the panel that
/// holds it (rows' nested panels too), then its variables' queries.
fn dashboard_queries(dashboard: &Value) -> Vec<Query> {
    fn walk(value: &Value, title: &str, out: &mut Vec<Query>) {
        match value {
            Value::Object(map) => {
                let title = map.get("title").and_then(Value::as_str).unwrap_or(title);
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("expr", Value::String(expr)) => out.push(Query {
                            place: format!("panel \"{title}\""),
                            expr: expr.clone(),
                        }),
                        _ => walk(child, title, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, title, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], "(untitled)", &mut out);
    for variable in variables(dashboard) {
        if variable["type"] != "query" {
            continue;
        }
        let query = &variable["query"];
        let expr = query.as_str().or_else(|| query["query"].as_str());
        out.push(Query {
            place: format!("variable ${}", variable["name"].as_str().unwrap_or("?")),
            expr: expr.unwrap_or_default().to_owned(),
        });
    }
    out
}

fn variables(dashboard: &Value) -> &[Value] {
    dashboard["templating"]["list"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// Every `expr:` of a rules file, by its rule's name: a line scan
/// (plain, quoted, or a block scalar `expr: |` whose lines are indented
/// under it).
fn rule_queries(text: &str) -> Vec<Query> {
    let mut out = Vec::new();
    let mut rule = String::from("(unnamed rule)");
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start().trim_start_matches("- ");
        for kind in ["alert:", "record:"] {
            if let Some(name) = trimmed.strip_prefix(kind) {
                rule = format!("{} {}", kind.trim_end_matches(':'), name.trim());
            }
        }
        let Some(value) = trimmed.strip_prefix("expr:") else {
            continue;
        };
        let value = value.trim();
        let expr = if value.starts_with('|') || value.starts_with('>') {
            let indent = line.len() - line.trim_start().len();
            let mut block = Vec::new();
            while let Some(next) = lines.peek() {
                let deeper = next.len() - next.trim_start().len() > indent;
                if !(deeper || next.trim().is_empty()) {
                    break;
                }
                block.push(next.trim());
                lines.next();
            }
            block.join(" ")
        } else if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            inner.replace("\\\"", "\"").replace("\\\\", "\\")
        } else if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            inner.replace("''", "'")
        } else {
            value.to_owned()
        };
        out.push(Query {
            place: rule.clone(),
            expr,
        });
    }
    out
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The `wanopt_` metric names an expression reads (PromQL, or a Grafana
/// variable's `label_values(...)`): identifiers outside string literals,
/// so that a label value or a `label_replace` argument is not one.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut code = String::with_capacity(expr.len());
    let mut quote = None;
    let mut escaped = false;
    for c in expr.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                code.push(' ');
            }
            None if matches!(c, '"' | '\'' | '`') => {
                quote = Some(c);
                code.push(' ');
            }
            None => code.push(c),
        }
    }
    code.split(|c: char| !is_name_char(c))
        .filter(|word| word.starts_with("wanopt_"))
        .map(str::to_owned)
        .collect()
}

/// The metric families of an exposition, by name, with their type (a
/// sample with no `# TYPE` line is `untyped`; the `_bucket`, `_sum` and
/// `_count` series of a histogram or summary are not families of their own).
fn families(exposition: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                out.insert(name.to_owned(), kind.to_owned());
            }
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let name: String = line.chars().take_while(|&c| is_name_char(c)).collect();
            if family_of(&name, &out).is_none() {
                out.insert(name, "untyped".to_owned());
            }
        }
    }
    out
}

/// The family a name read by a query belongs to: itself, or the
/// histogram or summary whose `_bucket`, `_sum` or `_count` it is.
fn family_of<'a>(name: &'a str, families: &BTreeMap<String, String>) -> Option<&'a str> {
    if families.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        matches!(
            families.get(base).map(String::as_str),
            Some("histogram" | "summary")
        )
        .then_some(base)
    })
}

/// Runs promtool (Debian's `prometheus` package, which scripts/deps
/// installs) in `dir`; fails the test in one line when it is missing.
fn promtool(dir: &Path, args: &[&str]) -> Output {
    match Command::new("promtool").args(args).current_dir(dir).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "promtool is not installed, the rules cannot be checked: apt-get install prometheus (scripts/deps does)"
        ),
        Err(e) => panic!("promtool: {e}"),
    }
}

fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_metric_of_the_dashboard_and_the_rules_is_exported_by_a_node() {
    let keys = Keys::new();
    let core_addr = free_udp();
    let core = spawn(&keys, "core", &core_args(&keys, core_addr, &["127.0.0.1"]));
    // Two WAN paths (from 127.0.0.1 and 127.0.0.2), so that the per-path
    // metrics are exported too; an edge needs something to accept.
    let forward = (free_tcp(), echo_server().to_string());
    let edge = two_path_edge(&keys, [core_addr, core_addr], &[forward], &[]);
    edge.wait_tunnel_up(Duration::from_secs(10));
    let mut exported = BTreeMap::new();
    for (role, node) in [("edge", &edge), ("core", &core)] {
        let text = http_get(node.control, "/metrics")
            .unwrap_or_else(|| panic!("no /metrics from the {role}; log:\n{}", node.log_text()));
        exported.extend(families(&text));
    }

    let dashboard_queries = dashboard_queries(&dashboard());
    let rules_queries = rule_queries(&read("dist/prometheus/wanopt.rules.yml"));
    let mut read_by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, queries) in [("dashboard", &dashboard_queries), ("rules", &rules_queries)] {
        for query in queries {
            for name in metric_names(&query.expr) {
                read_by
                    .entry(name)
                    .or_default()
                    .insert(format!("{file} {}", query.place));
            }
        }
    }
    // Not vacuous: the scans found the files' queries and their metrics.
    assert!(
        dashboard_queries.len() >= 40 && rules_queries.len() >= 7 && read_by.len() >= 60,
        "{} dashboard queries, {} rules, {} metrics found: is the scan broken?",
        dashboard_queries.len(),
        rules_queries.len(),
        read_by.len()
    );

    let missing: Vec<String> = read_by
        .iter()
        .filter(|(name, _)| family_of(name, &exported).is_none())
        .map(|(name, places)| {
            let places: Vec<&str> = places.iter().map(String::as_str).collect();
            format!("  {name}, read by {}", places.join(", "))
        })
        .collect();
    let unshown: Vec<&String> = exported
        .keys()
        .filter(|name| {
            !read_by
                .keys()
                .any(|read| family_of(read, &exported) == Some(name))
        })
        .collect();
    if !unshown.is_empty() {
        eprintln!("exported but read by neither file: {unshown:?}");
    }
    assert!(
        missing.is_empty(),
        "metrics that dist/ reads and neither node exports:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_dashboard_is_importable_with_a_prometheus_datasource_variable() {
    let dashboard = dashboard();
    let schema = dashboard["schemaVersion"].as_u64().unwrap_or(0);
    assert!(
        (36..=41).contains(&schema),
        "schemaVersion {schema}: not one of Grafana 9 to 11 (36 to 41)"
    );
    assert!(dashboard["uid"].is_string() && dashboard["title"].is_string());
    let variables = variables(&dashboard);
    let named = |name: &str| variables.iter().find(|v| v["name"] == name);
    let datasource = named("datasource").expect("a variable named datasource");
    assert_eq!(
        (&datasource["type"], &datasource["query"]),
        (&Value::from("datasource"), &Value::from("prometheus"))
    );
    for name in ["instance", "role"] {
        assert!(
            named(name).is_some_and(|v| v["type"] == "query"),
            "a query variable named {name}"
        );
    }
    // Every panel but rows queries Prometheus through the variable, so
    // that the dashboard imports into any Grafana whatever its data
    // source is called.
    let mut panels: Vec<&Value> = Vec::new();
    let mut stack: Vec<&Value> = vec![&dashboard["panels"]];
    while let Some(list) = stack.pop() {
        for panel in list.as_array().into_iter().flatten() {
            stack.push(&panel["panels"]);
            panels.push(panel);
        }
    }
    let mut ids = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("(untitled)");
        assert!(
            ids.insert(panel["id"].to_string()),
            "panel \"{title}\": id used twice"
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "panel \"{title}\""
        );
        let targets = panel["targets"].as_array();
        assert!(
            targets.is_some_and(|t| !t.is_empty()),
            "panel \"{title}\" has no query"
        );
        for target in targets.into_iter().flatten() {
            assert!(
                target["expr"]
                    .as_str()
                    .is_some_and(|e| !e.trim().is_empty()),
                "panel \"{title}\": a target without expr"
            );
            assert_eq!(
                target["datasource"]["uid"], "${datasource}",
                "panel \"{title}\""
            );
        }
    }
}

#[test]
fn promtool_accepts_the_rules_and_passes_their_unit_tests() {
    let dir = repo_root().join("dist/prometheus");
    assert_success(
        "promtool check rules wanopt.rules.yml",
        &promtool(&dir, &["check", "rules", "wanopt.rules.yml"]),
    );
    assert_success(
        "promtool test rules wanopt.rules.test.yml",
        &promtool(&dir, &["test", "rules", "wanopt.rules.test.yml"]),
    );
}

/// Grafana's variables in a query, replaced as Grafana would (intervals
/// by a duration, the template variables by a match-all regex), so that
/// promtool can parse what Prometheus will be sent.
fn as_prometheus_sees_it(expr: &str, variables: &[String]) -> String {
    let mut expr = expr.replace('\n', " ");
    for interval in ["$__rate_interval", "$__interval", "$__range"] {
        expr = expr.replace(interval, "5m");
    }
    for name in variables {
        expr = expr
            .replace(&format!("${{{name}}}"), ".*")
            .replace(&format!("${name}"), ".*");
    }
    // A variable's `label_values(SELECTOR, LABEL)`: its selector is PromQL.
    if let Some(inner) = expr.strip_prefix("label_values(") {
        if let Some((selector, _label)) = inner.rsplit_once(',') {
            return selector.to_owned();
        }
    }
    expr
}

#[test]
fn every_query_of_the_dashboard_parses_as_promql() {
    let dashboard = dashboard();
    let mut names: Vec<String> = variables(&dashboard)
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    // `$peers` before `$peer`.
    names.sort_by_key(|name| std::cmp::Reverse(name.len()));
    let queries = dashboard_queries(&dashboard);
    // Each query as a recording rule: `promtool check rules` parses them.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, query) in queries.iter().enumerate() {
        let expr = as_prometheus_sees_it(&query.expr, &names).replace('\'', "''");
        rules.push_str(&format!(
            "      - record: dashboard:query:{i}\n        expr: '{expr}'\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("dashboard.rules.yml"), &rules).unwrap();
    let out = promtool(dir.path(), &["check", "rules", "dashboard.rules.yml"]);
    let index: Vec<String> = queries
        .iter()
        .enumerate()
        .map(|(i, q)| format!("  dashboard:query:{i}: {}", q.place))
        .collect();
    assert_success(
        &format!(
            "the dashboard's queries as promtool parses them\n{}\n",
            index.join("\n")
        ),
        &out,
    );
}

#[test]
fn metric_names_skip_strings_and_find_histogram_series() {
    let names = metric_names(
        r#"label_replace(rate(wanopt_a_total{job="wanopt_not",x='wanopt_no'}[$__rate_interval]), "s", "$1", "p", "(.*)") / wanopt_b_bucket"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["wanopt_a_total", "wanopt_b_bucket"]
    );
    let families =
        families("# TYPE wanopt_b histogram\nwanopt_b_bucket{le=\"1\"} 0\nwanopt_c_sum 1\n");
    assert_eq!(family_of("wanopt_b_bucket", &families), Some("wanopt_b"));
    assert_eq!(family_of("wanopt_c_sum", &families), Some("wanopt_c_sum"));
    assert_eq!(family_of("wanopt_c", &families), None);
    let rules = rule_queries(
        "- alert: A\n  expr: |\n    wanopt_x\n      > 1\n  for: 1m\n- alert: B\n  expr: \"wanopt_y{a=\\\"b\\\"}\"\n",
    );
    let found: Vec<(&str, &str)> = rules
        .iter()
        .map(|q| (q.place.as_str(), q.expr.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("alert A", "wanopt_x > 1"),
            ("alert B", "wanopt_y{a=\"b\"}")
        ]
    );
}
