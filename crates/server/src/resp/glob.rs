//! Redis's glob patterns (KEYS, SCAN, HSCAN, SSCAN and ZSCAN MATCH, CONFIG GET): `*` any run of
//! bytes, `?` one byte, `[abc]`, `[^abc]` and `[a-z]` classes, `\x` the byte `x`. Bytes, not
//! characters, and case-sensitive, read as Redis's `stringmatchlen` (`util.c`) reads them, down
//! to its edge cases:
//! - In a class, `\x` is the byte `x`, and `x-y` is a range whichever way round (`[z-a]` is
//!   `[a-z]`) whose end may be any byte, `]` included: `[a-]` is the range from `]` to `a`, and
//!   the class goes on after it. A class with no closing `]` runs to the end of the pattern.
//! - `[` as the pattern's last byte matches nothing; `\` as its last byte is the byte `\`.
//! - The empty text matches only the empty pattern and the lone `*` (`stringmatchlen("**", "")`
//!   is false; Redis's callers skip matching for a lone `*`).
//! - A pattern with more than [`STAR_NESTING_MAX`] `*`s that something follows matches nothing:
//!   Redis gives up at that depth of recursion.
//!
//! Redis backtracks over every `*`, which a hostile pattern turns into O(p × t) steps or worse.
//! Here nothing is ever retried. A pattern compiles into elements that each match exactly one
//! byte, cut at its `*`s into segments. A text matches when the first segment matches its start,
//! the last segment its end, and every middle segment occurs, in order and without overlap, in
//! between. Taking each middle segment at its leftmost occurrence after the previous one is always
//! right: a match that used a later occurrence could use the leftmost instead and leave more room
//! for the segments after it. A middle segment of plain bytes is found with `memchr::memmem`
//! (Two-Way, linear in the text searched); one with `?` or classes by trying each position when
//! it has at most [`NAIVE_SEARCH_ELEMENTS_MAX`] elements, else bit-parallel (shift-and, 64 elements
//! per machine word).
//!
//! Cost, for a pattern of p bytes and a text of t bytes, with m the element count of the longest
//! middle segment that has a `?` or a class and is longer than [`NAIVE_SEARCH_ELEMENTS_MAX`]:
//! - compiling: O(p) time; 8 bytes per element and 32 per class;
//! - matching: O(t × ⌈m/64⌉), plus for each segment searched bit-parallel a 256-row table, costing
//!   O(256 × ⌈m/64⌉ + 256 per class in it). Each such segment found consumes more than
//!   [`NAIVE_SEARCH_ELEMENTS_MAX`] bytes of the text, so at most t/8 + 1 tables are built per text.
//!   Patterns whose middle segments are plain bytes or short match in O(t).
//!
//! Compile a pattern once with [`Glob::new`] to match it against many texts; [`matches`] compiles
//! for one text and stops compiling as soon as the pattern needs more bytes than the text has, so
//! a long pattern costs O(t) against a short text.

use memchr::memmem;
use smallvec::SmallVec;

/// Redis's limit on nested `*` (`stringmatchlen_impl`'s `nesting > 1000`): deeper, it answers
/// "no match" rather than recurse further. Kept so that a pattern matches exactly what it
/// matches in Redis.
pub const STAR_NESTING_MAX: usize = 1000;

/// Segments up to this many elements are searched by trying each position (at most this many
/// comparisons per text byte), which is cheaper than setting up the 2 KiB table of a bit-parallel
/// search for the short segments most patterns have.
pub const NAIVE_SEARCH_ELEMENTS_MAX: usize = 8;

const WORD_BITS: usize = u64::BITS as usize;

const _: () = assert!(NAIVE_SEARCH_ELEMENTS_MAX < WORD_BITS);

/// A compiled glob pattern.
#[derive(Clone, Debug)]
pub struct Glob {
    shape: Shape,
}

// Boxing the compiled pattern would allocate for every key KEYS and SCAN match, which its
// inline storage is there to avoid; a glob lives on the stack for one command.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
enum Shape {
    /// The lone `*`: every text, the empty one included.
    Everything,
    /// Past Redis's nesting limit: no text.
    Nothing,
    Compiled(Compiled),
}

