//! What each subcommand asks the nodes and how it shows the answers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::nodes::{Node, pairs};
use crate::table::{Style, Table};

/// `info`: each command's value, from every node reached (one line per node and command,
/// prefixed with the node when there are several).
///
/// # Errors
/// A node that stops answering.
pub fn info(nodes: &mut [Node], commands: &[String], style: Style) -> Result<String, String> {
    let mut out = String::new();
    let several = nodes.len() > 1;
    for node in nodes.iter_mut() {
        for command in commands {
            let value = node.info(command)?;
            if several {
                let _ = write!(
                    out,
                    "{} ",
                    style.title(&format!("{} {}", node.id, node.address))
                );
            }
            if commands.len() > 1 {
                let _ = write!(out, "{command}\t");
            }
            let _ = writeln!(out, "{value}");
        }
    }
    Ok(out)
}

/// One statistic of every node: rows are names, columns nodes (asadm's layout).
fn by_node(names_values: &[(String, Vec<(String, String)>)], like: Option<&str>) -> Table {
    let mut names: Vec<&str> = Vec::new();
    for (_, values) in names_values {
        for (name, _) in values {
            if !names.contains(&name.as_str()) && like.is_none_or(|like| name.contains(like)) {
                names.push(name);
            }
        }
    }
    let mut table = Table::new(
        std::iter::once("name".to_owned()).chain(names_values.iter().map(|(node, _)| node.clone())),
    );
    for name in names {
        let cells = names_values.iter().map(|(_, values)| {
            values
                .iter()
                .find(|(key, _)| key == name)
                .map_or(String::new(), |(_, value)| value.clone())
        });
        table.row(std::iter::once(name.to_owned()).chain(cells));
    }
    table
}

/// The namespaces the first node serves.
fn namespaces(nodes: &mut [Node]) -> Result<Vec<String>, String> {
    let Some(first) = nodes.first_mut() else {
        return Ok(Vec::new());
    };
    Ok(first
        .info("namespaces")?
        .split(';')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect())
}

/// `show statistics|config [service|namespace]`: a table per context, names by nodes.
///
/// # Errors
/// A node that stops answering.
pub fn show_stats(
    nodes: &mut [Node],
    config: bool,
    context: Option<&str>,
    like: Option<&str>,
    style: Style,
) -> Result<String, String> {
    let mut out = String::new();
    if context.is_none_or(|context| context == "service") {
        let command = match config {
            true => "get-config:context=service",
            false => "statistics",
        };
        let values = nodes
            .iter_mut()
            .map(|node| Ok((node.id.clone(), node.pairs(command)?)))
            .collect::<Result<Vec<_>, String>>()?;
        let _ = writeln!(
            out,
            "{}",
            style.title(if config {
                "Service configuration"
            } else {
                "Service statistics"
            })
        );
        out.push_str(&by_node(&values, like).render(style));
    }
    if context.is_none_or(|context| context == "namespace") {
        for namespace in namespaces(nodes)? {
            let command = match config {
                true => format!("get-config:context=namespace;id={namespace}"),
                false => format!("namespace/{namespace}"),
            };
            let values = nodes
                .iter_mut()
                .map(|node| Ok((node.id.clone(), node.pairs(&command)?)))
                .collect::<Result<Vec<_>, String>>()?;
            let what = if config {
                "configuration"
            } else {
                "statistics"
            };
            let _ = writeln!(
                out,
                "{}",
                style.title(&format!("Namespace {namespace} {what}"))
            );
            out.push_str(&by_node(&values, like).render(style));
        }
    }
    Ok(out)
}

/// `show sets`: a row per node and set.
///
/// # Errors
/// A node that stops answering.
pub fn show_sets(nodes: &mut [Node], style: Style) -> Result<String, String> {
    let columns = [
        "objects",
        "tombstones",
        "data_used_bytes",
        "sindexes",
        "enable-index",
    ];
    let mut table = Table::new(["node", "namespace", "set"].into_iter().chain(columns));
    for node in nodes.iter_mut() {
        let sets = node.info("sets")?;
        for set in sets.split(';').filter(|set| !set.is_empty()) {
            let fields: BTreeMap<String, String> = pairs(set, ':').into_iter().collect();
            let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
            let cells = [node.id.clone(), field("ns"), field("set")]
                .into_iter()
                .chain(columns.iter().map(|name| field(name)));
            table.row(cells);
        }
    }
    Ok(format!("{}\n{}", style.title("Sets"), table.render(style)))
}

