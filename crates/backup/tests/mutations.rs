//! The decoder refuses damaged files at the right line and never panics: files cut at every
//! byte, single-field mutations with their exact messages, and random damage.

mod common;

use backup::{DecodeErrorKind, Decoder, EncodeOptions, Found, Item};
use common::{decode, encode, find, line_at, random_first_file, replace, seeded_rng};
use rand::Rng;

const FIRST_FILE: &[u8] = include_bytes!("fixtures/test_00000.asb");
const LATER_FILE: &[u8] = include_bytes!("fixtures/test_00001.asb");
const COMPACT_FILE: &[u8] = include_bytes!("fixtures/compact.asb");

/// The header's end and each item's end, as the decoder reports them.
fn item_boundaries(file: &[u8]) -> (Vec<Item>, Vec<u64>) {
    let mut decoder = Decoder::new(file).expect("a valid file");
    let mut boundaries = vec![decoder.bytes_read()];
    let mut items = Vec::new();
    while let Some(item) = decoder.next() {
        items.push(item.expect("a valid file"));
        boundaries.push(decoder.bytes_read());
    }
    (items, boundaries)
}

/// A file cut at byte `cut` either ends at an item boundary and decodes to the items before
/// it, or fails at the line where it was cut, with the end of the file as what it found. A
/// first file cut just before `# first-file` is a valid later file with no items.
fn assert_cut_is_refused_or_a_prefix(file: &[u8], items: &[Item], boundaries: &[u64], cut: usize) {
    let outcome = decode(&file[..cut]);
    let before_first_file = file[cut..].starts_with(b"# first-file\n");
    let item_count = boundaries
        .iter()
        .position(|&boundary| boundary == cut as u64);
    match item_count.or(before_first_file.then_some(0)) {
        Some(item_count) => {
            let (_, decoded) = outcome.unwrap_or_else(|error| panic!("cut at {cut}: {error}"));
            assert_eq!(decoded, items[..item_count], "cut at {cut}");
        }
        None => {
            let error = outcome.expect_err("a cut inside an element is refused");
            assert_eq!(error.line, line_at(file, cut), "cut at {cut}: {error}");
            let message = error.to_string();
            let names_the_end = message.contains("end of file")
                || matches!(error.kind, DecodeErrorKind::BinCountMismatch { .. });
            assert!(names_the_end, "cut at {cut}: {message}");
        }
    }
}

#[test]
fn fixtures_cut_at_every_byte_are_refused_at_the_cut_line_or_are_a_prefix() {
    for file in [FIRST_FILE, LATER_FILE, COMPACT_FILE] {
        let (items, boundaries) = item_boundaries(file);
        assert_eq!(
            *boundaries.last().expect("at least the header"),
            file.len() as u64
        );
        for cut in 0..file.len() {
            assert_cut_is_refused_or_a_prefix(file, &items, &boundaries, cut);
        }
    }
}

#[test]
fn random_files_cut_at_line_ends_and_random_bytes_are_refused_or_a_prefix() {
    let mut rng = seeded_rng("random_files_cut_at_line_ends_and_random_bytes");
    for _ in 0..20 {
        let (header, items) = random_first_file(&mut rng, 8);
        let compact = EncodeOptions {
            compact: rng.random(),
        };
        let (file, boundaries) = encode(&header, &items, compact);
        let line_ends = file
            .iter()
            .enumerate()
            .filter(|(_, byte)| **byte == b'\n')
            .map(|(offset, _)| offset + 1);
        let random_cuts: Vec<usize> = (0..50).map(|_| rng.random_range(0..file.len())).collect();
        for cut in line_ends.chain(random_cuts) {
            assert_cut_is_refused_or_a_prefix(&file, &items, &boundaries, cut);
        }
    }
}

/// Decodes `file` and checks the error's line (that of the first occurrence of `at`) and
/// message.
fn assert_refused(file: &[u8], at: &[u8], message: &str) {
    let error = decode(file).expect_err("the mutation is refused");
    let line = line_at(file, find(file, at));
    assert_eq!(error.to_string(), format!("line {line}: {message}"));
}