/// A pattern as elements that each match one byte, and where its `*`s stood. A pattern of up
/// to [`INLINE_ELEMENTS`] elements and 4 runs of `*` compiles without allocating, since KEYS and
/// SCAN compile their pattern once per key.
///
/// Invariants:
/// - `literal_bytes` has one byte per element: its byte for a literal, 0 otherwise.
/// - `stars` is strictly increasing (consecutive `*`s are one), each at most `elements.len()`.
/// - `middles` are the segments between consecutive `stars`, each non-empty.
#[derive(Clone, Debug)]
struct Compiled {
    elements: SmallVec<[Element; INLINE_ELEMENTS]>,
    literal_bytes: SmallVec<[u8; INLINE_ELEMENTS]>,
    classes: Vec<ByteSet>,
    /// For each run of `*`s, the element count before it.
    stars: SmallVec<[usize; 4]>,
    middles: SmallVec<[Segment; 2]>,
}

/// Elements kept inline: most key and field patterns are shorter.
const INLINE_ELEMENTS: usize = 32;

/// What one element matches: exactly one byte of the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    Byte(u8),
    Any,
    /// A class, by its position in `Compiled::classes`.
    Class(u32),
}

/// The elements `start..end` between two `*`s.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: usize,
    end: usize,
    /// Only literal bytes: searched as a substring.
    plain: bool,
}

/// A set of bytes, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ByteSet([u64; 4]);

/// Whether `text` matches `pattern` (see the module docs for the cost): a one-off match, for
/// tests; commands compile their pattern once with [`Glob::new`].
#[cfg(test)]
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    Glob::compile(pattern, text.len()).is_some_and(|glob| glob.matches(text))
}

impl Glob {
    /// Compiles `pattern`, in O(pattern length).
    pub fn new(pattern: &[u8]) -> Glob {
        Glob::compile(pattern, usize::MAX).expect("with no element limit, every pattern compiles")
    }

    /// Whether `text` matches.
    pub fn matches(&self, text: &[u8]) -> bool {
        match &self.shape {
            Shape::Everything => true,
            Shape::Nothing => false,
            Shape::Compiled(compiled) => compiled.matches(text),
        }
    }

    /// Compiles `pattern`, or `None` once it has more than `elements_max` elements (then it
    /// matches no text of `elements_max` bytes).
    fn compile(pattern: &[u8], elements_max: usize) -> Option<Glob> {
        if pattern == b"*" {
            return Some(Glob {
                shape: Shape::Everything,
            });
        }
        let mut compiled = Compiled {
            elements: SmallVec::new(),
            literal_bytes: SmallVec::new(),
            classes: Vec::new(),
            stars: SmallVec::new(),
            middles: SmallVec::new(),
        };
        let mut position = 0;
        while position < pattern.len() {
            let (element, next) = match pattern[position] {
                b'*' => {
                    let before = compiled.elements.len();
                    if compiled.stars.last() != Some(&before) {
                        compiled.stars.push(before);
                    }
                    position += 1;
                    continue;
                }
                b'?' => (Element::Any, position + 1),
                b'[' => {
                    let (set, next) = parse_class(pattern, position + 1);
                    let class = u32::try_from(compiled.classes.len())
                        .expect("fewer than 2^32 classes: a pattern is at most 512 MiB");
                    compiled.classes.push(set);
                    (Element::Class(class), next)
                }
                b'\\' if position + 1 < pattern.len() => {
                    (Element::Byte(pattern[position + 1]), position + 2)
                }
                byte => (Element::Byte(byte), position + 1),
            };
            if compiled.elements.len() == elements_max {
                return None;
            }
            compiled.elements.push(element);
            compiled.literal_bytes.push(match element {
                Element::Byte(byte) => byte,
                Element::Any | Element::Class(_) => 0,
            });
            position = next;
        }
        let trailing_star = compiled.stars.last() == Some(&compiled.elements.len());
        if compiled.stars.len() - usize::from(trailing_star) > STAR_NESTING_MAX {
            return Some(Glob {
                shape: Shape::Nothing,
            });
        }
        compiled.middles = compiled
            .stars
            .windows(2)
            .map(|pair| Segment {
                start: pair[0],
                end: pair[1],
                plain: compiled.elements[pair[0]..pair[1]]
                    .iter()
                    .all(|element| matches!(element, Element::Byte(_))),
            })
            .collect();
        Some(Glob {
            shape: Shape::Compiled(compiled),
        })
    }
}

