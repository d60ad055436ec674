//! Any line given to `xq-engine judge --batch` is refused with an error or ruled.
#![no_main]

use libfuzzer_sys::fuzz_target;
use xq_engine::xiangqi::rules::{RuleSet, ViolationTiming};
use xq_engine::xiangqi::rules::judge::{JudgeRequest, judge};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(request) = JudgeRequest::from_json(line, RuleSet::Wxf, ViolationTiming::default()) {
        let _ = judge(&request);
    }
});
