//! Plain names: what users, machines and net lineages are called, shown as they are on
//! pages, in logs, in terminals and in file names, so none may hold markup, spaces,
//! control or look-alike characters.

/// Whether `text` is 1 to `max` bytes of ASCII letters, digits and the characters of
/// `punctuation`.
pub fn is_plain_name(text: &str, max: usize, punctuation: &str) -> bool {
    !text.is_empty() && text.len() <= max && text.chars().all(|c| c.is_ascii_alphanumeric() || punctuation.contains(c))
}

#[cfg(test)]
mod tests {
    use super::is_plain_name;

    #[test]
    fn a_plain_name_is_short_ascii_with_the_punctuation_allowed() {
        assert!(is_plain_name("loop59-gen2", 64, "._-"));
        assert!(is_plain_name(&"a".repeat(64), 64, ""));
        for refused in ["", "loop 59", "gen/2", "<b>", "lоop" /* a Cyrillic o */, "tab\there"] {
            assert!(!is_plain_name(refused, 64, "._-"), "{refused:?}");
        }
        assert!(!is_plain_name(&"a".repeat(65), 64, ""));
        assert!(!is_plain_name("v1.2", 64, "_-"), "only the punctuation given");
    }
}
