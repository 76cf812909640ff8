//! Locking shared state: a panic in one thread must not take every other
//! thread down with it, so a poisoned lock is taken anyway (the data it
//! guards is kept consistent by its own methods, never half-updated across
//! a panic point).

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking it even when another thread panicked holding it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
