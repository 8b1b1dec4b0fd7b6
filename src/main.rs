//! The `drift-sentinel` command: parses the arguments and calls one of `commands` (`serve`, the
//! default; `replay`; `check`; `compare`; `config validate`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use drift_model::Severity;
use drift_sentinel::check::Format;
use drift_sentinel::commands::{self, check::Live};

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
    /// Config file (YAML). `serve` (the default) and `replay` use all of it; `check` uses its
    /// `rules:` (classes, scope, ignore paths, watched ConfigMaps) and `resync:` (what
    /// `--live-cluster` lists, kubeconfig and context); `admission export` its
    /// `rules.invariants`.
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
    #[command(group(clap::ArgGroup::new("source").required(true).args(["live", "live_cluster"])))]
    Check {
        /// Desired manifests: a directory (every .yaml, .yml and .json below it) or a file.
        /// Optional when invariants are given (--invariants or `rules.invariants`): then only
        /// the invariants and the state-based classes are checked.
        #[arg(long)]
        baseline: Option<PathBuf>,
        /// Live objects: the output of `kubectl get ... -A -o yaml` for the Knative kinds and
        /// ConfigMaps to check (docs/check.md gives the command), a directory of such files, or
        /// `-` for standard input.
        #[arg(long, conflicts_with = "live_cluster")]
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
        /// A file of team invariants (a list of rules, or `invariants: [...]`), checked on the
        /// live objects besides the config's `rules.invariants`. Repeatable.
        #[arg(long = "invariants", value_name = "FILE")]
        invariants: Vec<PathBuf>,
    },
    /// Compare snapshots of clusters that should be alike (fleet drift): ConfigMap keys, spec
    /// fields, behavioural labels and annotations, Knative versions, objects missing from some.
    ///
    /// Uses the config's `fleet.groups` when it has any, else compares every snapshot with every
    /// other. Exit code 0: nothing at or above --fail-on; 1: divergence found; 2: bad input.
    #[command(group(clap::ArgGroup::new("source").required(true).args(["live", "live_cluster"])))]
    Compare {
        /// A cluster's objects (`kubectl get ... -A -o yaml`), a directory of such files; named
        /// after the file stem (or --name). Give two or more.
        #[arg(long, conflicts_with = "live_cluster")]
        live: Vec<PathBuf>,
        /// The cluster name of each --live, in order (default: the file stem).
        #[arg(long, requires = "live")]
        name: Vec<String>,
        /// Read each cluster straight from its API (the kinds of `resync.resources`), one per
        /// --context, named after the context.
        #[arg(long)]
        live_cluster: bool,
        /// The kubeconfig file for --live-cluster.
        #[arg(long, requires = "live_cluster")]
        kubeconfig: Option<PathBuf>,
        /// A kubeconfig context to read with --live-cluster. Give two or more.
        #[arg(long = "context", requires = "live_cluster")]
        contexts: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: CheckFormat,
        /// Lowest severity that fails the comparison.
        #[arg(long, value_enum, default_value = "warning")]
        fail_on: FailOn,
    },
    /// Team invariants (`rules.invariants`) outside the service.
    Invariants {
        #[command(subcommand)]
        action: InvariantsCommand,
    },
    /// Team invariants as Kubernetes ValidatingAdmissionPolicies.
    Admission {
        #[command(subcommand)]
        action: AdmissionCommand,
    },
    /// Work with config files.
    Config {
        #[command(subcommand)]
        action: ConfigCommand,
    },
    /// Work with the store.
    Store {
        #[command(subcommand)]
        action: StoreCommand,
    },
    /// Run a drill catalog against a cluster: inject known drifts, check through the sink's API
    /// that each is caught (and repaired), put every object back, report.
    ///
    /// Only namespaces labelled drift-sentinel.dev/drills: "allowed" are touched (checked before
    /// any request). Exit code 0: every drill passed (--recover: all put back); 1: a drill
    /// failed, a stop by a signal, in chaos a false alert (--recover: something not put back);
    /// 2: bad input (catalog, flags, a namespace not allowed, the journal, the API server or the
    /// sink unreachable). --config is not read.
    Drill(Box<DrillArgs>),
    /// Write a restorable manifest of every tracked object, from the store: a backup the team
    /// can `kubectl apply` (server-set fields, owner references, hashed annotations left out).
    ///
    /// Objects a controller owns (its owner re-creates them), Pods, Secrets and ConfigMaps with
    /// binaryData are left out. Reads the store without writing to it; may run beside the
    /// service. Files: OUT/<cluster>/<namespace>/<kind>[.<group>]-<name>.yaml (kind and group in
    /// lower case), or one YAML stream on standard output with `--out -`. Exit code 0: written;
    /// 2: the config, the store, OUT or a file failed.
    Export {
        /// The state each object was last seen in (the only export there is; required so the
        /// command says what it writes).
        #[arg(long, required = true)]
        last_good: bool,
        /// Only this cluster's objects.
        #[arg(long)]
        cluster: Option<String>,
        /// Only this namespace's objects.
        #[arg(long)]
        namespace: Option<String>,
        /// Only this kind (`Service`, any case, or `Service.serving.knative.dev`).
        #[arg(long)]
        kind: Option<String>,
        /// Deleted objects too, as the delete showed them, while they are remembered (the latest
        /// of a name, and none whose name a live object has again).
        #[arg(long)]
        deleted: bool,
        /// The directory to write to: new (it is created) or empty; `-` for one YAML stream on
        /// standard output (the summary then goes to standard error).
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Copy a SQLite store into an empty PostgreSQL database (one transaction, counts checked).
    ///
    /// Stop the service first. The password comes from the URL or from PGPASSWORD. Exit code 0:
    /// copied; 2: refused (a non-empty target, a bad argument) or failed, nothing committed.
    Migrate {
        /// The SQLite store: `sqlite:PATH`.
        #[arg(long)]
        from: String,
        /// The PostgreSQL database: `postgres://user@host:5432/db?sslmode=require`.
        #[arg(long, env = "DRIFT_SENTINEL_STORE_URL", hide_env_values = true)]
        to: String,
        /// A PEM bundle of CA certificates for the server's TLS certificate (besides the
        /// Mozilla roots).
        #[arg(long)]
        ca_file: Option<PathBuf>,
    },
}

