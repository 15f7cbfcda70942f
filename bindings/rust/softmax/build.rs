// SPDX-License-Identifier: Apache-2.0
//! softmax-sys finds libsoftmax and links it; its rpath, though, reaches only its own test
//! binaries. This script puts the same directory (DEP_SOFTMAX_LIB_DIR, from softmax-sys's `links`
//! metadata) into the rpath of this crate's tests, examples and doctests so they run without
//! LD_LIBRARY_PATH. Crates that depend on `softmax` do the same in their own build.rs (see
//! examples/rust in the libsoftmax repository).

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_SOFTMAX_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_SOFTMAX_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