impl Compiled {
    fn matches(&self, text: &[u8]) -> bool {
        let element_count = self.elements.len();
        if text.is_empty() {
            return element_count == 0 && self.stars.is_empty();
        }
        let (Some(&first_star), Some(&last_star)) = (self.stars.first(), self.stars.last()) else {
            return text.len() == element_count && self.matches_at(0, text);
        };
        if text.len() < element_count {
            return false;
        }
        let end = text.len() - (element_count - last_star);
        if !self.matches_at(0, &text[..first_star]) || !self.matches_at(last_star, &text[end..]) {
            return false;
        }
        let mut at = first_star;
        for segment in &self.middles {
            match self.find(*segment, &text[at..end]) {
                Some(found) => at += found + (segment.end - segment.start),
                None => return false,
            }
        }
        true
    }

    /// Whether the elements from `start` on, as many as `text` has bytes, match `text`.
    fn matches_at(&self, start: usize, text: &[u8]) -> bool {
        self.elements[start..start + text.len()]
            .iter()
            .zip(text)
            .all(|(&element, &byte)| self.element_matches(element, byte))
    }

    fn element_matches(&self, element: Element, byte: u8) -> bool {
        match element {
            Element::Byte(expected) => expected == byte,
            Element::Any => true,
            Element::Class(class) => self.classes[class as usize].contains(byte),
        }
    }

    /// The leftmost position where `segment` matches inside `window`.
    fn find(&self, segment: Segment, window: &[u8]) -> Option<usize> {
        let length = segment.end - segment.start;
        if length > window.len() {
            return None;
        }
        if segment.plain {
            return memmem::find(window, &self.literal_bytes[segment.start..segment.end]);
        }
        if self.elements[segment.start..segment.end]
            .iter()
            .all(|element| *element == Element::Any)
        {
            return Some(0);
        }
        if length <= NAIVE_SEARCH_ELEMENTS_MAX {
            return (0..=window.len() - length)
                .find(|&at| self.matches_at(segment.start, &window[at..at + length]));
        }
        self.find_bit_parallel(&self.elements[segment.start..segment.end], window)
    }

    /// Shift-and: after reading a text byte, bit j of `state` says whether the elements 0..=j
    /// match the text ending there; O(⌈m/64⌉) per text byte for m elements.
    fn find_bit_parallel(&self, elements: &[Element], window: &[u8]) -> Option<usize> {
        let words = elements.len().div_ceil(WORD_BITS);
        // Row b (`words` words) has bit j set when element j matches byte b. Every row starts
        // with the bits of the `?`s, so each `?` costs one bit rather than 256.
        let mut table = vec![0u64; 256 * words];
        for (j, element) in elements.iter().enumerate() {
            if *element == Element::Any {
                table[j / WORD_BITS] |= 1 << (j % WORD_BITS);
            }
        }
        for byte in 1..256 {
            table.copy_within(0..words, byte * words);
        }
        for (j, &element) in elements.iter().enumerate() {
            let (word, bit) = (j / WORD_BITS, 1u64 << (j % WORD_BITS));
            match element {
                Element::Byte(byte) => table[usize::from(byte) * words + word] |= bit,
                Element::Any => {}
                Element::Class(class) => {
                    for byte in self.classes[class as usize].iter() {
                        table[usize::from(byte) * words + word] |= bit;
                    }
                }
            }
        }
        let last = elements.len() - 1;
        let (last_word, last_bit) = (last / WORD_BITS, 1u64 << (last % WORD_BITS));
        let mut state = vec![0u64; words];
        for (position, &byte) in window.iter().enumerate() {
            let row = &table[usize::from(byte) * words..][..words];
            // Shift the whole state up by one bit (a new attempt starts at every byte).
            let mut carry = 1;
            for (word, &mask) in state.iter_mut().zip(row) {
                let next_carry = *word >> (WORD_BITS - 1);
                *word = ((*word << 1) | carry) & mask;
                carry = next_carry;
            }
            if state[last_word] & last_bit != 0 {
                return Some(position + 1 - elements.len());
            }
        }
        None
    }
}