#[test]
fn wrong_record_line_is_named_with_what_was_expected() {
    let file = replace(FIRST_FILE, b"+ g 3\n", b"+ x 3\n");
    assert_refused(&file, b"+ x", "expected \"+ g\", found \"+ x\"");
    let file = replace(FIRST_FILE, b"+ g 3\n", b"+ g  3\n");
    assert_refused(&file, b"+ g  3", "expected a generation, found \" \"");
    let file = replace(FIRST_FILE, b"+ g 3\n", b"+ g 3\r\n");
    assert_refused(&file, b"+ g 3\r", "expected \"+ t\", found \"\\r\"");
    let file = replace(FIRST_FILE, b"+ n test\n+ d z1", b"+ n test\n+ q z1");
    assert_refused(&file, b"+ q", "expected \"+ d\", found \"+ q\"");
}

#[test]
fn flipped_bin_counts_are_refused_where_the_record_stops_matching() {
    let fewer_lines = replace(FIRST_FILE, b"+ b 14\n", b"+ b 15\n");
    assert_refused(
        &fewer_lines,
        b"+ k S 6",
        "record declares 15 bins but has 14",
    );
    let more_lines = replace(FIRST_FILE, b"+ b 14\n", b"+ b 13\n");
    assert_refused(
        &more_lines,
        b"- L a\\\\b",
        "bin line after the record's 13 declared bins",
    );
    let last_record = replace(FIRST_FILE, b"+ b 1\n- S s 0", b"+ b 2\n- S s 0");
    let error = decode(&last_record).expect_err("the file ends a bin short");
    assert_eq!(error.line, line_at(&last_record, last_record.len()));
}

#[test]
fn wrong_lengths_are_refused_at_the_line_after_the_value() {
    let longer = replace(FIRST_FILE, b"- S name 7 ", b"- S name 8 ");
    assert_refused(
        &longer,
        b"- G loc",
        "expected end of line after a value, found \"-\"",
    );
    let shorter = replace(FIRST_FILE, b"- S name 7 ", b"- S name 6 ");
    assert_refused(
        &shorter,
        b"Lee",
        "expected end of line after a value, found \"e\"",
    );
    let udf = replace(FIRST_FILE, b"hello.lua 35 ", b"hello.lua 36 ");
    assert_refused(
        &udf,
        b"+ k I 42",
        "expected end of line after a value, found \"+\"",
    );
}

#[test]
fn bad_type_letters_are_refused() {
    let unknown = replace(FIRST_FILE, b"- Z flag", b"- Q flag");
    assert_refused(&unknown, b"- Q", "unknown bin type \"Q\"");
    let ldt = replace(FIRST_FILE, b"- Z flag", b"- U flag");
    assert_refused(
        &ldt,
        b"- U",
        "the backup contains an LDT bin (type \"U\"), which cannot be restored",
    );
    let compact_integer = replace(FIRST_FILE, b"- I age", b"- I! age");
    assert_refused(
        &compact_integer,
        b"- I!",
        "\"!\" is not allowed after type \"I\"",
    );
    let compact_string_key = replace(COMPACT_FILE, b"+ k B! 3", b"+ k S! 3");
    assert_refused(
        &compact_string_key,
        b"+ k S!",
        "expected a key type (\"I\", \"D\", \"S\", \"B\", \"B!\" or \"X\"), found \"S!\"",
    );
    let index_type = replace(FIRST_FILE, b"idx_age N 1", b"idx_age I 1");
    assert_refused(
        &index_type,
        b"idx_age I",
        "expected N, L, K or V, found \"I\"",
    );
    let udf_type = replace(FIRST_FILE, b"* u L", b"* u J");
    assert_refused(&udf_type, b"* u J", "expected UDF type \"L\", found \"J\"");
    let boolean = replace(FIRST_FILE, b"- Z flag T", b"- Z flag t");
    assert_refused(
        &boolean,
        b"- Z flag",
        "expected \"T\" or \"F\", found \"t\"",
    );
}

