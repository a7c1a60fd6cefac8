//! Secondary-index info commands, in both syntaxes the official clients send (before 8.1:
//! `ns=`, `indexdata=<bin>,<type>`; from 8.1: `namespace=`, `bin=`, `type=`): `sindex-create`,
//! `sindex-delete`, `sindex-list` (and `sindex`), `sindex/<ns>[/<name>]`, `sindex-exists` and
//! `sindex-stat`. Replies follow Aerospike 8: `ok`, `true`/`false`, `key=value;…` statistics
//! with `load_pct`, or `ERROR:<code>:<message>`. A new index is built on a background thread;
//! clients poll its `load_pct` until it reaches 100. Definitions are saved on every create and
//! drop (`sindex_store`).

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use std::sync::Arc;

use engine::{
    IndexCollection, IndexDefinition, IndexError, IndexKind, IndexSource, Namespace,
    SINDEX_ENTRY_SIZE_BYTES, SecondaryIndex,
};
use tracing::{info, warn};
use wire_aerospike::info_param;

use crate::state::ServerState;

/// `sindex-create:…`
pub fn create(state: &ServerState, params: &[u8], value: &mut String) {
    let Some(namespace) = namespace_param(state, params) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let definition = match definition(params) {
        Ok(definition) => definition,
        Err(message) => {
            let _ = write!(value, "ERROR:4:{message}");
            return;
        }
    };
    match create_defined(state, namespace, definition) {
        Ok(()) => value.push_str("ok"),
        Err(failure) => {
            let _ = write!(value, "ERROR:{}:{}", failure.code, failure.message);
        }
    }
}

/// Why an index was not created: Aerospike's result code and message.
#[derive(Debug)]
pub struct CreateFailure {
    /// 4 (parameter), 200 (exists) or 206 (too many).
    pub code: u8,
    /// For people.
    pub message: String,
}

/// Creates the index `definition` describes in `namespace`, saves the definitions and starts
/// its build. Creating an existing index again with the same definition succeeds, as in
/// Aerospike.
///
/// # Errors
/// See [`CreateFailure`].
pub fn create_defined(
    state: &ServerState,
    namespace: &Arc<Namespace>,
    definition: IndexDefinition,
) -> Result<(), CreateFailure> {
    let text = crate::sindex_store::definition_text(&definition);
    let name = definition.name.clone();
    create_local(state, namespace, definition)?;
    // On a cluster the definition applies on every node, through the metadata group.
    if let (Some(node), Some(text)) = (state.cluster_node(), text) {
        node.replicate_sindex_put(namespace.name(), &name, text);
    }
    Ok(())
}

/// [`create_defined`] on this node only (a definition the cluster already holds).
///
/// # Errors
/// As [`create_defined`].
pub fn create_local(
    state: &ServerState,
    namespace: &Arc<Namespace>,
    definition: IndexDefinition,
) -> Result<(), CreateFailure> {
    let failure = |code: u8, error: IndexError| CreateFailure {
        code,
        message: error.to_string(),
    };
    match namespace.create_index(definition) {
        Ok((index, true)) => {
            info!(
                namespace = namespace.name(),
                index = index.definition().name,
                "secondary index created"
            );
            crate::sindex_store::save(&state.config, namespace);
            build_in_background(namespace.clone(), index);
            Ok(())
        }
        Ok((_, false)) => Ok(()),
        Err(error @ IndexError::TooMany) => Err(failure(206, error)),
        Err(error @ IndexError::Invalid(_)) => Err(failure(4, error)),
        Err(error @ (IndexError::NameTaken(_) | IndexError::DefinitionTaken(_))) => {
            Err(failure(200, error))
        }
    }
}

/// Drops the index `name` of `namespace` and saves the definitions; false if there was none.
pub fn drop_named(state: &ServerState, namespace: &Namespace, name: &str) -> bool {
    if let Some(node) = state.cluster_node() {
        node.replicate_sindex_drop(namespace.name(), name);
    }
    drop_local(state, namespace, name)
}

/// [`drop_named`] on this node only.
pub fn drop_local(state: &ServerState, namespace: &Namespace, name: &str) -> bool {
    if !namespace.drop_index(name) {
        return false;
    }
    info!(
        namespace = namespace.name(),
        index = name,
        "secondary index dropped"
    );
    crate::sindex_store::save(&state.config, namespace);
    true
}

/// `sindex-delete:ns=<ns>;indexname=<name>`: `ok` whether or not it existed (Aerospike 8.1).
pub fn delete(state: &ServerState, params: &[u8], value: &mut String) {
    let Some(namespace) = namespace_param(state, params) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let Some(name) = index_name_param(params) else {
        value.push_str("ERROR:4:missing indexname");
        return;
    };
    drop_named(state, namespace, name);
    value.push_str("ok");
}

