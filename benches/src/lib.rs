//! Shared helpers for folio benchmarks.
