//! The benchmark driver behind `bench/run.sh` (benchmark-only code, not part of the product).
//!
//! `bench-loadgen run` does the whole benchmark against the release binary and writes a JSON
//! report and a Markdown table: sustained events/s of drift-sentinel and of the bare axum
//! ceiling (`bench-ceiling`) under the same `wrk` load, in binary and structured mode; p50/p99
//! latency at 50 % and 90 % of the sink's maximum (open loop, fixed rate, latency counted from
//! each request's scheduled send time, as wrk2 does); CPU microseconds per event (from
//! `/proc/<pid>/stat`); RSS with 10,000 and 100,000 tracked objects; time from process start to
//! the first `202`; time from the event that completes a drift to the webhook receiver's arrival;
//! CPU per event as the world grows and for status churn on large objects (`phases`, issue 28).
//! `--phases` selects some of them.
//!
//! All traffic stays on 127.0.0.1, every loop is bounded in count and time, and every process it
//! starts is stopped by its own pid.

mod client;
mod phases;
mod world;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use client::{Clock, Conn, Rng};
use world::{Fixtures, Mode, Op, OBJECTS_PER_APP};

#[derive(Parser)]
#[command(about = "drift-sentinel benchmark driver")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Writes the request templates (`binary.reqs`, `structured.reqs`) and the baseline manifests.
    Gen {
        /// Output directory.
        #[arg(long)]
        out: PathBuf,
        /// Apps (11 objects each, `world::OBJECTS_PER_APP`).
        #[arg(long, default_value_t = 72)]
        apps: usize,
        /// Also write two cycles as structured events with concrete ids, for `drift-sentinel
        /// replay` (the ids come from a fixed seed and every event has the fixed time
        /// `world::FIXED_TIME`: the same `--apps` gives the same file).
        #[arg(long)]
        replay: Option<PathBuf>,
    },
    /// Runs the whole benchmark.
    Run(RunArgs),
    /// The PostgreSQL store next to SQLite in one run (issue 19): throughput and open-loop
    /// latency on each, then the takeover of a 100,000-object PostgreSQL store by a standby.
    Store {
        #[command(flatten)]
        run: RunArgs,
        /// An empty PostgreSQL database for the throughput phase (`postgres://...`).
        #[arg(long)]
        throughput_url: String,
        /// An empty PostgreSQL database for the takeover phase.
        #[arg(long)]
        takeover_url: String,
    },
    /// Sends open-loop load at a fixed rate to a running server and prints the latency figures
    /// as JSON (for investigating one phase by hand).
    Open {
        /// Server address, e.g. 127.0.0.1:18080.
        #[arg(long)]
        addr: SocketAddr,
        /// Request templates (`binary.reqs` or `structured.reqs` from `gen`).
        #[arg(long)]
        reqs: PathBuf,
        /// Requests per second.
        #[arg(long)]
        rate: f64,
        /// Seconds.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Connections.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Also writes every request's scheduled time and latency here (CSV, microseconds,
        /// in the order of the schedule), to see whether slow requests come together.
        #[arg(long)]
        timeline: Option<PathBuf>,
    },
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    /// The drift-sentinel release binary.
    #[arg(long)]
    bin: PathBuf,
    /// The bench-ceiling binary.
    #[arg(long)]
    ceiling: PathBuf,
    /// The wrk Lua script.
    #[arg(long)]
    lua: PathBuf,
    /// Scratch directory (stores, templates, logs).
    #[arg(long)]
    work: PathBuf,
    /// Where the report goes (`report.json`, `report.md`).
    #[arg(long)]
    out: PathBuf,
    /// Seconds of each measured wrk run.
    #[arg(long, default_value_t = 15)]
    duration: u64,
    /// Seconds of each open-loop latency run.
    #[arg(long, default_value_t = 10)]
    latency_duration: u64,
    /// wrk threads and connections.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Apps in the replayed event set (11 objects each, `world::OBJECTS_PER_APP`).
    #[arg(long, default_value_t = 72)]
    apps: usize,
    /// Objects for the second RSS reading (the first is at 10,000).
    #[arg(long, default_value_t = 100_000)]
    objects: usize,
    /// Start-to-first-202 runs.
    #[arg(long, default_value_t = 40)]
    cold_runs: usize,
    /// Drift-to-delivery samples.
    #[arg(long, default_value_t = 300)]
    drift_samples: usize,
    /// First TCP port to use (a few consecutive ones are taken).
    #[arg(long, default_value_t = 18080)]
    port: u16,
    /// A team invariants file (`invariants: [...]`, e.g. examples/invariants/knative.yaml) whose
    /// rules the sink runs (`rules.invariants`), for the A/B of their cost.
    #[arg(long)]
    invariants: Option<PathBuf>,
    /// Writes each open-loop run's timeline of the sink (every request's scheduled time and
    /// latency) into this directory as `<mode or store>-<share>.csv` (`bench/tail.py`).
    #[arg(long)]
    timelines: Option<PathBuf>,
    /// The sink's store as a PostgreSQL URL instead of a SQLite file (set by `store`).
    #[arg(skip)]
    store_url: Option<String>,
    /// Phases to run (`run` only), comma-separated: throughput (with latency), memory (with the
    /// start on the big store), cold, drift, flatness, large.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Phase::ALL)]
    phases: Vec<Phase>,
    #[command(flatten)]
    phase: phases::PhaseArgs,
}

/// The phases of `run`, in the order they run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Throughput,
    Memory,
    Cold,
    Drift,
    Flatness,
    Large,
}

