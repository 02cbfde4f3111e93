//! `ipsecctl`: talks to a running ipsecd with setkey(8)'s own flags. See [`HELP`].

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use ipsecd::ctl::{call, read_body, Request, Wait, DEFAULT_SOCKET};
use ipsecd::ike_ctl::{self, Request as IkeRequest};

const USAGE: &str = "usage: ipsecctl [-s SOCKET] [--timeout SECONDS] [--keys] \
     (-f FILE | -c | -D | -DP | -F | -FP | stats | monitor)
       ipsecctl [--ike-socket SOCKET] [--timeout SECONDS] \
     ike (list [--raw] | up CONN | down CONN | rekey SA | stats | monitor)";

const HELP: &str = "\
Talks to a running ipsecd over its control socket, with setkey(8)'s flags.

  -f FILE      carry out the setkey statements in FILE
  -c           carry out setkey statements read from stdin
  -D           dump SAs (as setkey statements, each followed by a comment with its state,
               path MTU, driver and counters); keys are shown as (key not shown) unless
               --keys is given
  -DP          dump policies
  -F           flush SAs
  -FP          flush policies
  stats        every counter: I/O, totals, each drop reason, each SA, ocf's routing
               (per driver: requests by size class, model estimates), the control socket
  monitor      print ipsecd's events as they happen, one line each, until interrupted
               (as setkey -x or ip xfrm monitor do): SA soft and hard expiry, ACQUIRE,
               larval SAs that expired, ...; \"overflow lost=N\" if N were lost because
               this reader was too slow (--timeout does not apply)

  ike list     iked's IKE SAs and their CHILD_SAs, with their states
  ike list --raw
               the same, one field a line (\"ike CONN FIELD VALUE\", \"child CONN CHILD
               FIELD VALUE\") under swanctl --list-sas --raw's names, for scripts
  ike up CONN [--new]
               have iked initiate connection CONN (all its children: on its IKE SA
               if one is up, else a new one), or with --new another IKE SA (which,
               unless CONN says unique = never, replaces the older one once its
               CHILD_SA is up)
  ike down CONN
               have iked close connection CONN's IKE SAs (deleting their CHILD_SAs)
  ike rekey SA have iked rekey an IKE SA (its number in ike list, its SPI, or CONN:
               all of CONN's) or a CHILD_SA (CONN/CHILD, or its inbound SPI 0x...)
  ike stats    iked's counters: IKE messages per exchange and outcome, half-open SAs,
               cookies, retransmissions, authentication failures
  ike monitor  print iked's IKE events as they happen, one line each, until interrupted

  -s SOCKET          the control socket (default /run/ipsecd.sock)
  --ike-socket SOCKET
                     iked's control socket, for ike ... (default /run/iked.sock)
  --keys             print SAs with their keys (-D, and dump/get statements in -f or -c),
                     in setkey(8)'s form that can be fed back with -f
  --timeout SECONDS  give up after this long in all (default: wait as long as ipsecd
                     says it is working on the request; it says so every second)
  -h, --help         this text
  -V, --version      ipsecctl's version

A request holds at most 4 MiB (FILE or stdin: 4194297 bytes); more is refused before
anything is sent.

Exit status: 0 done; 1 ipsecd (or iked) refused the request (its reason on stderr) or could not be
reached; 2 bad arguments; 3 no reply came, so whether the request was applied is unknown
(look with -D and -DP).";

/// What the command line asks for.
enum Command {
    File(String),
    Stdin,
    Dump,
    DumpPolicies,
    Flush,
    FlushPolicies,
    Stats,
    Monitor,
    /// `ike …`: a request to iked.
    Ike(IkeRequest),
}

fn main() -> ExitCode {
    let mut socket = PathBuf::from(DEFAULT_SOCKET);
    let mut ike_socket = PathBuf::from(ike_ctl::DEFAULT_SOCKET);
    let mut wait = Wait::default();
    let mut keys = false;
    let mut new = false;
    let mut command: Option<(String, Command)> = None;
    let mut args = std::env::args().skip(1).peekable();
    while let Some(a) = args.next() {
        let c = match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}\n\n{HELP}");
                return ExitCode::SUCCESS;
            }
            "-V" | "--version" => {
                println!("ipsecctl {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            "-s" => {
                match args.next() {
                    Some(p) => socket = PathBuf::from(p),
                    None => return usage("-s needs a socket path"),
                }
                continue;
            }
            "--timeout" => {
                match args.next().as_deref().map(str::parse::<f64>) {
                    Some(Ok(s)) if s.is_finite() && s > 0.0 => wait.total = Some(Duration::from_secs_f64(s)),
                    _ => return usage("--timeout needs a number of seconds above 0"),
                }
                continue;
            }
            "--keys" => {
                keys = true;
                continue;
            }
            "--new" => {
                new = true;
                continue;
            }
            "--ike-socket" => {
                match args.next() {
                    Some(p) => ike_socket = PathBuf::from(p),
                    None => return usage("--ike-socket needs a socket path"),
                }
                continue;
            }
            "ike" => {
                let verb = args.next();
                let raw = verb.as_deref() == Some("list") && args.next_if(|a| a == "--raw").is_some();
                let mut arg = |what: &str| {
                    args.next().ok_or(format!("ike {} needs {what}", verb.as_deref().unwrap_or("")))
                };
                let r = match verb.as_deref() {
                    Some("list") if raw => Ok(IkeRequest::ListRaw),
                    Some("list") => Ok(IkeRequest::List),
                    Some("stats") => Ok(IkeRequest::Stats),
                    Some("monitor") => Ok(IkeRequest::Monitor),
                    Some("up") => arg("a connection name").map(|conn| IkeRequest::Up { conn, new: false }),
                    Some("down") => arg("a connection name").map(IkeRequest::Down),
                    Some("rekey") => arg("an SA").map(IkeRequest::Rekey),
                    Some(other) => Err(format!("unknown ike command {other:?}")),
                    None => Err("ike needs a command: list, up, down, rekey, stats or monitor".to_owned()),
                };
                match r {
                    Ok(r) => Command::Ike(r),
                    Err(e) => return usage(&e),
                }
            }
            "-f" => match args.next() {
                Some(file) => Command::File(file),
                None => return usage("-f needs a file"),
            },
            "-c" => Command::Stdin,
            "-D" => Command::Dump,
            "-DP" => Command::DumpPolicies,
            "-F" => Command::Flush,
            "-FP" => Command::FlushPolicies,
            "stats" => Command::Stats,
            "monitor" => Command::Monitor,
            other => return usage(&format!("unknown argument {other:?}")),
        };
        if let Some((first, _)) = &command {
            return usage(&format!("{first} and {a}: one command at a time"));
        }
        command = Some((a, c));
    }
    let Some((_, mut command)) = command else { return usage("nothing to do") };
    if new {
        match &mut command {
            Command::Ike(IkeRequest::Up { new, .. }) => *new = true,
            _ => return usage("--new goes with ike up only"),
        }
    }
    let setkey = |text: String| if keys { Request::SetkeyWithKeys(text) } else { Request::Setkey(text) };
    let req = match command {
        Command::File(file) => match std::fs::File::open(&file)
            .map_err(|e| format!("{file}: {e}"))
            .and_then(|f| read_body(f, &file))
        {
            Ok(t) => setkey(t),
            Err(e) => return fail(&e),
        },
        Command::Stdin => match read_body(std::io::stdin().lock(), "stdin") {
            Ok(t) => setkey(t),
            Err(e) => return fail(&e),
        },
        Command::Dump => setkey("dump;".into()),
        Command::DumpPolicies => setkey("spddump;".into()),
        Command::Flush => setkey("flush;".into()),
        Command::FlushPolicies => setkey("spdflush;".into()),
        Command::Stats => Request::Stats,
        Command::Monitor => return watch(&socket),
        Command::Ike(IkeRequest::Monitor) => return watch_ike(&ike_socket),
        Command::Ike(r) => return ike(&ike_socket, &r, wait),
    };
    match call(&socket, &req, wait) {
        Ok(Ok(text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok(Err(msg)) => fail(&msg),
        Err(e) if e.outcome_unknown() => {
            eprintln!("ipsecctl: {e}");
            ExitCode::from(3)
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// `monitor`: every event line to stdout, flushed at once (a pipe into a key manager or
/// `grep` sees each as it comes), until ipsecd goes or stdout closes.
fn watch(socket: &std::path::Path) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let r = ipsecd::ctl::monitor(socket, |line| writeln!(out, "{line}").and_then(|_| out.flush()).is_ok());
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// `ike …`: one request to iked, its reply on stdout.
fn ike(socket: &std::path::Path, req: &IkeRequest, wait: Wait) -> ExitCode {
    match ike_ctl::call(socket, req, wait) {
        Ok(Ok(text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Ok(Err(msg)) => fail(&msg),
        // ctl's messages for these name ipsecd and its dump: say it of iked instead.
        Err(e) if e.outcome_unknown() => {
            eprintln!("ipsecctl: no reply from iked at {}; whether it was done is unknown", socket.display());
            ExitCode::from(3)
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// `ike monitor`: iked's event lines to stdout, as `monitor` does for ipsecd's.
fn watch_ike(socket: &std::path::Path) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match ike_ctl::monitor(socket, |line| writeln!(out, "{line}").and_then(|_| out.flush()).is_ok()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("ipsecctl: {msg}");
    ExitCode::from(1)
}

fn usage(why: &str) -> ExitCode {
    eprintln!("ipsecctl: {why}\n{USAGE}\n(ipsecctl --help says more)");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    /// The limit printed in the help is the one the code enforces.
    use ipsecd::ctl::{MAX_REQUEST, MAX_SETKEY_BODY};

    #[test]
    fn help_names_the_limits() {
        assert!(super::HELP.contains(&format!("{MAX_SETKEY_BODY} bytes")));
        assert_eq!(MAX_REQUEST, 4 << 20, "the help says 4 MiB");
    }
}
