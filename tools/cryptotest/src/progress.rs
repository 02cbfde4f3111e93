//! A one-line progress bar on stderr, for sweeps long enough to wonder about. Drawn only
//! when stderr is a terminal (never into a file or a pipe), and redrawn once per case, so
//! it costs nothing while a case is being measured.

use std::io::{IsTerminal, Write};

pub struct Progress {
    total: usize,
    done: usize,
    shown: bool,
}

impl Progress {
    /// A bar for `total` steps, shown if `wanted` and stderr is a terminal.
    pub fn new(total: usize, wanted: bool) -> Progress {
        Progress { total, done: 0, shown: wanted && std::io::stderr().is_terminal() }
    }

    /// Draws the bar with what is about to run.
    pub fn show(&self, what: &str) {
        if !self.shown {
            return;
        }
        const WIDTH: usize = 30;
        let filled = WIDTH * self.done / self.total.max(1);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K[{}{}] {}/{} {what}",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            self.done,
            self.total
        );
        let _ = err.flush();
    }

    pub fn step(&mut self) {
        self.done += 1;
    }

    /// Prints a note above the bar.
    pub fn note(&self, text: &str) {
        self.clear();
        eprintln!("note: {text}");
    }

    /// Removes the bar.
    pub fn clear(&self) {
        if self.shown {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}