impl Phase {
    const ALL: [Phase; 6] = [
        Phase::Throughput,
        Phase::Memory,
        Phase::Cold,
        Phase::Drift,
        Phase::Flatness,
        Phase::Large,
    ];
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Gen { out, apps, replay } => gen(&out, apps, replay.as_deref()).map(|stats| {
            println!(
                "{}",
                serde_json::to_string_pretty(&stats).unwrap_or_default()
            );
        }),
        Cmd::Run(args) => run(&args),
        Cmd::Store {
            run,
            throughput_url,
            takeover_url,
        } => store_phases(&run, &throughput_url, &takeover_url),
        Cmd::Open {
            addr,
            reqs,
            rate,
            seconds,
            connections,
            timeline,
        } => read_templates(&reqs).and_then(|templates| {
            if let Some(path) = &timeline {
                // Asked for here: a timeline that could not be written fails the command.
                let _ = std::fs::remove_file(path);
            }
            let result = open_loop(
                addr,
                &templates,
                rate,
                Duration::from_secs(seconds),
                connections,
                timeline.as_deref(),
            )?;
            println!("{}", serde_json::to_string(&result).unwrap_or_default());
            match &timeline {
                Some(path) if !path.exists() => {
                    Err(format!("the timeline {} was not written", path.display()))
                }
                _ => Ok(()),
            }
        }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench-loadgen: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, String>;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn log(message: &str) {
    let _ = writeln!(std::io::stderr(), "[bench] {message}");
}

// ---------------------------------------------------------------------------------------------
// Templates

fn write_reqs(path: &Path, templates: &[world::Template]) -> Result<()> {
    let mut out = Vec::new();
    for template in templates {
        out.extend_from_slice(
            format!(
                "{} {} {}\n",
                template.object,
                template.op.code(),
                template.request.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&template.request);
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn gen(out: &Path, apps: usize, replay: Option<&Path>) -> Result<Value> {
    std::fs::create_dir_all(out).map_err(|e| e.to_string())?;
    let fixtures = Fixtures::load(&repo_root())?;
    let mut stats = json!({});
    for (mode, name) in [(Mode::Binary, "binary"), (Mode::Structured, "structured")] {
        let templates = world::cycle(&fixtures, apps, mode);
        write_reqs(&out.join(format!("{name}.reqs")), &templates)?;
        let mut sizes: Vec<u64> = templates.iter().map(|t| t.body_len as u64).collect();
        sizes.sort_unstable();
        let count = |op: Op| templates.iter().filter(|t| t.op == op).count();
        stats[name] = json!({
            "events": templates.len(),
            "objects": apps * OBJECTS_PER_APP,
            "status": count(Op::Status),
            "trusted": count(Op::Trusted),
            "drift": count(Op::Drift),
            "body_bytes": {"min": sizes.first(), "p50": percentile(&sizes, 50.0),
                           "mean": sizes.iter().sum::<u64>() / sizes.len().max(1) as u64,
                           "p90": percentile(&sizes, 90.0), "max": sizes.last()},
        });
    }
    // Desired manifests for baseline_drift: every Service as Argo CD would hold it in Git.
    let mut items = Vec::new();
    for index in 0..apps {
        let objects = world::app(&fixtures, index);
        let service = &objects[0].value;
        items.push(json!({
            "apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": service["metadata"]["name"], "namespace": service["metadata"]["namespace"]},
            "spec": {"template": {"metadata": {"annotations": {
                        "autoscaling.knative.dev/max-scale": "10"}},
                     "spec": {"containers": [{"image": service["spec"]["template"]["spec"]["containers"][0]["image"]}]}}},
        }));
    }
    let baseline = out.join("baseline");
    std::fs::create_dir_all(&baseline).map_err(|e| e.to_string())?;
    std::fs::write(
        baseline.join("services.yaml"),
        serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    if let Some(dir) = replay {
        // Two full cycles, in order, as structured events a person can replay and read.
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let templates = world::cycle(&fixtures, apps, Mode::Structured);
        let mut rng = Rng::seeded(7);
        let mut buf = Vec::new();
        let mut lines = String::new();
        for round in 0..2u64 {
            for (index, template) in templates.iter().enumerate() {
                let rv = format!("{:015}", 1_000_000 + round * 1_000_000 + index as u64);
                world::fill(&template.request, &rng.id(), &rv, &mut buf);
                let at = buf
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .map(|p| p + 4)
                    .unwrap_or(0);
                lines.push_str(&String::from_utf8_lossy(&buf[at..]));
                lines.push('\n');
            }
        }
        std::fs::write(dir.join("bench-events.ce.jsonl"), lines).map_err(|e| e.to_string())?;
    }
    Ok(stats)
}

// ---------------------------------------------------------------------------------------------
// Processes

struct Proc {
    name: String,
    child: Child,
}

impl Proc {
    fn spawn(name: &str, command: &mut Command, log_path: &Path) -> Result<Proc> {
        let log_file = std::fs::File::create(log_path).map_err(|e| e.to_string())?;
        let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(err_file))
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        Ok(Proc {
            name: name.to_string(),
            child,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then SIGKILL after `grace`.
    fn stop(mut self, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        log(&format!(
            "{} did not stop in {grace:?}; killing it",
            self.name
        ));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    stat_ticks(&stat).ok_or_else(|| "bad stat".to_string())
}

/// utime + stime from the text of a `/proc/.../stat` file (a process's or a thread's).
fn stat_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let number = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(number(11) + number(12))
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                line.strip_prefix(key)
                    .and_then(|rest| rest.trim_start_matches(':').split_whitespace().next())
                    .and_then(|n| n.parse().ok())
            })
        })
        .unwrap_or(0)
}

fn wait_ready(addr: SocketAddr, path: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok((200, _)) = client::get(addr, path) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{addr}{path} not ready within {timeout:?}"))
}

fn wait_listening(addr: SocketAddr, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!("{addr} not listening within {timeout:?}"))
}

/// Sums the samples of a metric (optionally only those whose labels contain `label`).
fn metric(text: &str, name: &str, label: Option<&str>) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.starts_with(name)
                && matches!(line.as_bytes().get(name.len()), Some(b'{') | Some(b' '))
        })
        .filter(|line| label.is_none_or(|label| line.contains(label)))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn scrape(addr: SocketAddr) -> String {
    client::get(addr, "/metrics")
        .map(|(_, body)| body)
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The webhook receiver: answers 200 and timestamps each delivery.

#[derive(Default)]
struct Received {
    count: u64,
    arrivals: Vec<(Instant, String, Vec<String>)>,
}

fn start_receiver(addr: SocketAddr) -> Result<Arc<Mutex<Received>>> {
    let received = Arc::new(Mutex::new(Received::default()));
    let state = Arc::clone(&received);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                let _ = ready_tx.send(Err(error.to_string()));
                return;
            }
        };
        runtime.block_on(async move {
            let handler = move |body: axum::body::Bytes| {
                let state = Arc::clone(&state);
                async move {
                    let at = Instant::now();
                    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let kind = parsed["type"].as_str().unwrap_or_default().to_string();
                    let names = parsed["data"]
                        .as_array()
                        .map(|items| {
                            items
                                .iter()
                                .filter_map(|item| item["name"].as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
                    guard.count += 1;
                    if guard.arrivals.len() < 100_000 {
                        guard.arrivals.push((at, kind, names));
                    }
                    axum::http::StatusCode::OK
                }
            };
            let app = axum::Router::new().route("/hook", axum::routing::post(handler));
            match tokio::net::TcpListener::bind(addr).await {
                Ok(listener) => {
                    let _ = ready_tx.send(Ok(()));
                    let _ = axum::serve(listener, app).await;
                }
                Err(error) => {
                    let _ = ready_tx.send(Err(error.to_string()));
                }
            }
        });
    });
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())??;
    Ok(received)
}

// ---------------------------------------------------------------------------------------------
// Load

#[derive(Debug, Clone, Default, serde::Serialize)]
struct WrkResult {
    requests: u64,
    seconds: f64,
    rps: f64,
    errors: u64,
    non_2xx: u64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_us_per_request: Option<f64>,
    cpu_cores: Option<f64>,
}

