//! A parser for NIST CAVP response files (`.rsp`) and the RFC vector files written in the
//! same format (`vectors/rfc/*.txt`).
//!
//! The format: `#` comments; section headers in brackets, either a bare word (`[ENCRYPT]`)
//! or a parameter (`[Keylen = 128]`), several of which may stand together; then entries
//! separated by blank lines, each made of `NAME = value` lines and bare markers such as
//! `FAIL` (gcmDecrypt files). A run of bracket lines after an entry replaces the whole
//! header set. Names are matched ignoring ASCII case (`COUNT` in AESAVS, `Count` in GCMVS).

use crate::hex;

/// One entry (one `COUNT` block) with the section headers in force where it stood.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The bracket headers in force: `("ENCRYPT", "")`, `("Taglen", "128")`, …
    pub headers: Vec<(String, String)>,
    /// The `NAME = value` lines, in file order.
    pub fields: Vec<(String, String)>,
    /// Bare words on lines of their own (`FAIL`).
    pub markers: Vec<String>,
    /// 1-based line number of the entry's first line, for messages.
    pub line: usize,
}

/// A syntax or content problem, with where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RspError {
    pub line: usize,
    pub what: String,
}

impl std::fmt::Display for RspError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl Entry {
    /// The value of field `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The value of field `name`, which must be present.
    pub fn text(&self, name: &str) -> Result<&str, RspError> {
        self.get(name).ok_or_else(|| self.error(format!("no {name} field")))
    }

    /// Field `name` decoded from hex.
    pub fn hex(&self, name: &str) -> Result<Vec<u8>, RspError> {
        hex::decode(self.text(name)?).map_err(|e| self.error(format!("{name}: {e}")))
    }

    /// Field `name` as a decimal number.
    pub fn number(&self, name: &str) -> Result<usize, RspError> {
        let v = self.text(name)?;
        v.parse().map_err(|_| self.error(format!("{name} = {v:?} is not a number")))
    }

    /// Whether a bare marker (`FAIL`) is present.
    pub fn has_marker(&self, marker: &str) -> bool {
        self.markers.iter().any(|m| m.eq_ignore_ascii_case(marker))
    }

    /// Whether a bare section header (`[ENCRYPT]`) is in force.
    pub fn in_section(&self, word: &str) -> bool {
        self.headers.iter().any(|(k, v)| v.is_empty() && k.eq_ignore_ascii_case(word))
    }

    /// The value of a parameter header (`[Taglen = 128]`) in force.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// A parameter header as a decimal number; it must be present.
    pub fn header_number(&self, name: &str) -> Result<usize, RspError> {
        let v = self.header(name).ok_or_else(|| self.error(format!("no [{name} = …] header")))?;
        v.parse().map_err(|_| self.error(format!("[{name} = {v:?}] is not a number")))
    }

    /// A short label for case names: the bare section headers and the count, e.g.
    /// `[DECRYPT] COUNT = 3`, or `line N` for files without counts.
    pub fn label(&self) -> String {
        let mut label = String::new();
        for (k, v) in &self.headers {
            if v.is_empty() {
                label.push_str(&format!("[{k}] "));
            } else {
                label.push_str(&format!("[{k}={v}] "));
            }
        }
        match self.get("COUNT") {
            Some(c) => label.push_str(&format!("COUNT = {c}")),
            None => label.push_str(&format!("line {}", self.line)),
        }
        label
    }

    /// An error about this entry.
    pub fn error(&self, what: String) -> RspError {
        RspError { line: self.line, what }
    }
}

/// Parses a whole file into entries.
pub fn parse(text: &str) -> Result<Vec<Entry>, RspError> {
    let mut entries = Vec::new();
    let mut headers: Vec<(String, String)> = Vec::new();
    // Whether the last non-blank line was a header: consecutive headers accumulate, a
    // header after an entry starts a new header set.
    let mut in_header_run = false;
    let mut current: Option<Entry> = None;

    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.trim();
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            entries.extend(current.take());
            continue;
        }
        if let Some(inner) = line.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| RspError { line: line_no, what: format!("unclosed header {line:?}") })?;
            entries.extend(current.take());
            if !in_header_run {
                headers.clear();
            }
            in_header_run = true;
            let (k, v) = match inner.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => (inner.trim(), ""),
            };
            headers.push((k.to_owned(), v.to_owned()));
            continue;
        }
        in_header_run = false;
        let entry = current.get_or_insert_with(|| Entry {
            headers: headers.clone(),
            fields: Vec::new(),
            markers: Vec::new(),
            line: line_no,
        });
        match line.split_once('=') {
            Some((k, v)) => entry.fields.push((k.trim().to_owned(), v.trim().to_owned())),
            None if line.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                entry.markers.push(line.to_owned())
            }
            None => return Err(RspError { line: line_no, what: format!("unrecognised line {line:?}") }),
        }
    }
    entries.extend(current.take());
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_entries_and_markers() {
        let text = "# comment\r\n\r\n[Keylen = 128]\r\n[IVlen = 96]\r\n\r\nCount = 0\r\nKey = 00ff\r\nCT = \r\nFAIL\r\n\r\nCount = 1\r\nKey = 01\r\n\r\n[Keylen = 256]\r\n[IVlen = 8]\r\nCount = 0\r\nKey = 02\r\n";
        let e = parse(text).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].header("ivlen"), Some("96"));
        assert!(e[0].has_marker("FAIL"));
        assert_eq!(e[0].hex("CT").unwrap(), Vec::<u8>::new());
        assert_eq!(e[0].hex("KEY").unwrap(), vec![0, 0xff]);
        assert!(!e[1].has_marker("FAIL"));
        assert_eq!(e[2].header_number("Keylen").unwrap(), 256);
        assert_eq!(e[2].headers.len(), 2, "a new header run replaces the old one");
    }

    #[test]
    fn bare_sections_switch_between_entries() {
        let e = parse("[ENCRYPT]\nCOUNT = 0\nKEY = 00\n\n[DECRYPT]\nCOUNT = 0\nKEY = 01\n").unwrap();
        assert!(e[0].in_section("ENCRYPT") && !e[0].in_section("DECRYPT"));
        assert!(e[1].in_section("DECRYPT") && !e[1].in_section("ENCRYPT"));
        assert_eq!(e[1].label(), "[DECRYPT] COUNT = 0");
    }

    #[test]
    fn reports_bad_lines_with_their_number() {
        assert_eq!(parse("COUNT = 0\nwhat is this?\n").unwrap_err().line, 2);
        assert!(parse("[ENCRYPT\n").is_err());
    }
}
