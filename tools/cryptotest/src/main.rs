//! # cryptotest — ocf's benchmark and verification tool
//!
//! Measures throughput by operand size for every driver and algorithm asked for, the way
//! the `cryptotest` of Leffler's "Cryptographic Device Support for FreeBSD" did (Tables 5–8),
//! with what that paper and later users' measurements used to explain
//! their figures: user and system CPU time and voluntary/involuntary context switches per
//! case (getrusage), the per-stage profile of Table 1 (`-p`), and `openssl speed
//! -elapsed` run side by side (`--openssl`). `--verify` checks every result against the
//! reference driver.
//!
//! `-d auto` adds a column in which ocf routes each request among the other drivers listed
//! (a framework of their own, with `--policy`); each auto case also reports how many
//! requests each driver took per size class, and with `--oracle` the static splits it is
//! compared with. `-s` takes size distributions as well as sizes (`imix`, `16..16384`).
//!
//! Public-key algorithms (`-a rsa2048,ecdsap256,ecdhx25519,…`, `openssl speed`'s names)
//! are measured per operation, in operations per second (sign/s, verify/s, op/s), with
//! keys made once per algorithm through `Framework::generate_key`; `--openssl` runs
//! `openssl speed NAME` once per algorithm and gives the ratio per operation; an auto
//! case per operation shows which driver took it. `-a random` measures random bytes
//! (MB/s) per size on every driver given that serves them.
//!
//! The modules: [`algs`] (names → sessions), [`pubkey`] (a public-key case's keys,
//! requests and checks), [`drivers`] (names → registered drivers),
//! [`sizes`] (`-s` values and their sequences), [`bench`] (measuring one case), [`oracle`]
//! (the static splits), [`routing`] (an auto case's routing and oracle tables), [`openssl`],
//! [`report`] (tables and JSON), [`units`] (how figures are written), [`plot`], [`rusage`],
//! [`progress`].
//!
//! Exit status: 0 when every case ran cleanly; 1 when a result failed verification or a
//! request failed (or the plot could not be written at the end); 2 for bad arguments
//! (a `--plot` path that cannot be written is one, found before anything is measured).

#![forbid(unsafe_code)]

mod algs;
mod bench;
mod drivers;
mod openssl;
mod oracle;
mod plot;
mod progress;
mod pubkey;
mod report;
mod routing;
mod rusage;
mod sizes;
mod units;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use ocf::{Config, Framework, Policy};

use crate::algs::Kind;
use crate::bench::{CaseResult, CaseSpec, Limit, PkCase, Skipped, Target};
use crate::drivers::{DriverSpec, NameKind, AUTO};
use crate::report::{Clock, Row, Unit};
use crate::routing::{Oracle, Routing};
use crate::sizes::SizeSpec;

/// Operand sizes when `-s` is not given: Table 5's.
const DEFAULT_SIZES: [usize; 11] = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192];
const DEFAULT_SECONDS: f64 = 1.0;

/// The sweep `cryptotest` runs with no options at all (the README's main job): each of
/// this machine's kinds of driver alone — the CPU, the multi-buffer CPU driver where
/// IPsec-MB is built in (skipped, with the reason, where not), a simulated modern card —
/// and `auto`, ocf choosing among them per request; the summary at the end says which
/// driver won which sizes and what auto chose. In runs of 16 handed over whole, as the
/// gateway hands ocf a batch of packets: the shape in which each driver has its case (mb's
/// engines need several buffers at once; a lone request on mb runs on soft's code, so
/// with `--batch 1` soft and mb tie and auto's choice shows nothing). Three algorithms,
/// three sizes: AES-CBC+HMAC (mb wins from about 256 B), AES-GCM (close), and
/// ChaCha20-Poly1305 (mb has none: auto routes around it). 3DES is left out: mb wins it
/// by 9x, but at 8 KiB a 0.1 s case is one or two dozen runs, too few for auto to learn
/// from (a trial at 0.075 s sent 57% of them to the card). About as long as the sweep
/// before it (32 cases of 0.1 s; now 33).
const QUICK_DRIVERS: [&str; 4] = ["soft", "mb", "sim:qat-like", "auto"];
const QUICK_ALGS: [&str; 3] = ["aes-128-gcm", "aes-128-cbc-hmac-sha1", "chacha20-poly1305"];
const QUICK_SIZES: [usize; 3] = [16, 1024, 8192];
const QUICK_BATCH: u16 = 16;
const QUICK_SECONDS: f64 = 0.1;

