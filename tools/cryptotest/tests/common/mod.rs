//! What the tests of cryptotest from the outside share: running it, its output as text, its
//! `--json` cases.

#![allow(dead_code)] // not every test file uses every helper

use std::process::{Command, Output};

use serde_json::Value;

pub fn cryptotest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cryptotest")).args(args).output().expect("cryptotest runs")
}

pub fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Runs with `--json` and parses every stdout line.
pub fn json_cases(args: &[&str]) -> (Output, Vec<Value>) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = cryptotest(&all);
    let cases = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (out, cases)
}