/// Parses the class whose body starts at `position` (just after `[`) as Redis does: the bytes it
/// matches, and where the pattern goes on (after its `]`, or at the end if it has none).
fn parse_class(pattern: &[u8], mut position: usize) -> (ByteSet, usize) {
    let negated = pattern.get(position) == Some(&b'^');
    if negated {
        position += 1;
    }
    let mut set = ByteSet::default();
    while position < pattern.len() {
        let byte = pattern[position];
        if byte == b'\\' && position + 1 < pattern.len() {
            set.insert_range(pattern[position + 1], pattern[position + 1]);
            position += 2;
        } else if byte == b']' {
            position += 1;
            break;
        } else if position + 2 < pattern.len() && pattern[position + 1] == b'-' {
            let end = pattern[position + 2];
            set.insert_range(byte.min(end), byte.max(end));
            position += 3;
        } else {
            set.insert_range(byte, byte);
            position += 1;
        }
    }
    if negated {
        set = set.complement();
    }
    (set, position)
}

impl ByteSet {
    fn insert_range(&mut self, low: u8, high: u8) {
        for byte in low..=high {
            self.0[usize::from(byte >> 6)] |= 1 << (byte & 63);
        }
    }

    fn contains(self, byte: u8) -> bool {
        self.0[usize::from(byte >> 6)] & (1 << (byte & 63)) != 0
    }

    fn complement(self) -> ByteSet {
        ByteSet(self.0.map(|word| !word))
    }

    fn iter(self) -> impl Iterator<Item = u8> {
        (0..=u8::MAX).filter(move |&byte| self.contains(byte))
    }
}

#[cfg(test)]
mod tests {
    use super::{Glob, STAR_NESTING_MAX, matches};