fn wrk(args: &RunArgs, addr: SocketAddr, reqs: &Path, seconds: u64) -> Result<WrkResult> {
    let output = Command::new("wrk")
        .args([
            &format!("-t{}", args.threads),
            &format!("-c{}", args.connections),
            &format!("-d{seconds}s"),
            "--timeout",
            "10s",
            "-s",
        ])
        .arg(&args.lua)
        .arg(format!("http://{addr}/"))
        .arg("--")
        .arg(reqs)
        .arg(args.threads.to_string())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running wrk: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix("WRKJSON "))
        .ok_or_else(|| {
            format!(
                "wrk printed no summary: {text} {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    let summary: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let number = |key: &str| summary[key].as_f64().unwrap_or(0.0);
    let seconds = number("duration_us") / 1e6;
    Ok(WrkResult {
        requests: number("requests") as u64,
        seconds,
        rps: number("requests") / seconds.max(1e-9),
        errors: (number("connect") + number("read") + number("write") + number("timeout")) as u64,
        non_2xx: number("status") as u64,
        p50_ms: number("p50_us") / 1000.0,
        p99_ms: number("p99_us") / 1000.0,
        cpu_us_per_request: None,
        cpu_cores: None,
    })
}

/// A wrk run with the server's CPU time measured around it.
fn measured_wrk(args: &RunArgs, pid: u32, addr: SocketAddr, reqs: &Path) -> Result<WrkResult> {
    let ticks = clock_ticks();
    let before = cpu_ticks(pid)?;
    let started = Instant::now();
    let mut result = wrk(args, addr, reqs, args.duration)?;
    let wall = started.elapsed().as_secs_f64();
    let used = (cpu_ticks(pid)? - before) as f64 / ticks;
    result.cpu_us_per_request = Some(used * 1e6 / result.requests.max(1) as f64);
    result.cpu_cores = Some(used / wall);
    Ok(result)
}

/// CPU ticks per thread name (`comm`; tokio's workers and blocking threads share theirs).
fn thread_ticks(pid: u32) -> BTreeMap<String, u64> {
    let mut ticks = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return ticks;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        let Some(used) = stat_ticks(&stat) else {
            continue;
        };
        *ticks.entry(name.trim().to_string()).or_default() += used;
    }
    ticks
}

/// CPU µs per event of each thread name between two readings (threads that ended in between
/// are not counted).
fn thread_split(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    events: u64,
) -> Value {
    let ticks = clock_ticks();
    let split: serde_json::Map<String, Value> = after
        .iter()
        .map(|(name, used)| {
            let used = used.saturating_sub(before.get(name).copied().unwrap_or(0)) as f64;
            (
                name.clone(),
                json!(used / ticks * 1e6 / events.max(1) as f64),
            )
        })
        .filter(|(_, us)| us.as_f64().unwrap_or(0.0) >= 0.05)
        .collect();
    Value::Object(split)
}

fn read_templates(path: &Path) -> Result<Vec<(usize, Vec<u8>)>> {
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let eol = data[pos..]
            .iter()
            .position(|b| *b == b'\n')
            .ok_or("truncated")?
            + pos;
        let header = String::from_utf8_lossy(&data[pos..eol]).to_string();
        let mut parts = header.split(' ');
        let object: usize = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or("bad header")?;
        let length: usize = parts
            .nth(1)
            .and_then(|p| p.parse().ok())
            .ok_or("bad header")?;
        out.push((object, data[eol + 1..eol + 1 + length].to_vec()));
        pos = eol + 1 + length;
    }
    Ok(out)
}

#[derive(Debug, Clone, Default, serde::Serialize)]
struct OpenResult {
    target_rps: f64,
    achieved_rps: f64,
    sent: u64,
    non_202: u64,
    errors: u64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
}

/// One request of an open loop: when it was scheduled (µs after the start) and its latency (µs).
type Sent = (u64, u64);

/// Open-loop load at a fixed rate: connection `c` of `C` sends its `k`-th request at
/// `start + (k·C + c) / rate`; latency counts from that scheduled time, so time spent waiting for
/// a busy connection is included (no coordinated omission). With `timeline`, every request's
/// scheduled offset and latency are written there too (`offset_us,latency_us`).
fn open_loop(
    addr: SocketAddr,
    templates: &[(usize, Vec<u8>)],
    rate: f64,
    duration: Duration,
    connections: usize,
    timeline: Option<&Path>,
) -> Result<OpenResult> {
    let start = Instant::now() + Duration::from_millis(50);
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(1_700_000_000) * 1_000_000)
        .unwrap_or(0);
    let results: Vec<(Vec<Sent>, u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..connections)
            .map(|c| {
                let mine: Vec<&Vec<u8>> = templates
                    .iter()
                    .filter(|(object, _)| object % connections == c)
                    .map(|(_, request)| request)
                    .collect();
                scope.spawn(move || {
                    let mut conn = Conn::new(addr);
                    let mut rng = Rng::new(c as u64 + 1);
                    let mut clock = Clock::new();
                    let mut buf = Vec::new();
                    let mut latencies = Vec::new();
                    let (mut non_202, mut errors) = (0u64, 0u64);
                    let interval = connections as f64 / rate;
                    let limit = (duration.as_secs_f64() / interval) as u64 + 1;
                    for k in 0..limit {
                        let offset = (k as f64 * connections as f64 + c as f64) / rate;
                        if offset >= duration.as_secs_f64() || mine.is_empty() {
                            break;
                        }
                        let scheduled = start + Duration::from_secs_f64(offset);
                        let now = Instant::now();
                        if scheduled > now {
                            std::thread::sleep(scheduled - now);
                        }
                        let template = mine[(k as usize) % mine.len()];
                        let rv = format!("{:015}", base + k * connections as u64 + c as u64);
                        world::fill_at(template, &rng.id(), &rv, clock.now(), &mut buf);
                        match conn.roundtrip(&buf) {
                            Ok((202, _)) => {}
                            Ok(_) => non_202 += 1,
                            Err(_) => errors += 1,
                        }
                        latencies.push((
                            (offset * 1e6) as u64,
                            scheduled.elapsed().as_micros() as u64,
                        ));
                    }
                    (latencies, non_202, errors)
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|handle| handle.join().ok())
            .collect()
    });
    let mut requests: Vec<Sent> = Vec::new();
    let (mut non_202, mut errors) = (0, 0);
    for (latencies, n, e) in results {
        requests.extend(latencies);
        non_202 += n;
        errors += e;
    }
    if let Some(path) = timeline {
        requests.sort_unstable();
        // The schedule's start as wall-clock time, to line it up with what the sink did then.
        let start_unix_us = (std::time::SystemTime::now() - start.elapsed())
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0);
        let mut csv = format!("# start_unix_us={start_unix_us}\noffset_us,latency_us\n");
        for (offset, latency) in &requests {
            csv.push_str(&format!("{offset},{latency}\n"));
        }
        if let Err(error) = std::fs::write(path, csv) {
            // Told, not returned: the run goes on and stops the processes it started.
            eprintln!("bench-loadgen: the timeline {}: {error}", path.display());
        }
    }
    let mut all: Vec<u64> = requests.iter().map(|(_, latency)| *latency).collect();
    all.sort_unstable();
    let ms = |p: f64| percentile(&all, p) as f64 / 1000.0;
    Ok(OpenResult {
        target_rps: rate,
        achieved_rps: all.len() as f64 / duration.as_secs_f64(),
        sent: all.len() as u64,
        non_202,
        errors,
        p50_ms: ms(50.0),
        p90_ms: ms(90.0),
        p99_ms: ms(99.0),
        p999_ms: ms(99.9),
        max_ms: all.last().copied().unwrap_or(0) as f64 / 1000.0,
    })
}