#[test]
fn bad_base64_and_digests_are_refused() {
    let bad_character = replace(FIRST_FILE, b"4 AAH/", b"4 AAH*");
    assert_refused(&bad_character, b"AAH*", "bytes is not valid base64");
    let bad_length = replace(FIRST_FILE, b"4 AAH/", b"3 AAH");
    assert_refused(
        &bad_length,
        b"3 AAH",
        "base64 length 3 is not a multiple of 4",
    );
    let short_digest = replace(
        FIRST_FILE,
        b"z1oTZe/6TcUzM/IWbRAzWPhxEJY=",
        b"z1oTZe/6TcUzM/IWbRAzWPhx",
    );
    assert_refused(&short_digest, b"z1oTZe", "digest is 18 bytes, not 20");
    let long_digest = replace(
        FIRST_FILE,
        b"z1oTZe/6TcUzM/IWbRAzWPhxEJY=",
        b"z1oTZe/6TcUzM/IWbRAzWPhxEJY=AAAA",
    );
    assert_refused(&long_digest, b"z1oTZe", "digest is longer than 28 bytes");
    let context = replace(FIRST_FILE, b"kiKiA2E=", b"kiKiA2E");
    assert_refused(&context, b"kiKiA2E", "index context is not valid base64");
}

#[test]
fn bad_escapes_and_names_are_refused() {
    let escape = replace(FIRST_FILE, b"empty\\ map", b"empty\\tmap");
    assert_refused(
        &escape,
        b"empty\\t",
        "invalid escape: backslash followed by \"t\"",
    );
    let nul = replace(FIRST_FILE, b"- I age", b"- I a\0e");
    assert_refused(&nul, b"- I a\0e", "bin name contains a NUL byte");
    let long_bin = replace(FIRST_FILE, b"- I age", b"- I sixteen_bytes_xx");
    assert_refused(&long_bin, b"sixteen", "bin name is longer than 15 bytes");
    let empty_set = replace(FIRST_FILE, b"+ s demo\n", b"+ s \n");
    assert_refused(&empty_set, b"+ s \n", "set is empty");
    let set_with_space = replace(FIRST_FILE, b"+ s demo\n", b"+ s de mo\n");
    assert_refused(
        &set_with_space,
        b"+ s de",
        "expected end of line after the name, found \" \"",
    );
}

#[test]
fn bad_numbers_are_refused() {
    let generation = replace(FIRST_FILE, b"+ g 65535", b"+ g 65536");
    assert_refused(
        &generation,
        b"+ g 65536",
        "generation is out of range (at most 65535)",
    );
    let expiration = replace(FIRST_FILE, b"+ t 520000000", b"+ t 4294967296");
    assert_refused(
        &expiration,
        b"+ t 4294967296",
        "expiration is out of range (at most 4294967295)",
    );
    let negative = replace(FIRST_FILE, b"+ t 520000000", b"+ t -1");
    assert_refused(&negative, b"+ t -1", "expected an expiration, found \"-\"");
    let overflow = replace(FIRST_FILE, b"- I age -7", b"- I age -9223372036854775809");
    assert_refused(
        &overflow,
        b"- I age",
        "integer is out of range (at most 9223372036854775808)",
    );
    let plus = replace(FIRST_FILE, b"- I age -7", b"- I age +7");
    assert_refused(&plus, b"- I age", "expected an integer, found \"+\"");
    let float = replace(FIRST_FILE, b"- D bad nan", b"- D bad 1E5");
    assert_refused(&float, b"- D bad", "invalid float \"1E5\"");
    let paths = replace(FIRST_FILE, b"idx_age N 1", b"idx_age N 2");
    assert_refused(
        &paths,
        b"idx_age",
        "secondary index has 2 paths; only 1 is supported",
    );
}

