//! The `drift-sentinel` command: `serve` (default), `replay`, `check`, `config validate`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

// mimalloc instead of glibc malloc: events are decoded on the HTTP workers and freed on the
// writer thread, a cross-thread pattern where glibc spent a quarter of the CPU in malloc, free
// and consolidation under load (BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "drift-sentinel",
    version,
    about = "Knative drift detector: a CloudEvents sink for ApiServerSource events"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file for the default `serve` command.
    #[arg(long, short, global = true, env = "DRIFT_SENTINEL_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the CloudEvents sink (the default).
    Serve,
    /// Run recorded CloudEvents through the drift engine and print every drift transition.
    Replay {
        /// Files or directories of structured CloudEvents (JSON lines, a JSON array, or one event).
        #[arg(required = true)]
        events: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: ReplayFormat,
        /// After the last event, advance the clock by this much so pending drifts show whether
        /// they fire.
        #[arg(long, default_value = "1h")]
        settle: String,
    },
    /// Compare a live snapshot with the desired manifests in Git: the CI/CD regression gate.
    ///
    /// Exit code 0: nothing at or above --fail-on; 1: drift found; 2: bad input.
    Check {
        /// Desired manifests: a directory (every .yaml, .yml and .json below it) or a file.
        #[arg(long)]
        baseline: PathBuf,
        /// Live objects: the output of `kubectl get ksvc,configurations,routes,revisions,configmaps
        /// -A -o yaml`, a directory of such files, or `-` for standard input.
        #[arg(
            long,
            required_unless_present = "live_cluster",
            conflicts_with = "live_cluster"
        )]
        live: Option<PathBuf>,
        /// Read the live objects straight from the cluster (the kinds of `resync.resources`),
        /// through the kubeconfig (`--kubeconfig`, `$KUBECONFIG`, `~/.kube/config`) or in-cluster.
        #[arg(long)]
        live_cluster: bool,
        /// The kubeconfig file for --live-cluster.
        #[arg(long, requires = "live_cluster")]
        kubeconfig: Option<PathBuf>,
        /// The kubeconfig context for --live-cluster (default: the current context).
        #[arg(long, requires = "live_cluster")]
        context: Option<String>,
        /// Check one namespace only (--live-cluster): desired objects of other namespaces are
        /// left out too.
        #[arg(long, requires = "live_cluster")]
        namespace: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: CheckFormat,
        /// Lowest severity that fails the check.
        #[arg(long, value_enum, default_value = "warning")]
        fail_on: FailOn,
    },
    /// Work with config files.
    Config {
        #[command(subcommand)]
        action: ConfigCommand,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ReplayFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CheckFormat {
    Text,
    Markdown,
    Json,
    Junit,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FailOn {
    Info,
    Warning,
    Critical,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a config file and print what is wrong.
    Validate {
        /// The file to check.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
        Command::Replay {
            events,
            format,
            settle,
        } => replay(cli.config, &events, format, &settle),
        Command::Check {
            baseline,
            live,
            live_cluster,
            kubeconfig,
            context,
            namespace,
            format,
            fail_on,
        } => {
            let live = match (live, live_cluster) {
                (Some(path), _) => Live::Files(path),
                (None, _) => Live::Cluster {
                    kubeconfig,
                    context,
                    namespace,
                },
            };
            check(cli.config, &baseline, live, format, fail_on)
        }
        Command::Config {
            action: ConfigCommand::Validate { file },
        } => match drift_sentinel::config::load_file(&file) {
            Ok(_) => {
                println!("{}: ok", file.display());
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("{}: {error}", file.display());
                ExitCode::from(2)
            }
        },
    }
}

fn load_config(path: Option<&PathBuf>) -> Result<drift_sentinel::config::Config, String> {
    match path {
        Some(path) => drift_sentinel::config::load_file(path)
            .map_err(|error| format!("{}: {error}", path.display())),
        None => drift_sentinel::config::load_str("", &|name| std::env::var(name).ok())
            .map_err(|error| error.to_string()),
    }
}

fn replay(
    config_path: Option<PathBuf>,
    inputs: &[PathBuf],
    format: ReplayFormat,
    settle: &str,
) -> ExitCode {
    let fail = |message: String| {
        eprintln!("drift-sentinel replay: {message}");
        ExitCode::from(2)
    };
    let config = match load_config(config_path.as_ref()) {
        Ok(config) => config,
        Err(message) => return fail(message),
    };
    let settle = match drift_sentinel::time::parse_duration(settle) {
        Ok(duration) => i64::try_from(duration.as_millis()).unwrap_or(i64::MAX),
        Err(message) => return fail(format!("--settle: {message}")),
    };
    let rules = match drift_sentinel::reload::load_rules(&config) {
        Ok(rules) => std::sync::Arc::new(rules),
        Err(error) => return fail(error.to_string()),
    };
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let entries = match std::fs::read_dir(input) {
                Ok(entries) => entries,
                Err(error) => return fail(format!("{}: {error}", input.display())),
            };
            let mut inside: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    path.extension()
                        .is_some_and(|ext| ext == "json" || ext == "jsonl")
                })
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(input.clone());
        }
    }
    let mut events = Vec::new();
    for file in &files {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(error) => return fail(format!("{}: {error}", file.display())),
        };
        match drift_sentinel::replay::parse_file(&file.display().to_string(), &text) {
            Ok(parsed) => events.extend(parsed),
            Err(error) => return fail(error.to_string()),
        }
    }
    let clusters = drift_sentinel::app::cluster_names(&config);
    match drift_sentinel::replay::replay(&events, rules, &clusters, settle) {
        Ok(transitions) => {
            for transition in &transitions {
                match format {
                    ReplayFormat::Json => {
                        println!("{}", drift_sentinel::replay::transition_json(transition))
                    }
                    ReplayFormat::Text => {
                        println!("{}", drift_sentinel::replay::transition_text(transition))
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(error.to_string()),
    }
}

/// Where `check` reads the live objects.
enum Live {
    Files(PathBuf),
    Cluster {
        kubeconfig: Option<PathBuf>,
        context: Option<String>,
        namespace: Option<String>,
    },
}

#[cfg(feature = "cluster")]
fn live_cluster_snapshot(
    config: &drift_sentinel::config::Config,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<&str>,
    desired: &mut drift_sentinel::manifest::Manifests,
) -> Result<drift_sentinel::manifest::Manifests, String> {
    use drift_sentinel::cluster::{snapshot, Cluster, Resource};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the runtime: {error}"))?;
    runtime.block_on(async {
        let kubeconfig = kubeconfig.or_else(|| config.resync.kubeconfig.clone());
        let context = context.or_else(|| config.resync.context.clone());
        let cluster = Cluster::connect(kubeconfig.as_deref(), context.as_deref())
            .await
            .map_err(|error| error.to_string())?;
        let resources = config
            .resync
            .resources
            .iter()
            .map(Resource::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| error.to_string())?;
        // Desired objects of kinds (or labels) the listed resources do not cover cannot be
        // compared with the cluster: leaving them in would report them missing.
        let skipped = desired.retain(|document| {
            resources
                .iter()
                .any(|resource| resource.covers(document))
        });
        if !skipped.is_empty() {
            eprintln!(
                "drift-sentinel check: {} desired object(s) not checked: --live-cluster lists only resync.resources ({}): {}",
                skipped.len(),
                resources
                    .iter()
                    .map(Resource::name)
                    .collect::<Vec<_>>()
                    .join(", "),
                skipped.join(", ")
            );
        }
        snapshot(&cluster, &resources, namespace, config.resync.page_size)
            .await
            .map_err(|error| error.to_string())
    })
}

#[cfg(not(feature = "cluster"))]
fn live_cluster_snapshot(
    _config: &drift_sentinel::config::Config,
    _kubeconfig: Option<PathBuf>,
    _context: Option<String>,
    _namespace: Option<&str>,
    _desired: &mut drift_sentinel::manifest::Manifests,
) -> Result<drift_sentinel::manifest::Manifests, String> {
    Err("--live-cluster needs a build with the `cluster` feature".to_string())
}

fn check(
    config_path: Option<PathBuf>,
    baseline: &std::path::Path,
    live: Live,
    format: CheckFormat,
    fail_on: FailOn,
) -> ExitCode {
    use drift_sentinel::check;
    use drift_sentinel::model::Severity;
    use std::io::Write;
    let fail = |message: String| {
        eprintln!("drift-sentinel check: {message}");
        ExitCode::from(2)
    };
    let config = match load_config(config_path.as_ref()) {
        Ok(config) => config,
        Err(message) => return fail(message),
    };
    // Only `rules:` matter here; `rules.baselineDir` is the sink's, `--baseline` is the check's.
    let rules = std::sync::Arc::new(config.rules.compile());
    let fail_on = match fail_on {
        FailOn::Info => Severity::Info,
        FailOn::Warning => Severity::Warning,
        FailOn::Critical => Severity::Critical,
    };
    let result = match live {
        Live::Files(path) => {
            check::run(baseline, &path, rules, fail_on).map_err(|error| error.to_string())
        }
        Live::Cluster {
            kubeconfig,
            context,
            namespace,
        } => (|| {
            let mut desired =
                drift_sentinel::manifest::load(baseline).map_err(|error| error.to_string())?;
            if let Some(namespace) = &namespace {
                desired.retain_namespace(namespace);
            }
            let live = live_cluster_snapshot(
                &config,
                kubeconfig,
                context,
                namespace.as_deref(),
                &mut desired,
            )?;
            check::check(&desired, &live, rules, fail_on).map_err(|error| error.to_string())
        })(),
    };
    let report = match result {
        Ok(report) => report,
        Err(error) => return fail(error),
    };
    let format = match format {
        CheckFormat::Text => check::Format::Text,
        CheckFormat::Markdown => check::Format::Markdown,
        CheckFormat::Json => check::Format::Json,
        CheckFormat::Junit => check::Format::Junit,
    };
    let output = check::render(&report, format);
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(output.as_bytes())
        .and_then(|()| stdout.flush())
    {
        return fail(format!("cannot write the report: {error}"));
    }
    if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn serve(config_path: Option<PathBuf>) -> ExitCode {
    drift_sentinel::telemetry::init();
    // Both ring and nothing else: pick the provider before any TLS client is built, or rustls
    // panics when it cannot choose.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match load_config(config_path.as_ref()) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("drift-sentinel: invalid config: {error}");
            tracing::error!(message = "Invalid config.", %error);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("drift-sentinel: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(drift_sentinel::app::run(config, config_path)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(
                message = "drift-sentinel stopped with an error.",
                error = format!("{error:#}")
            );
            eprintln!("drift-sentinel: {error:#}");
            ExitCode::FAILURE
        }
    }
}