    #[test]
    fn wildcards_classes_and_escapes() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hallo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("user:*:name", "user:42:name", true),
            ("user:*:name", "user:42:age", false),
            ("*a*b*c", "xxaxxbxxc", true),
            ("*a*b*c", "xxaxxcxxb", false),
            ("a", "ab", false),
            ("ab*", "a", false),
        ];
        for &(pattern, text, expected) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} ~ {text}"
            );
            assert_eq!(
                Glob::new(pattern.as_bytes()).matches(text.as_bytes()),
                expected,
                "{pattern} ~ {text}, compiled"
            );
        }
    }

    /// Cases read off Redis's `stringmatchlen` (util.c), where a glob could go either way.
    #[test]
    fn edge_cases_follow_redis_stringmatchlen() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            // The empty text: only the empty pattern and the lone `*` (skipped by the callers).
            (b"", b"", true),
            (b"", b"a", false),
            (b"**", b"", false),
            (b"a*", b"", false),
            (b"a**", b"a", true),
            // A range's end may be `]`: `[a-]` is `]`..=`a` and the class runs on, unclosed.
            (b"[a-]", b"]", true),
            (b"[a-]", b"^", true),
            (b"[a-]", b"-", false),
            (b"[a-]xyz", b"y", true),
            (b"[a-]xyz", b"axyz", false),
            // Escapes inside a class, and a `\` that ends the pattern.
            (b"[\\]]", b"]", true),
            (b"[\\-z]", b"-", true),
            (b"[\\-z]", b"m", false),
            (b"[a\\", b"\\", true),
            (b"a\\", b"a\\", true),
            // `]` first closes an empty class, which matches nothing.
            (b"[]a]", b"a]", false),
            (b"[^]a]", b"xa]", true),
            // Unclosed classes run to the end; a bare `[` matches nothing.
            (b"[abc", b"b", true),
            (b"[abc", b"bc", false),
            (b"x[", b"x[", false),
            (b"[^", b"q", true),
            (b"[^", b"", false),
            // A `-` that cannot start a range is a byte.
            (b"[-a]", b"-", true),
            (b"[a-", b"-", true),
            // Bytes, not characters; case matters.
            (b"?", "é".as_bytes(), false),
            (b"??", "é".as_bytes(), true),
            (b"[\x80-\xff]", b"\xc3", true),
            (b"HELLO", b"hello", false),
        ];
        for &(pattern, text, expected) in cases {
            assert_eq!(
                Glob::new(pattern).matches(text),
                expected,
                "{:?} ~ {:?}",
                String::from_utf8_lossy(pattern),
                String::from_utf8_lossy(text)
            );
            assert_eq!(matches(pattern, text), expected);
        }
    }

    /// Redis stops recursing below 1000 nested `*`s and then answers "no match"; a trailing `*`
    /// does not recurse.
    #[test]
    fn more_than_a_thousand_inner_stars_match_nothing_as_in_redis() {
        let at_limit = "*a".repeat(STAR_NESTING_MAX) + "*";
        let past_limit = "*a".repeat(STAR_NESTING_MAX + 1);
        let text = "a".repeat(2 * STAR_NESTING_MAX);
        assert!(Glob::new(at_limit.as_bytes()).matches(text.as_bytes()));
        assert!(!Glob::new(past_limit.as_bytes()).matches(text.as_bytes()));
        assert!(!matches(past_limit.as_bytes(), text.as_bytes()));
    }

    /// The bug: the matcher backtracked to the latest `*`, so `HSCAN key 0 MATCH` with `*` and
    /// 100,000 more bytes against a 200,000-byte field took O(p × t) = 2 × 10^10 steps (20 s,
    /// with every client of both protocols frozen behind it). Each of these patterns was such a
    /// worst case; now each is linear (or divided by 64, for the long middle segment with
    /// wildcards, whose size is kept so that debug builds stay fast).
    #[test]
    fn worst_cases_of_the_backtracking_matcher_finish_at_once() {
        let text = vec![b'a'; 200_000];
        let mut cases: Vec<(Vec<u8>, bool)> = Vec::new();
        let tail = |middle: &[u8], last: &[u8]| [b"*", middle, last].concat();
        // Last segment anchored at the end: plain, with `?`, with classes.
        cases.push((tail(&[b'a'; 100_000], b"b"), false));
        cases.push((tail(&b"a?".repeat(50_000), b""), true));
        cases.push((tail(&b"[ab]a".repeat(25_000), b"[^a]"), false));
        // Middle segments, found by memmem, by shift-and, and short ones tried in place.
        cases.push((tail(&[b'a'; 100_000], b"b*"), false));
        cases.push((tail(&[b'?'; 100_000], b"*b"), false));
        cases.push((tail(&b"a?[a-c]".repeat(1_000), b"b*"), false));
        cases.push((tail(&b"a?[a-c]".repeat(1_000), b"*a"), true));
        cases.push((
            [b"*".repeat(1000), b"a?*".repeat(999), b"b".to_vec()].concat(),
            false,
        ));
        for (pattern, expected) in cases {
            assert_eq!(Glob::new(&pattern).matches(&text), expected);
            assert_eq!(matches(&pattern, &text), expected);
        }
    }

    /// A pattern longer than the text is compiled only as far as the text is long.
    #[test]
    fn a_long_pattern_against_a_short_text_is_cut_short() {
        let pattern = "*?".repeat(1_000_000);
        assert!(!matches(pattern.as_bytes(), b"short"));
        assert!(matches(b"*?*", b"short"));
    }

    /// Small random patterns and texts over an alphabet of the special bytes, against a direct
    /// reading of Redis's rules (`reference`). `SEED` replays a run.
    #[test]
    fn random_patterns_agree_with_the_reference() {
        const PATTERN_ALPHABET: &[u8] = b"ab*?[]^-\\";
        const TEXT_ALPHABET: &[u8] = b"ab]-^\\*";
        let seed = crate::test_seed::seed("glob");
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
        for _ in 0..50_000 {
            let pattern = random_bytes(&mut rng, PATTERN_ALPHABET, 10);
            let text = random_bytes(&mut rng, TEXT_ALPHABET, 12);
            let expected = reference::matches(&pattern, &text);
            let (shown_pattern, shown_text) = (
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&text),
            );
            assert_eq!(
                Glob::new(&pattern).matches(&text),
                expected,
                "{shown_pattern:?} ~ {shown_text:?} (SEED={seed})"
            );
            assert_eq!(matches(&pattern, &text), expected, "one-shot (SEED={seed})");
        }
    }

    /// The same, with long segments, to exercise the bit-parallel search across words.
    #[test]
    fn random_long_segments_agree_with_the_reference() {
        let seed = crate::test_seed::seed("glob long-segment");
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
        for _ in 0..100 {
            let mut pattern = b"*".to_vec();
            for _ in 0..rand::Rng::random_range(&mut rng, 1..4) {
                let length = rand::Rng::random_range(&mut rng, 9..150);
                pattern.extend(random_bytes_exactly(&mut rng, b"ab?", length));
                pattern.push(b'*');
            }
            let text_length = rand::Rng::random_range(&mut rng, 0..400);
            let text = random_bytes_exactly(&mut rng, b"aab", text_length);
            assert_eq!(
                Glob::new(&pattern).matches(&text),
                reference::matches(&pattern, &text),
                "{:?} ~ {:?} (SEED={seed})",
                String::from_utf8_lossy(&pattern),
                String::from_utf8_lossy(&text)
            );
        }
    }

    /// The seed of a randomized test: `SEED` from the environment to replay a run, else one
    /// drawn from the clock; printed with the way to replay it.
    fn random_bytes(rng: &mut rand::rngs::SmallRng, alphabet: &[u8], length_max: usize) -> Vec<u8> {
        let length = rand::Rng::random_range(rng, 0..=length_max);
        random_bytes_exactly(rng, alphabet, length)
    }

    fn random_bytes_exactly(
        rng: &mut rand::rngs::SmallRng,
        alphabet: &[u8],
        length: usize,
    ) -> Vec<u8> {
        (0..length)
            .map(|_| alphabet[rand::Rng::random_range(rng, 0..alphabet.len())])
            .collect()
    }

    /// Redis's rules read directly off the pattern bytes, by dynamic programming over (pattern
    /// position, text position): O(p × t), and obviously what the rules say.
    mod reference {
        pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
            if pattern == b"*" {
                return true;
            }
            if text.is_empty() {
                return pattern.is_empty();
            }
            let (p, t) = (pattern.len(), text.len());
            // rest[i][j]: whether pattern[i..] matches text[j..].
            let mut rest = vec![vec![false; t + 1]; p + 1];
            rest[p][t] = true;
            for i in (0..p).rev() {
                for j in (0..=t).rev() {
                    rest[i][j] = if pattern[i] == b'*' {
                        rest[i + 1][j] || (j < t && rest[i][j + 1])
                    } else {
                        j < t
                            && one(&pattern[i..], text[j]).is_some_and(|next| rest[i + next][j + 1])
                    };
                }
            }
            rest[0][0]
        }

        /// Matches the element at the start of `pattern` against `byte`: where the pattern goes
        /// on, or `None`.
        fn one(pattern: &[u8], byte: u8) -> Option<usize> {
            match pattern[0] {
                b'?' => Some(1),
                b'\\' if pattern.len() >= 2 => (pattern[1] == byte).then_some(2),
                b'[' => {
                    let mut at = 1;
                    let negated = pattern.get(at) == Some(&b'^');
                    at += usize::from(negated);
                    let mut found = false;
                    loop {
                        let rest = &pattern[at..];
                        if rest.first() == Some(&b'\\') && rest.len() >= 2 {
                            found |= rest[1] == byte;
                            at += 2;
                        } else if rest.first() == Some(&b']') {
                            at += 1;
                            break;
                        } else if rest.is_empty() {
                            break;
                        } else if rest.len() >= 3 && rest[1] == b'-' {
                            let (low, high) = (rest[0].min(rest[2]), rest[0].max(rest[2]));
                            found |= low <= byte && byte <= high;
                            at += 3;
                        } else {
                            found |= rest[0] == byte;
                            at += 1;
                        }
                    }
                    (found != negated).then_some(at)
                }
                literal => (literal == byte).then_some(1),
            }
        }
    }
}
