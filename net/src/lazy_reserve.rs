//! The process allocator that makes an oversized up-front reservation cost no real memory.
//!
//! Why: the generated Kafka codec (kafka-protocol, every version up to 0.18) decodes an array by
//! `Vec::with_capacity(count)` with the count read from the wire, before it has read a single
//! element. A 18-byte Metadata request claiming 0x7ffffff0 topics asks for 154 GB; glibc's
//! `malloc` turns that into an `mmap` that the kernel's overcommit heuristic refuses (it is
//! larger than RAM + swap), and Rust aborts the whole process on a failed allocation. The decode
//! itself would fail a moment later on the first missing element.
//!
//! What: every allocation of at least [`LAZY_RESERVE_MIN_BYTES`] is served by an anonymous
//! `mmap` with `MAP_NORESERVE` (and released with `munmap`, grown with `mremap`). Such a mapping
//! is address space only: pages become memory when they are first written, so the cost of an
//! allocation is what is actually written into it. A decoder can only write an element per
//! element it read from the frame (an array of n elements needs at least n bytes on the wire),
//! so a lying count costs address space, never memory, and the decode fails as usual on the
//! truncated frame. The rule is by size alone, so `dealloc` and `realloc` know from the layout
//! which allocator a block came from; smaller allocations go to the system allocator unchanged.
//!
//! Limits: x86-64 gives a process 128 TiB of address space; the largest reservation a lying
//! count can ask for is `i32::MAX` × the largest decoded struct (a few hundred bytes), under
//! 1 TiB, and one decode runs at a time per core. With `vm.overcommit_memory = 2` (strict
//! accounting) the kernel ignores `MAP_NORESERVE`; the broker logs a warning at start then
//! ([`overcommit_is_strict`]).
//!
//! Install it in a binary with `#[global_allocator] static A: LazyReserve = LazyReserve;`
//! (`ringlog`, the fuzz targets and the decode tests do).

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations of at least this many bytes are lazily reserved mappings. Below it the system
/// allocator serves them (glibc already maps large blocks lazily; only the overcommit check
/// on blocks larger than RAM needs avoiding). Legitimate allocations this large are rare in
/// the broker, so the extra `mmap`/`munmap` per such allocation costs nothing measurable.
pub const LAZY_RESERVE_MIN_BYTES: usize = 64 << 20;

const PAGE_BYTES: usize = 4096;

/// See the module documentation.
pub struct LazyReserve;

fn is_lazy(layout: &Layout) -> bool {
    layout.size() >= LAZY_RESERVE_MIN_BYTES && layout.align() <= PAGE_BYTES
}

unsafe fn map(size: usize) -> *mut u8 {
    let p = libc::mmap(
        std::ptr::null_mut(),
        size,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
}

unsafe impl GlobalAlloc for LazyReserve {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_lazy(&layout) {
            map(layout.size())
        } else {
            System.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_lazy(&layout) {
            // Anonymous mappings are zero-filled on first touch.
            map(layout.size())
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_lazy(&layout) {
            let rc = libc::munmap(ptr.cast(), layout.size());
            debug_assert_eq!(rc, 0, "munmap of a lazily reserved block failed");
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (is_lazy(&layout), is_lazy(&new_layout)) {
            (false, false) => System.realloc(ptr, layout, new_size),
            (true, true) => {
                let p = libc::mremap(ptr.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE);
                if p == libc::MAP_FAILED {
                    std::ptr::null_mut()
                } else {
                    p.cast()
                }
            }
            _ => {
                // Crossing the threshold: move the contents between the two allocators.
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}

/// True when the kernel does strict commit accounting (`vm.overcommit_memory = 2`), where
/// `MAP_NORESERVE` is ignored and a lying array count can again fail an allocation.
pub fn overcommit_is_strict() -> bool {
    std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .map(|s| s.trim() == "2")
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_reservation_costs_address_space_only() {
        let a = LazyReserve;
        // 1 TiB: far beyond RAM + swap; the system allocator would fail this.
        let layout = Layout::from_size_align(1 << 40, 8).unwrap();
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "a 1 TiB lazy reservation must succeed");
            // Touch two pages: only they become memory.
            *p = 7;
            *p.add((1 << 40) - 1) = 9;
            assert_eq!(*p, 7);
            let q = a.realloc(p, layout, 1 << 41);
            assert!(!q.is_null());
            assert_eq!(*q, 7);
            a.dealloc(q, Layout::from_size_align(1 << 41, 8).unwrap());
        }
    }

    #[test]
    fn crossing_the_threshold_keeps_contents() {
        let a = LazyReserve;
        let small = Layout::from_size_align(1024, 8).unwrap();
        unsafe {
            let p = a.alloc(small);
            for i in 0..1024 {
                *p.add(i) = i as u8;
            }
            let big = a.realloc(p, small, LAZY_RESERVE_MIN_BYTES * 2);
            assert!(!big.is_null());
            for i in 0..1024 {
                assert_eq!(*big.add(i), i as u8);
            }
            let back = a.realloc(
                big,
                Layout::from_size_align(LAZY_RESERVE_MIN_BYTES * 2, 8).unwrap(),
                512,
            );
            for i in 0..512 {
                assert_eq!(*back.add(i), i as u8);
            }
            a.dealloc(back, Layout::from_size_align(512, 8).unwrap());
        }
    }
}
