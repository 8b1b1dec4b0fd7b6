//! Integration tests in one binary (compiles once): router contract, engine scenarios, processes.

mod router;
mod support;
