//! Redis's glob patterns (KEYS, SCAN MATCH, HSCAN MATCH, ...): `*` any run of bytes, `?` one
//! byte, `[abc]`, `[^abc]` and `[a-z]` classes, `\x` the byte `x`. Bytes, not characters, as
//! in Redis.
//!
//! Matching backtracks only to the latest `*`, so it takes O(pattern × text) steps at worst,
//! whatever the pattern.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // After a `*`: where the pattern resumes, and the text position it was tried from.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                p += 1;
                star = Some((p, t));
                continue;
            }
            Some(_) => {
                if let Some(next_p) = match_one(pattern, p, text[t]) {
                    p = next_p;
                    t += 1;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((star_p, star_t)) => {
                p = star_p;
                t = star_t + 1;
                star = Some((star_p, star_t + 1));
            }
            None => return false,
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&b| b == b'*')
}

/// Matches the pattern element at `p` (not `*`) against `byte`; the position after it, or
/// `None` if it does not match.
fn match_one(pattern: &[u8], p: usize, byte: u8) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'[' => match_class(pattern, p + 1, byte),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == byte).then_some(p + 2),
        literal => (literal == byte).then_some(p + 1),
    }
}

/// Matches a class whose body starts at `p` (after `[`); an unclosed class runs to the end.
fn match_class(pattern: &[u8], mut p: usize, byte: u8) -> Option<usize> {
    let negated = pattern.get(p) == Some(&b'^');
    if negated {
        p += 1;
    }
    let mut found = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            found |= pattern[p + 1] == byte;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (low, high) = (
                pattern[p].min(pattern[p + 2]),
                pattern[p].max(pattern[p + 2]),
            );
            found |= (low..=high).contains(&byte);
            p += 3;
        } else {
            found |= pattern[p] == byte;
            p += 1;
        }
    }
    let after = (p + 1).min(pattern.len());
    (found != negated).then_some(after)
}

#[cfg(test)]
mod tests {
    use super::matches;

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
        }
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = "*a".repeat(30) + "b";
        let text = "a".repeat(5000);
        assert!(!matches(pattern.as_bytes(), text.as_bytes()));
    }
}
