//! Integration tests of the worker.
