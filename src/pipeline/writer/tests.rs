//! Unit tests of the writer.