/// Where an open-loop run's timeline goes (`--timelines`, created when the run starts), if
/// anywhere: `<mode or store>-<share>.csv`.
fn timeline(args: &RunArgs, name: &str, share: u32) -> Option<PathBuf> {
    let dir = args.timelines.as_ref()?;
    Some(dir.join(format!("{name}-{share}.csv")))
}

/// Sends `add` events for the objects of apps `first..first + apps` (closed loop, `threads`
/// connections); returns how many were answered 202.
fn load_objects(
    addr: SocketAddr,
    fixtures: &Fixtures,
    first: usize,
    apps: usize,
    limit: usize,
    threads: usize,
) -> (u64, u64) {
    let results: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut conn = Conn::new(addr);
                    let mut rng = Rng::new(1000 + t as u64);
                    let mut clock = Clock::new();
                    let (mut ok, mut failed) = (0u64, 0u64);
                    let mut buf = Vec::new();
                    for index in (first..first + apps).filter(|i| i % threads == t) {
                        for (number, object) in world::app(fixtures, index).iter().enumerate() {
                            if (index - first) * OBJECTS_PER_APP + number >= limit {
                                break;
                            }
                            binary_event(
                                object,
                                "add",
                                "000000000000001",
                                &mut rng,
                                &mut clock,
                                &mut buf,
                            );
                            match conn.roundtrip(&buf) {
                                Ok((202, _)) => ok += 1,
                                _ => failed += 1,
                            }
                        }
                    }
                    (ok, failed)
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    results
        .into_iter()
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

// ---------------------------------------------------------------------------------------------
// The run

struct Sink {
    proc: Proc,
    addr: SocketAddr,
}

/// `rules.invariants` from a rules file, as one YAML line (JSON is YAML), or nothing.
fn invariants_yaml(path: Option<&std::path::Path>) -> Result<String> {
    let Some(path) = path else {
        return Ok(String::new());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    let list = value.get("invariants").cloned().unwrap_or(value);
    Ok(format!("\n  invariants: {list}"))
}

fn write_config(args: &RunArgs, name: &str, port: u16, receiver: SocketAddr) -> Result<PathBuf> {
    let dir = args.work.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config = format!(
        r#"# drift-sentinel benchmark config: embedded store, every class on (defaults), a webhook
# channel to the local receiver; a group's first drift goes at once (groupWait 0s), its next
# ones are paced as by default (groupInterval 1m).
server:
  port: {port}
defaultCluster: bench
# Above what the memory phase loads: the benchmark measures the state, not the caps.
limits:
  maxStateBytes: 4294967296
  maxObjects: 1000000
  maxObjectsPerCluster: 1000000
store:
{store}
rules:
  baselineDir: {baseline}{invariants}
channels:
  - name: webhook
    type: webhook
    url: http://{receiver}/hook
routes:
  - channels: [webhook]
    groupWait: 0s
"#,
        store = match &args.store_url {
            Some(url) => format!("  url: \"{url}\""),
            None => format!("  path: {}", dir.join("drift-sentinel.db").display()),
        },
        baseline = args.work.join("templates/baseline").display(),
        invariants = invariants_yaml(args.invariants.as_deref())?,
    );
    let path = dir.join("config.yaml");
    std::fs::write(&path, config).map_err(|e| e.to_string())?;
    Ok(path)
}

fn start_sink(args: &RunArgs, name: &str, port: u16, receiver: SocketAddr) -> Result<Sink> {
    let config = write_config(args, name, port, receiver)?;
    let addr: SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let proc = Proc::spawn(
        name,
        Command::new(&args.bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info"),
        &args.work.join(format!("{name}.log")),
    )?;
    wait_ready(addr, "/readyz", Duration::from_secs(20))?;
    Ok(Sink { proc, addr })
}

fn start_ceiling(args: &RunArgs, port: u16, decode: bool) -> Result<(Proc, SocketAddr)> {
    let addr: SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let proc = Proc::spawn(
        "ceiling",
        Command::new(&args.ceiling)
            .arg(addr.to_string())
            .args(decode.then_some("--decode")),
        &args.work.join("ceiling.log"),
    )?;
    wait_listening(addr, Duration::from_secs(10))?;
    Ok((proc, addr))
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    json!({"nproc": cores, "cpu_model": model, "memory": mem, "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim()})
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn run(args: &RunArgs) -> Result<()> {
    let begun = Instant::now();
    std::fs::create_dir_all(&args.work).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&args.out).map_err(|e| e.to_string())?;
    if let Some(dir) = &args.timelines {
        // Before any process starts: a failure later would leave them running.
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut report = json!({"machine": machine(), "load_before": loadavg()});
    log(&format!("load average before: {}", loadavg()));

    let templates_dir = args.work.join("templates");
    report["events"] = gen(&templates_dir, args.apps, None)?;
    let fixtures = Fixtures::load(&repo_root())?;

    let receiver_addr: SocketAddr = format!("127.0.0.1:{}", args.port + 9)
        .parse()
        .map_err(|e| format!("{e}"))?;
    let received = start_receiver(receiver_addr)?;
    let sink_port = args.port;
    let ceiling_port = args.port + 1;

    let runs = |phase: Phase| args.phases.contains(&phase);

    // 1. Throughput, and open-loop latency at 50 % and 90 % of the sink's maximum.
    let mut throughput = json!({});
    let modes = if runs(Phase::Throughput) {
        &[(Mode::Binary, "binary"), (Mode::Structured, "structured")][..]
    } else {
        &[]
    };
    for &(mode, name) in modes {
        let _ = mode;
        let reqs = templates_dir.join(format!("{name}.reqs"));
        log(&format!("{name}: ceiling"));
        let (ceiling, ceiling_addr) = start_ceiling(args, ceiling_port, false)?;
        wrk(args, ceiling_addr, &reqs, 2)?;
        let bare = measured_wrk(args, ceiling.pid(), ceiling_addr, &reqs)?;
        // The same edge decoding each event as the sink does, and nothing behind it: what the
        // edge and decoding cost together (issue 28's floor).
        log(&format!("{name}: ceiling with decoding"));
        let (decoding, decoding_addr) = start_ceiling(args, ceiling_port + 2, true)?;
        wrk(args, decoding_addr, &reqs, 2)?;
        let decoded = measured_wrk(args, decoding.pid(), decoding_addr, &reqs)?;
        decoding.stop(Duration::from_secs(5));
        if decoded.non_2xx > 0 || decoded.errors > 0 {
            // A refused event costs less than a decoded one: the figure would be too low.
            return Err(format!(
                "{name}: the ceiling refused {} events while decoding ({} socket errors)",
                decoded.non_2xx, decoded.errors
            ));
        }

        log(&format!("{name}: drift-sentinel"));
        let sink = start_sink(args, &format!("sink-{name}"), sink_port, receiver_addr)?;
        // Warm-up: the first event of each object is its baseline.
        wrk(args, sink.addr, &reqs, 3)?;
        let before = scrape(sink.addr);
        let delivered_before = received.lock().map(|r| r.count).unwrap_or(0);
        let threads_before = thread_ticks(sink.proc.pid());
        let sink_result = measured_wrk(args, sink.proc.pid(), sink.addr, &reqs)?;
        let threads = thread_split(
            &threads_before,
            &thread_ticks(sink.proc.pid()),
            sink_result.requests,
        );
        let after = scrape(sink.addr);
        let delta = |name: &str, label: Option<&str>| {
            metric(&after, name, label) - metric(&before, name, label)
        };
        let outcomes: BTreeMap<&str, f64> = ["applied", "stale", "duplicate", "ignored"]
            .iter()
            .map(|o| {
                (
                    *o,
                    delta(
                        "drift_sentinel_events_total",
                        Some(&format!("outcome=\"{o}\"")),
                    ),
                )
            })
            .collect();
        let commits = delta("drift_sentinel_store_commits_total", None);
        let queued = delta("drift_sentinel_notifications_queued_total", None);
        let delivered = received.lock().map(|r| r.count).unwrap_or(0) - delivered_before;

        let templates = read_templates(&reqs)?;
        let mut latency = json!({});
        for share in [50u32, 90] {
            let rate = sink_result.rps * f64::from(share) / 100.0;
            log(&format!("{name}: open loop at {share}% = {rate:.0}/s"));
            let sink_latency = open_loop(
                sink.addr,
                &templates,
                rate,
                Duration::from_secs(args.latency_duration),
                args.connections,
                timeline(args, name, share).as_deref(),
            )?;
            let bare_latency = open_loop(
                ceiling_addr,
                &templates,
                rate,
                Duration::from_secs(args.latency_duration.min(5)),
                args.connections,
                None,
            )?;
            latency[format!("{share}%")] = json!({"sink": sink_latency, "ceiling": bare_latency});
        }
        let rss = status_kib(sink.proc.pid(), "VmRSS");
        sink.proc.stop(Duration::from_secs(25));
        ceiling.stop(Duration::from_secs(5));
        throughput[name] = json!({
            "ceiling": bare,
            "ceiling_decoding": decoded,
            "sink": sink_result,
            "sink_threads_cpu_us_per_event": threads,
            "ratio": sink_result.rps / bare.rps.max(1e-9),
            "outcomes": outcomes,
            "commits": commits,
            "events_per_commit": outcomes["applied"] / commits.max(1.0),
            "notifications_queued": queued,
            "webhook_deliveries": delivered,
            "sink_rss_kib_after": rss,
            "latency": latency,
        });
        log(&format!(
            "{name}: ceiling {:.0}/s, sink {:.0}/s, ratio {:.2}",
            bare.rps,
            sink_result.rps,
            sink_result.rps / bare.rps.max(1e-9)
        ));
    }
    if runs(Phase::Throughput) {
        report["throughput"] = throughput;
    }
    // 2. RSS with 10,000 and `objects` tracked objects.
    if runs(Phase::Memory) {
        report["memory"] = memory_phase(args, &fixtures, receiver_addr)?;
    }

    // 3. Start to first 202.
    if runs(Phase::Cold) {
        log("start to first 202");
        report["cold_start"] = cold_start(
            args,
            "sink-cold",
            sink_port,
            receiver_addr,
            args.cold_runs,
            true,
        )?;
    }

    // 4. Drift to first delivery attempt.
    if runs(Phase::Drift) {
        log("drift to first delivery attempt");
        let sink = start_sink(args, "sink-drift", sink_port, receiver_addr)?;
        report["drift_to_delivery"] =
            drift_latency(&sink, &fixtures, &received, args.drift_samples)?;
        sink.proc.stop(Duration::from_secs(25));
    }

    // 5. CPU per event as the world grows (issue 28).
    if runs(Phase::Flatness) {
        report["flatness"] = phases::flatness(args, &fixtures, receiver_addr)?;
    }

    // 6. Status churn on large objects (issue 28).
    if runs(Phase::Large) {
        report["large_objects"] = phases::large_objects(args, &fixtures, receiver_addr)?;
    }

    report["load_after"] = json!(loadavg());
    report["elapsed_seconds"] = json!(begun.elapsed().as_secs_f64());
    log(&format!("load average after: {}", loadavg()));
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(args.out.join("report.json"), &text).map_err(|e| e.to_string())?;
    let markdown = markdown(&report);
    std::fs::write(args.out.join("report.md"), &markdown).map_err(|e| e.to_string())?;
    println!("{markdown}");
    Ok(())
}

/// RSS with 10,000 and `objects` tracked objects, then one start on that store.
fn memory_phase(args: &RunArgs, fixtures: &Fixtures, receiver_addr: SocketAddr) -> Result<Value> {
    let sink_port = args.port;
    log("memory: loading distinct objects");
    let sink = start_sink(args, "sink-rss", sink_port, receiver_addr)?;
    std::thread::sleep(Duration::from_millis(500));
    let rss_empty = status_kib(sink.proc.pid(), "VmRSS");
    let mut memory = json!({"rss_kib_empty": rss_empty});
    let mut loaded_apps = 0;
    for target in [10_000usize, args.objects] {
        let apps = target.div_ceil(OBJECTS_PER_APP) - loaded_apps;
        let started = Instant::now();
        let (ok, failed) = load_objects(
            sink.addr,
            fixtures,
            10_000 + loaded_apps,
            apps,
            target - loaded_apps * OBJECTS_PER_APP,
            8,
        );
        loaded_apps += apps;
        std::thread::sleep(Duration::from_secs(1));
        let text = scrape(sink.addr);
        let tracked = metric(&text, "drift_sentinel_tracked_objects", None);
        let state_bytes = metric(&text, "drift_sentinel_tracked_state_bytes", None);
        let rss = status_kib(sink.proc.pid(), "VmRSS");
        log(&format!(
            "memory: {tracked} objects, RSS {rss} KiB ({ok} ok, {failed} failed, {:.1}s)",
            started.elapsed().as_secs_f64()
        ));
        memory[format!("{target}")] = json!({"tracked_objects": tracked, "rss_kib": rss,
            "state_bytes": state_bytes,
            "hwm_kib": status_kib(sink.proc.pid(), "VmHWM"), "failed": failed,
            "load_seconds": started.elapsed().as_secs_f64()});
    }
    let db = args.work.join("sink-rss/drift-sentinel.db");
    if let Ok(connection) =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    {
        if let Ok((count, avg)) = connection.query_row(
            "SELECT COUNT(*), AVG(LENGTH(body)) FROM objects",
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, f64>(1)?)),
        ) {
            memory["stored_objects"] = json!(count);
            memory["compact_state_json_bytes_avg"] = json!(avg);
        }
    }
    sink.proc.stop(Duration::from_secs(25));
    // Cold start with the 100,000-object store, once, for information.
    let big_start = cold_start(args, "sink-rss", sink_port, receiver_addr, 1, false)?;
    memory["start_to_first_202_ms_with_store"] = big_start["p50_ms"].clone();
    Ok(memory)
}

/// Starts the sink `runs` times on the store `name` (made fresh when `fresh`), measuring from
/// just before `spawn` to the first `202` for an event sent as soon as the port accepts.
/// `object`'s `verb` event in binary mode at resourceVersion `rv`, with a new id and the time
/// now, written into `out`.
fn binary_event(
    object: &world::Object,
    verb: &str,
    rv: &str,
    rng: &mut Rng,
    clock: &mut Clock,
    out: &mut Vec<u8>,
) {
    let template = world::request(Mode::Binary, verb, object, world::ID_PLACE, world::RV_PLACE);
    world::fill_at(&template, &rng.id(), rv, clock.now(), out);
}

fn cold_start(
    args: &RunArgs,
    name: &str,
    port: u16,
    receiver: SocketAddr,
    runs: usize,
    fresh: bool,
) -> Result<Value> {
    let config = if fresh {
        write_config(args, name, port, receiver)?
    } else {
        args.work.join(name).join("config.yaml")
    };
    let addr: SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let fixtures = Fixtures::load(&repo_root())?;
    let mut rng = Rng::new(99);
    let mut clock = Clock::new();
    let mut samples = Vec::new();
    for run in 0..runs {
        let object = &world::app(&fixtures, 5_000_000 + run)[0];
        let mut request = Vec::new();
        // Its time is when it is made, just before the spawn: the tries until the port accepts
        // resend the same event, as an adapter's retries do.
        binary_event(
            object,
            "add",
            "000000000000001",
            &mut rng,
            &mut clock,
            &mut request,
        );
        let started = Instant::now();
        let proc = Proc::spawn(
            name,
            Command::new(&args.bin)
                .arg("serve")
                .arg("--config")
                .arg(&config),
            &args.work.join(format!("{name}-start.log")),
        )?;
        let deadline = started + Duration::from_secs(60);
        let mut first = None;
        while Instant::now() < deadline {
            if let Ok(mut stream) = std::net::TcpStream::connect(addr) {
                let _ = stream.set_nodelay(true);
                drop(stream.flush());
                let mut conn = Conn::new(addr);
                if let Ok((202, _)) = conn.roundtrip(&request) {
                    first = Some(started.elapsed());
                    break;
                }
            }
            std::thread::sleep(Duration::from_micros(250));
        }
        proc.stop(Duration::from_secs(25));
        match first {
            Some(elapsed) => samples.push(elapsed.as_micros() as u64),
            None => return Err(format!("{name}: no 202 within 60 s")),
        }
    }
    samples.sort_unstable();
    let ms = |p: f64| percentile(&samples, p) as f64 / 1000.0;
    Ok(
        json!({"runs": samples.len(), "p50_ms": ms(50.0), "p99_ms": ms(99.0),
              "min_ms": ms(0.0), "max_ms": samples.last().copied().unwrap_or(0) as f64 / 1000.0}),
    )
}

/// For each sample: a new Service, alone in its namespace, is sent (its baseline), then the same
/// Service edited by `kubectl-edit` (`manual_edit`, zero grace: it fires on that event). Measured from just before
/// that request is written to the moment the webhook receiver gets the firing notification.
fn drift_latency(
    sink: &Sink,
    fixtures: &Fixtures,
    received: &Arc<Mutex<Received>>,
    samples: usize,
) -> Result<Value> {
    let mut rng = Rng::new(5);
    let mut clock = Clock::new();
    let mut conn = Conn::new(sink.addr);
    let mut from_send = Vec::new();
    let mut from_ack = Vec::new();
    let mut missing = 0;
    let mut buf = Vec::new();
    for sample in 0..samples {
        let mut service = world::app(fixtures, 3_000_000 + sample).swap_remove(0);
        // A namespace of its own: the drift is the first of its group, which `groupWait: 0s`
        // sends at once (a group's next drifts wait for its `groupInterval`, by design).
        service.value["metadata"]["namespace"] = json!(format!("latency-{sample:05}"));
        let name = service.ident().3;
        binary_event(
            &service,
            "add",
            "000000000000001",
            &mut rng,
            &mut clock,
            &mut buf,
        );
        if !matches!(conn.roundtrip(&buf), Ok((202, _))) {
            return Err("baseline event not accepted".into());
        }
        // Step 3 of the Service script is the kubectl-edit.
        let mut op = Op::Status;
        for step in 0..=3 {
            op = service.step(step);
        }
        if op != Op::Drift {
            return Err("script step 3 is not a drift".into());
        }
        binary_event(
            &service,
            "update",
            "000000000000002",
            &mut rng,
            &mut clock,
            &mut buf,
        );
        let sent = Instant::now();
        if !matches!(conn.roundtrip(&buf), Ok((202, _))) {
            return Err("drift event not accepted".into());
        }
        let acked = Instant::now();
        let deadline = sent + Duration::from_secs(5);
        let mut arrival = None;
        while Instant::now() < deadline && arrival.is_none() {
            arrival = received.lock().ok().and_then(|r| {
                r.arrivals
                    .iter()
                    .rev()
                    .find(|(at, kind, names)| {
                        *at >= sent && kind == "drift.firing" && names.contains(&name)
                    })
                    .map(|(at, _, _)| *at)
            });
            if arrival.is_none() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        match arrival {
            Some(at) => {
                from_send.push((at - sent).as_micros() as u64);
                from_ack.push(at.saturating_duration_since(acked).as_micros() as u64);
            }
            None => missing += 1,
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    from_send.sort_unstable();
    from_ack.sort_unstable();
    let ms = |v: &[u64], p: f64| percentile(v, p) as f64 / 1000.0;
    Ok(json!({
        "samples": from_send.len(), "missing": missing,
        "p50_ms": ms(&from_send, 50.0), "p99_ms": ms(&from_send, 99.0),
        "max_ms": from_send.last().copied().unwrap_or(0) as f64 / 1000.0,
        "after_202_p50_ms": ms(&from_ack, 50.0), "after_202_p99_ms": ms(&from_ack, 99.0),
    }))
}

fn markdown(report: &Value) -> String {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let mut out = String::new();
    let m = &report["machine"];
    out.push_str(&format!(
        "Machine: {} cores, {}; load average before {}, after {}; run took {:.0} s.\n\n",
        m["nproc"],
        m["cpu_model"].as_str().unwrap_or_default(),
        report["load_before"].as_str().unwrap_or_default(),
        report["load_after"].as_str().unwrap_or_default(),
        f(&report["elapsed_seconds"])
    ));
    if report["throughput"].is_object() {
        throughput_markdown(report, &mut out);
    }
    let mut rows = String::new();
    if report["memory"].is_object() {
        memory_markdown(report, &mut rows);
    }
    let c = &report["cold_start"];
    if c.is_object() {
        rows.push_str(&format!(
            "| start → first 202, {} runs: p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |\n",
            c["runs"],
            f(&c["p50_ms"]),
            f(&c["p99_ms"]),
            f(&c["max_ms"])
        ));
    }
    let mem = &report["memory"];
    if mem.is_object() {
        rows.push_str(&format!(
            "| start → first 202 with the {:.0}-object store (1 run) | {:.0} ms |\n",
            f(&mem["stored_objects"]),
            f(&mem["start_to_first_202_ms_with_store"])
        ));
    }
    let d = &report["drift_to_delivery"];
    if d.is_object() {
        rows.push_str(&format!(
            "| drift event sent → webhook arrival, {} samples: p50 / p99 / max | {:.1} / {:.1} / {:.1} ms |\n",
            d["samples"],
            f(&d["p50_ms"]),
            f(&d["p99_ms"]),
            f(&d["max_ms"])
        ));
        rows.push_str(&format!(
            "| … of which after the 202: p50 / p99 | {:.1} / {:.1} ms |\n",
            f(&d["after_202_p50_ms"]),
            f(&d["after_202_p99_ms"])
        ));
    }
    if !rows.is_empty() {
        out.push_str("\n| measure | value |\n|---|---|\n");
        out.push_str(&rows);
    }
    out.push_str(&phases::markdown(report));
    out
}

/// The events line and the throughput and latency table.
fn throughput_markdown(report: &Value, out: &mut String) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let e = &report["events"]["binary"];
    out.push_str(&format!(
        "Events: {} per cycle over {} objects ({} status-only, {} trusted spec, {} kubectl-edit); body {}–{} bytes (median {}, mean {}).\n\n",
        e["events"], e["objects"], e["status"], e["trusted"], e["drift"],
        e["body_bytes"]["min"], e["body_bytes"]["max"], e["body_bytes"]["p50"], e["body_bytes"]["mean"]
    ));
    out.push_str("| measure | binary mode | structured mode |\n|---|---|---|\n");
    let t = &report["throughput"];
    let row = |label: &str, pick: &dyn Fn(&Value) -> String| {
        format!(
            "| {label} | {} | {} |\n",
            pick(&t["binary"]),
            pick(&t["structured"])
        )
    };
    out.push_str(&row("bare axum ceiling, events/s", &|v| {
        format!("{:.0}", f(&v["ceiling"]["rps"]))
    }));
    out.push_str(&row("drift-sentinel, events/s", &|v| {
        format!("{:.0}", f(&v["sink"]["rps"]))
    }));
    out.push_str(&row("**ratio sink / ceiling**", &|v| {
        format!("**{:.2}**", f(&v["ratio"]))
    }));
    out.push_str(&row("non-2xx / socket errors (sink)", &|v| {
        format!("{} / {}", v["sink"]["non_2xx"], v["sink"]["errors"])
    }));
    out.push_str(&row("outcomes applied / stale / duplicate", &|v| {
        format!(
            "{:.0} / {:.0} / {:.0}",
            f(&v["outcomes"]["applied"]),
            f(&v["outcomes"]["stale"]),
            f(&v["outcomes"]["duplicate"])
        )
    }));
    out.push_str(&row("events per commit (group commit)", &|v| {
        format!("{:.1}", f(&v["events_per_commit"]))
    }));
    out.push_str(&row("notifications queued / webhook deliveries", &|v| {
        format!(
            "{:.0} / {}",
            f(&v["notifications_queued"]),
            v["webhook_deliveries"]
        )
    }));
    out.push_str(&row("CPU µs per event, sink (ceiling)", &|v| {
        format!(
            "{:.0} ({:.0})",
            f(&v["sink"]["cpu_us_per_request"]),
            f(&v["ceiling"]["cpu_us_per_request"])
        )
    }));
    out.push_str(&row(
        "CPU µs per event, ceiling decoding each event (edge + decode)",
        &|v| format!("{:.0}", f(&v["ceiling_decoding"]["cpu_us_per_request"])),
    ));
    out.push_str(&row("… its events/s", &|v| {
        format!("{:.0}", f(&v["ceiling_decoding"]["rps"]))
    }));
    out.push_str(&row("sink CPU µs per event by thread", &|v| {
        v["sink_threads_cpu_us_per_event"]
            .as_object()
            .map(|threads| {
                threads
                    .iter()
                    .map(|(name, us)| format!("{name} {:.1}", us.as_f64().unwrap_or(0.0)))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }));
    out.push_str(&row("cores used, sink (ceiling)", &|v| {
        format!(
            "{:.2} ({:.2})",
            f(&v["sink"]["cpu_cores"]),
            f(&v["ceiling"]["cpu_cores"])
        )
    }));
    for share in ["50%", "90%"] {
        out.push_str(&row(
            &format!("open loop at {share} of sink max: rate"),
            &|v| format!("{:.0}/s", f(&v["latency"][share]["sink"]["target_rps"])),
        ));
        out.push_str(&row(&format!("… sink p50 / p99 ms at {share}"), &|v| {
            let s = &v["latency"][share]["sink"];
            format!("{:.2} / {:.2}", f(&s["p50_ms"]), f(&s["p99_ms"]))
        }));
        out.push_str(&row("… ceiling p50 / p99 ms at the same rate", &|v| {
            let s = &v["latency"][share]["ceiling"];
            format!("{:.2} / {:.2}", f(&s["p50_ms"]), f(&s["p99_ms"]))
        }));
    }
    out.push_str(&row(
        "wrk closed-loop p50 / p99 ms, sink (64 connections)",
        &|v| {
            format!(
                "{:.2} / {:.2}",
                f(&v["sink"]["p50_ms"]),
                f(&v["sink"]["p99_ms"])
            )
        },
    ));
}

/// The memory rows of the second table.
fn memory_markdown(report: &Value, out: &mut String) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let mem = &report["memory"];
    // The second reading is at `--objects` (100,000 by default, 20,000 in a quick run): the
    // largest reading taken.
    let large = mem
        .as_object()
        .and_then(|readings| {
            readings
                .keys()
                .filter_map(|key| key.parse::<u64>().ok())
                .max()
        })
        .unwrap_or(100_000)
        .to_string();
    let large = &large;
    let per_object = (f(&mem[large]["rss_kib"]) - f(&mem["10000"]["rss_kib"])) * 1024.0
        / (f(&mem[large]["tracked_objects"]) - f(&mem["10000"]["tracked_objects"])).max(1.0);
    out.push_str(&format!(
        "| RSS, empty | {:.1} MiB |\n",
        f(&mem["rss_kib_empty"]) / 1024.0
    ));
    out.push_str(&format!(
        "| RSS with {:.0} tracked objects | {:.1} MiB |\n",
        f(&mem["10000"]["tracked_objects"]),
        f(&mem["10000"]["rss_kib"]) / 1024.0
    ));
    out.push_str(&format!(
        "| RSS with {:.0} tracked objects | {:.1} MiB |\n",
        f(&mem[large]["tracked_objects"]),
        f(&mem[large]["rss_kib"]) / 1024.0
    ));
    out.push_str(&format!(
        "| RSS per object (10k → 100k) / its compact state as JSON | {:.0} B / {:.0} B |\n",
        per_object,
        f(&mem["compact_state_json_bytes_avg"])
    ));
    let state_per_object = (f(&mem[large]["state_bytes"]) - f(&mem["10000"]["state_bytes"]))
        / (f(&mem[large]["tracked_objects"]) - f(&mem["10000"]["tracked_objects"])).max(1.0);
    out.push_str(&format!(
        "| state bytes per object (limits.maxStateBytes counts these) / RSS per state byte | {:.0} B / {:.2} |\n",
        state_per_object,
        per_object / state_per_object.max(1.0)
    ));
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL next to SQLite (`store`)

/// Throughput (closed loop, binary mode) and open-loop latency at 50 % and 90 % of each store's
/// own maximum, SQLite then PostgreSQL in the same run; then a standby's takeover of a writer
/// killed with a 100,000-object PostgreSQL store: the state load it logs and kill-to-ready.
fn store_phases(args: &RunArgs, throughput_url: &str, takeover_url: &str) -> Result<()> {
    let begun = Instant::now();
    std::fs::create_dir_all(&args.work).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&args.out).map_err(|e| e.to_string())?;
    if let Some(dir) = &args.timelines {
        // Before any process starts: a failure later would leave them running.
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut report = json!({"machine": machine(), "load_before": loadavg()});
    let templates_dir = args.work.join("templates");
    report["events"] = gen(&templates_dir, args.apps, None)?;
    let fixtures = Fixtures::load(&repo_root())?;
    let receiver_addr: SocketAddr = format!("127.0.0.1:{}", args.port + 9)
        .parse()
        .map_err(|e| format!("{e}"))?;
    let _received = start_receiver(receiver_addr)?;
    let reqs = templates_dir.join("binary.reqs");
    let templates = read_templates(&reqs)?;
    let mut stores = json!({});
    for (name, url) in [
        ("sqlite", None),
        ("postgres", Some(throughput_url.to_string())),
    ] {
        let args = RunArgs {
            store_url: url,
            ..args.clone()
        };
        log(&format!("{name}: throughput"));
        let sink = start_sink(&args, &format!("store-{name}"), args.port, receiver_addr)?;
        wrk(&args, sink.addr, &reqs, 3)?;
        let before = scrape(sink.addr);
        let result = measured_wrk(&args, sink.proc.pid(), sink.addr, &reqs)?;
        let after = scrape(sink.addr);
        let commits = metric(&after, "drift_sentinel_store_commits_total", None)
            - metric(&before, "drift_sentinel_store_commits_total", None);
        let mut latency = json!({});
        for share in [50u32, 90] {
            let rate = result.rps * f64::from(share) / 100.0;
            log(&format!("{name}: open loop at {share}% = {rate:.0}/s"));
            latency[format!("{share}%")] = json!(open_loop(
                sink.addr,
                &templates,
                rate,
                Duration::from_secs(args.latency_duration),
                args.connections,
                timeline(&args, name, share).as_deref(),
            )?);
        }
        sink.proc.stop(Duration::from_secs(25));
        log(&format!("{name}: {:.0}/s", result.rps));
        stores[name] = json!({"sink": result, "commits": commits, "latency": latency});
    }
    let ratio = stores["postgres"]["sink"]["rps"].as_f64().unwrap_or(0.0)
        / stores["sqlite"]["sink"]["rps"]
            .as_f64()
            .unwrap_or(1.0)
            .max(1e-9);
    report["stores"] = stores;
    report["postgres_to_sqlite_throughput"] = json!(ratio);

    // Takeover: a writer holding `objects` objects is killed; a standby takes the lease when
    // it expires and loads the state.
    let takeover = RunArgs {
        store_url: Some(takeover_url.to_string()),
        ..args.clone()
    };
    log(&format!("takeover: loading {} objects", args.objects));
    let writer = start_sink(&takeover, "takeover-a", args.port, receiver_addr)?;
    let (ok, failed) = load_objects(
        writer.addr,
        &fixtures,
        10_000,
        args.objects.div_ceil(OBJECTS_PER_APP),
        args.objects,
        8,
    );
    log(&format!("takeover: {ok} loaded, {failed} failed"));
    let standby_port = args.port + 2;
    let config = write_config(&takeover, "takeover-b", standby_port, receiver_addr)?;
    let standby_addr: SocketAddr = format!("127.0.0.1:{standby_port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let standby_log = args.work.join("takeover-b.log");
    let standby = Proc::spawn(
        "takeover-b",
        Command::new(&args.bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info"),
        &standby_log,
    )?;
    wait_ready(standby_addr, "/healthz", Duration::from_secs(20))?;
    std::thread::sleep(Duration::from_millis(500));
    let standby_rss_waiting = status_kib(standby.pid(), "VmRSS");
    let writer_rss = status_kib(writer.proc.pid(), "VmRSS");
    let mut killer = writer.proc;
    let _ = killer.child.kill();
    let _ = killer.child.wait();
    let killed = Instant::now();
    wait_ready(standby_addr, "/readyz", Duration::from_secs(120))?;
    let kill_to_ready = killed.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&standby_log).unwrap_or_default();
    let became = text
        .lines()
        .find(|line| line.contains("Became the writer."))
        .and_then(|line| serde_json::from_str::<Value>(line).ok())
        .unwrap_or(Value::Null);
    let fields = if became["fields"].is_object() {
        became["fields"].clone()
    } else {
        became.clone()
    };
    let rss = status_kib(standby.pid(), "VmRSS");
    standby.stop(Duration::from_secs(25));
    report["takeover"] = json!({
        "objects_loaded": fields["objects"],
        "state_load_ms": fields["load_ms"],
        "kill_to_ready_seconds": kill_to_ready,
        "lease": "shipped defaults (ttl 10s, renewInterval 2s, retryInterval 1s)",
        "standby_rss_kib_after": rss,
        "standby_rss_kib_waiting": standby_rss_waiting,
        "writer_rss_kib_before_kill": writer_rss,
        "objects_sent": ok,
        "objects_failed": failed,
    });
    report["load_after"] = json!(loadavg());
    report["elapsed_seconds"] = json!(begun.elapsed().as_secs_f64());
    let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(args.out.join("store-report.json"), &text).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}
