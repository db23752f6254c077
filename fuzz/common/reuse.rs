//! A global allocator for the fuzz targets that keeps a few freed blocks of
//! 1 MiB and more for the next allocation of the same size.
//!
//! The codec's compression contexts are large (a PPMd model is 4 MiB,
//! zero-filled when made) and every input makes several. AddressSanitizer's
//! allocator maps each large block afresh and unmaps it when freed, so each
//! model cost a page fault per 4 KiB page: most of an input's time in
//! `ppmd_run` (measured with `perf`). A kept block is written again without
//! faults. Only Rust's allocations pass here (zstd's and liblzma's C code
//! calls `malloc`).
//! AddressSanitizer still checks every access against a kept block's
//! bounds; it no longer sees a use after free of one, which safe Rust
//! cannot do.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;

/// Blocks from this size up are kept.
const MIN_KEPT: usize = 1 << 20;

/// How many blocks are kept (a few contexts per input).
const KEPT: usize = 8;

/// Free blocks: (size, align, address); size 0 is an empty slot.
static FREE: Mutex<[(usize, usize, usize); KEPT]> = Mutex::new([(0, 0, 0); KEPT]);

/// The allocator (`#[global_allocator] static A: Reuse = Reuse;`).
pub struct Reuse;

impl Reuse {
    fn take(layout: Layout) -> Option<*mut u8> {
        let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
        let slot = free
            .iter_mut()
            .find(|(size, align, _)| *size == layout.size() && *align == layout.align())?;
        let address = slot.2;
        *slot = (0, 0, 0);
        Some(address as *mut u8)
    }

    fn keep(ptr: *mut u8, layout: Layout) -> bool {
        let mut free = FREE.lock().unwrap_or_else(|e| e.into_inner());
        match free.iter_mut().find(|(size, _, _)| *size == 0) {
            Some(slot) => {
                *slot = (layout.size(), layout.align(), ptr as usize);
                true
            }
            None => false,
        }
    }
}

// SAFETY: blocks come from `System` with the layout they are handed out
// for, and each is either handed out or kept, never both.
unsafe impl GlobalAlloc for Reuse {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= MIN_KEPT {
            if let Some(ptr) = Self::take(layout) {
                return ptr;
            }
        }
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() >= MIN_KEPT {
            if let Some(ptr) = Self::take(layout) {
                // SAFETY: a kept block of exactly this layout.
                unsafe { ptr.write_bytes(0, layout.size()) };
                return ptr;
            }
        }
        // SAFETY: the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.size() < MIN_KEPT && new_size < MIN_KEPT {
            // SAFETY: the caller's block and layout, from `System`.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: `GlobalAlloc::realloc` promises a valid size for this
        // alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as in `alloc`; the old block is valid for its size and
        // the new one for `new_size`, and they do not overlap.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() >= MIN_KEPT && Self::keep(ptr, layout) {
            return;
        }
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}
