// SPDX-License-Identifier: Apache-2.0
//! Finds libsoftmax.so and tells cargo how to link it.
//!
//! Order: the `SOFTMAX_LIB_DIR` environment variable (set by the CMake build's ctest), then the
//! `pkg-config` program (`pkg-config --variable=libdir softmax`, for an installed library).
//! The directory is also written into the test binaries' rpath and handed to dependent crates as
//! `DEP_SOFTMAX_LIB_DIR`, so that their binaries can carry the same rpath.
//! No crates.io helper (pkg-config, cc) is used: the build must work offline.
//!
//! Without the library the script does not fail: documentation (`cargo doc`, docs.rs, which sets
//! `DOCS_RS`) and the compilation of this rlib need no native library. It says what is missing in
//! a cargo warning instead, and a program that links these declarations then fails at link time
//! with undefined `softmax_*` symbols.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SOFTMAX_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("DOCS_RS").is_some() {
        return; // documentation only: nothing is linked
    }
    match find_library() {
        Ok(dir) => link(&dir),
        Err(why) => println!(
            "cargo:warning=libsoftmax not found ({}); nothing that calls it can be linked. Set \
             SOFTMAX_LIB_DIR to the directory holding libsoftmax.so (e.g. the CMake build \
             directory), or install libsoftmax so that `pkg-config softmax` works \
             (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig).",
            why
        ),
    }
}

fn find_library() -> Result<PathBuf, String> {
    let (dir, from) = match env::var_os("SOFTMAX_LIB_DIR") {
        Some(d) if !d.is_empty() => (PathBuf::from(d), "SOFTMAX_LIB_DIR"),
        _ => (
            pkg_config_libdir().map_err(|e| format!("SOFTMAX_LIB_DIR is not set and {}", e))?,
            "pkg-config",
        ),
    };
    if !dir.join("libsoftmax.so").exists() {
        return Err(format!(
            "no libsoftmax.so in {} (from {})",
            dir.display(),
            from
        ));
    }
    Ok(dir)
}

fn link(dir: &std::path::Path) {
    println!(
        "cargo:rerun-if-changed={}",
        dir.join("libsoftmax.so").display()
    );
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=softmax");
    // rustc-link-arg reaches only this package's own tests and examples; dependents get the
    // directory through `links` metadata (DEP_SOFTMAX_LIB_DIR) and add their own rpath.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}

fn pkg_config_libdir() -> Result<PathBuf, String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "softmax"])
        .output()
        .map_err(|e| format!("could not run pkg-config: {}", e))?;
    if !out.status.success() {
        return Err(format!(
            "`pkg-config --variable=libdir softmax` exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if text.is_empty() {
        return Err("pkg-config printed an empty libdir for softmax".to_string());
    }
    Ok(PathBuf::from(text))
}