/// `sindex-exists:ns=<ns>;indexname=<name>`: `true` or `false`.
pub fn exists(state: &ServerState, params: &[u8], value: &mut String) {
    let Some(namespace) = namespace_param(state, params) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    let found = index_name_param(params).and_then(|name| namespace.index_named(name));
    value.push_str(if found.is_some() { "true" } else { "false" });
}

/// `sindex-list[:ns=<ns>]` and `sindex`: every index, `;`-separated.
pub fn list(state: &ServerState, params: &[u8], value: &mut String) {
    let only = info_param(params, b"ns").or_else(|| info_param(params, b"namespace"));
    let mut first = true;
    for namespace in state.namespaces.iter() {
        if only.is_some_and(|name| name != namespace.name().as_bytes()) {
            continue;
        }
        for index in namespace.indexes() {
            if !first {
                value.push(';');
            }
            first = false;
            describe(namespace.name(), &index, value);
        }
    }
}

/// `sindex/<ns>` (the namespace's indexes) or `sindex/<ns>/<name>` (one index's statistics).
pub fn by_path(state: &ServerState, path: &[u8], value: &mut String) {
    if path.is_empty() {
        list(state, &[], value);
        return;
    }
    let mut parts = path.splitn(2, |&byte| byte == b'/');
    let namespace_name = parts.next().unwrap_or_default();
    let Some(namespace) = state.namespace_arc(namespace_name) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    match parts.next() {
        None => {
            let mut first = true;
            for index in namespace.indexes() {
                if !first {
                    value.push(';');
                }
                first = false;
                describe(namespace.name(), &index, value);
            }
        }
        Some(name) => write_stats(namespace, name, value),
    }
}

/// `sindex-stat:namespace=<ns>;indexname=<name>`.
pub fn stat(state: &ServerState, params: &[u8], value: &mut String) {
    let Some(namespace) = namespace_param(state, params) else {
        value.push_str("ERROR:20:namespace not found");
        return;
    };
    match index_name_param(params) {
        Some(name) => write_stats(namespace, name.as_bytes(), value),
        None => value.push_str("ERROR:4:missing indexname"),
    }
}

fn write_stats(namespace: &Namespace, name: &[u8], value: &mut String) {
    let index = std::str::from_utf8(name)
        .ok()
        .and_then(|name| namespace.index_named(name));
    let Some(index) = index else {
        value.push_str("ERROR:201:no index");
        return;
    };
    let entries = namespace.index_entry_count(&index);
    let _ = write!(
        value,
        "entries={entries};used_bytes={};load_pct={};loadtime=0;stat_gc_recs=0;\
         query_basic_complete={};query_basic_error=0;query_basic_abort=0;\
         query_basic_avg_rec_count={};lookups={};records_returned={}",
        entries * SINDEX_ENTRY_SIZE_BYTES,
        index.load_pct(),
        index.queries(),
        index
            .records_returned()
            .checked_div(index.queries())
            .unwrap_or(0),
        index.lookups(),
        index.records_returned(),
    );
}

/// One index's `sindex-list` line.
pub fn describe(namespace_name: &str, index: &SecondaryIndex, value: &mut String) {
    let definition = index.definition();
    let set = definition
        .set_name
        .as_deref()
        .map_or_else(|| "null".into(), String::from_utf8_lossy);
    let bin = definition
        .source
        .bin()
        .map_or_else(|| "null".into(), String::from_utf8_lossy);
    // Osprey's extension, shown only where it applies so that other lines read as Aerospike's.
    let source = match definition.source {
        IndexSource::UserKey => ":source=key",
        _ => "",
    };
    let base64_or_null =
        |bytes: Option<&[u8]>| bytes.map_or_else(|| "null".to_owned(), |b| BASE64.encode(b));
    let _ = write!(
        value,
        "ns={namespace_name}:indexname={}:set={set}:bin={bin}{source}:type={}:\
         indextype={}:context={}:exp={}:state={}",
        definition.name,
        definition.kind.name(),
        definition.collection.name(),
        base64_or_null(definition.source.context()),
        base64_or_null(definition.source.expression()),
        if index.is_ready() { "RW" } else { "WO" },
    );
}

fn namespace_param<'s>(state: &'s ServerState, params: &[u8]) -> Option<&'s Arc<Namespace>> {
    let name = info_param(params, b"ns").or_else(|| info_param(params, b"namespace"))?;
    state.namespace_arc(name)
}

