//! The `drift-sentinel` command: `serve` (default), `config validate`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Work with config files.
    Config {
        #[command(subcommand)]
        action: ConfigCommand,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
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

fn serve(config_path: Option<PathBuf>) -> ExitCode {
    drift_sentinel::telemetry::init();
    // Both ring and nothing else: pick the provider before any TLS client is built, or rustls
    // panics when it cannot choose.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = match &config_path {
        Some(path) => drift_sentinel::config::load_file(path),
        None => drift_sentinel::config::load_str("", &|name| std::env::var(name).ok()),
    };
    let config = match config {
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
