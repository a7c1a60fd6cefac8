//! Secondary-index definitions that survive a restart.
//!
//! A namespace stored on files keeps its index definitions in a small TOML file beside its
//! first data file (`<file>.sindex`), as Aerospike keeps them in its system metadata; an
//! in-memory namespace keeps them in the service's `work-directory` (`<namespace>.sindex`),
//! or nowhere when none is configured. Every create or drop rewrites the whole file
//! atomically (a temporary file, synced, renamed over it, then the directory synced), so a
//! crash leaves the old list or the new one, never a mix. At start the namespace recreates
//! each index and builds it again in the background, from the records recovery loaded (none
//! in memory: such an index fills as records are written): entries themselves are never
//! stored.
//!
//! Invariant: the file lists exactly the indexes the namespace had after the last create or
//! drop that returned; writes of it are serialized (`SAVE_LOCK`), each from the list of the
//! moment, so the last one written is the newest.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use engine::{IndexCollection, IndexDefinition, IndexKind, IndexSource, Namespace};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tracing::{error, info, warn};

use crate::config::{Config, NamespaceSection};

/// Serializes rewrites of every definitions file.
static SAVE_LOCK: Mutex<()> = Mutex::new(());

#[derive(Debug, Default, Serialize, Deserialize)]
struct SavedIndexes {
    #[serde(default)]
    index: Vec<SavedIndex>,
}

#[derive(Debug, Serialize, Deserialize)]
struct SavedIndex {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    set: Option<String>,
    /// The bin of a bin index; absent for a user-key index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bin: Option<String>,
    /// `key` for a user-key index; absent for a bin index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    /// The CDT context of a bin index on an element inside the bin (base64 of its packed
    /// form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context: Option<String>,
    /// The expression of an expression index (base64 of its packed form); no bin then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    indextype: String,
}

/// Where `section`'s definitions live: beside its first data file; in memory, in
/// `work_directory`; `None` in memory without one.
pub fn definitions_path(work_directory: &Path, section: &NamespaceSection) -> Option<PathBuf> {
    let Some(first_file) = section.storage_engine.files.first() else {
        return (!work_directory.as_os_str().is_empty())
            .then(|| work_directory.join(format!("{}.sindex", section.name)));
    };
    let mut path = first_file.clone().into_os_string();
    path.push(".sindex");
    Some(PathBuf::from(path))
}

/// Rewrites the definitions file of `namespace` from its indexes now. A failure is logged:
/// the indexes work until the restart that will lack them.
pub fn save(config: &Config, namespace: &Namespace) {
    let Some(section) = config
        .namespaces
        .iter()
        .find(|s| s.name == namespace.name())
    else {
        return;
    };
    let Some(path) = definitions_path(&config.service.work_directory, section) else {
        return;
    };
    let _serialized = SAVE_LOCK.lock();
    let saved = SavedIndexes {
        index: namespace
            .indexes()
            .iter()
            .filter_map(|index| saved(index.definition()))
            .collect(),
    };
    if let Err(e) = write_atomically(&path, &saved) {
        error!(
            namespace = namespace.name(),
            path = %path.display(),
            "cannot save secondary index definitions, they will be missing after a restart: {e}"
        );
    }
}

/// Recreates the indexes `section`'s definitions file lists and starts building each.
pub fn restore(
    work_directory: &Path,
    section: &NamespaceSection,
    namespace: &std::sync::Arc<Namespace>,
) {
    let Some(path) = definitions_path(work_directory, section) else {
        return;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            error!(path = %path.display(), "cannot read secondary index definitions: {e}");
            return;
        }
    };
    let saved: SavedIndexes = match toml::from_str(&text) {
        Ok(saved) => saved,
        Err(e) => {
            error!(path = %path.display(), "secondary index definitions unreadable, none restored: {e}");
            return;
        }
    };
    for entry in saved.index {
        let name = entry.name.clone();
        let Some(definition) = definition(entry) else {
            warn!(
                index = name,
                "secondary index definition not understood; skipped"
            );
            continue;
        };
        match namespace.create_index(definition) {
            Ok((index, _)) => {
                info!(
                    namespace = namespace.name(),
                    index = name,
                    "secondary index restored; building"
                );
                crate::sindex_info::build_in_background(namespace.clone(), index);
            }
            Err(e) => warn!(index = name, "secondary index not restored: {e}"),
        }
    }
}

