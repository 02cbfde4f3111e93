//! Where ipsecd's log goes and how it looks: `tracing` lines on stderr, filtered by
//! `RUST_LOG` (default `info`), in colour only where a person reads them.
//!
//! ```text
//!  tracing::warn!(…) ─► fmt layer ─► stderr
//!                        └ ANSI colours: stderr is a terminal and NO_COLOR is unset or empty
//! ```
//!
//! Why: `tracing-subscriber` colours by default, so a log redirected to a file or read by
//! journald carried escape sequences (`\x1b[2m…\x1b[0m`) that grep and editors show as
//! noise. `NO_COLOR` is <https://no-color.org>'s convention: present and not empty turns
//! colours off even on a terminal.

use std::ffi::OsStr;
use std::io::IsTerminal;

use tracing_subscriber::util::SubscriberInitExt;

/// Whether log lines carry ANSI colours: only on a terminal, and not when `NO_COLOR` (its
/// value given here) is present and not empty.
pub fn colours(terminal: bool, no_color: Option<&OsStr>) -> bool {
    terminal && no_color.is_none_or(OsStr::is_empty)
}

/// Installs the log for the process: stderr, `RUST_LOG` or `info`, colours by [`colours`].
pub fn init() {
    let ansi = colours(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    subscriber(std::io::stderr, ansi).init();
}

/// The subscriber [`init`] installs, writing to `writer`.
fn subscriber<W>(writer: W, ansi: bool) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(writer)
        .with_ansi(ansi)
        .finish()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// NO_COLOR's rule: present and not empty turns colours off; a pipe or a file never
    /// gets them.
    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some(OsStr::new(""))));
        assert!(!colours(true, Some(OsStr::new("1"))));
        assert!(!colours(true, Some(OsStr::new("false"))), "any non-empty value");
        assert!(!colours(false, None));
        assert!(!colours(false, Some(OsStr::new(""))));
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(ansi: bool) -> String {
        let out = Captured::default();
        let w = out.clone();
        let sub = subscriber(move || w.clone(), ansi);
        tracing::subscriber::with_default(sub, || tracing::warn!(spi = 0x1001, "a warning for a file"));
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text
    }

    /// What goes to a file or a pipe (stderr not a terminal) has no escape sequence; the
    /// same line for a terminal has them (so the check can fail).
    #[test]
    fn a_log_for_a_file_has_no_escapes() {
        let plain = logged(colours(false, None));
        assert!(plain.contains("WARN") && plain.contains("a warning for a file"), "{plain:?}");
        assert!(!plain.contains('\x1b'), "{plain:?}");
        let coloured = logged(colours(true, None));
        assert!(coloured.contains("\x1b["), "{coloured:?}");
    }
}