#[derive(Parser, Debug)]
#[command(
    name = "cryptotest",
    version,
    about = "Measure and verify ocf drivers: throughput by operand size, CPU time, context switches, \
             per-stage profiles, openssl speed side by side.",
    after_help = "With no options: a few-second sweep of soft, mb, a simulated card and auto choosing among them.\n\n\
                  Examples:\n  \
                  cryptotest -d soft -a aes-128-gcm -s 16,1024,8192 --openssl\n  \
                  cryptotest -d soft -d sim:bcm5822 -a des-ede3-cbc -a sha1 -T 0.5\n  \
                  cryptotest -d sim:hifn7951 -a des-ede3-cbc -s 1024 -t 28 -p\n  \
                  cryptotest -a all --verify -n 1000 --json > results.jsonl\n  \
                  cryptotest -d soft -d sim:bcm5822 -d auto -a des-ede3-cbc-hmac-sha1 -s imix,64..8k --oracle\n  \
                  cryptotest -d soft -d sim:hifn7951 -d sim:hifn7951 -d auto -a des-ede3-cbc -s 1k -t 8"
)]
struct Cli {
    /// Driver to measure: soft, null, sim:PROFILE, afalg, mb (multi-buffer AES-CBC/CTR, 3DES, HMAC-SHA1/2, cipher+HMAC, AES-GCM; use --batch N, and --direct for runs handed over whole), hwrng (hardware random sources, health-tested; random only), all, or auto (repeatable). Default: soft.
    /// Each sim:PROFILE is a card of its own (twice: two cards, the second named
    /// sim:PROFILE#2). auto: a column in which ocf chooses per request among the other
    /// drivers given (not null; not soft unless given), by --policy.
    #[arg(short = 'd', long = "driver", value_name = "NAME")]
    drivers: Vec<String>,
    /// Algorithm, openssl-style (aes-128-gcm, sha256, hmac-sha1, aes-128-cbc-hmac-sha1, …),
    /// public-key as openssl speed names them (rsa2048, ecdsap256, ecdhp256, ecdhx25519,
    /// ed25519, ffdh2048, …; modexp2048, mlkem768), random, or all (repeatable, or
    /// comma-separated). Default: the main symmetric ones. Public-key cases are measured
    /// per operation (-s does not apply), random per size.
    #[arg(short = 'a', long = "alg", value_name = "NAME", value_delimiter = ',')]
    algs: Vec<String>,
    /// Measure decryption instead of encryption (decompression for deflate; digests are unaffected).
    #[arg(long)]
    decrypt: bool,
    /// Operand sizes in bytes, comma-separated (1k = 1024), or size distributions: imix (40,
    /// 576 and 1500 bytes weighted 7:4:1) or A..B (log-uniform from A to B bytes). Each is a
    /// row; a distribution's throughput counts the bytes done. Each thread cycles through its
    /// own 4096 precomputed sizes (seeded by thread, the same for every driver). For a block
    /// cipher a distribution's sizes are rounded up to whole blocks (down where that would
    /// pass B); a fixed size that is not whole blocks is skipped. Default: 8,16,32,…,8192.
    #[arg(short = 's', long, value_name = "LIST", value_delimiter = ',', value_parser = SizeSpec::parse)]
    sizes: Vec<SizeSpec>,
    /// Threads submitting at once, each with its own session.
    #[arg(short = 't', long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,
    /// Seconds per case (default 1).
    #[arg(short = 'T', long, value_name = "S", conflicts_with = "count", value_parser = parse_seconds)]
    seconds: Option<f64>,
    /// Operations per case, shared among the threads, instead of a time.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Submit N batchable requests at once (through the dispatch worker, with the hint that
    /// more follow) and wait for them; 1: one request at a time, directly.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4096))]
    batch: u16,
    /// With --batch N: hand each batch to the driver whole, in the measuring thread
    /// (`Session::run_batch`, as ipsecd does with a run of packets), instead of through the
    /// dispatch worker
    #[arg(long, requires = "batch")]
    direct: bool,
    /// Profile every request and print the per-stage table (Table 1 of "Cryptographic Device Support for FreeBSD").
    #[arg(short = 'p', long)]
    profile: bool,
    /// Check every result against the reference driver (soft); a mismatch makes the exit
    /// status 1. Public key: deterministic results compared (a derive with the peer's),
    /// ECDSA signatures verified and ML-KEM ciphertexts decapsulated after the clock (up
    /// to 256 per thread). random: each result must differ from the one before it.
    #[arg(long)]
    verify: bool,
    /// The routing policy of the auto column: cost-model, priority, least-loaded or
    /// round-robin.
    #[arg(long, value_name = "NAME", default_value_t = Policy::CostModel, value_parser = parse_policy)]
    policy: Policy,
    /// For every auto case, also run static splits between the drivers and report the best
    /// and auto ÷ best. A = the first driver auto routes to, B = the others (round-robin).
    /// Distributions: every power-of-two threshold in their range (smaller requests to A),
    /// plus all-A and all-B; fixed sizes: 0%, 10%, …, 100% of the requests to B. Each split
    /// runs as long as the case (-T), so this multiplies the run time (by 11 for a fixed
    /// size). Needs -d auto.
    #[arg(long)]
    oracle: bool,
    /// Report wall-clock throughput only (as openssl speed -elapsed); by default both wall
    /// clock and per CPU second.
    #[arg(long)]
    elapsed: bool,
    /// Also run `openssl speed -elapsed` for the same algorithms and sizes, and print the
    /// ratio (ours ÷ openssl) per size; for a public-key algorithm `openssl speed -elapsed
    /// NAME` once, and the ratio per operation. Uses $OPENSSL if set.
    #[arg(long)]
    openssl: bool,
    /// Print JSON Lines, one object per case, instead of tables.
    #[arg(long)]
    json: bool,
    /// Draw throughput against operand size into FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// List drivers and algorithms, and exit.
    #[arg(long)]
    list: bool,
    /// Table layout: the paper's (Mb/s) or openssl speed's (1000s of bytes per second).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Openssl,
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    s.parse::<Policy>().map_err(|e| e.to_string())
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.001..=3600.0).contains(&x) => Ok(x),
        _ => Err(format!("`{s}` is not a number of seconds between 0.001 and 3600")),
    }
}

