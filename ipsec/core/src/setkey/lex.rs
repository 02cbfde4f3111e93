//! The setkey lexer: words, quoted strings and `;`, each with its line and column, blanks
//! and `#` comments skipped. Everything finer (addresses, prefixes, ports, policy rules) is
//! split out of a word ([`Piece`]) by the parser, which knows what it expects there.
//! Tokens and pieces make the errors that point at them, which never quote key material.

use super::SetkeyError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind<'a> {
    Word(&'a str),
    /// The text between the quotes.
    Quoted(&'a str),
    Semi,
    Eof,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Tok<'a> {
    pub(super) kind: Kind<'a>,
    pub(super) line: usize,
    pub(super) col: usize,
}

impl<'a> Tok<'a> {
    pub(super) fn err(&self, message: impl Into<String>) -> SetkeyError {
        SetkeyError { line: self.line, column: self.col, message: message.into() }
    }

    pub(super) fn expected(&self, what: &str) -> SetkeyError {
        self.err(format!("expected {what}, found {}", self.describe()))
    }

    /// Like [`Tok::expected`], for a place where a key may stand: a word there may be a
    /// mistyped key, so it is not quoted back.
    pub(super) fn expected_key(&self, what: &str) -> SetkeyError {
        match self.kind {
            Kind::Word(w) if !w.starts_with('-') => {
                self.err(format!("expected {what}, found a word that is neither hex (0x…) nor quoted"))
            }
            _ => self.expected(what),
        }
    }

    pub(super) fn describe(&self) -> String {
        match self.kind {
            // Longer than any SPI: a key, which is not repeated in messages.
            Kind::Word(w) if is_hex_prefixed(w) && w.len() > 10 => "a hex string".to_string(),
            Kind::Word(w) => quote(w),
            Kind::Quoted(_) => "a quoted string".to_string(),
            Kind::Semi => "`;`".to_string(),
            Kind::Eof => "the end of the input".to_string(),
        }
    }

    pub(super) fn word(&self) -> Option<&'a str> {
        match self.kind {
            Kind::Word(w) => Some(w),
            _ => None,
        }
    }

    pub(super) fn piece(&self) -> Option<Piece<'a>> {
        self.word().map(|text| Piece { text, line: self.line, col: self.col })
    }

    pub(super) fn is_word(&self, w: &str) -> bool {
        self.word() == Some(w)
    }
}

/// `text` in backquotes for a message, shortened if long, control characters escaped.
pub(super) fn quote(text: &str) -> String {
    const MAX: usize = 40;
    let shown: String = text.chars().take(MAX).collect();
    let more = if text.chars().count() > MAX { "…" } else { "" };
    format!("`{}{more}`", shown.escape_debug())
}

pub(super) fn is_hex_prefixed(w: &str) -> bool {
    w.starts_with("0x") || w.starts_with("0X")
}

