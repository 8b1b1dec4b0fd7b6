//! Integration tests in one binary (compiles once): router contract, engine scenarios, processes.

mod api;
mod check;
mod classes;
mod delivery;
mod oidc;
mod properties;
mod receivers;
mod router;
mod scenario;
mod support;
