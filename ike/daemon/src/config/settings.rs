//! strongSwan's settings syntax (strongswan.conf(5), the syntax of swanctl.conf) read into a
//! tree of sections and settings, each with its line and column; no meaning yet.
//!
//! ```text
//! file     item*
//! item     name "{" item* "}"          a section
//!        | name "=" value              a setting; the value ends at a newline, '#' or '}'
//! name     [A-Za-z0-9_-]+
//! value    ( word | "quoted" )*         words joined by one space, as strongSwan joins them
//! quoted   "…" with \" \\ \n \t \r and a backslash before a newline joining lines
//! comment  '#' to the end of the line (not inside quotes)
//! ```
//!
//! `include` and section references (`name : other { }`) are strongSwan features this
//! reader refuses with their own errors. The reader is total: every input gives a tree or
//! an error (sections nest at most [`MAX_DEPTH`] deep, so that no input exhausts the stack).

use std::fmt;

/// How deep sections may nest (a swanctl.conf connection needs four levels:
/// connections, the connection, children, the child).
pub const MAX_DEPTH: usize = 16;

/// A 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

/// `name = value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub pos: Pos,
    pub value: String,
    /// Where the value starts (at the `=` if it is empty).
    pub value_pos: Pos,
}

/// `name { … }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub pos: Pos,
    pub items: Vec<Item>,
}

/// A section's content, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    Section(Section),
    Setting(Setting),
}

/// What is wrong with the syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyntaxError {
    /// A character that cannot start or continue a name here.
    UnexpectedChar(char),
    /// A name not followed by `=` or `{`.
    ExpectedEqualsOrBrace(String),
    /// The file ended inside a section.
    UnclosedSection(String),
    /// A `}` with no section open.
    UnmatchedBrace,
    /// The file ended inside a quoted value.
    UnterminatedString,
    /// Sections nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// `include`, not supported.
    Include,
    /// `name : template {`, not supported.
    Reference(String),
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyntaxError::UnexpectedChar(c) => write!(f, "unexpected {c:?}"),
            SyntaxError::ExpectedEqualsOrBrace(n) => write!(f, "expected '=' or '{{' after '{n}'"),
            SyntaxError::UnclosedSection(n) => write!(f, "section '{n}' is not closed (missing '}}')"),
            SyntaxError::UnmatchedBrace => write!(f, "'}}' without an open section"),
            SyntaxError::UnterminatedString => write!(f, "unterminated quoted string"),
            SyntaxError::TooDeep => write!(f, "sections nested more than {MAX_DEPTH} deep"),
            SyntaxError::Include => write!(f, "include is not supported: write the file out in one"),
            SyntaxError::Reference(n) => {
                write!(f, "section '{n}': references to other sections ('name : other') are not supported")
            }
        }
    }
}

/// A syntax error and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub pos: Pos,
    pub error: SyntaxError,
}

struct Scanner {
    chars: Vec<char>,
    i: usize,
    line: usize,
    column: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

impl Scanner {
    fn pos(&self) -> Pos {
        Pos { line: self.line, column: self.column }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn skip_comment(&mut self) {
        while self.peek().is_some_and(|c| c != '\n') {
            self.bump();
        }
    }

    /// Skips whitespace (newlines included) and comments.
    fn skip_blank(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.bump();
            } else if c == '#' {
                self.skip_comment();
            } else {
                break;
            }
        }
    }