pub(super) struct Lexer<'a> {
    src: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    line: usize,
    col: usize,
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `src` (line 1, column 1).
    pub(super) fn new(src: &'a str) -> Lexer<'a> {
        Lexer { src, pos: 0, line: 1, col: 1 }
    }

    fn peek_char(&self) -> Option<char> {
        self.src.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    /// The next token: a word, a quoted string, `;` or the end (blanks and `#` comments
    /// skipped).
    pub(super) fn next(&mut self) -> Result<Tok<'a>, SetkeyError> {
        // Blanks and comments.
        while let Some(c) = self.peek_char() {
            if c == '#' {
                while self.peek_char().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
        let (line, col, start) = (self.line, self.col, self.pos);
        let tok = |kind| Tok { kind, line, col };
        match self.peek_char() {
            None => Ok(tok(Kind::Eof)),
            Some(';') => {
                self.bump();
                Ok(tok(Kind::Semi))
            }
            Some('"') => {
                self.bump();
                let body = self.pos;
                loop {
                    match self.bump() {
                        Some('"') => break,
                        // A quote left open would otherwise swallow the rest of the file and
                        // report an error far from the mistake.
                        Some('\n') | None => {
                            return Err(SetkeyError {
                                line,
                                column: col,
                                message:
                                    "unterminated string: a quoted string must end with `\"` on the line \
                                          it starts"
                                        .to_string(),
                            })
                        }
                        Some(_) => {}
                    }
                }
                let text = self.src.get(body..self.pos - 1).unwrap_or("");
                Ok(tok(Kind::Quoted(text)))
            }
            Some(_) => {
                while self.peek_char().is_some_and(|c| !(c.is_whitespace() || matches!(c, ';' | '#' | '"'))) {
                    self.bump();
                }
                Ok(tok(Kind::Word(self.src.get(start..self.pos).unwrap_or(""))))
            }
        }
    }
}

/// Part of a word, with the position of its first character (words never span lines).
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece<'a> {
    pub(super) text: &'a str,
    pub(super) line: usize,
    pub(super) col: usize,
}

impl<'a> Piece<'a> {
    /// Splits at the first `c`; the right part starts after it.
    pub(super) fn split_once(self, c: char) -> Option<(Piece<'a>, Piece<'a>)> {
        let (a, b) = self.text.split_once(c)?;
        let right = Piece { text: b, line: self.line, col: self.col + a.chars().count() + 1 };
        Some((Piece { text: a, ..self }, right))
    }

    pub(super) fn err(&self, message: impl Into<String>) -> SetkeyError {
        SetkeyError { line: self.line, column: self.col, message: message.into() }
    }

    pub(super) fn expected(&self, what: &str) -> SetkeyError {
        let found = if self.text.is_empty() { "nothing".to_string() } else { quote(self.text) };
        self.err(format!("expected {what}, found {found}"))
    }
}

/// A non-empty string of decimal digits as a number (no sign, no spaces, as setkey's lexer).
pub(super) fn decimal<T: std::str::FromStr>(text: &str) -> Option<T> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(src: &str) -> Vec<(Kind<'_>, usize, usize)> {
        let mut lex = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = lex.next().unwrap();
            out.push((t.kind, t.line, t.col));
            if t.kind == Kind::Eof {
                return out;
            }
        }
    }

    #[test]
    fn lexer_positions() {
        assert_eq!(
            tokens("add\t\"k;#\" x;# c\n  ;é;"),
            vec![
                (Kind::Word("add"), 1, 1),
                (Kind::Quoted("k;#"), 1, 5),
                (Kind::Word("x"), 1, 11),
                (Kind::Semi, 1, 12),
                (Kind::Semi, 2, 3),
                (Kind::Word("é"), 2, 4),
                (Kind::Semi, 2, 5),
                (Kind::Eof, 2, 6),
            ]
        );
        assert_eq!(
            tokens("a\"b\""),
            vec![(Kind::Word("a"), 1, 1), (Kind::Quoted("b"), 1, 2), (Kind::Eof, 1, 5)]
        );
        assert_eq!(tokens(""), vec![(Kind::Eof, 1, 1)]);
    }

    #[test]
    fn pieces_know_their_columns() {
        let p = Piece { text: "ü1/24[80]", line: 4, col: 10 };
        let (a, b) = p.split_once('/').unwrap();
        assert_eq!((a.text, a.col, b.text, b.col), ("ü1", 10, "24[80]", 13));
        let (c, d) = b.split_once('[').unwrap();
        assert_eq!((c.col, d.text, d.col), (13, "80]", 16));
    }

    #[test]
    fn message_helpers() {
        assert_eq!(quote("a\u{0}b"), "`a\\0b`");
        assert_eq!(quote(&"x".repeat(41)), format!("`{}…`", "x".repeat(40)));
        assert_eq!(decimal::<u8>("255"), Some(255));
        assert_eq!(decimal::<u8>("256"), None);
        assert_eq!(decimal::<u8>("+1"), None);
        assert_eq!(decimal::<u8>(""), None);
    }
}
