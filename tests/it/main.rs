//! Integration tests in one binary (compiles once): router contract, engine scenarios, processes.

mod classes;
mod properties;
mod router;
mod scenario;
mod support;
