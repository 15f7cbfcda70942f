//! Finds libsoftmax.so and tells cargo how to link it.
//!
//! Order: the `SOFTMAX_LIB_DIR` environment variable (set by the CMake build's ctest), then the
//! `pkg-config` program (`pkg-config --variable=libdir softmax`, for an installed library).
//! The directory is also written into the test binaries' rpath and handed to dependent crates as
//! `DEP_SOFTMAX_LIB_DIR`, so that their binaries can carry the same rpath.
//! No crates.io helper (pkg-config, cc) is used: the build must work offline.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SOFTMAX_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    let dir = match env::var_os("SOFTMAX_LIB_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => match pkg_config_libdir() {
            Ok(d) => d,
            Err(why) => panic!(
                "\n\nlibsoftmax not found: SOFTMAX_LIB_DIR is not set and pkg-config failed: {}\n\
                 Set SOFTMAX_LIB_DIR to the directory holding libsoftmax.so (e.g. the CMake build \
                 directory), or install libsoftmax and make `pkg-config softmax` work \
                 (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig).\n\n",
                why
            ),
        },
    };
    if !dir.join("libsoftmax.so").exists() {
        panic!(
            "\n\nno libsoftmax.so in {} (from SOFTMAX_LIB_DIR or pkg-config); build libsoftmax \
             first or point SOFTMAX_LIB_DIR at the directory that holds it\n\n",
            dir.display()
        );
    }
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