/// A definition as text, the form the cluster's metadata group carries.
pub fn definition_text(definition: &IndexDefinition) -> Option<String> {
    toml::to_string(&saved(definition)?).ok()
}

/// The definition [`definition_text`] wrote.
pub fn definition_from_text(text: &str) -> Option<IndexDefinition> {
    definition(toml::from_str(text).ok()?)
}

fn saved(definition: &IndexDefinition) -> Option<SavedIndex> {
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).ok();
    Some(SavedIndex {
        name: definition.name.clone(),
        set: match &definition.set_name {
            Some(set) => Some(text(set)?),
            None => None,
        },
        bin: match definition.source.bin() {
            Some(bin) => Some(text(bin)?),
            None => None,
        },
        source: (definition.source == IndexSource::UserKey).then(|| USER_KEY_SOURCE.to_owned()),
        context: definition
            .source
            .context()
            .map(|context| BASE64.encode(context)),
        exp: definition
            .source
            .expression()
            .map(|packed| BASE64.encode(packed)),
        kind: definition.kind.name().to_owned(),
        indextype: definition.collection.name().to_owned(),
    })
}

/// The `source` of a user-key index.
const USER_KEY_SOURCE: &str = "key";

fn definition(saved: SavedIndex) -> Option<IndexDefinition> {
    let decode = |text: &str| BASE64.decode(text).ok();
    let source = match (saved.bin, saved.source.as_deref(), saved.context, saved.exp) {
        (Some(bin), None, None, None) => IndexSource::Bin(bin.into_bytes()),
        (Some(bin), None, Some(context), None) => IndexSource::BinContext {
            bin: bin.into_bytes(),
            context: decode(&context)?,
        },
        (None, None, None, Some(exp)) => IndexSource::Expression(decode(&exp)?),
        (None, Some(USER_KEY_SOURCE), None, None) => IndexSource::UserKey,
        _ => return None,
    };
    Some(IndexDefinition {
        kind: IndexKind::named_with_geo(saved.kind.as_bytes())?,
        collection: IndexCollection::named(saved.indextype.as_bytes())?,
        name: saved.name,
        set_name: saved.set.map(String::into_bytes),
        source,
    })
}

fn write_atomically(path: &Path, saved: &SavedIndexes) -> std::io::Result<()> {
    let text = toml::to_string(saved).map_err(std::io::Error::other)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(
        b"# Secondary index definitions, rewritten by the server on each create or drop.\n",
    )?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    let directory = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(directory)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_round_trip_through_their_saved_form() {
        let original = IndexDefinition {
            name: "by_tag".to_owned(),
            set_name: Some(b"people".to_vec()),
            source: IndexSource::Bin(b"tags".to_vec()),
            kind: IndexKind::String,
            collection: IndexCollection::MapValues,
        };
        let by_key = IndexDefinition {
            name: "by_key".to_owned(),
            set_name: Some(b"redis".to_vec()),
            source: IndexSource::UserKey,
            kind: IndexKind::String,
            collection: IndexCollection::Default,
        };
        // A blob index on the first element of a list bin, and a numeric one on an
        // expression (`[BIN(int) "n"]` packed), keep their context and expression.
        let by_context = IndexDefinition {
            name: "by_first".to_owned(),
            set_name: None,
            source: IndexSource::BinContext {
                bin: b"list".to_vec(),
                context: vec![0x92, 0x10, 0x00],
            },
            kind: IndexKind::Blob,
            collection: IndexCollection::Default,
        };
        let by_expression = IndexDefinition {
            name: "by_n".to_owned(),
            set_name: None,
            source: IndexSource::Expression(vec![0x93, 0x51, 0x02, 0xa1, b'n']),
            kind: IndexKind::Numeric,
            collection: IndexCollection::Default,
        };
        let originals = vec![original, by_key, by_context, by_expression];
        let whole = SavedIndexes {
            index: originals
                .iter()
                .map(|d| saved(d).expect("UTF-8 names"))
                .collect(),
        };
        let text = toml::to_string(&whole).expect("serializes");
        let back: SavedIndexes = toml::from_str(&text).expect("parses");
        let restored: Vec<_> = back.index.into_iter().filter_map(definition).collect();
        assert_eq!(restored, originals);
    }
}
