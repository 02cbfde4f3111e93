//! `ipsecctl`: talks to a running ipsecd with setkey(8)'s own flags.
//!
//! ```text
//! ipsecctl -f FILE      carry out the setkey statements in FILE
//! ipsecctl -c           carry out setkey statements read from stdin
//! ipsecctl -D           dump SAs          ipsecctl -DP   dump policies
//! ipsecctl -F           flush SAs         ipsecctl -FP   flush policies
//! ipsecctl stats        every counter: global, per drop reason, per SA
//! ```

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use ipsecd::ctl::{call, Request, DEFAULT_SOCKET};

const USAGE: &str = "usage: ipsecctl [-s SOCKET] (-f FILE | -c | -D | -DP | -F | -FP | stats)";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut socket = PathBuf::from(DEFAULT_SOCKET);
    if let Some(i) = args.iter().position(|a| a == "-s") {
        if i + 1 >= args.len() {
            return usage("-s needs a socket path");
        }
        socket = PathBuf::from(args.remove(i + 1));
        args.remove(i);
    }
    let req = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["-f", file] => match std::fs::read_to_string(file) {
            Ok(t) => Request::Setkey(t),
            Err(e) => {
                eprintln!("ipsecctl: {file}: {e}");
                return ExitCode::from(1);
            }
        },
        ["-c"] => {
            let mut t = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut t) {
                eprintln!("ipsecctl: stdin: {e}");
                return ExitCode::from(1);
            }
            Request::Setkey(t)
        }
        ["-D"] => Request::Setkey("dump;".into()),
        ["-DP"] => Request::Setkey("spddump;".into()),
        ["-F"] => Request::Setkey("flush;".into()),
        ["-FP"] => Request::Setkey("spdflush;".into()),
        ["stats"] => Request::Stats,
        [] => return usage("nothing to do"),
        other => return usage(&format!("unknown arguments {other:?}")),
    };
    match call(&socket, &req) {
        Ok(Ok(text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok(Err(msg)) => {
            eprintln!("ipsecctl: {msg}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("ipsecctl: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("ipsecctl: {why}\n{USAGE}");
    ExitCode::from(2)
}