/// Why cryptotest stops early: bad arguments (exit 2) or a failure (exit 1).
enum Stop {
    Usage(String),
    Failure(String),
}

fn main() -> ExitCode {
    let bare = std::env::args_os().len() == 1;
    let cli = Cli::parse();
    match run(cli, bare) {
        Ok(code) => code,
        Err(Stop::Usage(msg)) => {
            eprintln!("cryptotest: {msg}");
            ExitCode::from(2)
        }
        Err(Stop::Failure(msg)) => {
            eprintln!("cryptotest: {msg}");
            ExitCode::from(1)
        }
    }
}

/// The algorithms of each kind of table, in the order given.
struct Tables {
    /// Bytes per second by operand size (Mb/s).
    sized: Vec<String>,
    /// Random bytes per second by size (MB/s).
    random: Vec<String>,
    /// Public-key operations per second.
    per_op: Vec<String>,
}

/// `auto`'s own framework and the drivers it routes to (A first), if `-d auto` was given.
struct Auto {
    fw: Framework,
    drivers: Vec<String>,
}

fn run(mut cli: Cli, bare: bool) -> Result<ExitCode, Stop> {
    if cli.list {
        print!("{}", listing());
        return Ok(ExitCode::SUCCESS);
    }
    if bare {
        cli.drivers = QUICK_DRIVERS.map(String::from).to_vec();
        cli.algs = QUICK_ALGS.map(String::from).to_vec();
        cli.sizes = QUICK_SIZES.map(SizeSpec::Fixed).to_vec();
        cli.seconds = Some(QUICK_SECONDS);
        cli.batch = QUICK_BATCH;
        cli.direct = true;
    }
    let driver_names = if cli.drivers.is_empty() { vec!["soft".to_owned()] } else { cli.drivers.clone() };
    let drivers = drivers::resolve(&driver_names).map_err(Stop::Usage)?;
    let with_auto = drivers.contains(&DriverSpec::Auto);
    if cli.oracle && !with_auto {
        return Err(Stop::Usage(
            "--oracle compares the auto column with static splits: add -d auto (and the drivers it \
             chooses among)"
                .into(),
        ));
    }
    let alg_names =
        if cli.algs.is_empty() { algs::MAIN.map(String::from).to_vec() } else { cli.algs.clone() };
    let algs = algs::resolve(&alg_names).map_err(Stop::Usage)?;
    let sizes =
        if cli.sizes.is_empty() { DEFAULT_SIZES.map(SizeSpec::Fixed).to_vec() } else { dedup(&cli.sizes) };
    if let Some(path) = &cli.plot {
        if algs.iter().all(algs::Alg::per_op) {
            return Err(Stop::Usage(
                "--plot draws throughput against operand size, and public-key cases have none: add a \
                 symmetric algorithm or random, or leave --plot out"
                    .into(),
            ));
        }
        plot::check_path(path).map_err(Stop::Usage)?;
    }
    let openssl_version = if cli.openssl { Some(openssl::check().map_err(Stop::Usage)?) } else { None };
    let limit = match (cli.count, cli.seconds) {
        (Some(n), _) => Limit::Count(n),
        (None, s) => Limit::Time(Duration::from_secs_f64(s.unwrap_or(DEFAULT_SECONDS))),
    };
    let (threads, batch) = (usize::from(cli.threads), usize::from(cli.batch));

    // Profiling costs a few ns per request: on only when asked for, then for every request.
    // Pinned sessions make no decisions: only auto's framework needs the policy.
    let config = Config { profile_every: u32::from(cli.profile), ..Config::default() };
    let fw = Framework::with_config(config.clone());
    let driver_names = drivers::register(&fw, &drivers).map_err(Stop::Failure)?;
    if driver_names.is_empty() && !with_auto {
        // Every driver asked for was skipped (afalg on a kernel without AF_ALG): nothing to
        // measure is a failure, not an empty table.
        return Err(Stop::Failure(
            "no driver left to measure (each one asked for was skipped, above)".into(),
        ));
    }
    let auto = if with_auto {
        let fw = Framework::with_config(Config { policy: cli.policy, ..config });
        let drivers = drivers::register_routed(&fw, &drivers).map_err(Stop::Failure)?;
        if drivers.is_empty() {
            return Err(Stop::Failure(
                "auto has no driver left to route to (each was skipped, above)".into(),
            ));
        }
        Some(Auto { fw, drivers })
    } else {
        None
    };
    // The tables' algorithms: by operand size (Mb/s), random bytes (MB/s), public-key
    // operations (per second).
    let names_of = |keep: fn(&algs::Alg) -> bool| -> Vec<String> {
        algs.iter().filter(|a| keep(a)).map(|a| a.name.to_owned()).collect()
    };
    let tables = Tables {
        sized: names_of(|a| !a.per_op() && a.kind != Kind::Random),
        random: names_of(|a| a.kind == Kind::Random),
        per_op: names_of(algs::Alg::per_op),
    };

    // openssl speed takes whole seconds.
    let openssl_seconds = match limit {
        Limit::Time(d) => d.as_secs_f64().ceil().max(1.0) as u64,
        Limit::Count(_) => 1,
    };
    let has_b = auto.as_ref().is_some_and(|a| a.drivers.len() > 1);
    let splits_per_alg: usize =
        if cli.oracle { sizes.iter().map(|&s| oracle::splits(s, has_b).len()).sum() } else { 0 };
    // Per algorithm, its rows: a size each, or an operation each (public key), and the
    // openssl runs: one per size, or one for all of a public-key algorithm's operations.
    let points = |a: &algs::Alg| a.public_key.map_or(sizes.len(), |pk| pk.ops.len());
    let cases: usize = algs
        .iter()
        .map(|a| points(a) * driver_names.len() + if a.per_op() { 0 } else { splits_per_alg })
        .sum();
    let openssl_runs: usize = algs.iter().map(|a| if a.per_op() { 1 } else { sizes.len() }).sum();
    let openssl_secs: u64 = algs.iter().map(|a| points(a) as u64 * openssl_seconds).sum();
    let total = cases + openssl_runs * usize::from(cli.openssl);
    let estimate = match limit {
        Limit::Time(d) => d.as_secs_f64() * cases as f64,
        Limit::Count(_) => 0.0,
    } + (openssl_secs * u64::from(cli.openssl)) as f64;
    let mut progress = progress::Progress::new(total, !cli.json && estimate > 1.0);
    // openssl speed's public-key figures: per CPU second, its own measure and the steadier
    // one on a shared machine, compared with ours per CPU second; with --elapsed, or
    // several threads (its -multi sums its processes' rates), per wall-clock second.
    let pk_clock = if cli.elapsed || threads > 1 { Clock::Wall } else { Clock::Cpu };

    if !cli.json {
        let auto_over = auto.as_ref().map(|a| a.drivers.as_slice());
        println!(
            "{}",
            header(
                &cli,
                bare,
                &driver_names,
                auto_over,
                limit,
                openssl_version.as_deref().map(|version| OpensslRun {
                    version,
                    seconds: openssl_seconds,
                    pk_clock,
                    by_size: !tables.sized.is_empty() || !tables.random.is_empty(),
                    public_key: !tables.per_op.is_empty(),
                }),
                algs.iter().any(|a| a.kind.ciphers()),
            )
        );
    }
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: BTreeSet<String> = BTreeSet::new();
    let mut note = |progress: &progress::Progress, text: String| {
        if notes.insert(text.clone()) {
            progress.note(&text);
        }
    };
    // Failed requests and results, a line each (the splits' as they run, the cases' after).
    let mut failures_seen: Vec<String> = Vec::new();
    for alg in &algs {
        if cli.decrypt && !alg.kind.ciphers() {
            let what = match alg.kind {
                Kind::PublicKey => "its operations",
                Kind::Random => "random bytes",
                _ => "the digest",
            };
            note(&progress, format!("{}: no decrypt; measuring {what}", alg.name));
        }
        // A public-key algorithm's keys: made once, used by every driver and operation.
        let keys = match alg.kind {
            Kind::PublicKey => match pubkey::Keys::generate(&fw, alg) {
                Ok(k) => Some(k),
                Err(why) => {
                    note(&progress, why);
                    continue;
                }
            },
            _ => None,
        };
        if cli.oracle && keys.is_some() {
            note(
                &progress,
                format!("--oracle splits by operand size: {} (public key) is not split", alg.name),
            );
        }
        let points: Vec<(SizeSpec, Option<PkCase>)> = match &keys {
            Some(k) => k
                .alg
                .ops
                .iter()
                .map(|&op| (SizeSpec::Fixed(k.input_len(op)), Some(PkCase { keys: k, op })))
                .collect(),
            None => sizes.iter().map(|&s| (s, None)).collect(),
        };
        let alg_first = rows.len();
        for &(size, public_key) in &points {
            let first = rows.len();
            let what = match public_key {
                Some(pk) => pk.op.name().to_owned(),
                None => size.phrase(),
            };
            for d in &driver_names {
                progress.show(&format!("{} {what} on {d}", alg.name));
                let target = match (&auto, d.as_str()) {
                    (Some(a), AUTO) => Target::Auto(&a.fw),
                    _ => Target::Pinned(d),
                };
                let spec = CaseSpec {
                    fw: &fw,
                    alg,
                    target,
                    decrypt: cli.decrypt,
                    sizes: size,
                    threads,
                    batch,
                    direct: cli.direct,
                    limit,
                    verify: cli.verify,
                    public_key,
                };
                fw.reset_profiles();
                let before = auto.as_ref().map(|a| a.fw.routing());
                let result = bench::run_case(&spec);
                if let Err(skip) = &result {
                    note(&progress, skip.0.clone());
                }
                let routing = match (&auto, target, &result) {
                    (Some(a), Target::Auto(_), Ok(_)) => {
                        before.map(|b| Routing::between(&b, &a.fw.routing()))
                    }
                    _ => None,
                };
                progress.step();
                let oracle = match (&auto, target, &result) {
                    (Some(a), Target::Auto(_), Ok(r)) if cli.oracle && public_key.is_none() => {
                        Some(run_oracle(&spec, a, r, has_b, &mut progress, &mut failures_seen))
                    }
                    _ => None,
                };
                let profile = match target {
                    Target::Pinned(d) if cli.profile && result.is_ok() => fw.profile(d),
                    _ => None,
                };
                rows.push(Row {
                    alg: alg.name.to_owned(),
                    driver: d.clone(),
                    op: spec.op_name(),
                    per_op: public_key.is_some(),
                    size,
                    threads,
                    batch,
                    result,
                    verify: cli.verify,
                    openssl_kbytes_s: None,
                    openssl_ops_s: None,
                    openssl_clock: pk_clock,
                    profile,
                    routing,
                    oracle,
                });
            }
            if cli.openssl && public_key.is_none() {
                progress.show(&format!("{} {} with openssl speed", alg.name, size.phrase()));
                let measured_any = rows[first..].iter().any(|r| r.measured().is_some());
                let kbytes = match (alg.openssl, size) {
                    (None, _) => {
                        note(&progress, format!("{}: openssl speed has no such algorithm", alg.name));
                        None
                    }
                    (Some(_), SizeSpec::Imix | SizeSpec::LogUniform(..)) => {
                        note(&progress, format!("openssl speed has no size distributions ({size})"));
                        None
                    }
                    (Some(_), _) if !measured_any => None,
                    (Some(args), SizeSpec::Fixed(size)) => {
                        if let Some(caveat) = algs::openssl_caveat(alg) {
                            note(&progress, format!("{} vs openssl: {caveat}", alg.name));
                        }
                        let decrypt = cli.decrypt && alg.kind.ciphers();
                        match openssl::speed(args, decrypt, size, openssl_seconds, threads) {
                            Ok(bytes_s) => Some(bytes_s / 1e3),
                            Err(e) => {
                                note(&progress, e);
                                None
                            }
                        }
                    }
                };
                for r in &mut rows[first..] {
                    r.openssl_kbytes_s = kbytes;
                }
                progress.step();
            }
            if cli.json && public_key.is_none() {
                for r in &rows[first..] {
                    if let Some(v) = r.json(cli.openssl, cli.profile) {
                        println!("{v}");
                    }
                }
            }
        }
        let Some(keys) = &keys else { continue };
        // A public-key algorithm: one openssl speed run for all its operations, after ours.
        let measured_any = rows[alg_first..].iter().any(|r| r.measured().is_some());
        if cli.openssl && measured_any {
            progress.show(&format!("{} with openssl speed", alg.name));
            match alg.openssl {
                None => note(&progress, format!("{}: openssl speed has no such algorithm", alg.name)),
                Some(args) => {
                    if let Some(caveat) = algs::openssl_caveat(alg) {
                        note(&progress, format!("{} vs openssl: {caveat}", alg.name));
                    }
                    match openssl::speed_public_key(args, openssl_seconds, threads, pk_clock == Clock::Wall) {
                        Ok(per_op) => {
                            for r in &mut rows[alg_first..] {
                                let at = keys.alg.ops.iter().position(|o| o.name() == r.op);
                                r.openssl_ops_s = at.and_then(|i| per_op.get(i).copied());
                            }
                        }
                        Err(e) => note(&progress, e),
                    }
                }
            }
            progress.step();
        }
        if cli.json {
            for r in &rows[alg_first..] {
                if let Some(v) = r.json(cli.openssl, cli.profile) {
                    println!("{v}");
                }
            }
        }
    }
    progress.clear();

    if !cli.json {
        print_tables(&cli, &rows, &tables, &driver_names, &sizes);
    }

    for r in &rows {
        let Some(m) = r.measured() else { continue };
        let case = if r.per_op {
            format!("{} {} on {}", r.alg, r.op, r.driver)
        } else if r.alg == r.op {
            // random: the operation is the algorithm.
            format!("{} {} on {}", r.alg, r.size.phrase(), r.driver)
        } else {
            format!("{} {} {} on {}", r.alg, r.op, r.size.phrase(), r.driver)
        };
        failures_seen.extend(failures(&case, r.alg == r.op, m));
    }
    let mut failed = !failures_seen.is_empty();
    for f in &failures_seen {
        eprintln!("cryptotest: {f}");
    }
    if let Some(path) = &cli.plot {
        let by_size: Vec<String> = tables.sized.iter().chain(&tables.random).cloned().collect();
        let series = plot_series(&rows, &by_size, &driver_names);
        let title = format!("cryptotest: {} ({}, batch {batch})", ops_of(&rows), threads_text(threads));
        match plot::write_plot(path, &title, &series) {
            Ok(()) => eprintln!("cryptotest: plot written to {}", path.display()),
            Err(e) => {
                eprintln!("cryptotest: {e}");
                failed = true;
            }
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// What went wrong in a case, a line each (none: nothing did).
/// `random` says so for its mismatches: they are results that repeated, not results that
/// differ from the reference's.
fn failures(case: &str, random: bool, m: &CaseResult) -> Vec<String> {
    let mut out = Vec::new();
    if m.mismatches > 0 {
        let verdict =
            if random { "failed the check".to_owned() } else { format!("differ from {}", bench::REFERENCE) };
        out.push(format!(
            "{case}: {} of {} results {verdict} ({})",
            m.mismatches,
            m.checked,
            m.first_mismatch.as_deref().unwrap_or("")
        ));
    }
    if m.errors > 0 {
        out.push(format!(
            "{case}: {} requests failed ({})",
            m.errors,
            m.first_error.as_deref().unwrap_or("")
        ));
    }
    out
}

/// `--oracle` for one auto case: each static split, measured like the case.
fn run_oracle(
    auto_case: &CaseSpec,
    auto: &Auto,
    auto_result: &CaseResult,
    has_b: bool,
    progress: &mut progress::Progress,
    failed: &mut Vec<String>,
) -> Oracle {
    let mut splits = Vec::new();
    for split in oracle::splits(auto_case.sizes, has_b) {
        progress.show(&format!(
            "{} {}, oracle split {}",
            auto_case.alg.name,
            auto_case.sizes.phrase(),
            split.label()
        ));
        let target = Target::Split { fw: &auto.fw, drivers: &auto.drivers, split };
        let spec = CaseSpec { target, ..*auto_case };
        let mbit_s = match bench::run_case(&spec) {
            Ok(r) => {
                let case = format!(
                    "{} {} {}, oracle split {}",
                    auto_case.alg.name,
                    spec.op_name(),
                    auto_case.sizes.phrase(),
                    split.label()
                );
                failed.extend(failures(&case, auto_case.alg.kind == Kind::Random, &r));
                Some(r.mbit_s())
            }
            Err(Skipped(why)) => {
                failed.push(format!("oracle split {}: {why}", split.label()));
                None
            }
        };
        splits.push((split.label(), mbit_s));
        progress.step();
    }
    let (a, b) = match auto.drivers.split_first() {
        Some((a, b)) => (a.clone(), b.to_vec()),
        None => (String::new(), Vec::new()),
    };
    Oracle { a, b, splits, auto_mbit_s: auto_result.mbit_s() }
}

fn dedup(sizes: &[SizeSpec]) -> Vec<SizeSpec> {
    let mut v = Vec::new();
    for &s in sizes {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

/// The operations measured, for the plot's title: "encrypt", "encrypt / digest".
fn ops_of(rows: &[Row]) -> String {
    let mut ops: Vec<&str> = Vec::new();
    for r in rows {
        if !ops.contains(&r.op) {
            ops.push(r.op);
        }
    }
    ops.join(" / ")
}

fn threads_text(n: usize) -> String {
    if n == 1 {
        "1 thread".into()
    } else {
        format!("{n} threads")
    }
}

/// How `openssl speed` runs beside the cases, for the header.
struct OpensslRun<'a> {
    version: &'a str,
    /// Seconds per size (per public-key operation).
    seconds: u64,
    /// The clock of its public-key figures.
    pk_clock: Clock,
    /// Whether algorithms by size, and public-key algorithms, are measured.
    by_size: bool,
    public_key: bool,
}

/// The lines above the tables: what was measured, and how.
fn header(
    cli: &Cli,
    bare: bool,
    drivers: &[String],
    auto_over: Option<&[String]>,
    limit: Limit,
    openssl: Option<OpensslRun<'_>>,
    directed: bool,
) -> String {
    let mut h = String::new();
    if bare {
        h.push_str(&format!(
            "cryptotest: quick sweep, the same as: cryptotest {} {} -s {} --batch {QUICK_BATCH} --direct -T {QUICK_SECONDS}\n\
             Each driver alone, then auto: ocf choosing per request among them (at the end: which driver won\n\
             which sizes, and what auto chose). Runs of {QUICK_BATCH} requests handed over whole, as the gateway hands\n\
             ocf its packets. `cryptotest --help` for the options, `cryptotest --list` for drivers and algorithms.\n",
            QUICK_DRIVERS.map(|d| format!("-d {d}")).join(" "),
            QUICK_ALGS.map(|a| format!("-a {a}")).join(" "),
            QUICK_SIZES.map(|s| s.to_string()).join(","),
        ));
    }
    let per_case = match limit {
        Limit::Time(d) => format!("{} s per case", d.as_secs_f64()),
        Limit::Count(n) => format!("{n} operations per case"),
    };
    // The direction applies to ciphers and compression only.
    let dir = match (directed, cli.decrypt) {
        (false, _) => String::new(),
        (true, false) => " · encrypt".into(),
        (true, true) => " · decrypt".into(),
    };
    let auto = match auto_over {
        Some(over) => format!(" (auto: {} over {})", cli.policy, over.join(", ")),
        None => String::new(),
    };
    h.push_str(&format!(
        "drivers: {}{auto}{dir} · {} · batch {}{} · {per_case}{}{}",
        drivers.join(", "),
        threads_text(usize::from(cli.threads)),
        cli.batch,
        if cli.direct && cli.batch > 1 { " (handed over whole, direct)" } else { "" },
        if cli.verify { " · every result verified against soft" } else { "" },
        if cli.oracle { " · --oracle: every split of every auto case runs as long" } else { "" }
    ));
    if let Some(OpensslRun { version, seconds, pk_clock, by_size, public_key }) = openssl {
        let mut runs = Vec::new();
        if by_size {
            runs.push(format!("`openssl speed -elapsed`, {seconds} s per size"));
        }
        if public_key {
            let (flag, per) = match pk_clock {
                Clock::Cpu => ("", "per CPU second (its measure), compared with ours per CPU second"),
                Clock::Wall => ("-elapsed ", "per second of wall-clock time"),
            };
            runs.push(format!(
                "public key: `openssl speed {flag}-seconds {seconds} NAME`, {seconds} s per operation, {per}"
            ));
        }
        h.push_str(&format!("\nopenssl: {version} · {}", runs.join("; ")));
    }
    h
}

fn print_tables(cli: &Cli, rows: &[Row], tables: &Tables, drivers: &[String], sizes: &[SizeSpec]) {
    let by_size: Vec<String> = tables.sized.iter().chain(&tables.random).cloned().collect();
    if cli.format == Format::Openssl && !by_size.is_empty() {
        let clock = if cli.elapsed { Clock::Wall } else { Clock::Cpu };
        let what = if cli.elapsed { "wall clock" } else { "per CPU second (user + system)" };
        println!("\nThroughput {what}");
        print!("{}", report::openssl_layout(rows, &by_size, drivers, sizes, clock));
    } else {
        for (algs, unit) in [(&tables.sized, Unit::Mbit), (&tables.random, Unit::MByte)] {
            if algs.is_empty() {
                continue;
            }
            let (what, of) = match unit {
                Unit::Mbit => ("Throughput, Mb/s", "of payload"),
                Unit::MByte => ("Random bytes, MB/s (10^6 bytes)", "drawn"),
            };
            println!("\n{what} {of} per second of wall-clock time");
            print!("{}", report::throughput_table(rows, algs, drivers, sizes, Clock::Wall, unit));
            if !cli.elapsed {
                println!("\n{what} {of} per CPU second (user + system, every thread of the process)");
                print!("{}", report::throughput_table(rows, algs, drivers, sizes, Clock::Cpu, unit));
            }
        }
    }
    let wall = report::public_key_table(rows, &tables.per_op, drivers, Clock::Wall);
    if !wall.is_empty() {
        println!("\nPublic-key operations per second of wall-clock time (as openssl speed prints them)");
        print!("{wall}");
        if !cli.elapsed {
            println!("\nPublic-key operations per CPU second (user + system, every thread of the process)");
            print!("{}", report::public_key_table(rows, &tables.per_op, drivers, Clock::Cpu));
        }
    }
    println!("\nCost of each case (getrusage: CPU seconds and context switches of the whole process)");
    print!("{}", report::cost_table(rows));
    // "aes-128-gcm encrypt", "ed25519 sign"; "random" (the operation is the algorithm).
    let what = |r: &Row| if r.alg == r.op { r.alg.clone() } else { format!("{} {}", r.alg, r.op) };
    for r in rows {
        if let Some(routing) = &r.routing {
            if r.per_op {
                println!("\nRouting: {} on auto (requests per size class of their input)", what(r));
            } else {
                println!("\nRouting: {} of {} on auto (requests per size class)", what(r), r.size.phrase());
            }
            print!("{}", routing.table(cli.profile));
        }
        if let Some(oracle) = &r.oracle {
            println!("\nOracle: {} of {}, static splits (Mb/s, wall clock)", what(r), r.size.phrase());
            print!("{}", oracle.table());
        }
    }
    if cli.profile {
        for r in rows {
            if let Some(p) = &r.profile {
                let of = if r.per_op { String::new() } else { format!(" of {}", r.size.phrase()) };
                println!("\nProfile: {}{of} on {} (every request, ns)", what(r), r.driver);
                print!("{p}");
            }
        }
    }
    if let Some(summary) = report::auto_summary(rows, &by_size, sizes) {
        println!(
            "\nWhat auto chose: the fastest driver alone, where auto sent the requests, auto ÷ that \
             driver (wall clock)"
        );
        print!("{summary}");
    }
    if let Some(summary) = report::public_key_auto_summary(rows, &tables.per_op) {
        println!(
            "\nWhat auto chose for each public-key operation: the fastest driver alone, where auto sent \
             the requests, auto ÷ that driver (operations per second, wall clock)"
        );
        print!("{summary}");
    }
}

/// `--plot`'s lines: per algorithm and driver, the fixed sizes as one line and each size
/// distribution as a point of its own; `openssl speed` as a line where it ran.
fn plot_series(rows: &[Row], algs: &[String], drivers: &[String]) -> Vec<plot::Series> {
    let mut series = Vec::new();
    for alg in algs {
        for d in drivers {
            let points: Vec<(usize, f64)> = rows
                .iter()
                .filter(|r| &r.alg == alg && &r.driver == d)
                .filter_map(|r| Some((r.size.fixed()?, r.measured()?.mbit_s())))
                .collect();
            if !points.is_empty() {
                series.push(plot::Series { label: format!("{alg} · {d}"), points });
            }
            // A distribution has no operand size of its own: it is a series of one point, at
            // the mean size of the requests it did, named after it (on the fixed sizes' line
            // it would draw a slope that nothing measured).
            for r in rows.iter().filter(|r| &r.alg == alg && &r.driver == d && r.size.fixed().is_none()) {
                let Some(m) = r.measured().filter(|m| m.ops > 0) else { continue };
                let mean = m.bytes as f64 / m.ops as f64;
                series.push(plot::Series {
                    label: format!("{alg} · {d} · {} (mean {mean:.0} B)", r.size),
                    points: vec![(mean.round() as usize, m.mbit_s())],
                });
            }
        }
        let openssl: Vec<(usize, f64)> = rows
            .iter()
            .filter(|r| &r.alg == alg && drivers.first() == Some(&r.driver))
            .filter_map(|r| Some((r.size.fixed()?, r.openssl_kbytes_s? * 8.0 / 1e3)))
            .collect();
        if !openssl.is_empty() {
            series.push(plot::Series { label: format!("{alg} · openssl speed"), points: openssl });
        }
    }
    series
}

/// `--list`: the drivers and algorithms, with what openssl speed measures for each. The
/// drivers are `drivers::NAMES`, the table `-d` is parsed with, each followed by what this
/// machine has of it.
fn listing() -> String {
    let mut s = String::from("Drivers (-d NAME):\n");
    const INDENT: &str = "                  ";
    for n in &drivers::NAMES {
        for (i, line) in wrap(n.about, 84).iter().enumerate() {
            let form = if i == 0 { n.form } else { "" };
            s.push_str(&format!("  {form:<15} {line}\n"));
        }
        match n.kind {
            NameKind::Sim => {
                for p in ocf_sim::PROFILE_NAMES {
                    if let Some(prof) = ocf_sim::SimProfile::named(p) {
                        s.push_str(&format!("{INDENT}sim:{p:<10} {prof}\n"));
                    }
                }
                s.push_str(&format!(
                    "{INDENT}or custom: sim:ring=N,setup=TIME,rate=RATE[,hash_rate=…,coalesce=…,cpu=N,corrupt=N]\n"
                ));
                s.push_str(&format!(
                    "{INDENT}each -d sim:… is a card of its own: the same twice is two cards (…, …#2)\n"
                ));
            }
            NameKind::Mb => {
                let here = if ocf_mb::available() {
                    "available"
                } else {
                    "unavailable (IPsec-MB not built in, or it does not start on this CPU): skipped, with the reason"
                };
                s.push_str(&format!("{INDENT}this machine: {here}\n"));
            }
            // What this kernel offers (the probe binds each algorithm and reads /proc/crypto).
            NameKind::Afalg if !n.prefix => match ocf_afalg::AfalgDriver::probe() {
                Ok(d) => {
                    s.push_str(&format!(
                        "{INDENT}this kernel: type, name, implementation, kernel priority, class\n"
                    ));
                    for line in d.report().to_string().lines() {
                        s.push_str(&format!("                {line}\n"));
                    }
                }
                Err(why) => s.push_str(&format!("{INDENT}this kernel: {why}\n")),
            },
            NameKind::Hwrng => {
                let here = match ocf_hwrng::probe() {
                    Ok(kinds) => kinds.iter().map(|k| k.driver_name()).collect::<Vec<_>>().join(", "),
                    Err(why) => format!("{why}: skipped, with the reason"),
                };
                s.push_str(&format!("{INDENT}this machine: {here}\n"));
            }
            NameKind::Auto => {
                let policies: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
                s.push_str(&format!(
                    "{INDENT}(policies: {}; default {})\n",
                    policies.join(", "),
                    Policy::default()
                ));
            }
            _ => {}
        }
    }
    s.push_str(
        "\nSizes (-s): bytes (64, 8k), imix (40/576/1500 B weighted 7:4:1), A..B (log-uniform, e.g. 16..16384)\n",
    );
    s.push_str("\nAlgorithms (-a NAME, or all):\n");
    for a in algs::all() {
        let openssl =
            a.openssl.map_or("(none)".to_owned(), |args| format!("openssl speed {}", args.join(" ")));
        s.push_str(&format!("  {:<24} {:<38} {openssl}\n", a.name, a.describe()));
    }
    s.push_str(&per_driver_listing());
    s
}

/// `--list`'s table of the public-key algorithms and random bytes each driver of this
/// machine offers (its capabilities: an engine may still refuse a key size when a session
/// is made).
fn per_driver_listing() -> String {
    let fw = Framework::new();
    let mut specs = drivers::all();
    specs.push(DriverSpec::Afalg(ocf_afalg::NAME.to_owned()));
    specs.push(DriverSpec::Hwrng);
    // Quietly: a driver this machine lacks is left out (the listing above says why).
    let names = drivers::register_quietly(&fw, &specs);
    let infos = fw.drivers();
    let caps: Vec<(&str, &ocf::Capabilities)> = names
        .iter()
        .filter_map(|n| infos.iter().find(|i| &i.name == n).map(|i| (n.as_str(), &i.capabilities)))
        .collect();
    let mut rows: Vec<(String, Vec<bool>)> = algs::public_key()
        .iter()
        .filter_map(|a| {
            let pk = a.public_key?;
            Some((a.name.to_owned(), caps.iter().map(|(_, c)| c.asymmetric.contains(&pk.alg)).collect()))
        })
        .collect();
    rows.push(("random".to_owned(), caps.iter().map(|(_, c)| c.random).collect()));
    let mut s = String::from(
        "\nPublic-key algorithms and random bytes per driver (this machine; a driver may still refuse \
         a key size):\n",
    );
    s.push_str(&format!("  {:<12}", ""));
    for (n, _) in &caps {
        s.push_str(&format!(" {n:>w$}", w = n.len().max(4)));
    }
    s.push('\n');
    for (name, has) in rows {
        s.push_str(&format!("  {name:<12}"));
        for ((n, _), yes) in caps.iter().zip(has) {
            s.push_str(&format!(" {:>w$}", if yes { "yes" } else { "-" }, w = n.len().max(4)));
        }
        s.push('\n');
    }
    s
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word is a
/// line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}