/// `show sindex`: a row per node and index, with its entries and load.
///
/// # Errors
/// A node that stops answering.
pub fn show_sindex(nodes: &mut [Node], style: Style) -> Result<String, String> {
    let mut table = Table::new([
        "node",
        "namespace",
        "set",
        "index",
        "bin",
        "type",
        "state",
        "entries",
        "load_pct",
    ]);
    for node in nodes.iter_mut() {
        let list = node.info("sindex-list:")?;
        for index in list.split(';').filter(|index| !index.is_empty()) {
            let fields: BTreeMap<String, String> = pairs(index, ':').into_iter().collect();
            let field = |name: &str| fields.get(name).cloned().unwrap_or_default();
            let stats: BTreeMap<String, String> = node
                .pairs(&format!(
                    "sindex-stat:namespace={};indexname={}",
                    field("ns"),
                    field("indexname")
                ))?
                .into_iter()
                .collect();
            let stat = |name: &str| stats.get(name).cloned().unwrap_or_default();
            table.row([
                node.id.clone(),
                field("ns"),
                field("set"),
                field("indexname"),
                field("bin"),
                field("type"),
                field("state"),
                stat("entries"),
                stat("load_pct"),
            ]);
        }
    }
    Ok(format!(
        "{}\n{}",
        style.title("Secondary indexes"),
        table.render(style)
    ))
}

/// `show latencies`: per node and histogram, the operations per second of the last interval
/// and the share over `buckets` thresholds, every `exponent`-th power of two (asadm's `-b 3
/// -e 3`: >1, >8, >64).
///
/// # Errors
/// A node that stops answering, or a bucket past Aerospike's 17.
pub fn show_latencies(
    nodes: &mut [Node],
    buckets: usize,
    exponent: usize,
    style: Style,
) -> Result<String, String> {
    let thresholds: Vec<usize> = (0..buckets).map(|index| index * exponent.max(1)).collect();
    if thresholds.last().is_some_and(|last| *last > 16) {
        return Err("latencies have 17 thresholds (2^0 to 2^16): ask for fewer buckets".to_owned());
    }
    let mut header = vec![
        "node".to_owned(),
        "histogram".to_owned(),
        "ops/sec".to_owned(),
    ];
    header.extend(thresholds.iter().map(|power| format!(">{}", 1u64 << power)));
    let mut table = Table::new(header);
    for node in nodes.iter_mut() {
        for entry in node.info("latencies:")?.split(';') {
            let Some((name, data)) = entry.split_once(':') else {
                continue;
            };
            let fields: Vec<&str> = data.split(',').collect();
            // `name:` alone: no interval measured yet.
            if fields.len() < 2 {
                continue;
            }
            let unit = match fields[0] {
                "usec" => "us",
                _ => "ms",
            };
            let mut row = vec![
                node.id.clone(),
                format!("{name} ({unit})"),
                fields[1].to_owned(),
            ];
            row.extend(
                thresholds
                    .iter()
                    .map(|power| fields.get(2 + power).map_or("", |v| v).to_owned()),
            );
            table.row(row);
        }
    }
    Ok(format!(
        "{}\n{}",
        style.title("Latencies (% of operations at or over each threshold)"),
        table.render(style)
    ))
}

