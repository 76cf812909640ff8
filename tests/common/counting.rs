//! A global allocator that passes every call to `System` as it came and
//! tells the test's own function how many bytes each call took (or, as a
//! negative number, gave back): what a test counts, and for which threads,
//! is the test's.
//!
//! Not a part of `common`: a test crate that counts includes it with
//! `#[path = "common/counting.rs"] mod counting;` and installs
//! `#[global_allocator] static COUNTING: Counting = Counting(its_count);`.
#![allow(unsafe_code, unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout, System};

/// The allocator, with the function told of every change.
pub struct Counting(pub fn(isize));

// SAFETY: every call is passed to `System` as it came; only counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            (self.0)(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            (self.0)(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        (self.0)(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            (self.0)(new_size as isize - layout.size() as isize);
        }
        p
    }
}
