use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/boundary/verbs_shim.c");
    cc::Build::new()
        .file("src/boundary/verbs_shim.c")
        .warnings(true)
        .compile("urdma_verbs_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");

    // The daemon dlopens us into a process that exports all of its own
    // globals: export nothing but the entry point it looks up.
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let script = out.join("exports.map");
    fs::write(&script, "{\n  global: provider_query;\n  local: *;\n};\n")
        .expect("write version script");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
}
