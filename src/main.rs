//! `perfcast` command line: `serve` the HTTP API, `predict` or `search` from a request file, print the `openapi`
//! document, `eval` accuracy. The commands live in [`perfcast::cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    perfcast::cli::run()
}