    /// Skips spaces and tabs on the current line.
    fn skip_inline(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t' || c == '\r') {
            self.bump();
        }
    }

    fn err(&self, pos: Pos, error: SyntaxError) -> ParseError {
        ParseError { pos, error }
    }

    fn name(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek().filter(|&c| is_name_char(c)) {
            s.push(c);
            self.bump();
        }
        s
    }

    /// A quoted string, the opening quote already consumed.
    fn quoted(&mut self, start: Pos) -> Result<String, ParseError> {
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return Err(self.err(start, SyntaxError::UnterminatedString)),
                Some('"') => return Ok(s),
                Some('\\') => match self.bump() {
                    None => return Err(self.err(start, SyntaxError::UnterminatedString)),
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('r') => s.push('\r'),
                    Some('\n') => {}
                    Some(c) => s.push(c),
                },
                Some('\r') => {}
                Some(c) => s.push(c),
            }
        }
    }

    /// A value after `=`: words and quoted strings up to a newline, `#` or `}`.
    fn value(&mut self) -> Result<(String, Option<Pos>), ParseError> {
        let mut parts: Vec<String> = Vec::new();
        let mut first = None;
        loop {
            self.skip_inline();
            let pos = self.pos();
            match self.peek() {
                None | Some('\n') | Some('#') | Some('}') => break,
                Some('"') => {
                    self.bump();
                    parts.push(self.quoted(pos)?);
                }
                Some(_) => {
                    let mut w = String::new();
                    while let Some(c) =
                        self.peek().filter(|&c| !matches!(c, '#' | '}' | '"' | '\n' | ' ' | '\t' | '\r'))
                    {
                        w.push(c);
                        self.bump();
                    }
                    parts.push(w);
                }
            }
            first.get_or_insert(pos);
        }
        Ok((parts.join(" "), first))
    }

    /// The items of a section (or of the file, `open` = `None`) up to its `}` (or the end).
    fn items(&mut self, open: Option<(&str, Pos)>, depth: usize) -> Result<Vec<Item>, ParseError> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            let pos = self.pos();
            match self.peek() {
                None => {
                    return match open {
                        Some((name, at)) => Err(self.err(at, SyntaxError::UnclosedSection(name.to_string()))),
                        None => Ok(items),
                    }
                }
                Some('}') => {
                    if open.is_none() {
                        return Err(self.err(pos, SyntaxError::UnmatchedBrace));
                    }
                    self.bump();
                    return Ok(items);
                }
                Some(c) if !is_name_char(c) => return Err(self.err(pos, SyntaxError::UnexpectedChar(c))),
                Some(_) => {}
            }
            let name = self.name();
            self.skip_inline();
            if name == "include" && self.peek() != Some('=') {
                return Err(self.err(pos, SyntaxError::Include));
            }
            // A section's `{` may follow on the next line, as strongSwan allows.
            if !matches!(self.peek(), Some('=')) {
                self.skip_blank();
            }
            match self.peek() {
                Some('=') => {
                    let eq = self.pos();
                    self.bump();
                    let (value, vpos) = self.value()?;
                    items.push(Item::Setting(Setting {
                        key: name,
                        pos,
                        value,
                        value_pos: vpos.unwrap_or(eq),
                    }));
                }
                Some('{') => {
                    if depth >= MAX_DEPTH {
                        return Err(self.err(pos, SyntaxError::TooDeep));
                    }
                    self.bump();
                    let inner = self.items(Some((&name, pos)), depth + 1)?;
                    items.push(Item::Section(Section { name, pos, items: inner }));
                }
                Some(':') => return Err(self.err(pos, SyntaxError::Reference(name))),
                _ => return Err(self.err(pos, SyntaxError::ExpectedEqualsOrBrace(name))),
            }
        }
    }
}

/// Reads a file's text into its top-level items.
pub fn parse(text: &str) -> Result<Vec<Item>, ParseError> {
    let mut s = Scanner { chars: text.chars().collect(), i: 0, line: 1, column: 1 };
    s.items(None, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(items: &[Item], i: usize) -> &Setting {
        match &items[i] {
            Item::Setting(s) => s,
            other => panic!("not a setting: {other:?}"),
        }
    }

    fn section(items: &[Item], i: usize) -> &Section {
        match &items[i] {
            Item::Section(s) => s,
            other => panic!("not a section: {other:?}"),
        }
    }

    #[test]
    fn sections_settings_values() {
        let text = "# comment\nconnections {\n  gw {\n    id = C=CH, O=x,   CN=y # trailing\n    \
                    secret = \"a \\\"quoted\\\" # value\"\n    empty =\n    local { auth = psk }\n  }\n}\n";
        let items = parse(text).unwrap();
        let conns = section(&items, 0);
        assert_eq!((conns.name.as_str(), conns.pos), ("connections", Pos { line: 2, column: 1 }));
        let gw = section(&conns.items, 0);
        let id = setting(&gw.items, 0);
        assert_eq!(id.value, "C=CH, O=x, CN=y");
        assert_eq!((id.pos, id.value_pos), (Pos { line: 4, column: 5 }, Pos { line: 4, column: 10 }));
        assert_eq!(setting(&gw.items, 1).value, "a \"quoted\" # value");
        assert_eq!(setting(&gw.items, 2).value, "");
        let local = section(&gw.items, 3);
        assert_eq!(setting(&local.items, 0).value, "psk");
    }

    #[test]
    fn brace_on_next_line_and_joined_words() {
        let items = parse("a\n{\n b = x   y \"z  w\"\n}").unwrap();
        assert_eq!(setting(&section(&items, 0).items, 0).value, "x y z  w");
    }

    #[test]
    fn errors_with_positions() {
        let e = |t| parse(t).unwrap_err();
        let at = |line, column| Pos { line, column };
        assert_eq!(
            e("a {\n b = c\n"),
            ParseError { pos: at(1, 1), error: SyntaxError::UnclosedSection("a".into()) }
        );
        assert_eq!(e("a = b\n}"), ParseError { pos: at(2, 1), error: SyntaxError::UnmatchedBrace });
        assert_eq!(e("a = \"b\n"), ParseError { pos: at(1, 5), error: SyntaxError::UnterminatedString });
        assert_eq!(
            e("a {\n  b c\n}"),
            ParseError { pos: at(2, 3), error: SyntaxError::ExpectedEqualsOrBrace("b".into()) }
        );
        assert_eq!(
            e("a {\n  ?x = 1\n}"),
            ParseError { pos: at(2, 3), error: SyntaxError::UnexpectedChar('?') }
        );
        assert_eq!(e("include other.conf\n"), ParseError { pos: at(1, 1), error: SyntaxError::Include });
        assert_eq!(e("x : y {\n}"), ParseError { pos: at(1, 1), error: SyntaxError::Reference("x".into()) });
        let deep = "a {".repeat(MAX_DEPTH + 1);
        assert_eq!(e(&deep).error, SyntaxError::TooDeep);
        assert_eq!(e("a = \"b\\").error, SyntaxError::UnterminatedString);
    }
}
