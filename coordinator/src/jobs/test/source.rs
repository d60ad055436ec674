//! What a test tests, as its submitter says it ([`v1::TestSource`]): the repository
//! its engines were built from, each side's branch and commit, and a text. Checked at
//! creation (it is shown on the dashboard, where a repository is a link), and read for
//! a forge's page comparing the two sides.

use xq_proto::v1;

use crate::jobs::checks::{SpecError, bad, check_name};

/// The longest repository address.
const MAX_REPOSITORY_BYTES: usize = 300;
/// The longest branch or commit.
const MAX_REFERENCE_BYTES: usize = 200;
/// The longest info text.
pub const MAX_INFO_BYTES: usize = 4_000;

/// Checks a test's source: a repository is an http or https address (the dashboard
/// links to it: no `javascript:`), branches and commits are short and printable, and
/// the info text may hold line breaks but no other control characters.
pub fn check_source(source: &v1::TestSource) -> Result<(), SpecError> {
    let repository = &source.repository;
    check_name("source.repository", repository, MAX_REPOSITORY_BYTES)?;
    if !repository.is_empty() && !is_web_address(repository) {
        return Err(bad("source.repository", "an http or https address, such as https://github.com/owner/engine"));
    }
    for (field, text) in [
        ("source.new_branch", &source.new_branch),
        ("source.new_commit", &source.new_commit),
        ("source.base_branch", &source.base_branch),
        ("source.base_commit", &source.base_commit),
    ] {
        check_name(field, text, MAX_REFERENCE_BYTES)?;
        if text.contains(char::is_whitespace) {
            return Err(bad(field, "a branch or commit without spaces"));
        }
    }
    if source.info.len() > MAX_INFO_BYTES || source.info.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t')) {
        return Err(bad(
            "source.info",
            format!("at most {MAX_INFO_BYTES} bytes, no control characters but line breaks"),
        ));
    }
    Ok(())
}

/// Whether `text` is an http or https address with a host.
pub fn is_web_address(text: &str) -> bool {
    let rest = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"));
    rest.is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/') && !rest.contains(char::is_whitespace))
}

/// The forge's page comparing the base side with the new one (commits, else branches),
/// when the repository is on GitHub, GitLab or Codeberg and both sides are named.
pub fn compare_url(source: &v1::TestSource) -> Option<String> {
    let side = |commit: &str, branch: &str| if commit.is_empty() { branch.to_owned() } else { commit.to_owned() };
    let (base, new) = (side(&source.base_commit, &source.base_branch), side(&source.new_commit, &source.new_branch));
    if base.is_empty() || new.is_empty() {
        return None;
    }
    let repository = source.repository.trim_end_matches('/').trim_end_matches(".git");
    let host = repository.strip_prefix("https://")?.split('/').next()?;
    let compare = match host {
        "github.com" | "codeberg.org" => "compare",
        "gitlab.com" => "-/compare",
        _ => return None,
    };
    Some(format!("{repository}/{compare}/{base}...{new}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(repository: &str) -> v1::TestSource {
        v1::TestSource {
            repository: repository.to_owned(),
            new_branch: "tune-kings".to_owned(),
            new_commit: "9f1c2ab".to_owned(),
            base_branch: "master".to_owned(),
            base_commit: String::new(),
            info: "King safety terms retuned.\nSTC first.".to_owned(),
        }
    }

    #[test]
    fn a_known_forge_gets_a_compare_link_and_others_none() {
        assert_eq!(
            compare_url(&source("https://github.com/owner/engine")).as_deref(),
            Some("https://github.com/owner/engine/compare/master...9f1c2ab")
        );
        assert_eq!(
            compare_url(&source("https://gitlab.com/owner/engine.git")).as_deref(),
            Some("https://gitlab.com/owner/engine/-/compare/master...9f1c2ab")
        );
        assert_eq!(
            compare_url(&source("https://codeberg.org/owner/engine/")).as_deref(),
            Some("https://codeberg.org/owner/engine/compare/master...9f1c2ab")
        );
        assert_eq!(compare_url(&source("https://git.example.org/engine")), None);
        let one_sided = v1::TestSource { base_branch: String::new(), ..source("https://github.com/owner/engine") };
        assert_eq!(compare_url(&one_sided), None);
    }

    #[test]
    fn a_source_that_would_not_show_safely_is_refused() {
        assert!(check_source(&source("https://github.com/owner/engine")).is_ok());
        for (bad_source, field) in [
            (source("javascript:alert(1)"), "source.repository"),
            (source("https:///etc/passwd"), "source.repository"),
            (v1::TestSource { new_commit: "abc def".to_owned(), ..source("") }, "source.new_commit"),
            (v1::TestSource { info: "escape \u{1b}[2J".to_owned(), ..source("") }, "source.info"),
            (v1::TestSource { info: "x".repeat(MAX_INFO_BYTES + 1), ..source("") }, "source.info"),
        ] {
            assert_eq!(check_source(&bad_source).unwrap_err().field, field);
        }
    }
}