fn index_name_param(params: &[u8]) -> Option<&str> {
    info_param(params, b"indexname").and_then(|name| std::str::from_utf8(name).ok())
}

/// `source=` of a user-key index (Osprey's extension: no bin).
const USER_KEY_SOURCE: &str = "key";

/// The definition a create names, in either syntax: a bin (`indexdata=<bin>,<type>`, or
/// `bin=` and `type=`), optionally with a `context=` (base64 of a packed CDT context); an
/// expression (`exp=`, base64 of a packed expression, and `type=`). Osprey's extension:
/// `source=key` (with `type=`, and no bin) indexes the records' user keys.
fn definition(params: &[u8]) -> Result<IndexDefinition, &'static str> {
    let name = index_name_param(params).ok_or("missing indexname")?;
    let index_type = info_param(params, b"indextype").unwrap_or(b"default");
    let collection = IndexCollection::named(index_type)
        .ok_or("bad indextype: default, list, mapkeys or mapvalues")?;
    let (source, type_name) = source_and_type(params)?;
    let kind = IndexKind::named_with_geo(type_name)
        .ok_or("bad index type: numeric, string, blob or geo2dsphere")?;
    Ok(IndexDefinition {
        name: name.to_owned(),
        set_name: info_param(params, b"set")
            .filter(|set| !set.is_empty())
            .map(<[u8]>::to_vec),
        source,
        kind,
        collection,
    })
}

/// What a create's index reads, and the type name it gives, with Aerospike's exclusions:
/// `indexdata` or `type`, `bin` or `exp`, `context` or `exp`.
fn source_and_type(params: &[u8]) -> Result<(IndexSource, &[u8]), &'static str> {
    let data = info_param(params, b"indexdata");
    let bin = info_param(params, b"bin");
    let type_name = info_param(params, b"type");
    let expression = info_param(params, b"exp");
    let context = info_param(params, b"context");
    let by_key = match info_param(params, b"source") {
        None | Some(b"bin") => false,
        Some(source) if source == USER_KEY_SOURCE.as_bytes() => true,
        Some(_) => return Err("bad source: bin or key"),
    };
    if data.is_some() && type_name.is_some() {
        return Err("indexdata and type are mutually exclusive");
    }
    if data.is_some() && bin.is_some() {
        return Err("indexdata and bin are mutually exclusive");
    }
    let names_bin = data.is_some() || bin.is_some();
    if expression.is_some() && (names_bin || by_key) {
        return Err("bin and exp are mutually exclusive");
    }
    if expression.is_some() && context.is_some() {
        return Err("context and exp are mutually exclusive");
    }
    if by_key && (names_bin || context.is_some()) {
        return Err("a user-key index names no bin");
    }
    if let Some(expression) = expression {
        let packed = decoded_canonical(expression).ok_or("invalid exp")?;
        let type_name = type_name.ok_or("missing type")?;
        return Ok((IndexSource::Expression(packed), type_name));
    }
    if by_key {
        return Ok((IndexSource::UserKey, type_name.ok_or("missing type")?));
    }
    let (bin, type_name) = match (data, bin) {
        (Some(data), _) => {
            let mut parts = data.splitn(2, |&byte| byte == b',');
            let bin = parts.next().unwrap_or_default();
            (bin, parts.next().ok_or("indexdata needs <bin>,<type>")?)
        }
        (None, Some(bin)) => (bin, type_name.ok_or("missing type")?),
        (None, None) => return Err("missing bin"),
    };
    let source = match context {
        None => IndexSource::Bin(bin.to_vec()),
        Some(context) => IndexSource::BinContext {
            bin: bin.to_vec(),
            context: decoded_canonical(context).ok_or("invalid context")?,
        },
    };
    Ok((source, type_name))
}

/// Base64 text of a packed msgpack value, decoded and made canonical (see
/// [`engine::sindex_canonical`]).
fn decoded_canonical(text: &[u8]) -> Option<Vec<u8>> {
    let packed = BASE64.decode(text).ok()?;
    engine::sindex_canonical(&packed).ok()
}

pub(crate) fn build_in_background(namespace: Arc<Namespace>, index: Arc<SecondaryIndex>) {
    let spawned = std::thread::Builder::new()
        .name("sindex-build".to_owned())
        .spawn(move || {
            namespace.build_index(&index);
            info!(
                namespace = namespace.name(),
                index = index.definition().name,
                "secondary index built"
            );
        });
    if let Err(error) = spawned {
        warn!(%error, "cannot start a secondary index build");
    }
}