/// `drift-sentinel drill`'s arguments (boxed: the other commands' are small).
#[derive(clap::Args)]
struct DrillArgs {
    /// The drill catalog (`drills:`; see examples/drills/knative.yaml). Not with --recover.
    #[arg(long, required_unless_present_any = ["recover", "forget"])]
    catalog: Option<PathBuf>,
    /// Only this drill (repeat for more).
    #[arg(long = "drill", value_name = "NAME")]
    only: Vec<String>,
    /// Not this drill (repeat for more).
    #[arg(long, value_name = "NAME")]
    skip: Vec<String>,
    /// The kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: the current one).
    #[arg(long)]
    context: Option<String>,
    /// Send nothing: read each target and print every request.
    #[arg(long)]
    dry_run: bool,
    /// The running sink's base URL, whose drift API the drills read.
    #[arg(long, value_name = "URL")]
    sink: Option<String>,
    /// The sink's API token (its api.token).
    #[arg(long, env = "DRIFT_SENTINEL_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The sink's name for this cluster, when it watches several (drifts' `cluster`).
    #[arg(long, value_name = "NAME")]
    cluster: Option<String>,
    /// The journal of drills not yet put back (for --recover after a crash).
    #[arg(long, default_value = "drift-sentinel-drill.journal")]
    journal: PathBuf,
    /// Put back what the journal holds (a run that was killed), and nothing else; with the
    /// killed run's --kubeconfig/--context.
    #[arg(long, conflicts_with_all = ["dry_run", "chaos", "catalog", "only", "skip", "forget"])]
    recover: bool,
    /// Drop this drill's entry from the journal (you put its object back by hand, or keep
    /// the change), and nothing else; repeat for more.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["dry_run", "chaos", "catalog", "only", "skip"])]
    forget: Vec<String>,
    /// Random drills from the catalog at --rate for --duration.
    #[arg(long, requires_all = ["duration", "rate"])]
    chaos: bool,
    /// How long a chaos run starts drills, e.g. 30m (required with --chaos).
    #[arg(long, requires = "chaos")]
    duration: Option<String>,
    /// Drills per second, minute or hour on average, e.g. 2/m (required with --chaos).
    #[arg(long, requires = "chaos")]
    rate: Option<String>,
    /// The chaos run's seed (printed when not given), to repeat a run.
    #[arg(long, requires = "chaos")]
    seed: Option<u64>,
    /// How often the sink's API and the objects are polled.
    #[arg(long, default_value = "500ms")]
    poll: String,
    /// How long to wait after the last drill before looking up false alerts, so a drift in
    /// its grace can fire (default: 2m with --chaos, else 0s).
    #[arg(long)]
    settle: Option<String>,
    /// The report's format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    format: CheckFormat,
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
enum AdmissionCommand {
    /// Write ValidatingAdmissionPolicy + ValidatingAdmissionPolicyBinding YAML from team
    /// invariants, judged by the API server as the sink judges them (Kubernetes 1.30+).
    ///
    /// A rule the API server cannot judge as the sink does (it reads status, calls a function
    /// the API server lacks, costs more than its limits, ...) is named with the reason and not
    /// written. Exit code 0: written; 1: a rule is not exportable (nothing written unless
    /// --skip-unexportable); 2: bad input (a rules file, a flag, OUT).
    Export {
        /// A rules file (a list, or `invariants: [...]`). Repeatable; with --config, the config's
        /// `rules.invariants` come first.
        #[arg(long = "invariants")]
        invariants: Vec<PathBuf>,
        /// Export only this rule (by name). Repeatable; default: every rule.
        #[arg(long = "rule")]
        rules: Vec<String>,
        /// What the bindings do: warn (Warn + Audit), audit (Audit) or deny (Deny + Audit).
        #[arg(long, value_enum, default_value = "warn")]
        action: AdmissionAction,
        /// Add a policy on hand edits of what Knative's controllers own and of Knative's
        /// ConfigMaps (anyone but the controllers, the garbage collector and --allow).
        #[arg(long)]
        protect_managed: bool,
        /// A user --protect-managed lets through besides the defaults
        /// (`system:serviceaccount:NS:NAME`). Repeatable.
        #[arg(long = "allow", requires = "protect_managed")]
        allow: Vec<String>,
        /// The API server's Kubernetes version: which CEL functions a new policy may use.
        #[arg(long, default_value = "1.30")]
        kubernetes_version: String,
        /// The cluster the policies are for (rules that select clusters by name).
        #[arg(long)]
        cluster: Option<String>,
        /// Write the exportable rules and exit 0 when some are not.
        #[arg(long)]
        skip_unexportable: bool,
        /// Write one file per policy and a kustomize Component into this new or empty
        /// directory (default: one YAML stream on standard output).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum AdmissionAction {
    Warn,
    Audit,
    Deny,
}

#[derive(Subcommand)]
enum InvariantsCommand {
    /// Evaluate rules against a directory of YAML objects, as unit tests: per rule and object,
    /// held, broken or error.
    ///
    /// Exit code 0: nothing broken and no error (or, when objects carry the annotation
    /// `invariants.drift-sentinel.dev/expect`, every expectation met); 1: something broken (an
    /// expectation not met); 2: bad input or an evaluation error.
    Test {
        /// The rules: a list of rules, or `invariants: [...]`, or a whole config file.
        file: PathBuf,
        /// Objects: a YAML or JSON file or a directory of them (Lists are flattened).
        #[arg(long)]
        against: PathBuf,
        /// The cluster name the objects are judged under (rules may match on `clusters`).
        #[arg(long, default_value = "default")]
        cluster: String,
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        format: ReplayFormat,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a config file and print what is wrong.
    Validate {
        /// The file to check.
        file: PathBuf,
    },
}

fn check_format(format: CheckFormat) -> Format {
    match format {
        CheckFormat::Text => Format::Text,
        CheckFormat::Markdown => Format::Markdown,
        CheckFormat::Json => Format::Json,
        CheckFormat::Junit => Format::Junit,
    }
}

fn severity(fail_on: FailOn) -> Severity {
    match fail_on {
        FailOn::Info => Severity::Info,
        FailOn::Warning => Severity::Warning,
        FailOn::Critical => Severity::Critical,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => commands::serve::run(cli.config),
        Command::Replay {
            events,
            format,
            settle,
        } => commands::replay::run(
            cli.config,
            &events,
            matches!(format, ReplayFormat::Json),
            &settle,
        ),
        Command::Check {
            baseline,
            live,
            live_cluster,
            kubeconfig,
            context,
            namespace,
            format,
            fail_on,
            invariants,
        } => {
            let live = match (live, live_cluster) {
                (Some(path), _) => Live::Files(path),
                (None, _) => Live::Cluster {
                    kubeconfig,
                    context,
                    namespace,
                },
            };
            commands::check::run(
                cli.config,
                baseline.as_deref(),
                live,
                check_format(format),
                severity(fail_on),
                &invariants,
            )
        }
        Command::Compare {
            live,
            name,
            live_cluster,
            kubeconfig,
            contexts,
            format,
            fail_on,
        } => {
            let snapshots = if live_cluster {
                commands::compare::Snapshots::Contexts {
                    kubeconfig,
                    contexts,
                }
            } else {
                match commands::compare::names_of(live, &name) {
                    Ok(files) => commands::compare::Snapshots::Files(files),
                    Err(message) => {
                        eprintln!("drift-sentinel compare: {message}");
                        return ExitCode::from(2);
                    }
                }
            };
            commands::compare::run(
                cli.config,
                snapshots,
                check_format(format),
                severity(fail_on),
            )
        }
        Command::Invariants {
            action:
                InvariantsCommand::Test {
                    file,
                    against,
                    cluster,
                    format,
                },
        } => commands::invariants::test(
            &file,
            &against,
            &cluster,
            matches!(format, ReplayFormat::Json),
        ),
        Command::Admission {
            action:
                AdmissionCommand::Export {
                    invariants,
                    rules,
                    action,
                    protect_managed,
                    allow,
                    kubernetes_version,
                    cluster,
                    skip_unexportable,
                    out,
                },
        } => {
            let minor = match commands::admission::minor_version(&kubernetes_version) {
                Ok(minor) => minor,
                Err(error) => {
                    eprintln!("error: --kubernetes-version: {error}");
                    return ExitCode::from(2);
                }
            };
            commands::admission::run(commands::admission::ExportArgs {
                files: cli.config.into_iter().chain(invariants).collect(),
                only: rules,
                action: match action {
                    AdmissionAction::Warn => drift_core::admission::Action::Warn,
                    AdmissionAction::Audit => drift_core::admission::Action::Audit,
                    AdmissionAction::Deny => drift_core::admission::Action::Deny,
                },
                protect_managed,
                allowed_users: allow,
                minor,
                cluster,
                skip_unexportable,
                out,
            })
        }
        Command::Config {
            action: ConfigCommand::Validate { file },
        } => commands::validate(&file),
        Command::Store {
            action: StoreCommand::Migrate { from, to, ca_file },
        } => commands::store::migrate(&from, &to, ca_file.as_deref()),
        Command::Drill(drill) => {
            let DrillArgs {
                catalog,
                only,
                skip,
                kubeconfig,
                context,
                dry_run,
                sink,
                token,
                cluster,
                journal,
                recover,
                forget,
                chaos,
                duration,
                rate,
                seed,
                poll,
                settle,
                format,
            } = *drill;
            let parse_duration = |flag: &str, text: &str| {
                drift_model::time::parse_duration(text)
                    .ok()
                    .filter(|duration| !duration.is_zero())
                    .ok_or_else(|| format!("--{flag} {text:?} is not a duration (500ms, 30s, 30m)"))
            };
            let shape = match (chaos, duration, rate) {
                (true, Some(duration), Some(rate)) => {
                    let shape = parse_duration("duration", &duration).and_then(|duration| {
                        let per_second = drift_core::drill::chaos::parse_rate(&rate)
                            .map_err(|error| error.to_string())?;
                        drift_core::drill::chaos::check_size(per_second, duration)?;
                        Ok(commands::drill::Chaos {
                            duration,
                            per_second,
                            // Drawn from the time when not given (and printed).
                            seed: seed.unwrap_or_else(|| {
                                drift_model::time::system_clock()().unsigned_abs()
                            }),
                        })
                    });
                    match shape {
                        Ok(shape) => Some(shape),
                        Err(error) => {
                            eprintln!("drill: {error}");
                            return ExitCode::from(2);
                        }
                    }
                }
                _ => None,
            };
            let settle = match settle {
                None if shape.is_some() => std::time::Duration::from_secs(120),
                None => std::time::Duration::ZERO,
                Some(text) => match drift_model::time::parse_duration(&text) {
                    Ok(settle) => settle,
                    Err(error) => {
                        eprintln!("drill: --settle: {error}");
                        return ExitCode::from(2);
                    }
                },
            };
            let poll = match parse_duration("poll", &poll) {
                Ok(poll) => poll,
                Err(error) => {
                    eprintln!("drill: {error}");
                    return ExitCode::from(2);
                }
            };
            commands::drill::run(&commands::drill::Args {
                catalog: catalog.as_deref(),
                only: &only,
                skip: &skip,
                kubeconfig: kubeconfig.as_deref(),
                context: context.as_deref(),
                dry_run,
                sink: sink.as_deref(),
                token,
                cluster_name: cluster.as_deref(),
                journal: &journal,
                recover,
                forget: &forget,
                chaos: shape,
                poll,
                settle,
                format: check_format(format),
            })
        }
        Command::Export {
            last_good: _,
            cluster,
            namespace,
            kind,
            deleted,
            out,
        } => commands::export::last_good(
            cli.config.as_ref(),
            &commands::export::Filter {
                cluster,
                namespace,
                kind,
                deleted,
            },
            &out,
        ),
    }
}