#[test]
fn c_tool_floats_are_accepted() {
    for (old, new) in [
        (&b"- D bad nan"[..], &b"- D bad -nan"[..]),
        (b"- D bad nan", b"- D bad +Inf"),
    ] {
        let file = replace(FIRST_FILE, old, new);
        decode(&file).unwrap_or_else(|error| panic!("{error}"));
    }
}

#[test]
fn bad_headers_and_misplaced_elements_are_refused() {
    let version = replace(FIRST_FILE, b"Version 3.1", b"Version 3.2");
    assert_refused(
        &version,
        b"Version",
        "expected \"Version 3.1\" or \"Version 3.0\", found \"Version 3.2\"",
    );
    let meta = replace(FIRST_FILE, b"# first-file", b"# last-file");
    assert_refused(&meta, b"# last", "unexpected meta line \"last-file\"");
    let no_namespace = replace(FIRST_FILE, b"# namespace test\n", b"");
    assert_refused(
        &no_namespace,
        b"# first",
        "unexpected meta line \"first-file\"",
    );
    let not_first = replace(FIRST_FILE, b"# first-file\n", b"");
    assert_refused(
        &not_first,
        b"* i",
        "a global (\"*\") line in a file that is not the first file of a 3.1 backup",
    );
    let mut late_udf = FIRST_FILE.to_vec();
    late_udf.extend_from_slice(b"* u L x.lua 1 a\n");
    assert_refused(
        &late_udf,
        b"* u L x.lua",
        "a global (\"*\") line after a record",
    );
    let empty_line = replace(FIRST_FILE, b"+ k S 6", b"\n+ k S 6");
    let error = decode(&empty_line).expect_err("an empty line is refused");
    let line = line_at(&empty_line, find(&empty_line, b"\n+ k S 6"));
    let message = "expected \"*\", \"+\" or end of file, found \"\\n\"";
    assert_eq!(error.to_string(), format!("line {line}: {message}"));
}

#[test]
fn errors_show_short_found_text() {
    let found = Found::bytes(&[b'x'; 100]);
    assert_eq!(found.bytes.len(), Found::BYTES_MAX);
    assert_eq!(Found::end_of_file().to_string(), "end of file");
}

/// Random damage (flipped, deleted, inserted and duplicated bytes) anywhere in valid files:
/// the decoder must return, never panic, and any error must name a line inside the file.
#[test]
fn random_damage_never_panics_and_names_a_line_in_the_file() {
    let mut rng = seeded_rng("random_damage_never_panics_and_names_a_line_in_the_file");
    for _ in 0..2_000 {
        let (header, items) = random_first_file(&mut rng, 3);
        let compact = EncodeOptions {
            compact: rng.random(),
        };
        let (mut file, _) = encode(&header, &items, compact);
        for _ in 0..rng.random_range(1..4) {
            damage(&mut rng, &mut file);
        }
        if let Err(error) = decode(&file) {
            assert!(
                error.line >= 1 && error.line <= line_at(&file, file.len()),
                "{error}"
            );
        }
    }
}

fn damage(rng: &mut impl Rng, file: &mut Vec<u8>) {
    if file.is_empty() {
        return;
    }
    let at = rng.random_range(0..file.len());
    match rng.random_range(0..4) {
        0 => file[at] ^= 1 << rng.random_range(0..8),
        1 => {
            file.remove(at);
        }
        2 => file.insert(at, b" \n\\-+*!0"[rng.random_range(0..8)]),
        _ => {
            let end = (at + rng.random_range(1..40)).min(file.len());
            let copy = file[at..end].to_vec();
            file.splice(at..at, copy);
        }
    }
}

#[test]
fn legacy_base64_string_key_is_read_as_a_string() {
    let file = replace(LATER_FILE, b"+ k B 4 AQI=", b"+ k X 4 aGk=");
    let (_, items) = decode(&file).unwrap_or_else(|error| panic!("{error}"));
    let Item::Record(record) = &items[0] else {
        panic!("a record");
    };
    assert_eq!(
        record.user_key,
        Some(backup::BackupKey::String(b"hi".to_vec()))
    );
}