/// `summary`: the cluster and its namespaces at a glance.
///
/// # Errors
/// A node that stops answering.
pub fn summary(nodes: &mut [Node], style: Style) -> Result<String, String> {
    let mut node_table = Table::new([
        "node",
        "address",
        "build",
        "cluster size",
        "uptime s",
        "client conns",
        "redis conns",
        "objects",
    ]);
    for node in nodes.iter_mut() {
        let build = node.info("build")?;
        let stats: BTreeMap<String, String> = node.pairs("statistics")?.into_iter().collect();
        let stat = |name: &str| stats.get(name).cloned().unwrap_or_default();
        node_table.row([
            node.id.clone(),
            node.address.to_string(),
            build,
            stat("cluster_size"),
            stat("uptime"),
            stat("client_connections"),
            stat("resp_connections"),
            stat("objects"),
        ]);
    }
    let mut namespace_table = Table::new([
        "namespace",
        "nodes",
        "objects",
        "master objects",
        "memory used bytes",
        "replication factor",
        "storage",
    ]);
    for namespace in namespaces(nodes)? {
        let mut totals = [0u64; 3];
        let mut shared = (String::new(), String::new());
        for node in nodes.iter_mut() {
            let stats: BTreeMap<String, String> = node
                .pairs(&format!("namespace/{namespace}"))?
                .into_iter()
                .collect();
            let number = |name: &str| {
                stats
                    .get(name)
                    .and_then(|value| value.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            totals[0] += number("objects");
            totals[1] += number("master_objects");
            totals[2] += number("memory_used_bytes");
            let text = |name: &str| stats.get(name).cloned().unwrap_or_default();
            shared = (text("effective_replication_factor"), text("storage-engine"));
        }
        namespace_table.row([
            namespace.clone(),
            nodes.len().to_string(),
            totals[0].to_string(),
            totals[1].to_string(),
            totals[2].to_string(),
            shared.0,
            shared.1,
        ]);
    }
    let cluster_name = match nodes.first_mut() {
        Some(node) => node.info("cluster-name")?,
        None => String::new(),
    };
    Ok(format!(
        "{}\n{}{}\n{}",
        style.title(&format!("Cluster {cluster_name}: {} node(s)", nodes.len())),
        node_table.render(style),
        style.title("Namespaces"),
        namespace_table.render(style)
    ))
}

/// The counters `watch` shows as rates: per namespace, and the node's.
const WATCHED_NAMESPACE: [&str; 8] = [
    "client_read_success",
    "client_read_not_found",
    "client_write_success",
    "client_delete_success",
    "client_read_error",
    "client_write_error",
    "client_read_timeout",
    "client_write_timeout",
];

/// Every watched counter of every node: `(node, namespace, counter) -> value`.
fn watched(
    nodes: &mut [Node],
    namespaces: &[String],
) -> Result<BTreeMap<(String, String, String), u64>, String> {
    let mut values = BTreeMap::new();
    for node in nodes.iter_mut() {
        for namespace in namespaces {
            for (name, value) in node.pairs(&format!("namespace/{namespace}"))? {
                if WATCHED_NAMESPACE.contains(&name.as_str())
                    && let Ok(value) = value.parse()
                {
                    values.insert((node.id.clone(), namespace.clone(), name), value);
                }
            }
        }
    }
    Ok(values)
}

/// `watch`: every `interval`, the rates per second of the watched counters since the last
/// look, per node and namespace, `count` times (forever with none); each table is handed to
/// `show` as it is made.
///
/// # Errors
/// A node that stops answering.
pub fn watch(
    nodes: &mut [Node],
    interval: Duration,
    count: Option<u64>,
    style: Style,
    mut show: impl FnMut(&str),
) -> Result<(), String> {
    let namespaces = namespaces(nodes)?;
    let mut before = watched(nodes, &namespaces)?;
    let mut at = Instant::now();
    let mut shown = 0;
    while count.is_none_or(|count| shown < count) {
        std::thread::sleep(interval);
        let now = watched(nodes, &namespaces)?;
        let seconds = at.elapsed().as_secs_f64().max(1e-3);
        at = Instant::now();
        let mut table = Table::new(
            ["node", "namespace"].into_iter().map(str::to_owned).chain(
                WATCHED_NAMESPACE
                    .iter()
                    .map(|name| format!("{}/s", name.trim_start_matches("client_"))),
            ),
        );
        let mut rows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for ((node, namespace, name), value) in &now {
            let earlier = before
                .get(&(node.clone(), namespace.clone(), name.clone()))
                .copied()
                .unwrap_or(*value);
            let rate = value.saturating_sub(earlier) as f64 / seconds;
            let position = WATCHED_NAMESPACE
                .iter()
                .position(|watched| watched == name)
                .unwrap_or(0);
            let row = rows
                .entry((node.clone(), namespace.clone()))
                .or_insert_with(|| vec![String::new(); WATCHED_NAMESPACE.len()]);
            row[position] = format!("{rate:.1}");
        }
        for ((node, namespace), cells) in rows {
            table.row([node, namespace].into_iter().chain(cells));
        }
        show(&format!(
            "{}\n{}",
            style.title(&format!("Rates over {seconds:.1} s")),
            table.render(style)
        ));
        before = now;
        shown += 1;
    }
    Ok(())
}

/// `set-config`: `set-config:context=<context>[;id=<namespace>];<key>=<value>` on every node;
/// a row per node with its answer.
///
/// # Errors
/// A node that stops answering, or one that refuses.
pub fn set_config(
    nodes: &mut [Node],
    context: &str,
    namespace: Option<&str>,
    settings: &[String],
    style: Style,
) -> Result<String, String> {
    let mut command = format!("set-config:context={context}");
    if let Some(namespace) = namespace {
        let _ = write!(command, ";id={namespace}");
    }
    for setting in settings {
        if !setting.contains('=') {
            return Err(format!("{setting:?} is not KEY=VALUE"));
        }
        let _ = write!(command, ";{setting}");
    }
    let mut table = Table::new(["node", "answer"]);
    let mut refused = false;
    for node in nodes.iter_mut() {
        let answer = node.info(&command)?;
        refused |= answer != "ok";
        table.row([node.id.clone(), answer]);
    }
    let shown = table.render(style);
    match refused {
        true => Err(format!(
            "{}{shown}",
            style.error("a node refused the change:\n")
        )),
        false => Ok(shown),
    }
}
